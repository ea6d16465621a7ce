"""The labeling trial an annotator passes before extracting key notes (paper section 4.2).

A researcher builds a :class:`QualificationSet` of gold extractions; an annotator
labels each item, and the mean span F1 against the gold decides whether they
qualify at the set's threshold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts.roles import is_researcher
from benchmarks.models import ToMDimension

from ..chartom_models import (
    QualificationAnswer,
    QualificationAttempt,
    QualificationItem,
    QualificationSet,
    ReaderNote,
)
from .spans import span_compare_segments, span_f1, spans_clean, spans_from_fragments
from .workflow import WorkflowError


def annotator_qualified(user: AbstractBaseUser) -> bool:
    """May ``user`` extract key notes? True when no set is active, else a passed attempt.

    An attempt passed on any active set counts: a new set added later does not take
    the right away from people who already qualified.
    """
    if not QualificationSet.objects.filter(is_active=True).exists():
        return True
    if not user.is_authenticated:
        return False
    return QualificationAttempt.objects.filter(
        annotator=user, qset__is_active=True, passed=True
    ).exists()


# --- building a gold set ------------------------------------------------------------


@dataclass(frozen=True)
class GoldRow:
    note: ReaderNote
    dimension: str
    spans: list[list[int]]


def _note_of(row: dict[str, Any], line: int) -> ReaderNote:
    if "note" in row:
        note = ReaderNote.objects.filter(pk=row["note"]).first()
        if note is None:
            raise WorkflowError(f"line {line}: note: no reader note {row['note']!r}")
        return note
    if "batch" in row and "position" in row:
        note = ReaderNote.objects.filter(batch_id=row["batch"], position=row["position"]).first()
        if note is None:
            raise WorkflowError(
                f"line {line}: no note at position {row['position']!r} of batch {row['batch']!r}"
            )
        return note
    raise WorkflowError(f"line {line}: note: give 'note' (an id) or 'batch' and 'position'")


def gold_rows_parse(text: str) -> list[GoldRow]:
    """Gold items from JSON lines, checked against the notes; errors name line and field.

    Each line: ``{"note": 12, "dimension": "intention", "gold": ["fragment", …]}``;
    ``"batch": 3, "position": 1`` may stand for ``note``; ``"gold": []`` means the
    note states nothing about the dimension; ``"spans": [[start, end], …]`` (code
    points) may replace ``gold``.
    """
    rows: list[GoldRow] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise WorkflowError(f"line {line}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise WorkflowError(f"line {line}: expected an object")
        note = _note_of(row, line)
        dimension = row.get("dimension")
        if dimension not in ToMDimension.values:
            raise WorkflowError(
                f"line {line}: dimension: {dimension!r} is not one of "
                f"{', '.join(ToMDimension.values)}"
            )
        try:
            if "spans" in row:
                spans = spans_clean(note.note_text, row["spans"], allow_empty=True)
            else:
                gold = row.get("gold")
                if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
                    raise WorkflowError("gold: expected a list of quoted fragments")
                spans = spans_from_fragments(note.note_text, gold)
        except WorkflowError as exc:
            raise WorkflowError(f"line {line}: {exc}") from None
        rows.append(GoldRow(note=note, dimension=dimension, spans=spans))
    if not rows:
        raise WorkflowError("gold: no items given")
    return rows


@transaction.atomic
def qualification_set_create(
    *,
    name: str,
    threshold: float,
    rows: list[GoldRow],
    created_by: AbstractBaseUser | None = None,
) -> QualificationSet:
    """A new active gold set with its items in the order given."""
    name = name.strip()
    if not name:
        raise WorkflowError("name: give the set a name")
    if not 0.0 <= threshold <= 1.0:
        raise WorkflowError("threshold: a mean F1 between 0 and 1")
    if not rows:
        raise WorkflowError("gold: no items given")
    qset = QualificationSet.objects.create(
        name=name[:200],
        threshold=threshold,
        created_by=created_by if created_by is not None and created_by.is_authenticated else None,
    )
    QualificationItem.objects.bulk_create(
        QualificationItem(
            qset=qset, position=n, note=row.note, dimension=row.dimension, gold_spans=row.spans
        )
        for n, row in enumerate(rows, start=1)
    )
    return qset


# --- taking the trial -----------------------------------------------------------------


def trial_set() -> QualificationSet | None:
    """The set an annotator takes now: the newest active one."""
    return QualificationSet.objects.filter(is_active=True).order_by("-created_at", "-pk").first()


@transaction.atomic
def attempt_start(*, annotator: AbstractBaseUser) -> QualificationAttempt:
    """The annotator's unfinished attempt on the current set, or a new one.

    A failed attempt stays as it was; trying again starts a fresh attempt.
    """
    qset = trial_set()
    if qset is None:
        raise WorkflowError("There is no qualification trial to take at the moment.")
    if not qset.items.exists():
        raise WorkflowError(f"The trial {qset.name!r} has no items yet.")
    # The user's row serialises two "start" clicks from two tabs into one attempt.
    get_user_model().objects.select_for_update().filter(pk=annotator.pk).first()
    attempt = QualificationAttempt.objects.filter(
        qset=qset, annotator=annotator, finished_at__isnull=True
    ).first()
    if attempt is None:
        attempt = QualificationAttempt.objects.create(qset=qset, annotator=annotator)
    return attempt


def attempt_get(*, attempt_id: int, user: AbstractBaseUser) -> QualificationAttempt | None:
    """The attempt if ``user`` may see it: their own, or any for a researcher."""
    attempts = QualificationAttempt.objects.select_related("qset", "annotator")
    if not is_researcher(user):
        attempts = attempts.filter(annotator=user)
    return attempts.filter(pk=attempt_id).first()


def _attempt_lock(*, attempt_id: int, annotator: AbstractBaseUser) -> QualificationAttempt:
    attempt = (
        QualificationAttempt.objects.select_for_update(of=("self",))
        .select_related("qset")
        .filter(pk=attempt_id, annotator=annotator)
        .first()
    )
    if attempt is None:
        raise WorkflowError("no such qualification attempt of yours")
    if attempt.finished_at is not None:
        raise WorkflowError("this attempt is already finished; nothing was changed")
    return attempt


@transaction.atomic
def qualification_answer_save(
    *,
    attempt_id: int,
    annotator: AbstractBaseUser,
    item_id: int,
    spans: Any,
    no_key_note: bool = False,
) -> tuple[QualificationAnswer, bool]:
    """Store the annotator's spans for one gold item; ``(answer, changed)``.

    Saving the same spans again changes nothing (``changed`` is False); another
    answer to the same item replaces the first until the attempt is finished.
    """
    attempt = _attempt_lock(attempt_id=attempt_id, annotator=annotator)
    item = (
        QualificationItem.objects.select_related("note")
        .filter(pk=item_id, qset_id=attempt.qset_id)
        .first()
    )
    if item is None:
        raise WorkflowError("item: not an item of this trial")
    text = item.note.note_text
    if no_key_note:
        if spans:
            raise WorkflowError(
                "spans: either select fragments or mark that the note states nothing "
                "about this dimension, not both"
            )
        clean: list[list[int]] = []
    else:
        clean = spans_clean(text, spans)
    f1 = span_f1(text, item.gold_spans, clean)
    answer = QualificationAnswer.objects.filter(attempt=attempt, item=item).first()
    if answer is not None and answer.spans == clean:
        return answer, False
    if answer is None:
        answer = QualificationAnswer.objects.create(attempt=attempt, item=item, spans=clean, f1=f1)
    else:
        answer.spans, answer.f1 = clean, f1
        answer.save(update_fields=["spans", "f1", "answered_at"])
    return answer, True


@transaction.atomic
def attempt_finish(*, attempt_id: int, annotator: AbstractBaseUser) -> QualificationAttempt:
    """Score the attempt: mean F1 over the items, passed at the set's threshold.

    Every item must have an answer. A finished attempt is refused, unchanged.
    """
    attempt = _attempt_lock(attempt_id=attempt_id, annotator=annotator)
    items = list(attempt.qset.items.order_by("position"))
    f1s = dict(attempt.answers.values_list("item_id", "f1"))
    missing = [str(item.position) for item in items if item.pk not in f1s]
    if missing:
        raise WorkflowError(f"items {', '.join(missing)}: not answered yet")
    score = sum(f1s[item.pk] for item in items) / len(items)
    attempt.score = score
    # A score printed as 0.80 passes a threshold of 0.8 even if float sums say 0.7999….
    attempt.passed = round(score, 9) >= attempt.qset.threshold
    attempt.finished_at = timezone.now()
    attempt.save(update_fields=["score", "passed", "finished_at"])
    return attempt


@dataclass
class ItemResult:
    item: QualificationItem
    answer: QualificationAnswer | None
    segments: list[tuple[str, str]] = field(default_factory=list)

    @property
    def f1(self) -> float:
        return self.answer.f1 if self.answer else 0.0


def attempt_items(attempt: QualificationAttempt) -> list[ItemResult]:
    """Each item with the annotator's answer and the note marked both/missed/extra."""
    answers = {a.item_id: a for a in attempt.answers.all()}
    rows = []
    for item in attempt.qset.items.select_related("note").order_by("position"):
        answer = answers.get(item.pk)
        segments = span_compare_segments(
            item.note.note_text, item.gold_spans, answer.spans if answer else []
        )
        rows.append(ItemResult(item=item, answer=answer, segments=segments))
    return rows


def qset_attempts(qset: QualificationSet) -> QuerySet[QualificationAttempt]:
    """Every attempt on the set, for researchers, with the annotator."""
    return qset.attempts.select_related("annotator").order_by("-started_at", "-pk")
