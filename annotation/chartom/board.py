"""Selectors of the CharToM-QA board: batches, progress figures, needs-retry, provenance;
and :func:`task_claim`, the one way the board's "take" buttons claim a task.

Apart from the claim everything here reads; the writes are in :mod:`.workflow` and
the review services. Progress is counted from the rows themselves (constructions per
stage and state, task slots per annotator), so the board can never disagree with
the queue.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.roles import is_researcher

from .models import (
    AnnotationTask,
    Construction,
    FieldChange,
    NoteBatch,
    Stage,
    TaskAssignment,
    TaskKind,
)
from .text_edits import diff_segments
from .workflow import STAGE_ORDER, live_assignments, task_timeout

# The board's rows, in the order a construction walks them; dropped ones last.
BOARD_STAGES: tuple[str, ...] = (*STAGE_ORDER, Stage.DROPPED)
STATES: tuple[str, ...] = tuple(Construction.State.values)
# Column heads of the progress table: the states' labels are too long for seven columns.
STATE_HEADS: dict[str, str] = {
    Construction.State.QUEUED: "queued",
    Construction.State.RUNNING: "running",
    Construction.State.NEEDS_RETRY: "needs retry",
    Construction.State.WAITING_HUMAN: "waiting",
    Construction.State.DONE: "done",
}
BUSY_STATES = (Construction.State.QUEUED, Construction.State.RUNNING)

# Construction fields shown with their history, in stage order.
TRACKED_FIELDS: tuple[str, ...] = (
    "stage",
    "filter_verdict",
    "filter_reason",
    "key_spans",
    "key_note",
    "description",
    "question",
    "bonus_points",
    "misleadings",
    "distractors",
    "qa_item_id",
)


def batch_list() -> QuerySet[NoteBatch]:
    """Note batches, newest first, with their note, construction and outcome counts."""
    constructions = "notes__constructions"
    return NoteBatch.objects.select_related("run", "backend", "created_by").annotate(
        note_count=Count("notes", distinct=True),
        construction_count=Count(constructions, distinct=True),
        published_count=Count(
            constructions,
            filter=Q(notes__constructions__stage=Stage.PUBLISHED),
            distinct=True,
        ),
        retry_count=Count(
            constructions,
            filter=Q(notes__constructions__state=Construction.State.NEEDS_RETRY),
            distinct=True,
        ),
    )


def batch_get(batch_id: int) -> NoteBatch:
    """The batch with what its page shows beside the counts (raises DoesNotExist)."""
    return NoteBatch.objects.select_related("run", "backend", "created_by").get(pk=batch_id)


@dataclass
class StageRow:
    stage: str
    label: str
    total: int = 0
    states: dict[str, int] = field(default_factory=dict)

    @property
    def cells(self) -> list[int]:
        return [self.states.get(state, 0) for state in STATES]


def batch_stage_progress(batch: NoteBatch) -> list[StageRow]:
    """Constructions of ``batch`` counted per stage (rows) and state (columns); one query."""
    rows = {stage: StageRow(stage, Stage(stage).label) for stage in BOARD_STAGES}
    counts = (
        Construction.objects.filter(note__batch=batch)
        .values_list("stage", "state")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for stage, state, n in counts:
        row = rows.setdefault(stage, StageRow(stage, stage))
        row.states[state] = n
        row.total += n
    return list(rows.values())


def batch_is_busy(batch: NoteBatch) -> bool:
    """True while an LLM step of the batch is queued or running (the page keeps polling)."""
    # Steps of a batch without a backend wait for one; nothing will move until then.
    if batch.backend_id is None:
        return False
    return Construction.objects.filter(note__batch=batch, state__in=BUSY_STATES).exists()


@dataclass
class AnnotatorRow:
    annotator: str
    kinds: dict[str, dict[str, Any]]

    @property
    def total(self) -> int:
        return sum(k["submitted"] for k in self.kinds.values())


def batch_annotator_progress(batch: NoteBatch) -> list[AnnotatorRow]:
    """Per annotator and task kind: slots submitted, slots open, median seconds taken.

    Medians are computed here rather than in SQL: SQLite has no percentile function.
    """
    slots = (
        TaskAssignment.objects.filter(task__batch=batch)
        .values_list("annotator__username", "task__kind", "submitted_at", "seconds")
        .order_by()
    )
    seconds: dict[tuple[str, str], list[float]] = defaultdict(list)
    open_slots: dict[tuple[str, str], int] = defaultdict(int)
    names: set[str] = set()
    for name, kind, submitted_at, secs in slots:
        names.add(name)
        if submitted_at is None:
            open_slots[name, kind] += 1
        else:
            seconds[name, kind].append(secs or 0.0)
    rows = []
    for name in sorted(names):
        kinds = {}
        for kind in TaskKind.values:
            done = seconds.get((name, kind), [])
            if done or open_slots.get((name, kind)):
                kinds[kind] = {
                    "label": TaskKind(kind).label,
                    "submitted": len(done),
                    "open": open_slots.get((name, kind), 0),
                    "median_seconds": statistics.median(done) if done else None,
                }
        rows.append(AnnotatorRow(name, kinds))
    return rows


def batch_needs_retry(batch: NoteBatch) -> QuerySet[Construction]:
    """Constructions whose LLM step failed, with the note each error is about."""
    return (
        Construction.objects.filter(note__batch=batch, state=Construction.State.NEEDS_RETRY)
        .select_related("note", "note__book")
        .order_by("note__position", "dimension")
    )


def batch_queued_steps(batch: NoteBatch) -> QuerySet[Construction]:
    """Constructions whose LLM step is queued, longest waiting first, with their note."""
    return (
        Construction.objects.filter(note__batch=batch, state=Construction.State.QUEUED)
        .select_related("note", "note__book")
        .order_by("updated_at", "pk")
    )


def batch_constructions(batch: NoteBatch) -> QuerySet[Construction]:
    return (
        Construction.objects.filter(note__batch=batch)
        .select_related("note", "note__book")
        .order_by("note__position", "dimension")
    )


# --- the annotator's cards ----------------------------------------------------------


# The board's card order: the construction steps as a construction meets them.
BOARD_KINDS: tuple[str, ...] = (
    TaskKind.NOTE_CHECK,
    TaskKind.EXTRACT,
    TaskKind.PARAPHRASE_REVIEW,
    TaskKind.QUESTION_CHOICE,
    TaskKind.BONUS_REVIEW,
    TaskKind.DISTRACTOR_REVIEW,
    TaskKind.JUDGEMENT,
)


@dataclass
class KindCard:
    kind: str
    label: str
    key: str  # the board's keyboard shortcut
    open: int
    done: int
    current_id: int | None


def annotator_cards(annotator: AbstractBaseUser) -> list[KindCard]:
    """One card per task kind: tasks with room for ``annotator``, theirs submitted, theirs open.

    "Open" counts tasks that are not closed, have a free slot and were not already
    submitted by this annotator; a kind's own eligibility rules (qualification,
    not checking one's own notes) may still refuse some of them at take time.
    Three grouped queries whatever the number of kinds.
    """
    cutoff = timezone.now() - task_timeout()
    live = (
        live_assignments()
        .filter(task=OuterRef("pk"))
        .order_by()
        .values("task")
        .annotate(c=Count("pk"))
        .values("c")
    )
    open_counts = dict(
        AnnotationTask.objects.filter(closed=False)
        .exclude(assignments__annotator=annotator, assignments__submitted_at__isnull=False)
        .annotate(n=Coalesce(Subquery(live, output_field=IntegerField()), Value(0)))
        .filter(n__lt=F("k"))
        .order_by()
        .values_list("kind")
        .annotate(c=Count("pk"))
    )
    done_counts = dict(
        TaskAssignment.objects.filter(annotator=annotator, submitted_at__isnull=False)
        .order_by()
        .values_list("task__kind")
        .annotate(c=Count("pk"))
    )
    current: dict[str, int] = {}
    for kind, pk in (
        TaskAssignment.objects.filter(
            annotator=annotator,
            submitted_at__isnull=True,
            taken_at__gte=cutoff,
            task__closed=False,
        )
        .order_by("taken_at")
        .values_list("task__kind", "pk")
    ):
        current.setdefault(kind, pk)
    return [
        KindCard(
            kind=kind,
            label=TaskKind(kind).label,
            key=str(index),
            open=open_counts.get(kind, 0),
            done=done_counts.get(kind, 0),
            current_id=current.get(kind),
        )
        for index, kind in enumerate(BOARD_KINDS, start=1)
    ]


# --- taking a task ------------------------------------------------------------------------

Taken = TypeVar("Taken")


def task_claim(*, annotator: AbstractBaseUser, take: Callable[[], Taken]) -> Taken:
    """Run ``take`` (a kind's ``*_take`` service) as the annotator's only claim in flight.

    A take first looks for the annotator's open task of the kind and only then claims
    a new one; two takes of the same annotator at once (two tabs, a double click)
    would both find none and claim two tasks. Here the annotator's user row is locked
    first, in the take's transaction, so their takes run one after the other and the
    second finds the task the first claimed. (On SQLite, whose transactions begin
    IMMEDIATE in our settings, the transaction alone serialises them.)
    """
    with transaction.atomic():
        list(get_user_model().objects.select_for_update().filter(pk=annotator.pk).values("pk"))
        return take()


# --- one construction and its provenance -------------------------------------------------


def construction_get(construction_id: int) -> Construction:
    """The construction with its note, book, batch and item (raises DoesNotExist)."""
    return Construction.objects.select_related(
        "note", "note__book", "note__batch", "note__batch__run", "qa_item"
    ).get(pk=construction_id)


def construction_visible_to(user: AbstractBaseUser, construction: Construction) -> bool:
    """Researchers see every construction; an annotator those they had a task on."""
    if is_researcher(user):
        return True
    return TaskAssignment.objects.filter(task__construction=construction, annotator=user).exists()


def change_author(change: FieldChange) -> str:
    """Who made a change, in words: a username, or the model and template version."""
    if change.changed_by_id is not None and change.changed_by is not None:
        return change.changed_by.get_username()
    if change.model or change.template:
        return " · ".join(part for part in (change.model, change.template) if part)
    return "system"


def _as_text(value: Any) -> str | None:
    """A value as diffable text: strings as they are, lists of strings one per line."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return None


def _text_items(value: Any) -> list[str] | None:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


def value_display(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


@dataclass
class ChangeRow:
    change: FieldChange
    author: str
    old: str
    new: str
    segments: list[tuple[str, str]] | None


@dataclass
class FieldHistory:
    name: str
    current: str
    changes: list[ChangeRow]
    items: list[str] | None = None  # a list of texts, shown as a list


def construction_history(construction: Construction) -> list[FieldHistory]:
    """Every tracked field's current value and its changes, oldest first, diffs for text."""
    by_field: dict[str, list[ChangeRow]] = defaultdict(list)
    for change in FieldChange.objects.filter(construction=construction).select_related(
        "changed_by"
    ):
        old_text, new_text = _as_text(change.old_value), _as_text(change.new_value)
        segments = None
        if old_text is not None and new_text is not None and old_text and change.field != "stage":
            segments = diff_segments(old_text, new_text)
        by_field[change.field].append(
            ChangeRow(
                change=change,
                author=change_author(change),
                old=value_display(change.old_value),
                new=value_display(change.new_value),
                segments=segments,
            )
        )
    names = list(TRACKED_FIELDS) + sorted(set(by_field) - set(TRACKED_FIELDS))
    return [
        FieldHistory(
            name=name,
            current=value_display(getattr(construction, name, None)),
            changes=by_field.get(name, []),
            items=_text_items(getattr(construction, name, None)),
        )
        for name in names
    ]
