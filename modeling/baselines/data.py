"""Training and evaluation material for the trained baselines, read from the item bank.

Each work (a movie, a TV show) is one task of the meta-learning setting (ToM-in-AMC
§3.3): its main characters are the classes, its *history* scenes (``Scene.Part
.TRAINING``, the first 3/5 of the movie) the task's few-shot training data, and its
masked speakers in testing scenes (``SpeakerInstance`` rows) the task's test data,
which is what predictions are written for.

Where the history comes from:

- the HuggingFace release keeps history scenes masked, with their ``char_map``;
- a screenplay import keeps them with names in clear (raters read them), so they are
  masked here the way the importer masks testing scenes, roughly: each main character
  who speaks gets a code (a seeded permutation), in the speaker slot and where the
  narration names them (name or alias, whole words); what characters say is left as is;
- a work with no history part (TVShowGuess) takes the paper's rule itself: the first
  3/5 of its scenes that have masked speakers are history (their gold answers become
  training labels) and only the rest are evaluated.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from django.db.models import F

from benchmarks.models import Character, Scene, SpeakerInstance, Work

HISTORY_SHARE = (3, 5)  # ToM-in-AMC §4: "the first 3/5 of the movie script for training"
CODE_RE = re.compile(r"^P(\d+)$")


@dataclass(frozen=True)
class Line:
    kind: str  # "dialog" or "scene"
    speaker: str  # a code (P0), a name, or "" for narration
    text: str


@dataclass
class Example:
    """One masked character in one scene, with its class (index into ``Task.classes``)."""

    scene_id: int
    code: str
    label: int
    candidates: list[int]  # classes it may be (the instance's candidate list)
    instance_id: int | None = None  # the SpeakerInstance predicted, for test examples
    # "<scene source id>/<code>": names the example in any database (ids differ).
    natural_key: str = ""


@dataclass
class Task:
    """One work: its classes, scenes and examples, history and test."""

    work_id: int
    key: str
    split: str
    classes: list[str]
    scenes: dict[int, list[Line]] = field(default_factory=dict)
    history: dict[int, list[Example]] = field(default_factory=dict)  # scene id -> examples
    tests: dict[int, list[Example]] = field(default_factory=dict)

    @property
    def history_examples(self) -> list[Example]:
        return [e for examples in self.history.values() for e in examples]

    @property
    def test_examples(self) -> list[Example]:
        return [e for examples in self.tests.values() for e in examples]


def tasks_load(*, benchmark: str, splits: list[str], works: list[str] | None = None) -> list[Task]:
    """The tasks of ``benchmark``'s works in ``splits`` (or the named ``works``), by key.

    Raises ``ValueError`` naming what is missing when a named work does not exist.
    """
    qs = Work.objects.filter(benchmark=benchmark)
    if works:
        qs = qs.filter(key__in=works)
        missing = sorted(set(works) - set(qs.values_list("key", flat=True)))
        if missing:
            raise ValueError(f"no {benchmark} work with key {', '.join(map(repr, missing))}")
    else:
        qs = qs.filter(split__in=splits)
    return [_task(work) for work in qs.order_by("key")]


def _task(work: Work) -> Task:
    characters = list(
        Character.objects.filter(work=work)
        .order_by("position", "name")
        .values("name", "aliases", "is_main")
    )
    classes = [c["name"] for c in characters if c["is_main"]]
    instances = list(
        SpeakerInstance.objects.filter(scene__work=work)
        .order_by("scene__position", "code")
        .values("id", "scene_id", "code", "candidates", gold=_gold_name())
    )
    for row in instances:  # a gold speaker not marked main is still a class
        for name in [row["gold"], *row["candidates"]]:
            if name not in classes:
                classes.append(name)
    index = {name: i for i, name in enumerate(classes)}
    task = Task(work_id=work.pk, key=work.key, split=work.split, classes=classes)
    scenes = list(
        Scene.objects.filter(work=work)
        .order_by("position")
        .values("id", "position", "part", "lines", "char_map", "source_id")
    )
    by_scene: dict[int, list[dict]] = {}
    for row in instances:
        by_scene.setdefault(row["scene_id"], []).append(row)
    has_history_part = any(s["part"] == Scene.Part.TRAINING for s in scenes)
    if has_history_part:
        aliases = _main_aliases(characters)
        for scene in scenes:
            if scene["part"] != Scene.Part.TRAINING:
                continue
            lines, char_map = history_scene(scene, aliases, work_key=work.key)
            examples = [
                Example(scene["id"], code, index[name], list(range(len(classes))))
                for name, code in sorted(char_map.items(), key=lambda item: item[1])
                if name in index
            ]
            if examples:
                task.scenes[scene["id"]] = _lines(lines)
                task.history[scene["id"]] = examples
        tested = [s for s in scenes if s["id"] in by_scene]
    else:
        tested = [s for s in scenes if s["id"] in by_scene]
        cut = len(tested) * HISTORY_SHARE[0] // HISTORY_SHARE[1]
        for scene in tested[:cut]:
            task.scenes[scene["id"]] = _lines(scene["lines"])
            task.history[scene["id"]] = [
                Example(scene["id"], r["code"], index[r["gold"]], _candidates(r, index))
                for r in by_scene[scene["id"]]
            ]
        tested = tested[cut:]
    for scene in tested:
        task.scenes[scene["id"]] = _lines(scene["lines"])
        task.tests[scene["id"]] = [
            Example(
                scene["id"],
                r["code"],
                index[r["gold"]],
                _candidates(r, index),
                r["id"],
                natural_key=f"{scene['source_id']}/{r['code']}",
            )
            for r in by_scene[scene["id"]]
        ]
    return task


def _main_aliases(characters: list[dict]) -> dict[str, list[str]]:
    return {c["name"]: [c["name"], *(c["aliases"] or [])] for c in characters if c["is_main"]}


def history_scene(
    scene: dict, aliases: dict[str, list[str]], *, work_key: str
) -> tuple[list[dict], dict[str, str]]:
    """A history scene as the baselines read it: its lines and ``{name: code}``.

    The release's own ``char_map`` where it has one; a screenplay import's scene (names
    in clear) is masked here (:func:`mask_history_scene`). ``scene`` needs ``lines``,
    ``char_map`` and ``source_id``.
    """
    if scene["char_map"]:
        return scene["lines"], scene["char_map"]
    return mask_history_scene(scene["lines"], aliases, seed=f"{work_key}/{scene['source_id']}")


def history_counts(*, benchmark: str) -> tuple[dict[tuple[int, str], int], set[int]]:
    """How often each character is a masked speaker in its work's history scenes.

    What the Majority baseline counts (ToM-in-AMC §5: the most frequent character in
    the training part), read through :func:`history_scene` as the trained baselines read
    it, so ``train_baseline majority`` and the reports' Majority row count the same
    thing. Returns ``{(work id, name): n}`` and the ids of the works that have a history
    part (TVShowGuess works have none: nothing to count there).
    """
    counts: dict[tuple[int, str], int] = {}
    scenes = (
        Scene.objects.filter(work__benchmark=benchmark, part=Scene.Part.TRAINING)
        .order_by("work_id", "position")
        .values("work_id", "lines", "char_map", "source_id", work_key=F("work__key"))
    )
    with_history: set[int] = set()
    aliases: dict[int, dict[str, list[str]]] | None = None
    for scene in scenes.iterator(chunk_size=500):
        with_history.add(scene["work_id"])
        if not scene["char_map"] and aliases is None:
            # Only screenplay imports need the aliases: one query for every work.
            rows: dict[int, list[dict]] = {}
            for c in Character.objects.filter(work__benchmark=benchmark, is_main=True).values(
                "work_id", "name", "aliases", "is_main"
            ):
                rows.setdefault(c["work_id"], []).append(c)
            aliases = {work_id: _main_aliases(cs) for work_id, cs in rows.items()}
        work_aliases = (aliases or {}).get(scene["work_id"], {})
        _, char_map = history_scene(scene, work_aliases, work_key=scene["work_key"])
        for name in char_map:
            counts[(scene["work_id"], name)] = counts.get((scene["work_id"], name), 0) + 1
    return counts, with_history


def _gold_name():
    return F("gold_character__name")


def _candidates(row: dict, index: dict[str, int]) -> list[int]:
    return [index[name] for name in row["candidates"]] or list(range(len(index)))


def _lines(lines: list[dict]) -> list[Line]:
    out = []
    for line in lines:
        title = line.get("title") or ""
        text = line.get("text") or ""
        if line.get("type") == "dialog":
            out.append(Line("dialog", title, text))
        else:
            # A heading is kept in "title"; narration has "NULL" there.
            heading = "" if title in ("", "NULL") else title
            out.append(Line("scene", "", f"{heading} {text}".strip()))
    return out


def mask_history_scene(
    lines: list[dict], aliases: dict[str, list[str]], *, seed: str
) -> tuple[list[dict], dict[str, str]]:
    """Mask the main characters who speak in a history scene with names in clear.

    ``aliases`` maps each main character to the spellings that may name it. Returns the
    masked lines and ``{name: code}``. Codes are a permutation drawn from ``seed``, so the
    same scene is masked the same way in every run.
    """
    spelling = {a.lower(): name for name, names in aliases.items() for a in names}
    speakers = list(
        dict.fromkeys(
            spelling[line["title"].lower()]
            for line in lines
            if line.get("type") == "dialog" and (line.get("title") or "").lower() in spelling
        )
    )
    if not speakers:
        return lines, {}
    order = random.Random(seed).sample(range(len(speakers)), len(speakers))
    codes = {name: f"P{n}" for name, n in zip(speakers, order, strict=True)}
    words = sorted(
        ((a, codes[name]) for name in speakers for a in aliases[name] if a.strip()),
        key=lambda pair: -len(pair[0]),  # "ADULT EDWARD" before "EDWARD"
    )
    pattern = re.compile(r"\b(" + "|".join(re.escape(a) for a, _ in words) + r")\b", re.IGNORECASE)
    code_of = {a.lower(): code for a, code in words}

    def mask(text: str) -> str:
        return pattern.sub(lambda m: code_of[m.group(1).lower()], text)

    masked = []
    for line in lines:
        title = line.get("title") or ""
        if line.get("type") == "dialog":
            speaker = codes.get(spelling.get(title.lower(), ""), title)
            masked.append({**line, "title": speaker})
        else:
            masked.append(
                {
                    **line,
                    "title": mask(title) if title != "NULL" else title,
                    "text": mask(line.get("text") or ""),
                }
            )
    return masked, codes


def code_number(code: str) -> int:
    """3 for "P3"; ``ValueError`` for anything else."""
    match = CODE_RE.match(code)
    if not match:
        raise ValueError(f"{code!r} is not a mask code like P0")
    return int(match.group(1))
