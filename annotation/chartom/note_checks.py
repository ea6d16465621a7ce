"""Checking filtered notes by hand (CharToM-QA section 4.1).

After the LLM filter, a researcher samples notes the filter kept (a note with at least
one dimension judged "yes") and each goes to ``k`` annotators (the paper: 100 notes,
two annotators), who judge whether the note describes the target character's mind
appropriately: accurate, subjective but consistent with the book, or inappropriate.
The report shows the shares (the paper: 80% / 13% / 7%, so 93% "treated as
accurate") and the two annotators' agreement.

A note-check task is an :class:`AnnotationTask` of kind ``note_check`` pointing at the
note; the shared queue of :mod:`annotation.chartom.workflow` hands them out.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, QuerySet, Sum

from .check_decisions import settled_in_force
from .models import (
    AnnotationTask,
    Construction,
    NoteBatch,
    NoteCheckLabel,
    ReaderNote,
    TaskAssignment,
    TaskKind,
)
from .workflow import WorkflowError, assignment_lock, assignment_submit, task_take

logger = logging.getLogger(__name__)

KIND = TaskKind.NOTE_CHECK
MAX_K = 10
NOT_FOUND = "no such task in your queue"


# --- selectors -------------------------------------------------------------------------


def filtered_notes(batch: NoteBatch) -> QuerySet[ReaderNote]:
    """The batch's notes the LLM filter kept for at least one ToM dimension."""
    kept = Construction.objects.filter(note=OuterRef("pk"), filter_verdict__iexact="yes")
    return ReaderNote.objects.filter(batch=batch).filter(Exists(kept)).order_by("pk")


def note_check_batches() -> list[dict[str, Any]]:
    """Batches with filtered notes: how many, how many sampled, judgements in and due."""
    kept = Construction.objects.filter(note=OuterRef("pk"), filter_verdict__iexact="yes")
    filtered = dict(
        ReaderNote.objects.filter(Exists(kept))
        .order_by()
        .values_list("batch_id")
        .annotate(n=Count("pk"))
    )
    tasks = {
        row["batch_id"]: row
        for row in AnnotationTask.objects.filter(kind=KIND)
        .order_by()
        .values("batch_id")
        .annotate(sampled=Count("pk"), due=Sum("k"))
    }
    submitted = dict(
        TaskAssignment.objects.filter(task__kind=KIND, submitted_at__isnull=False)
        .order_by()
        .values_list("task__batch_id")
        .annotate(n=Count("pk"))
    )
    ids = set(filtered) | set(tasks)
    return [
        {
            "id": batch.pk,
            "name": batch.name,
            "filtered": filtered.get(batch.pk, 0),
            "sampled": tasks.get(batch.pk, {}).get("sampled", 0),
            "submitted": submitted.get(batch.pk, 0),
            "due": tasks.get(batch.pk, {}).get("due", 0),
        }
        for batch in NoteBatch.objects.filter(pk__in=ids).order_by("-created_at")
    ]


def note_check_done(*, annotator: AbstractBaseUser) -> int:
    """How many notes ``annotator`` has checked."""
    return TaskAssignment.objects.filter(
        annotator=annotator, task__kind=KIND, submitted_at__isnull=False
    ).count()


def note_check_slot(*, assignment_id: int, annotator: AbstractBaseUser) -> TaskAssignment | None:
    """The annotator's own note-check slot with its note and book; None for anything else."""
    return (
        TaskAssignment.objects.filter(pk=assignment_id, annotator=annotator, task__kind=KIND)
        .select_related("task", "task__note", "task__note__book")
        .first()
    )


def note_verdicts(note: ReaderNote) -> list[dict[str, str]]:
    """The LLM filter's verdict and reason per dimension, in the model's dimension order."""
    return [
        {
            "dimension": c.get_dimension_display(),
            "verdict": c.filter_verdict or "not judged",
            "reason": c.filter_reason,
        }
        for c in Construction.objects.filter(note=note).order_by("dimension")
    ]


@dataclass(frozen=True)
class NoteJudgement:
    note_id: int
    annotator_id: int
    label: str


def note_check_judgements(*, settled: bool = True) -> list[NoteJudgement]:
    """Every submitted note check, per note in submission order (for shares and agreement).

    With ``settled`` (the default) a note a reviewer settled counts every judgement of
    it as the settled label, so the decision wins wherever the labels are read; without
    it, the annotators' own labels (agreement before adjudication).
    """
    rows = (
        TaskAssignment.objects.filter(task__kind=KIND, submitted_at__isnull=False)
        .order_by("task__note_id", "submitted_at", "pk")
        .values_list("task_id", "task__note_id", "annotator_id", "answer")
    )
    decided = settled_in_force(kind=KIND) if settled else {}
    return [
        NoteJudgement(
            note_id,
            annotator_id,
            decided[task_id].outcome if task_id in decided else answer["label"],
        )
        for task_id, note_id, annotator_id, answer in rows
        if isinstance(answer, dict) and answer.get("label") in NoteCheckLabel.values
    ]


# --- services --------------------------------------------------------------------------


def note_check_sample(
    *,
    batch: NoteBatch,
    size: int,
    seed: int = 0,
    k: int = 2,
    created_by: AbstractBaseUser | None = None,
) -> int:
    """Sample ``size`` filtered notes of ``batch`` for checking by ``k`` annotators each.

    The sample is the first ``size`` notes of the batch's filtered notes shuffled with
    ``seed``, so the same call gives the same notes and a larger ``size`` with the same
    seed extends the smaller sample. A note already sampled keeps its task (nothing is
    duplicated). A ``size`` above the filtered notes takes them all (compare with
    ``filtered_notes(batch).count()`` to say so). Returns how many tasks were created.
    """
    if size < 1:
        raise WorkflowError("size: sample at least one note")
    if not 1 <= k <= MAX_K:
        raise WorkflowError(f"k: between 1 and {MAX_K} annotators per note")
    if seed < 0:
        raise WorkflowError("seed: must not be negative")
    with transaction.atomic():
        # The batch row serialises two samplings of one batch: no note gets two tasks.
        NoteBatch.objects.select_for_update().filter(pk=batch.pk).first()
        ids = list(filtered_notes(batch).values_list("pk", flat=True))
        if not ids:
            raise WorkflowError(f"batch {batch.name!r} has no note the filter kept yet")
        random.Random(seed).shuffle(ids)
        chosen = ids[:size]
        taken = set(
            AnnotationTask.objects.filter(kind=KIND, note_id__in=chosen).values_list(
                "note_id", flat=True
            )
        )
        new = [
            AnnotationTask(kind=KIND, batch=batch, note_id=note_id, k=k, position=position)
            for position, note_id in enumerate(chosen)
            if note_id not in taken
        ]
        AnnotationTask.objects.bulk_create(new)
    logger.info(
        "note checks: %s new of %s sampled notes in batch %s (seed %s, k %s) by %s",
        len(new),
        len(chosen),
        batch.pk,
        seed,
        k,
        getattr(created_by, "pk", None),
    )
    return len(new)


def note_check_take(
    *, annotator: AbstractBaseUser, batch: NoteBatch | None = None
) -> TaskAssignment | None:
    """The annotator's open note check, or the next sampled note with room for them."""
    filters = {"batch": batch} if batch is not None else {}
    return task_take(kind=KIND, annotator=annotator, **filters)


def note_check_submit(
    *, assignment_id: int, annotator: AbstractBaseUser, label: str
) -> TaskAssignment:
    """Record the annotator's judgement of a note: one of :class:`NoteCheckLabel`.

    In one transaction: the annotator's live slot is locked and submitted with
    ``{"label": label}``. A replay finds the slot submitted and is refused without
    changing anything; another annotator's slot is "not found".
    """
    if label not in NoteCheckLabel.values:
        raise WorkflowError(f"label: must be one of {', '.join(NoteCheckLabel.values)}")
    with transaction.atomic():
        assignment = assignment_lock(assignment_id=assignment_id, annotator=annotator)
        if assignment.task.kind != KIND:
            raise WorkflowError(NOT_FOUND)
        return assignment_submit(assignment, {"label": label})
