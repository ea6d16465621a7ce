"""Writes for the study lifecycle, shared by every study kind: set-up, go-live, pause,
close, and the texts participants are shown.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from benchmarks.models import Scene, SpeakerInstance, Work
from benchmarks.selectors import test_scenes

from .choice.allocation import tallies_start
from .errors import (
    StudyError,  # views, commands and tests import it from here
)
from .models import (
    Assignment,
    Study,
    StudyItem,
    StudyTextVersion,
    StudyWork,
)
from .participation.ledger import SCENE_BENCHMARKS

# ../shared/bench/annotation_load.py makes its load-check study with it from here.
from .participation.services import participants_invite as participants_invite
from .scene.leaks import LeakReport, leaks_check
from .scene.perturbation import name_maps_build
from .signals import study_closed
from .slots import slots_ensure

# (work id, StudyItem fields) for each item of a study, in order.
ItemPlan = list[tuple[int, dict[str, Any]]]

# -- set-up -----------------------------------------------------------------------------


def item_set_hash(study: Study) -> str:
    """sha256 over the study's items (with their gold), in order.

    Scenes: their masked speakers; CharToM-QA: the questions and their answers; DynToM:
    the stages' questions and gold letters; a mapped benchmark: its items' ids and
    content hashes (texts, answers, categories) with their roles, and the language.
    """
    if study.benchmark == "generic":
        items = study.study_items.order_by("position")
        payload = json.dumps(
            {
                "items": list(
                    items.values_list("mc_item__item_id", "mc_item__content_hash", "role")
                ),
                # The checks the researcher wrote (none: the hash of a study before them).
                **(
                    {"instructed": [i.instructed for i in written]}
                    if (written := [i for i in items.filter(mc_item__isnull=True)])
                    else {}
                ),
                "language": (study.sampling or {}).get("language", ""),
            }
        )
        return hashlib.sha256(payload.encode()).hexdigest()
    if study.benchmark in ("chartom-qa", "dyntom"):
        items = study.study_items.order_by("position")
        payload = json.dumps(
            {
                "qa": list(items.values_list("qa_item__natural_key", "qa_item__answer")),
                "stages": list(items.values_list("stage__work__key", "question_ids")),
            }
        )
        return hashlib.sha256(payload.encode()).hexdigest()
    rows = (
        SpeakerInstance.objects.filter(scene__in=study.study_items.values("scene"))
        .order_by("scene__work__key", "scene__source_id", "code")
        .values_list("scene__work__key", "scene__source_id", "code", "gold_character__name")
    )
    held = sorted(
        study.study_items.filter(held_back=True).values_list("scene__source_id", flat=True)
    )
    payload = json.dumps({"instances": list(rows), "held_back": held})
    return hashlib.sha256(payload.encode()).hexdigest()


def scene_items(works: list[Work], scenes: list[Scene] | None = None) -> ItemPlan:
    """A scene study's items: every test scene of ``works`` (``test_scenes``), or
    only those of them in ``scenes`` (a sample)."""
    chosen = {s.pk for s in scenes} if scenes is not None else None
    candidates = test_scenes(works=works).order_by("position")
    return [
        (scene.work_id, {"scene": scene, "position": scene.position})
        for scene in candidates
        if chosen is None or scene.pk in chosen
    ]


def study_items_set(*, study: Study, works: list[Work], items: ItemPlan) -> None:
    """Give ``study`` these works, in order, and these items (replacing any it had).

    ``items`` are (work id, StudyItem fields) pairs, as :func:`scene_items` and
    ``choice.services.choice_items_sample`` draw them.
    """
    if not works:
        raise StudyError("choose at least one work")
    if wrong := [w.key for w in works if w.benchmark != study.benchmark]:
        raise StudyError(f"not {study.benchmark} works: {', '.join(wrong)}")
    if not items:
        raise StudyError("the chosen works have no items this study can ask")
    # The attention checks the researcher wrote (no bank item) are not drawn: a redraw
    # of a mapped benchmark's study keeps them, after the drawn items.
    written = (
        list(
            StudyItem.objects.filter(
                study=study,
                scene__isnull=True,
                qa_item__isnull=True,
                stage__isnull=True,
                mc_item__isnull=True,
            )
            .order_by("position", "pk")
            .values_list("instructed", flat=True)
        )
        if study.benchmark == "generic"
        else []
    )
    study.study_works.all().delete()  # their items go with them
    study_works = {
        work.pk: StudyWork.objects.create(study=study, work=work, position=position)
        for position, work in enumerate(works)
    }
    after = max((fields.get("position", 0) for _, fields in items), default=0) + 1
    StudyItem.objects.bulk_create(
        [
            *(
                StudyItem(study=study, study_work=study_works[work_id], **fields)
                for work_id, fields in items
            ),
            *(
                StudyItem(
                    study=study,
                    study_work=study_works[works[0].pk],
                    role=StudyItem.Role.ATTENTION,
                    position=after + n,
                    instructed=content,
                )
                for n, content in enumerate(written)
            ),
        ]
    )


@transaction.atomic
def study_create(
    *,
    name: str,
    benchmark: str,
    works: list[Work],
    scenes: list[Scene] | None = None,
    created_by=None,
    **settings_: Any,
) -> Study:
    """A draft study over ``works``: every test scene (``test_scenes``), or ``scenes``.

    ``settings_`` are Study fields (overlap, min_seen, reveal, tags, instructions…).
    """
    if not works:
        raise StudyError("choose at least one work")
    if wrong := [w.key for w in works if w.benchmark != benchmark]:
        raise StudyError(f"not {benchmark} works: {', '.join(wrong)}")
    items = scene_items(works, scenes)
    if not items:
        raise StudyError("the chosen works have no test scenes (a masked speaker to guess)")
    study = Study.objects.create(name=name, benchmark=benchmark, created_by=created_by, **settings_)
    study_items_set(study=study, works=works, items=items)
    return study


# -- drafts: edit, duplicate, delete ------------------------------------------------------


def _draft_only(study: Study, doing: str) -> None:
    if study.status != Study.Status.DRAFT:
        raise StudyError(
            f"a {study.status} study cannot be {doing}: only drafts can "
            "(duplicate it to get a draft with the same settings)"
        )


@transaction.atomic
def study_update(
    *,
    study: Study,
    name: str,
    instructions: str,
    consent: str,
    works: list[Work] | None = None,
    items: ItemPlan | None = None,
    **settings_: Any,
) -> Study:
    """Change every setting of a draft study (the new-study form's fields).

    ``works`` and ``items`` replace the study's items (the caller re-samples only when
    a sampling setting changed; the seed they were drawn with is in ``settings_``):
    practice and attention roles and the leak check's holds start afresh, and a scene
    study's leak check runs again. The texts go through :func:`study_update_texts`, so
    a change is a new version. Refused once the study is live or anyone has answered.
    """
    study = Study.objects.select_for_update().get(pk=study.pk)
    _draft_only(study, "edited")
    name = name.strip()
    if not name:
        raise StudyError("the study needs a name")
    if Study.objects.filter(name__iexact=name).exclude(pk=study.pk).exists():
        raise StudyError("a study with this name exists already; choose another")
    if (works is None) != (items is None):
        raise ValueError("pass works and items together")
    if items is not None and Assignment.objects.filter(study_item__study=study).exists():
        raise StudyError("items have been handed out: they can no longer be drawn again")
    study.name = name
    for field, value in settings_.items():
        setattr(study, field, value)
    study.save(update_fields=["name", *settings_, "updated_at"])
    if works is not None and items is not None:
        study_items_set(study=study, works=works, items=items)
        if study.benchmark in ("tom-in-amc", "tvshowguess"):
            leaks_check(study=study)
    return study_update_texts(study=study, instructions=instructions, consent=consent)


DUPLICATE_SKIPS = {
    # A copy is a new draft: its own name, link, state and text versions.
    "id",
    "name",
    "status",
    "public_token",
    "public_cap",
    "item_set_hash",
    "design_applied_at",
    "imported",
    "instructions_version",
    "exit_questions_version",
    "created_by",
    "created_at",
    "updated_at",
    # A copy calls nobody until its researcher says where, with a secret of its own.
    "webhook_url",
    "webhook_secret",
}


def duplicate_name(name: str) -> str:
    """``name (copy)``, or ``name (copy 2)``… when that is taken too."""
    base = f"{name} (copy)"
    candidate, n = base, 1
    while Study.objects.filter(name__iexact=candidate).exists():
        n += 1
        candidate = f"{name} (copy {n})"
    return candidate[:200]


@transaction.atomic
def study_duplicate(*, study: Study, created_by=None) -> Study:
    """A new draft with ``study``'s settings, works and items (any status may be copied).

    Items keep their roles, leak findings and holds; the copy has no participants, no
    public link (its places are set afresh) and its texts start again at version 1.
    """
    fields = {
        f.name: getattr(study, f.name)
        for f in Study._meta.concrete_fields
        if f.name not in DUPLICATE_SKIPS
    }
    copy = Study.objects.create(name=duplicate_name(study.name), created_by=created_by, **fields)
    for study_work in study.study_works.order_by("position"):
        new_work = StudyWork.objects.create(
            study=copy,
            work_id=study_work.work_id,
            position=study_work.position,
            name_map=study_work.name_map,
        )
        StudyItem.objects.bulk_create(
            StudyItem(
                study=copy,
                study_work=new_work,
                scene_id=item.scene_id,
                qa_item_id=item.qa_item_id,
                stage_id=item.stage_id,
                mc_item_id=item.mc_item_id,
                instructed=item.instructed,
                question_ids=item.question_ids,
                position=item.position,
                role=item.role,
                held_back=item.held_back,
                leaks=item.leaks,
            )
            for item in study_work.items.order_by("position")
        )
    return copy


@transaction.atomic
def study_delete(*, study: Study) -> str:
    """Delete a draft that nobody has joined (its works, items and texts go with it).

    A study with participants, or past its draft, is refused: close it instead, so
    what was collected stays. Returns the deleted study's name.
    """
    study = Study.objects.select_for_update().get(pk=study.pk)
    _draft_only(study, "deleted")
    if n := study.participants.count():
        raise StudyError(
            f"this draft has {n} participant{'s' if n != 1 else ''} (invite links count): "
            "it cannot be deleted; close it instead"
        )
    name = study.name
    study.delete()
    return name


def _transition(study: Study, allowed: tuple[str, ...], to: str) -> Study:
    updated = Study.objects.filter(pk=study.pk, status__in=allowed).update(
        status=to, updated_at=timezone.now()
    )
    study.refresh_from_db()
    if not updated and study.status != to:
        raise StudyError(f"a {study.status} study cannot become {to}")
    return study


@dataclass(frozen=True)
class GoLive:
    """What going live did: the leak check's report (first time only) and what is held."""

    study: Study
    leaks: LeakReport | None  # None when a paused study resumes: nothing was re-checked
    held_back: tuple[str, ...]  # source ids of the scenes no rater will be given

    def summary(self) -> str:
        """One line for the researcher (browser message and command output alike)."""
        held = f": {', '.join(self.held_back)}" if self.held_back else ""
        if self.study.benchmark not in ("tom-in-amc", "tvshowguess"):
            return "Multiple-choice items need no leak check; the item set is now fixed."
        if self.leaks is None:
            return f"{len(self.held_back)} scenes held back{held}."
        return f"Leak check: {self.leaks.summary()}{held}."


@transaction.atomic
def study_launch(*, study: Study) -> GoLive:
    """Open the study to raters: the one way every caller (browser, command, demo) goes live.

    The first time (a draft) the name maps are drawn and the leak check is run, so a
    study can never reach raters with a leaking scene unchecked; a refusal rolls all
    of it back. The item set is fixed (hashed) the first time too.
    """
    report = None
    if study.status == Study.Status.DRAFT and study.benchmark in ("tom-in-amc", "tvshowguess"):
        name_maps_build(study=study)
        report = leaks_check(study=study)
    if not study.study_items.filter(held_back=False).exists():
        raise StudyError("every scene is held back: nothing to assign")
    if not study.item_set_hash:
        study.item_set_hash = item_set_hash(study)
        study.save(update_fields=["item_set_hash", "updated_at"])
    study = _transition(study, (Study.Status.DRAFT, Study.Status.PAUSED), Study.Status.LIVE)
    tallies_start(study=study)  # an adaptive generic study's strata (once)
    if study.benchmark in SCENE_BENCHMARKS:
        # Every scene's quota slots now, not on the work's first "seen it?": made there,
        # they locked the work's scenes while the first of a launch's arrivals wrote
        # them, and everyone arriving with them waited (issue 51).
        for study_work in study.study_works.order_by("pk"):
            slots_ensure(study_work=study_work)
    held = study.study_items.filter(held_back=True).order_by("study_work__position", "position")
    return GoLive(
        study=study,
        leaks=report,
        held_back=tuple(held.values_list("scene__source_id", flat=True)),
    )


def study_go_live(*, study: Study) -> Study:
    """``study_launch`` for callers that only need the study back."""
    return study_launch(study=study).study


def study_pause(*, study: Study) -> Study:
    return _transition(study, (Study.Status.LIVE,), Study.Status.PAUSED)


@transaction.atomic
def study_close(*, study: Study) -> Study:
    study = _transition(
        study, (Study.Status.DRAFT, Study.Status.LIVE, Study.Status.PAUSED), Study.Status.CLOSED
    )
    study_closed.send(sender=Study, study=study)
    return study


# -- texts --------------------------------------------------------------------------------

# What a scene study's attention check tells the rater to select: ``{name}`` is each
# masked speaker's character as the rater sees it (its gold, given away on purpose).
NAME_PLACEHOLDER = "{name}"
ATTENTION_INSTRUCTION_MAX = 300


def attention_instruction_check(text: str) -> str:
    """The attention-check instruction as it is stored (outer spaces cut, "" for none).

    Raises :class:`StudyError` naming the ``attention_instruction`` field when it is too
    long or does not say where the name goes.
    """
    text = (text or "").strip()
    if len(text) > ATTENTION_INSTRUCTION_MAX:
        raise StudyError(
            f"attention_instruction: at most {ATTENTION_INSTRUCTION_MAX} characters "
            f"(this one has {len(text)})"
        )
    if text and NAME_PLACEHOLDER not in text:
        raise StudyError(
            f"attention_instruction: write {NAME_PLACEHOLDER} where the name to select goes "
            f"(e.g. “Attention check: select '{NAME_PLACEHOLDER}' for this speaker.”)"
        )
    return text


def attention_instruction_text(instruction: str, name: str) -> str:
    """The instruction a masked speaker of a check shows, its ``name`` filled in."""
    return instruction.replace(NAME_PLACEHOLDER, name)


def _shared_texts(study: Study) -> dict[str, str]:
    """kind -> text of those ``instructions_version`` numbers: instructions and consent,
    and the attention-check instruction while the study has one (none shown: none kept)."""
    texts = {
        StudyTextVersion.Kind.INSTRUCTIONS: study.instructions,
        StudyTextVersion.Kind.CONSENT: study.consent,
    }
    if study.attention_instruction:
        texts[StudyTextVersion.Kind.ATTENTION_INSTRUCTION] = study.attention_instruction
    return texts


def _texts_save(study: Study, **texts: str) -> Study:
    """Store ``texts`` (fields under ``instructions_version``) as a new version when any
    changed; each version of each is kept (:func:`text_version_ensure`), the outgoing one
    too, in case it was never written."""
    if all(getattr(study, name) == text for name, text in texts.items()):
        return study
    for kind in _shared_texts(study):
        text_version_ensure(study=study, kind=kind)
    for name, text in texts.items():
        setattr(study, name, text)
    study.instructions_version += 1
    study.save(update_fields=[*texts, "instructions_version", "updated_at"])
    for kind in _shared_texts(study):
        text_version_ensure(study=study, kind=kind)
    return study


@transaction.atomic
def study_update_texts(*, study: Study, instructions: str, consent: str) -> Study:
    """Edit the instructions/consent page; a new version is stamped on later answers."""
    return _texts_save(study, instructions=instructions, consent=consent)


@transaction.atomic
def study_attention_instruction_set(*, study: Study, instruction: str) -> Study:
    """A scene study's attention-check instruction ("" for none): a new version of the
    texts under ``instructions_version`` when it changed.

    With one, every check is an instructed-response item (each masked speaker shows it
    with the name to select) and counts under ``Study.instructed_max_failures``. Once
    scenes have been handed out it can be reworded, not added or removed: the checks
    already answered were answered with it or without it. Raises :class:`StudyError`
    naming the ``attention_instruction`` field.
    """
    text = attention_instruction_check(instruction)
    if text == study.attention_instruction:
        return study
    if study.benchmark not in SCENE_BENCHMARKS:
        raise StudyError(
            "attention_instruction: only a scene study's checks take it here (a "
            "multiple-choice study's instruction is set with its items)"
        )
    handed_out = Assignment.objects.filter(study_item__study=study).exists()
    if handed_out and not (text and study.attention_instruction):
        raise StudyError(
            "attention_instruction: scenes have been handed out: the instruction can be "
            "reworded now, not added or removed"
        )
    return _texts_save(study, attention_instruction=text)


def study_current_texts(study: Study) -> dict[str, tuple[int, Any]]:
    """kind -> (version, content) of each text the study shows participants now."""
    version = study.instructions_version
    texts = {kind: (version, text) for kind, text in _shared_texts(study).items()}
    exit_questions = (study.exit_questions_version, study.exit_questions)
    texts[StudyTextVersion.Kind.EXIT_QUESTIONS] = exit_questions
    return texts


def text_version_ensure(*, study: Study, kind: str) -> StudyTextVersion:
    """The snapshot of the study's current text of ``kind`` (instructions, consent or
    exit questions), written the first time it is needed.

    Studies made before snapshots existed have none, and a data migration is not the
    way to write them: every edit snapshots the outgoing version before it bumps, and
    whoever stores an answer against a version calls this, so a version that anyone
    answered always has its text.
    """
    current = study_current_texts(study)
    if kind not in current:
        raise StudyError(f"no text of kind {kind!r} on this study")
    version, content = current[kind]
    snapshot, _ = StudyTextVersion.objects.get_or_create(
        study=study, kind=kind, version=version, defaults={"content": content}
    )
    return snapshot
