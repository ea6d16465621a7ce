"""Speaker guessing (ToM-in-AMC and TVShowGuess) on the run engine.

One prompt per scene to guess (a testing scene with masked speakers): the scene, the
masked codes and the candidates as lettered options; the reply is one ``P0: NAME``
line per code, read by :mod:`.answers` (which ``import_predictions`` uses too).

Methods (``Run.method``):
- ``zero-shot`` and ``icl``: no examples, or k solved scenes first (option ``shots``,
  default 10; the paper uses 10 and 20). Examples are the last k history scenes of the
  work (``Scene.Part.TRAINING``, masked here like a testing scene); a work with no
  history part (TVShowGuess) uses the k scenes before the one guessed, with their
  answers. The title is withheld (Appendix A).
- ``tompro``: stage 1 (:mod:`.tompro`) writes mental-state records, stage 2 guesses
  with each candidate's description attached, from records of earlier scenes only.
- ``character-memory`` (Appendix H): descriptions recalled from the model's memory,
  then the ToMPro guessing prompt.
- ``names-only`` (section 7.4): the scene with the real names and the title, nothing
  else: what memorisation alone achieves. It refuses name perturbation.

Option ``perturb_names`` (with ``perturb_seed``) shows every main character under a
gender-matched common name (``benchmarks.perturbation``, shared with the studies):
one map per work, applied to every text of the prompt, titles withheld.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Prefetch

from benchmarks.models import Benchmark, Character, Scene, SpeakerInstance, Work

from ..base import CallUnit, Chain, ParsedItem, Pipeline, PrepareSteps, run_chains
from .answers import (
    MISSING,
    OK,
    UNPARSEABLE,
    NameReader,
    Scored,
    read_name,
    read_reply,
    score_answer,
)
from .scenes import WorkView, mask_scene
from .tompro import DIMENSIONS, INSTANT, PERSONALITY, descriptions_before, recall, stage1

ZERO_SHOT, ICL, TOMPRO, MEMORY, NAMES_ONLY = (
    "zero-shot",
    "icl",
    "tompro",
    "character-memory",
    "names-only",
)
DEFAULT_SHOTS = 10
MAX_SHOTS = 50
# Paper section 7.1: temperature 0.1 for guessing, 1.0 for ToMPro's stage 1.
STAGE1_TEMPERATURE = 1.0
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "1", "false", "no", "0"):
        return value.lower() in ("true", "yes", "1")
    raise ValueError(f"option {name}: expected true or false, got {value!r}")


def _int(name: str, value: Any, low: int, high: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"option {name}: expected a whole number, got {value!r}") from None
    if isinstance(value, bool) or not low <= number <= high or str(number) != str(value).strip():
        raise ValueError(f"option {name}: expected a whole number from {low} to {high}")
    return number


class SpeakerGuessPipeline(Pipeline):
    methods = (ZERO_SHOT, ICL, TOMPRO, MEMORY, NAMES_ONLY)
    item_field = "speaker_instance"
    default_params = {"temperature": 0.1}

    # -- options -----------------------------------------------------------------------

    def clean_options(self, *, method: str, options: dict[str, Any]) -> dict[str, Any]:
        from modeling.models import PromptTemplate
        from modeling.runs.prompt_templates import active_template

        allowed = {"perturb_names", "perturb_seed"}
        if method == ICL:
            allowed |= {"shots"}
        if method == TOMPRO:
            allowed |= {"updates_after_training", "iterative", "dimensions", "stage1_temperature"}
        if unknown := sorted(set(options) - allowed - {"templates"}):
            raise ValueError(
                f"option(s) {', '.join(unknown)} do not apply to {method}; "
                f"it takes {', '.join(sorted(allowed))}"
            )
        clean: dict[str, Any] = {}
        clean["perturb_names"] = _bool("perturb_names", options.get("perturb_names", False))
        if clean["perturb_names"] and method == NAMES_ONLY:
            raise ValueError(
                "the names-only probe measures what the model remembers of the real names; "
                "it cannot be run with perturb_names"
            )
        clean["perturb_seed"] = _int("perturb_seed", options.get("perturb_seed", 0), 0, 2**31)
        if method == ICL:
            clean["shots"] = _int("shots", options.get("shots", DEFAULT_SHOTS), 1, MAX_SHOTS)
        if method == TOMPRO:
            clean["iterative"] = _bool("iterative", options.get("iterative", True))
            # The single long-context pass reads the history part only (section 7.4).
            updates = options.get("updates_after_training", clean["iterative"])
            clean["updates_after_training"] = _bool("updates_after_training", updates)
            if clean["updates_after_training"] and not clean["iterative"]:
                raise ValueError(
                    "option updates_after_training needs iterative: the long-context pass "
                    "reads the history scenes only"
                )
            dims = options.get("dimensions", list(DIMENSIONS))
            if isinstance(dims, str):
                dims = [d.strip() for d in dims.split(",") if d.strip()]
            if not isinstance(dims, list) or not dims or set(dims) - set(DIMENSIONS):
                raise ValueError(
                    f"option dimensions: expected a non-empty subset of {', '.join(DIMENSIONS)}"
                )
            clean["dimensions"] = [d for d in DIMENSIONS if d in dims]
            try:
                temperature = float(options.get("stage1_temperature", STAGE1_TEMPERATURE))
            except (TypeError, ValueError):
                raise ValueError("option stage1_temperature: expected a number") from None
            if not 0 <= temperature <= 2:
                raise ValueError("option stage1_temperature: expected a number from 0 to 2")
            clean["stage1_temperature"] = temperature
        # The stage-1 / recall templates, pinned to their versions when the run is made
        # (the guessing template is the run's own).
        names = {
            TOMPRO: {
                PERSONALITY: "tompro-personality",
                "instant": "tompro-instant",
                "long_context": "tompro-long-context",
            },
            MEMORY: {"recall": "character-memory-recall"},
        }.get(method, {})
        pinned = options.get("templates") or {}
        clean_templates = {}
        for role, name in names.items():
            if role in pinned:
                pk = _int(f"templates.{role}", pinned[role], 1, 2**31)
                # Read through the workspace's scope: a built-in or this workspace's own
                # revision of the role's template, never another workspace's wording.
                if not PromptTemplate.objects.filter(
                    pk=pk, name=f"{self.benchmark}-{name}"
                ).exists():
                    raise ValueError(
                        f"option templates.{role}: no {self.benchmark}-{name} template #{pk} "
                        "in this workspace"
                    )
                clean_templates[role] = pk
            else:
                clean_templates[role] = active_template(f"{self.benchmark}-{name}").pk
        if clean_templates:
            clean["templates"] = clean_templates
        return clean

    # -- items ---------------------------------------------------------------------------

    def _selected_works(self, selection: dict[str, Any]):
        works = Work.objects.filter(benchmark=self.benchmark)
        if keys := selection.get("works"):
            works = works.filter(key__in=keys)
        if split := selection.get("split"):
            works = works.filter(split=split)
        works = works.order_by("key")
        if limit := selection.get("limit"):
            works = works[: int(limit)]
        return works.prefetch_related(
            Prefetch("characters", queryset=Character.objects.order_by("position", "name"))
        )

    def works(self, selection: dict[str, Any]):
        return self._selected_works(selection).prefetch_related(
            Prefetch(
                "scenes",
                queryset=Scene.objects.order_by("position").prefetch_related(
                    Prefetch(
                        "instances",
                        queryset=SpeakerInstance.objects.order_by("code").select_related(
                            "gold_character"
                        ),
                    )
                ),
            ),
        )

    @staticmethod
    def test_scenes(scenes: list[Scene], selection: dict[str, Any]) -> list[Scene]:
        """The scenes to guess: those with masked speakers, at most ``scene_limit``."""
        tested = [s for s in scenes if s.instances.all()]
        if limit := selection.get("scene_limit"):
            tested = tested[: int(limit)]
        return tested

    @staticmethod
    def view(work: Work, method: str, options: dict[str, Any]) -> WorkView:
        return WorkView(
            work=work,
            characters=list(work.characters.all()),
            perturb=bool(options.get("perturb_names")),
            seed=int(options.get("perturb_seed", 0)),
            redact_title=method != NAMES_ONLY,
        )

    def name_maps(self, *, run) -> list[tuple[Work, dict[str, str], list[Character]]]:
        options = run.params.get("options", {})
        if not options.get("perturb_names"):
            return []
        maps = []
        for work in self._selected_works(run.selection):  # no scenes: a page reads this
            view = self.view(work, run.method, options)
            maps.append((work, view.name_map, view.characters))
        return maps

    # -- stage 1 -------------------------------------------------------------------------

    def prepare(self, *, run, steps: PrepareSteps) -> None:
        if run.method not in (TOMPRO, MEMORY):
            return
        from modeling.models import PromptTemplate

        options = run.params.get("options", {})
        templates = {
            role: PromptTemplate.objects.get(pk=pk)
            for role, pk in options.get("templates", {}).items()
        }
        chains: list[Chain] = []
        for work in self.works(run.selection):
            view = self.view(work, run.method, options)
            if run.method == MEMORY:
                chains.append(recall(run=run, view=view, template=templates["recall"]))
                continue
            scenes = list(work.scenes.all())
            tested = self.test_scenes(scenes, run.selection)
            if not tested:
                continue
            if options["updates_after_training"]:
                # Everything before the last scene guessed: nothing after it is needed.
                walk = [s for s in scenes if s.position < tested[-1].position]
            else:
                walk = [s for s in scenes if s.part == Scene.Part.TRAINING]
            chains.append(
                stage1(run=run, view=view, scenes=walk, options=options, templates=templates)
            )
        # Works do not read each other's records: their chains share the run's window.
        run_chains(steps, chains)

    # -- units ---------------------------------------------------------------------------

    def build_units(self, *, selection, template) -> list[CallUnit]:
        return self._units(
            selection=selection, template=template, method=template.method, options={}, run=None
        )

    def units_for_run(self, *, run) -> list[CallUnit]:
        return self._units(
            selection=run.selection,
            template=run.template,
            method=run.method,
            options=run.params.get("options", {}),
            run=run,
        )

    def _units(self, *, selection, template, method, options, run) -> list[CallUnit]:
        from modeling.models import MentalStateRecord

        records: dict[int, list[MentalStateRecord]] = defaultdict(list)
        if run is not None and run.pk and method in (TOMPRO, MEMORY):
            for record in (
                MentalStateRecord.objects.filter(run=run)
                .select_related("scene", "character")
                .order_by("scene__position", "pk")
            ):
                records[record.character.work_id].append(record)
        units = []
        for work in self.works(selection):
            view = self.view(work, method, options)
            scenes = list(work.scenes.all())
            for scene in self.test_scenes(scenes, selection):
                instances = list(scene.instances.all())
                candidates = list(instances[0].candidates)
                described = None
                if method in (TOMPRO, MEMORY):
                    described = descriptions_before(
                        records[work.pk],
                        scene,
                        history_only=not options.get("updates_after_training", True),
                    )
                fields = {
                    "work_kind": view.kind,
                    "work_title": work.title,
                    "scene": view.scene_text(scene.lines),
                    "codes": ", ".join(i.code for i in instances),
                    "candidates": self._candidates(
                        view, candidates, described, options.get("dimensions", DIMENSIONS)
                    ),
                }
                if method == ICL:
                    fields["demonstrations"] = self._demonstrations(
                        view, scenes, scene, candidates, int(options.get("shots", DEFAULT_SHOTS))
                    )
                units.append(
                    CallUnit(
                        key=f"{self.benchmark}:{work.key}:{scene.source_id}"[:200],
                        messages=_messages(template, fields),
                        item_ids=[i.pk for i in instances],
                        items=[
                            {
                                "id": i.pk,
                                "code": i.code,
                                "candidates": list(i.candidates),
                                "gold": i.gold_character.name,
                                "shown": {c: view.name(c) for c in i.candidates},
                                "aliases": {c: view.aliases(c) for c in i.candidates},
                            }
                            for i in instances
                        ],
                    )
                )
        return units

    @staticmethod
    def _candidates(
        view: WorkView,
        candidates: list[str],
        described: dict[int, dict[str, str]] | None,
        dimensions,
    ) -> str:
        lines = []
        for letter, name in zip(_LETTERS, candidates, strict=False):
            lines.append(f"({letter}) {view.name(name)}")
            if described is None:
                continue
            character = view.character(name)
            dims = described.get(character.pk, {}) if character else {}
            shown = [d for d in DIMENSIONS if d in dimensions and dims.get(d)]
            if not shown:
                lines.append("    (no description yet)")
            for d in shown:
                lines.append(f"    {d.title()}: {view.text(dims[d])}")
        return "\n".join(lines)

    def _demonstrations(
        self,
        view: WorkView,
        scenes: list[Scene],
        scene: Scene,
        candidates: list[str],
        shots: int,
    ) -> str:
        """The last ``shots`` solved scenes before ``scene``: history first, else earlier."""
        history = [
            s for s in scenes if s.part == Scene.Part.TRAINING and s.position < scene.position
        ]
        pool = history or [s for s in scenes if s.position < scene.position and s.char_map]
        examples = []
        mains = view.mains
        for candidate in reversed(pool):
            lines, codes = mask_scene(candidate, mains)
            codes = {n: c for n, c in codes.items() if view.character(n) in mains}
            if not codes:
                continue
            examples.append((lines, codes))
            if len(examples) == shots:
                break
        options = "\n".join(
            f"({letter}) {view.name(name)}"
            for letter, name in zip(_LETTERS, candidates, strict=False)
        )
        blocks = []
        for number, (lines, codes) in enumerate(reversed(examples), start=1):
            order = sorted(codes.items(), key=lambda nc: int(nc[1][1:]))
            answer = "\n".join(f"{code}: {view.name(name)}" for name, code in order)
            blocks.append(
                f"Example {number}. Read this scene from the {view.kind}:\n\n"
                f"{view.scene_text(lines)}\n\n"
                f"Who are the masked characters ({', '.join(c for _, c in order)})? "
                f"Choose from:\n{options}\n\nAnswer:\n{answer}"
            )
        return "\n\n".join(blocks) if blocks else "(no earlier scenes)"

    # -- replies -------------------------------------------------------------------------

    def parse(self, *, unit: CallUnit, text: str) -> list[ParsedItem]:
        return parse_scene_reply(text, unit.items)


def _messages(template, fields: dict[str, Any]) -> list[dict[str, str]]:
    try:
        messages = []
        if template.system:
            messages.append({"role": "system", "content": template.system.format(**fields)})
        messages.append({"role": "user", "content": template.user.format(**fields)})
    except KeyError as exc:
        raise ValueError(
            f"template {template.name} v{template.version} uses the field {{{exc.args[0]}}}, "
            f"which this method does not fill (it fills {', '.join(sorted(fields))})"
        ) from None
    return messages


def parse_scene_reply(text: str, items: list[dict[str, Any]]) -> list[ParsedItem]:
    """One ParsedItem per masked speaker of a scene's reply (items as the units hold them)."""
    if not items:
        return []
    first = items[0]
    display = [first["shown"].get(c, c) for c in first["candidates"]]
    original = dict(zip(display, first["candidates"], strict=True))
    aliases = {first["shown"].get(c, c): a for c, a in first["aliases"].items() if a}
    read = read_reply(text, [item["code"] for item in items], NameReader(display, aliases))
    parsed = []
    for item in items:
        answer = read[item["code"]]
        if answer.name is None:
            details = (
                {"reason": "not one of the candidates: " + ", ".join(display)}
                if answer.answer
                else {}
            )
            parsed.append(
                ParsedItem(item["id"], answer.answer[:500], answer.status, False, details)
            )
            continue
        candidate = original[answer.name]
        parsed.append(
            ParsedItem(
                item["id"],
                candidate,
                OK,
                candidate.casefold() == item["gold"].casefold(),
                {"shown_as": answer.name} if answer.name != candidate else None,
            )
        )
    return parsed


def instances_by_key(
    *, benchmark: str, work_keys: set[str]
) -> tuple[dict[tuple[str, str, str], dict[str, Any]], dict[str, dict[str, list[str]]]]:
    """The masked speakers of some works by (work key, scene id, code), and each work's
    character aliases (name -> aliases): what :func:`score_answer` needs, in two queries.
    """
    rows = SpeakerInstance.objects.filter(
        scene__work__benchmark=benchmark, scene__work__key__in=work_keys
    ).values(
        "id", "scene__work__key", "scene__source_id", "code", "candidates", "gold_character__name"
    )
    instances = {(r["scene__work__key"], r["scene__source_id"], r["code"]): r for r in rows}
    aliases: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for c in Character.objects.filter(work__benchmark=benchmark, work__key__in=work_keys).values(
        "work__key", "name", "aliases"
    ):
        if c["aliases"]:
            aliases[c["work__key"]][c["name"]] = c["aliases"]
    return instances, dict(aliases)


class ToMInAMCPipeline(SpeakerGuessPipeline):
    benchmark = Benchmark.TOM_IN_AMC


class TVShowGuessPipeline(SpeakerGuessPipeline):
    benchmark = Benchmark.TVSHOWGUESS


__all__ = [
    "INSTANT",
    "MISSING",
    "OK",
    "UNPARSEABLE",
    "Scored",
    "SpeakerGuessPipeline",
    "TVShowGuessPipeline",
    "ToMInAMCPipeline",
    "instances_by_key",
    "parse_scene_reply",
    "read_name",
    "read_reply",
    "score_answer",
]
