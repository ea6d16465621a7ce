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

from .errors import (
    StudyError,  # views, commands and tests import it from here
)
from .models import (
    Study,
    StudyItem,
    StudyWork,
)
from .scene.leaks import LeakReport, leaks_check
from .scene.perturbation import name_maps_build

# -- set-up -----------------------------------------------------------------------------


def item_set_hash(study: Study) -> str:
    """sha256 over the study's items (with their gold), in order.

    Scenes: their masked speakers; CharToM-QA: the questions and their answers; DynToM:
    the stages' questions and gold letters.
    """
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
    """A draft study over ``works``: every testing scene with masked speakers, or ``scenes``.

    ``settings_`` are Study fields (overlap, min_seen, reveal, tags, instructions…).
    """
    if not works:
        raise StudyError("choose at least one work")
    if wrong := [w.key for w in works if w.benchmark != benchmark]:
        raise StudyError(f"not {benchmark} works: {', '.join(wrong)}")
    study = Study.objects.create(name=name, benchmark=benchmark, created_by=created_by, **settings_)
    chosen = {s.pk for s in scenes} if scenes is not None else None
    for position, work in enumerate(works):
        study_work = StudyWork.objects.create(study=study, work=work, position=position)
        candidates = (
            Scene.objects.filter(work=work, part=Scene.Part.TESTING, instances__isnull=False)
            .distinct()
            .order_by("position")
        )
        StudyItem.objects.bulk_create(
            StudyItem(study=study, study_work=study_work, scene=scene, position=scene.position)
            for scene in candidates
            if chosen is None or scene.pk in chosen
        )
    if not study.study_items.exists():
        raise StudyError("the chosen works have no testing scenes with masked speakers")
    return study


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


def study_close(*, study: Study) -> Study:
    return _transition(
        study, (Study.Status.DRAFT, Study.Status.LIVE, Study.Status.PAUSED), Study.Status.CLOSED
    )


@transaction.atomic
def study_update_texts(*, study: Study, instructions: str, consent: str) -> Study:
    """Edit the instructions/consent page; a new version is stamped on later answers."""
    if (instructions, consent) != (study.instructions, study.consent):
        study.instructions = instructions
        study.consent = consent
        study.instructions_version += 1
        study.save(update_fields=["instructions", "consent", "instructions_version", "updated_at"])
    return study
