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

from .models import (
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
    """A new gold set with its items in the order given.

    With items it is active at once; with none it is an inactive draft, filled one
    item at a time (:func:`qualification_item_add`) and then activated.
    """
    name = name.strip()
    if not name:
        raise WorkflowError("name: give the set a name")
    if not 0.0 <= threshold <= 1.0:
        raise WorkflowError("threshold: a mean F1 between 0 and 1")
    qset = QualificationSet.objects.create(
        name=name[:200],
        threshold=threshold,
        # A set without items is a draft to fill on its page: active, it would block
        # every annotator (the trial refuses an empty set) until it had gold.
        is_active=bool(rows),
        created_by=created_by if created_by is not None and created_by.is_authenticated else None,
    )
    QualificationItem.objects.bulk_create(
        QualificationItem(
            qset=qset, position=n, note=row.note, dimension=row.dimension, gold_spans=row.spans
        )
        for n, row in enumerate(rows, start=1)
    )
    return qset


# --- editing a gold set item by item ----------------------------------------------------

FROZEN = (
    "annotators have already attempted this set, so its gold and threshold are frozen "
    "(their scores must stay comparable): make a new set instead"
)
NOTE_CHOICES_LIMIT = 500


@dataclass(frozen=True)
class NoteChoice:
    pk: int
    label: str


def _first_words(text: str, words: int = 8) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def gold_note_choices(*, limit: int = NOTE_CHOICES_LIMIT) -> tuple[list[NoteChoice], bool]:
    """Notes a gold item may use, labelled "batch · #position · character · first words".

    ``(choices, more)``: at most ``limit`` notes of the newest batches; ``more`` says
    there are others, which the builder then takes by id.
    """
    notes = list(
        ReaderNote.objects.select_related("batch")
        .only("pk", "position", "target_character", "note_text", "batch__name")
        .order_by("-batch__created_at", "-batch_id", "position")[: limit + 1]
    )
    choices = [
        NoteChoice(
            pk=note.pk,
            label=f"{note.batch.name} · #{note.position} · {note.target_character} · "
            f"{_first_words(note.note_text)}",
        )
        for note in notes[:limit]
    ]
    return choices, len(notes) > limit


def gold_note_get(*, note_id: Any) -> ReaderNote:
    """The reader note a gold item is about; a missing one names the ``note`` field."""
    if isinstance(note_id, str):
        note_id = int(note_id) if note_id.strip().isdigit() else None
    if not isinstance(note_id, int) or isinstance(note_id, bool):
        raise WorkflowError("note: choose a reader note")
    note = ReaderNote.objects.select_related("batch", "book").filter(pk=note_id).first()
    if note is None:
        raise WorkflowError(f"note: no reader note {note_id}")
    return note


def dimension_clean(dimension: Any) -> str:
    """``dimension`` if it is a ToM dimension; else an error naming the field."""
    if dimension not in ToMDimension.values:
        raise WorkflowError(
            f"dimension: {dimension!r} is not one of {', '.join(ToMDimension.values)}"
        )
    return dimension


def _editable_set(*, qset_id: int, user: AbstractBaseUser) -> QualificationSet:
    """The set locked for an edit of its gold; refused once anyone attempted it.

    :func:`attempt_start` takes the same lock, so an attempt cannot begin between
    this check and the edit.
    """
    if not is_researcher(user):
        raise WorkflowError("only researchers edit gold sets")
    qset = QualificationSet.objects.select_for_update().filter(pk=qset_id).first()
    if qset is None:
        raise WorkflowError(f"no qualification set {qset_id}")
    if qset.attempts.exists():
        raise WorkflowError(f"{qset.name!r}: {FROZEN}")
    return qset


def gold_set_frozen(qset: QualificationSet) -> bool:
    """True once an annotator attempted the set: no gold edit is accepted then."""
    return qset.attempts.exists()


@transaction.atomic
def qualification_item_add(
    *,
    qset_id: int,
    note_id: Any,
    dimension: str,
    spans: Any,
    no_key_note: bool = False,
    user: AbstractBaseUser,
) -> QualificationItem:
    """Append a gold item: the note, the dimension and the gold spans (code points).

    ``no_key_note`` says the note states nothing about the dimension (no spans).
    A note appears once per dimension in a set: adding it again, even with the same
    spans, is refused naming ``note``, so a replayed form cannot duplicate an item.
    """
    qset = _editable_set(qset_id=qset_id, user=user)
    note = gold_note_get(note_id=note_id)
    dimension = dimension_clean(dimension)
    if no_key_note:
        if spans:
            raise WorkflowError(
                "spans: either select fragments or mark that the note states nothing "
                "about this dimension, not both"
            )
        clean: list[list[int]] = []
    else:
        clean = spans_clean(note.note_text, spans)
    twin = qset.items.filter(note=note, dimension=dimension).first()
    if twin is not None:
        raise WorkflowError(
            f"note: #{note.position} of {note.batch.name!r} is already item "
            f"{twin.position} of this set for {dimension}; remove that item to change its gold"
        )
    last = qset.items.order_by("-position").values_list("position", flat=True).first() or 0
    return QualificationItem.objects.create(
        qset=qset, position=last + 1, note=note, dimension=dimension, gold_spans=clean
    )


@transaction.atomic
def qualification_item_remove(*, item_id: int, user: AbstractBaseUser) -> QualificationSet:
    """Delete a gold item; the items after it move up so positions stay 1..n.

    The last item of an active set stays: an active set without items would stop
    every annotator (deactivate the set first).
    """
    qset_id = QualificationItem.objects.filter(pk=item_id).values_list("qset_id", flat=True).first()
    if qset_id is None:
        raise WorkflowError(f"item: no gold item {item_id}")
    qset = _editable_set(qset_id=qset_id, user=user)
    item = qset.items.filter(pk=item_id).first()
    if item is None:
        raise WorkflowError(f"item: no gold item {item_id}")
    if qset.is_active and qset.items.count() == 1:
        raise WorkflowError(
            "item: this is the only item of an active set; deactivate the set first"
        )
    item.delete()
    # One row at a time, lowest first: each moves into the place just freed, so the
    # (qset, position) unique constraint holds after every UPDATE (PostgreSQL checks
    # it row by row, a single UPDATE … SET position = position - 1 could trip it).
    for later in qset.items.filter(position__gt=item.position).order_by("position"):
        later.position -= 1
        later.save(update_fields=["position"])
    return qset


@transaction.atomic
def qualification_threshold_set(
    *, qset_id: int, threshold: float, user: AbstractBaseUser
) -> QualificationSet:
    """Change the mean F1 needed to pass; refused once the set has attempts."""
    if (
        not isinstance(threshold, int | float)
        or isinstance(threshold, bool)
        or not 0.0 <= threshold <= 1.0
    ):
        raise WorkflowError("threshold: a mean F1 between 0 and 1")
    qset = _editable_set(qset_id=qset_id, user=user)
    if qset.threshold != threshold:
        qset.threshold = float(threshold)
        qset.save(update_fields=["threshold"])
    return qset


@transaction.atomic
def qualification_set_activate(
    *, qset_id: int, active: bool, user: AbstractBaseUser
) -> QualificationSet:
    """Make a set the trial annotators take (``active``) or retire it.

    Allowed after attempts, since the gold does not change; a set needs items to be
    activated.
    """
    if not is_researcher(user):
        raise WorkflowError("only researchers edit gold sets")
    qset = QualificationSet.objects.select_for_update().filter(pk=qset_id).first()
    if qset is None:
        raise WorkflowError(f"no qualification set {qset_id}")
    if active and not qset.items.exists():
        raise WorkflowError("items: add at least one gold item before activating the set")
    if qset.is_active != active:
        qset.is_active = active
        qset.save(update_fields=["is_active"])
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
    # The user's row serialises two "start" clicks from two tabs into one attempt.
    get_user_model().objects.select_for_update().filter(pk=annotator.pk).first()
    # The set's row waits for a gold edit in progress (see _editable_set), so the
    # attempt starts on the gold as edited, and freezes it from then on.
    QualificationSet.objects.select_for_update().filter(pk=qset.pk).first()
    if not qset.items.exists():
        raise WorkflowError(f"The trial {qset.name!r} has no items yet.")
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
