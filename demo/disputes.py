"""Disagreements for the demo's reviewer queues, answered by seeded demo annotators.

Nobody answers the demo's own validation batch or check samples, so without this both
reviewer queues (DynToM validation, CharToM-QA checks) would be empty. Three seeded
annotators (``fixtures/demo/disagreements.json``; unusable passwords, nobody signs in
as them) submit fixed answers through the services the scoring screens call:

* a second, small validation batch over the demo DynToM stage (``k`` of 3, no
  questions) that they score in full, some objects in disagreement; the demo's own
  batch keeps every slot of the demo annotator;
* the first note check of the demo construction batch and the first answer of its
  expert-judgement sample, each answered by two of them in conflict; the demo
  annotator keeps the rest of both queues.

Each part is skipped when it is there already, so a second load adds nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from accounts.roles import ANNOTATOR
from accounts.services import user_create_with_role
from annotation.chartom.demo import DemoDataError
from annotation.chartom.judgement import judgement_submit, judgement_take
from annotation.chartom.models import JudgementSample, NoteBatch, TaskAssignment, TaskKind
from annotation.chartom.note_checks import note_check_submit, note_check_take
from annotation.chartom.workflow import WorkflowError
from annotation.dyntom.validation.selectors import annotator_assignments
from annotation.dyntom.validation.services import (
    ValidationError,
    validation_batch_create,
    validation_stage_take,
    validation_submit,
)
from annotation.models import ValidationBatch
from benchmarks.models import DynToMStage

CHECK_KINDS = (TaskKind.NOTE_CHECK, TaskKind.JUDGEMENT)
CHECKS_PART = "disagreements to settle: CharToM-QA checks"


def demo_annotators_ensure(usernames: list[str]) -> list[AbstractBaseUser]:
    """The seeded annotators, created when missing (an existing one is left alone)."""
    found = get_user_model().objects.in_bulk(usernames, field_name="username")
    return [
        found.get(name) or user_create_with_role(username=name, password=None, role=ANNOTATOR)
        for name in usernames
    ]


@transaction.atomic
def demo_disputes_ensure(
    *, fixture: Path, construction_fixture: Path, researcher: AbstractBaseUser
) -> list[tuple[str, bool]]:
    """Both parts: ``(name, whether it is new)`` each. Raises :class:`DemoDataError`."""
    spec = json.loads(Path(fixture).read_text(encoding="utf-8"))
    construction = json.loads(Path(construction_fixture).read_text(encoding="utf-8"))
    annotators = demo_annotators_ensure(spec["annotators"])
    try:
        return [
            _validation_disputes(spec["validation"], annotators, researcher),
            _check_disputes(spec, construction, annotators),
        ]
    except (ValidationError, WorkflowError) as exc:
        raise DemoDataError(f"demo disagreements: {exc}") from None


def _validation_disputes(
    spec: dict[str, Any], annotators: list[AbstractBaseUser], researcher: AbstractBaseUser
) -> tuple[str, bool]:
    """A batch over the demo DynToM stage, every object scored by every annotator."""
    if ValidationBatch.objects.filter(name=spec["batch"]).exists():
        return spec["batch"], False
    stages = list(DynToMStage.objects.filter(work__key__startswith="trial_demo"))
    batch = validation_batch_create(
        name=spec["batch"], stages=stages, k=spec["k"], kinds=spec["kinds"], created_by=researcher
    )
    for index, annotator in enumerate(annotators):
        # The screen's "take": every object of the stage, the k-th slot of each.
        vstage = validation_stage_take(batch=batch, annotator=annotator)
        if vstage is None:
            raise DemoDataError(f"{batch.name}: no stage with room for {annotator}")
        for slot in annotator_assignments(annotator=annotator, vstage=vstage):
            answers = spec["objects"].get(slot.object.label)
            if answers is None or index >= len(answers):
                raise DemoDataError(f"{batch.name}: no answer of {annotator} on {slot.object}")
            answer = answers[index]
            validation_submit(
                assignment_id=slot.pk,
                annotator=annotator,
                values=answer["scores"],
                comment=answer.get("comment", ""),
            )
    return batch.name, True


def _check_disputes(
    spec: dict[str, Any], construction: dict[str, Any], annotators: list[AbstractBaseUser]
) -> tuple[str, bool]:
    """The first note check and judgement with room, answered in conflict."""
    if TaskAssignment.objects.filter(annotator__in=annotators, task__kind__in=CHECK_KINDS).exists():
        return CHECKS_PART, False
    batch = NoteBatch.objects.filter(name=construction["batch"]).first()
    sample = JudgementSample.objects.filter(name=construction["judgement"]["name"]).first()
    if batch is None or sample is None:
        raise DemoDataError("the demo construction batch and its judgement sample come first")
    tasks = set()
    for annotator, label in zip(annotators, spec["note_check"], strict=False):
        slot = note_check_take(annotator=annotator, batch=batch)
        if slot is None:
            raise DemoDataError(f"{batch.name}: no note check with room for {annotator}")
        note_check_submit(assignment_id=slot.pk, annotator=annotator, label=label)
        tasks.add(slot.task_id)
    for annotator, answer in zip(annotators, spec["judgement"], strict=False):
        slot = judgement_take(annotator=annotator, sample=sample)
        if slot is None:
            raise DemoDataError(f"{sample.name}: no answer with room for {annotator}")
        judgement_submit(
            assignment_id=slot.pk,
            annotator=annotator,
            score=answer["score"],
            comment=answer["comment"],
        )
        tasks.add(slot.task_id)
    # Tasks are handed out in queue order, so each pair meets on one task of its kind.
    if len(tasks) != 2:
        raise DemoDataError(f"the demo's check answers fell on {len(tasks)} tasks, not 2")
    return CHECKS_PART, True
