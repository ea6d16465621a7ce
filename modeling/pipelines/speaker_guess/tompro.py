"""ToMPro's stage 1 and the character-memory probe: descriptions written before guessing.

Stage 1 (ToM-in-AMC section 6, Appendix D) walks a work's scenes in order, reading
each scene with the names in clear (a masked scene is unmasked with its ``char_map``:
the gold identities of a scene already guessed, the paper's "history of a testing
scene"). For every scene with main characters in it, one prompt updates the
personality descriptions of those characters from their previous ones (recurrent),
and one prompt per character reads the emotions, beliefs, desires and intentions
from that scene alone. Each result is a :class:`~modeling.models.MentalStateRecord`
(character x scene). Stage 2 reads only records of scenes before the one it guesses.

Ablations (run options): ``updates_after_training=False`` walks the history part
only; ``iterative=False`` replaces the walk with one long-context prompt over the
history part; ``dimensions`` keeps a subset of the five (paper Figure 4).

The character-memory probe (Appendix H) asks, per main character, for the persona
the model remembers from the title and the real name: one record with no scene.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from benchmarks.models import Character, Scene

from ..base import Chain, Step
from .answers import NameReader
from .scenes import WorkView, mask_scene, unmask_scene

if TYPE_CHECKING:
    from modeling.models import PromptTemplate, Run

PERSONALITY = "personality"
INSTANT = ("emotions", "beliefs", "desires", "intentions")
DIMENSIONS = (PERSONALITY, *INSTANT)
# Our wording of the definitions in the paper's Figure 8.
DEFINITIONS = {
    "emotions": "strong feelings arising from one's circumstances, mood or relationships, "
    "with their thoughts, bodily reactions and a degree of pleasure or displeasure.",
    "beliefs": "what the character takes to be true, objective facts and subjective "
    "perceptions alike.",
    "desires": "physical needs and psychological longings that push the character to act; "
    "fulfilling them is pleasant.",
    "intentions": "plans that steer actions: what the character means to do next and the "
    "motives behind what they do now.",
    "personality": "lasting traits, interests, background and weaknesses.",
}
_DIM_LINE_RE = re.compile(
    r"^\W*(personality|emotions?|beliefs?|desires?|intentions?)\W*\s*[:\-]\s*(.*)$", re.I
)
UNIT_KEY_MAX = 200


def unit_key(*parts: str) -> str:
    """A stable call key; long work or character names are hashed to fit the column."""
    key = ":".join(parts)
    if len(key) <= UNIT_KEY_MAX:
        return key
    return f"{parts[0]}:{hashlib.sha256(key.encode()).hexdigest()}"


def _dimension(word: str) -> str:
    word = word.lower()
    return word if word.endswith("s") or word == PERSONALITY else f"{word}s"


def parse_dimensions(text: str, wanted: list[str]) -> dict[str, str]:
    """``Emotions: …`` lines (continuation lines appended) -> {dimension: text}."""
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        match = _DIM_LINE_RE.match(line.strip())
        if match:
            # A dimension not asked for ends the previous one and is dropped.
            current = _dimension(match.group(1))
            current = current if current in wanted else None
            if current:
                found.setdefault(current, []).append(match.group(2).strip())
        elif current and line.strip():
            found[current].append(line.strip())
    return {dim: " ".join(parts).strip() for dim, parts in found.items()}


def parse_descriptions(text: str, names: list[str]) -> dict[str, str]:
    """``NAME: description`` lines -> {name as given in ``names``: description}."""
    reader = NameReader(names)
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        head, sep, rest = line.strip().partition(":")
        name = reader.read(head.strip("*# ")) if sep and len(head) <= 60 else None
        if name is not None:
            current = name
            found.setdefault(name, []).append(rest.strip())
        elif current and line.strip():
            found[current].append(line.strip())
    return {name: " ".join(parts).strip() for name, parts in found.items()}


def parse_blocks(text: str, names: list[str], wanted: list[str]) -> dict[str, dict[str, str]]:
    """The long-context reply: a block per character, a name line then dimension lines."""
    reader = NameReader(names)
    blocks: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip().strip("*#: ")
        if stripped and not _DIM_LINE_RE.match(line.strip()):
            name = reader.read(stripped) if len(stripped) <= 60 else None
            if name is not None:
                current = name
                blocks.setdefault(name, [])
                continue
        if current:
            blocks[current].append(line)
    return {name: parse_dimensions("\n".join(lines), wanted) for name, lines in blocks.items()}


def _messages(template: PromptTemplate, fields: dict[str, Any]) -> list[dict[str, str]]:
    messages = []
    if template.system:
        messages.append({"role": "system", "content": template.system.format(**fields)})
    messages.append({"role": "user", "content": template.user.format(**fields)})
    return messages


def _present(scene: Scene, view: WorkView) -> tuple[list[dict[str, str]], list[Character]]:
    """The scene with names in clear, and the main characters in it (first seen first)."""
    if scene.char_map:
        lines, names = unmask_scene(scene)
    else:
        lines = scene.lines
        names = list(mask_scene(scene, view.mains)[1])
    mains = {c.name.casefold(): c for c in view.mains}
    present = [mains[n.casefold()] for n in names if n.casefold() in mains]
    return lines, list(dict.fromkeys(present))


def stage1(
    *,
    run: Run,
    view: WorkView,
    scenes: list[Scene],
    options: dict[str, Any],
    templates: dict[str, PromptTemplate],
) -> Chain:
    """Walk ``scenes`` (in order) and store a record per character per scene: a chain
    for :func:`~modeling.pipelines.base.run_chains`, which runs the chains of several
    works side by side inside the run's window.

    Each scene yields its calls together: the personality update (which reads the
    descriptions the previous scene's update wrote, so one scene waits for the last)
    and each present character's instant states (which read the scene only).
    """
    from modeling.models import MentalStateRecord

    dims = [d for d in DIMENSIONS if d in options["dimensions"]]
    instant = [d for d in INSTANT if d in dims]
    temperature = options["stage1_temperature"]
    kind = view.kind
    if not options["iterative"]:
        yield from _long_context(run=run, view=view, scenes=scenes, dims=dims, templates=templates)
        return
    personality: dict[int, str] = {}
    for scene in scenes:
        lines, present = _present(scene, view)
        if not present:
            continue
        text = view.scene_text(lines)
        shown = [view.name(c.name) for c in present]
        records: dict[int, dict[str, str]] = {c.pk: {} for c in present}
        calls: list[Step] = []
        if PERSONALITY in dims:
            descriptions = "\n".join(
                f"{view.name(c.name)}: {personality.get(c.pk) or '(nothing known yet)'}"
                for c in view.mains
            )
            calls.append(
                Step(
                    key=unit_key("tompro1", view.work.key, scene.source_id, PERSONALITY),
                    messages=_messages(
                        templates[PERSONALITY],
                        {
                            "work_kind": kind,
                            "descriptions": descriptions,
                            "characters": ", ".join(shown),
                            "scene": text,
                        },
                    ),
                    temperature=temperature,
                )
            )
        if instant:
            answer_format = "\n".join(f"{d.title()}: ..." for d in instant)
            calls.extend(
                Step(
                    key=unit_key("tompro1", view.work.key, scene.source_id, character.name),
                    messages=_messages(
                        templates["instant"],
                        {
                            "work_kind": kind,
                            "definitions": "\n".join(
                                f"{d.title()}: {DEFINITIONS[d]}" for d in instant
                            ),
                            "scene": text,
                            "dimensions": ", ".join(instant),
                            "character": name,
                            "answer_format": answer_format,
                        },
                    ),
                    temperature=temperature,
                )
                for character, name in zip(present, shown, strict=True)
            )
        replies = (yield calls) if calls else []
        if PERSONALITY in dims:
            updated = parse_descriptions(replies[0], shown)
            replies = replies[1:]
            for character, name in zip(present, shown, strict=True):
                if updated.get(name):
                    personality[character.pk] = updated[name]
                records[character.pk][PERSONALITY] = personality.get(character.pk, "")
        if instant:
            for character, reply in zip(present, replies, strict=True):
                parsed = parse_dimensions(reply, instant)
                if not parsed and reply.strip():
                    # Kept rather than lost: the page shows what the model wrote.
                    parsed = {instant[0]: reply.strip()}
                records[character.pk].update(parsed)
        for character, name in zip(present, shown, strict=True):
            MentalStateRecord.objects.update_or_create(
                run=run,
                character=character,
                scene=scene,
                defaults={
                    "source": MentalStateRecord.Source.SCENE,
                    "shown_name": name,
                    **{d: records[character.pk].get(d, "") for d in DIMENSIONS},
                },
            )


def _long_context(
    *,
    run: Run,
    view: WorkView,
    scenes: list[Scene],
    dims: list[str],
    templates: dict[str, PromptTemplate],
) -> Chain:
    from modeling.models import MentalStateRecord

    if not scenes:
        return
    text = "\n\n".join(
        f"Scene {i}\n{view.scene_text(_present(scene, view)[0])}"
        for i, scene in enumerate(scenes, start=1)
    )
    shown = [view.name(c.name) for c in view.mains]
    (reply,) = yield [
        Step(
            key=unit_key("tompro1", view.work.key, "long-context"),
            messages=_messages(
                templates["long_context"],
                {
                    "work_kind": view.kind,
                    "scenes": text,
                    "characters": ", ".join(shown),
                    "dimensions": ", ".join(dims),
                    "answer_format": "NAME\n" + "\n".join(f"{d.title()}: ..." for d in dims),
                },
            ),
        )
    ]
    blocks = parse_blocks(reply, shown, dims)
    for character, name in zip(view.mains, shown, strict=True):
        MentalStateRecord.objects.update_or_create(
            run=run,
            character=character,
            scene=scenes[-1],
            defaults={
                "source": MentalStateRecord.Source.LONG_CONTEXT,
                "shown_name": name,
                **{d: blocks.get(name, {}).get(d, "") for d in DIMENSIONS},
            },
        )


def recall(*, run: Run, view: WorkView, template: PromptTemplate) -> Chain:
    """The character-memory probe: one remembered persona per main character, asked
    together (no prompt reads another's reply).

    The prompt names the real character and title on purpose (it probes memory); the
    guessing prompts then show the description through the run's perturbation map.
    """
    from modeling.models import MentalStateRecord

    calls = []
    for character in view.mains:
        real = character.name.title() if character.name.islower() else character.name
        calls.append(
            Step(
                key=unit_key("memory", view.work.key, character.name),
                messages=_messages(
                    template,
                    {"character": real, "work_kind": view.kind, "work_title": view.work.title},
                ),
            )
        )
    replies = (yield calls) if calls else []
    for character, reply in zip(view.mains, replies, strict=True):
        MentalStateRecord.objects.update_or_create(
            run=run,
            character=character,
            scene=None,
            source=MentalStateRecord.Source.MEMORY,
            defaults={"shown_name": view.name(character.name), "personality": reply.strip()},
        )


def descriptions_before(
    records: list[Any], scene: Scene, *, history_only: bool
) -> dict[int, dict[str, str]]:
    """Character id -> dimension -> text, from records of scenes strictly before ``scene``.

    The latest personality and the latest instant states count. ``records`` are a
    run's records of one work, ordered by scene position; sceneless (memory) records
    always count. ``history_only`` keeps records of the history part only.
    """
    out: dict[int, dict[str, str]] = {}
    for record in records:
        if record.scene_id is not None:
            if record.scene.position >= scene.position:
                continue
            if history_only and record.scene.part != Scene.Part.TRAINING:
                continue
        dims = out.setdefault(record.character_id, {})
        if record.personality:
            dims[PERSONALITY] = record.personality
        if any(getattr(record, d) for d in INSTANT):
            for d in INSTANT:
                dims[d] = getattr(record, d)
    return out


__all__ = [
    "DEFINITIONS",
    "DIMENSIONS",
    "INSTANT",
    "PERSONALITY",
    "descriptions_before",
    "parse_blocks",
    "parse_descriptions",
    "parse_dimensions",
    "recall",
    "stage1",
    "unit_key",
]
