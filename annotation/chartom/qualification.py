"""The labeling trial an annotator passes before extracting key notes (paper section 4.2).

A researcher builds a :class:`QualificationSet` of gold extractions; an annotator
labels each item of an attempt, and the mean span F1 against the gold decides whether
they qualify at the set's threshold.

A failed annotator must not pass the next attempt by copying the gold from the
feedback; the set's ``retry_mode`` (the researcher's choice) says how. ``hide_gold``:
every attempt is on all the set's items, and the annotator's feedback marks where
their selection matched or went beyond the gold but never shows the gold text.
``new_items``: each attempt draws ``items_per_attempt`` items the annotator has never
been given, so the feedback may show the gold. Every attempt is kept, with the items
it was on, for the researcher.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts.roles import is_researcher
from benchmarks.models import ToMDimension
from common.request_params import BadNumber, parse_number

from .models import (
    QualificationAnswer,
    QualificationAttempt,
    QualificationItem,
    QualificationSet,
    ReaderNote,
)
from .spans import span_compare_segments, span_f1, spans_clean, spans_from_fragments
from .text_edits import nul_refused, shown
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


def _row_id(row: dict[str, Any], key: str, line: int) -> int:
    """A whole number from a gold line (a note id, a batch id, a position)."""
    value = row[key]
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 2**63:
        raise WorkflowError(f"line {line}: {key}: expected a whole number, got {shown(value)}")
    return value


def _note_of(row: dict[str, Any], line: int) -> ReaderNote:
    if "note" in row:
        note_id = _row_id(row, "note", line)
        note = ReaderNote.objects.filter(pk=note_id).first()
        if note is None:
            raise WorkflowError(f"line {line}: note: no reader note {note_id}")
        return note
    if "batch" in row and "position" in row:
        batch, position = _row_id(row, "batch", line), _row_id(row, "position", line)
        note = ReaderNote.objects.filter(batch_id=batch, position=position).first()
        if note is None:
            raise WorkflowError(f"line {line}: no note at position {position} of batch {batch}")
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
        except (ValueError, RecursionError):
            # json.loads' other refusals: nesting thousands deep, or an integer past
            # Python's 4,300-digit limit.
            raise WorkflowError(
                f"line {line}: not JSON (nested too deeply or a number too long)"
            ) from None
        if not isinstance(row, dict):
            raise WorkflowError(f"line {line}: expected an object")
        note = _note_of(row, line)
        dimension = row.get("dimension")
        if dimension not in ToMDimension.values:
            raise WorkflowError(
                f"line {line}: dimension: {shown(dimension)} is not one of "
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
    retry_mode: str = QualificationSet.RetryMode.HIDE_GOLD,
    items_per_attempt: int | None = None,
) -> QualificationSet:
    """A new gold set with its items in the order given.

    With items it is active at once; with none it is an inactive draft, filled one
    item at a time (:func:`qualification_item_add`) and then activated. ``retry_mode``
    and ``items_per_attempt``: see :func:`retry_clean`.
    """
    name = nul_refused(name, field="name").strip()
    if not name:
        raise WorkflowError("name: give the set a name")
    if not 0.0 <= threshold <= 1.0:
        raise WorkflowError("threshold: a mean F1 between 0 and 1")
    retry_mode, items_per_attempt = retry_clean(retry_mode, items_per_attempt)
    if rows and items_per_attempt is not None and items_per_attempt > len(rows):
        raise WorkflowError(
            f"items_per_attempt: {items_per_attempt} is more than the {len(rows)} gold items given"
        )
    qset = QualificationSet.objects.create(
        name=name[:200],
        threshold=threshold,
        retry_mode=retry_mode,
        items_per_attempt=items_per_attempt,
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
    "annotators have already attempted this set, so its gold, threshold and retry "
    "setting are frozen (their scores must stay comparable): make a new set instead"
)
MAX_ITEMS_PER_ATTEMPT = 1000


def retry_clean(retry_mode: Any, items_per_attempt: Any) -> tuple[str, int | None]:
    """The retry setting, checked: ``(retry_mode, items_per_attempt)``.

    ``hide_gold`` needs no number (every attempt is on every item); ``new_items`` needs
    how many items an attempt draws, at least 1. Errors name the field.
    """
    modes = QualificationSet.RetryMode
    if retry_mode not in modes.values:
        raise WorkflowError(
            f"retry_mode: {shown(retry_mode)} is not one of {', '.join(modes.values)}"
        )
    if retry_mode == modes.HIDE_GOLD:
        return retry_mode, None
    if (
        not isinstance(items_per_attempt, int)
        or isinstance(items_per_attempt, bool)
        or not 1 <= items_per_attempt <= MAX_ITEMS_PER_ATTEMPT
    ):
        raise WorkflowError(
            "items_per_attempt: with other items on each attempt, say how many gold items "
            f"an attempt draws (1 to {MAX_ITEMS_PER_ATTEMPT})"
        )
    return retry_mode, items_per_attempt


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
        if not note_id.strip():
            raise WorkflowError("note: choose a reader note")
        try:
            note_id = parse_number(note_id.strip(), name="note")
        except BadNumber:
            raise WorkflowError(f"note: choose a reader note, not {shown(note_id)}") from None
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
            f"dimension: {shown(dimension)} is not one of {', '.join(ToMDimension.values)}"
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
    count = qset.items.count()
    if qset.is_active and count == 1:
        raise WorkflowError(
            "item: this is the only item of an active set; deactivate the set first"
        )
    if qset.is_active and (qset.items_per_attempt or 0) > count - 1:
        raise WorkflowError(
            f"item: an attempt draws {qset.items_per_attempt} gold items; the active set "
            "would have fewer (deactivate it first, or draw fewer)"
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
def qualification_retry_set(
    *, qset_id: int, retry_mode: Any, items_per_attempt: Any, user: AbstractBaseUser
) -> QualificationSet:
    """Choose how a retry is kept honest (:func:`retry_clean`); refused once the set has
    attempts, like its gold: feedback already given was given under the old setting."""
    retry_mode, items_per_attempt = retry_clean(retry_mode, items_per_attempt)
    qset = _editable_set(qset_id=qset_id, user=user)
    if qset.is_active and (items_per_attempt or 0) > (count := qset.items.count()):
        raise WorkflowError(
            f"items_per_attempt: {items_per_attempt} is more than the active set's {count} "
            "gold items"
        )
    if (qset.retry_mode, qset.items_per_attempt) != (retry_mode, items_per_attempt):
        qset.retry_mode, qset.items_per_attempt = retry_mode, items_per_attempt
        qset.save(update_fields=["retry_mode", "items_per_attempt"])
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
    if active and (qset.items_per_attempt or 0) > (count := qset.items.count()):
        raise WorkflowError(
            f"items: an attempt draws {qset.items_per_attempt} gold items and the set has "
            f"{count}; add items or draw fewer"
        )
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
        items = _attempt_draw(qset, annotator)
        attempt = QualificationAttempt.objects.create(qset=qset, annotator=annotator)
        attempt.items.set(items)
    return attempt


def _attempt_draw(qset: QualificationSet, annotator: AbstractBaseUser) -> list[QualificationItem]:
    """The items of a new attempt: all of them, or a random draw of unseen ones."""
    items = list(qset.items.order_by("position"))
    if qset.retry_mode != QualificationSet.RetryMode.NEW_ITEMS:
        return items
    wanted = qset.items_per_attempt or len(items)
    seen = set(
        QualificationAttempt.items.through.objects.filter(
            qualificationattempt__qset=qset, qualificationattempt__annotator=annotator
        ).values_list("qualificationitem_id", flat=True)
    )
    unseen = [item for item in items if item.pk not in seen]
    if len(unseen) < wanted:
        if seen:
            raise WorkflowError(
                f"You have had every gold item of the trial {qset.name!r} that an attempt "
                "could draw; a researcher can give you a new trial set."
            )
        raise WorkflowError(f"The trial {qset.name!r} has fewer gold items than an attempt draws.")
    # Unpredictable, so no one can tell which items the next attempt will hold.
    drawn = random.SystemRandom().sample(unseen, wanted)
    return sorted(drawn, key=lambda item: item.position)


def attempt_item_list(attempt: QualificationAttempt) -> list[QualificationItem]:
    """The attempt's items in the set's order, with their notes."""
    return list(attempt.items.select_related("note", "note__book").order_by("position"))


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
    item = attempt.items.select_related("note").filter(pk=item_id).first()
    if item is None:
        raise WorkflowError("item: not an item of this trial attempt")
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
    items = list(attempt.items.order_by("position"))
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
    missed: int = 0  # characters of the gold (spaces aside) the answer did not select
    threshold: float = 1.0

    @property
    def right(self) -> bool:
        """Whether this item alone reaches the set's threshold (the per-item verdict
        the feedback gives when the gold is hidden)."""
        return self.f1 >= self.threshold

    @property
    def f1(self) -> float:
        return self.answer.f1 if self.answer else 0.0


def feedback_shows_gold(attempt: QualificationAttempt, user: AbstractBaseUser) -> bool:
    """Whether ``user`` may see the gold text of the attempt's items.

    Researchers always; the annotator only when a retry draws other items
    (``new_items``), since with ``hide_gold`` the same items come back.
    """
    return is_researcher(user) or attempt.qset.retry_mode == QualificationSet.RetryMode.NEW_ITEMS


def _gold_hidden(segments: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The comparison without the gold: the annotator's own selection, one mark whether
    or not it is in the gold. Telling "selected, in the gold" from "selected, not in it"
    gave the gold away to an annotator who selected a whole note (issue 45, finding 9)."""
    out: list[tuple[str, str]] = []
    for label, text in segments:
        label = "selected" if label in ("both", "extra") else "none"
        if out and out[-1][0] == label:
            out[-1] = (label, out[-1][1] + text)
        else:
            out.append((label, text))
    return out


def attempt_items(attempt: QualificationAttempt, *, show_gold: bool = True) -> list[ItemResult]:
    """Each item of the attempt with the annotator's answer and the note marked
    both/missed/extra; with ``show_gold`` False only both/extra (the annotator's own
    selection), and how many gold characters they missed."""
    answers = {a.item_id: a for a in attempt.answers.all()}
    rows = []
    for item in attempt_item_list(attempt):
        answer = answers.get(item.pk)
        text = item.note.note_text
        spans = answer.spans if answer else []
        segments = span_compare_segments(text, item.gold_spans, spans)
        missed = sum(
            len(part) - sum(c.isspace() for c in part) for lab, part in segments if lab == "missed"
        )
        if not show_gold:
            # Neither where the gold is nor how much of it was missed: a count told an
            # annotator who selected everything how long the gold is.
            segments, missed = _gold_hidden(segments), 0
        rows.append(
            ItemResult(
                item=item,
                answer=answer,
                segments=segments,
                missed=missed,
                threshold=attempt.qset.threshold,
            )
        )
    return rows


def qset_attempts(qset: QualificationSet) -> QuerySet[QualificationAttempt]:
    """Every attempt on the set, for researchers, with the annotator."""
    return (
        qset.attempts.select_related("annotator")
        .prefetch_related("items")
        .order_by("-started_at", "-pk")
    )
