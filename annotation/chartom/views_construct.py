"""CharToM-QA construction screens: qualification trial, key-note extraction, paraphrase
review and question choice (stages 3-6).

Every screen works on one of the annotator's own slots; an id of anyone else's slot is
"not found". Submits are plain form posts (the pages work without JavaScript; the
script in ``static/js/chartom_construct.js`` adds the keyboard and the live diff), each
one service call in one transaction. After a submit the next task of the same kind
opens at once; an empty queue says so on the queue page. A refused input re-renders
the screen with the message (422), a replayed submit says it was already submitted
and changes nothing (409).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import researcher_required
from accounts.roles import is_researcher
from benchmarks.models import ToMDimension
from common.request_params import BadNumber, optional_number

from ..dyntom.validation.views import annotator_required
from . import qualification as quals
from .board import annotator_cards, task_claim
from .extraction import DIMENSION_DEFINITIONS, extraction_submit, extraction_take
from .models import QualificationItem, QualificationSet, TaskAssignment, TaskKind
from .paraphrase_review import paraphrase_review_submit, paraphrase_review_take
from .question_choice import candidates_for, question_choice_take, question_choose
from .review_slot import review_slot_get
from .spans import (
    key_note_text,
    span_compare_segments,
    spans_clean,
    spans_from_fragments,
    spans_parse,
    token_rows,
)
from .text_edits import diff_segments, nul_refused
from .workflow import WorkflowError, task_timeout

TEMPLATES = "annotation/chartom/construct"
ALREADY = "already submitted"

# The kinds these screens serve: how to take one and which screen shows a slot.
TAKERS: dict[str, Callable[..., TaskAssignment | None]] = {
    TaskKind.EXTRACT: extraction_take,
    TaskKind.PARAPHRASE_REVIEW: paraphrase_review_take,
    TaskKind.QUESTION_CHOICE: question_choice_take,
}
SCREENS: dict[str, str] = {
    TaskKind.EXTRACT: "annotation:chartom-extract",
    TaskKind.PARAPHRASE_REVIEW: "annotation:chartom-paraphrase",
    TaskKind.QUESTION_CHOICE: "annotation:chartom-question",
}


def _kind(kind: str) -> str:
    if kind not in TAKERS:
        raise Http404("no such queue")
    return kind


def _progress(annotator: Any, kind: str) -> dict[str, Any]:
    card = next(c for c in annotator_cards(annotator) if c.kind == kind)
    return {"done": card.done, "left": card.open, "current_id": card.current_id}


def _take_next(request: HttpRequest, kind: str) -> HttpResponse:
    """Open the annotator's next task of ``kind``, or say the queue is empty."""
    try:
        assignment = task_claim(
            annotator=request.user, take=lambda: TAKERS[kind](annotator=request.user)
        )
    except WorkflowError as exc:
        messages.error(request, str(exc))
        return redirect("annotation:chartom-work", kind=kind)
    if assignment is None:
        messages.info(request, f"No {TaskKind(kind).label} task is waiting for you: thank you.")
        return redirect("annotation:chartom-work", kind=kind)
    return redirect(SCREENS[kind], assignment_id=assignment.pk)


@require_GET
@annotator_required
def work(request: HttpRequest, kind: str) -> HttpResponse:
    """A kind's queue: the annotator's progress, and the button that takes the next task."""
    kind = _kind(kind)
    context: dict[str, Any] = {
        "kind": kind,
        "kind_label": TaskKind(kind).label,
        "progress": _progress(request.user, kind),
        "screen": SCREENS[kind],
    }
    if kind == TaskKind.EXTRACT:
        context["qualified"] = quals.annotator_qualified(request.user)
    return render(request, f"{TEMPLATES}/work.html", context)


@require_POST
@annotator_required
def take(request: HttpRequest, kind: str) -> HttpResponse:
    return _take_next(request, _kind(kind))


# --- one task's screen -------------------------------------------------------------------


def _slot(request: HttpRequest, assignment_id: int, kind: str) -> TaskAssignment:
    slot = review_slot_get(assignment_id=assignment_id, annotator=request.user, kind=kind)
    if slot is None:
        raise Http404("no such task in your queue")
    return slot


def context_parts(note: Any, *, plot: bool = False) -> tuple[str, str, str]:
    """The context split around the underlined text, to mark it there.

    ``plot``: the story plot the question generator was given (the 0-token window, as
    ``llm_steps`` picks it) rather than the context imported with the note.
    """
    if plot:
        context = note.context_0 or note.context_1000 or note.underlined_text
    else:
        context = note.context or note.context_0
    underlined = note.underlined_text
    at = context.find(underlined) if underlined else -1
    if at < 0:
        return context, "", ""
    return context[:at], underlined, context[at + len(underlined) :]


def _slot_state(slot: TaskAssignment) -> str:
    if slot.submitted_at is not None:
        return "submitted"
    if slot.taken_at < timezone.now() - task_timeout():
        return "expired"
    return "open"


def _screen(
    request: HttpRequest,
    slot: TaskAssignment,
    kind: str,
    extra: dict[str, Any],
    *,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    construction = slot.task.construction
    note = construction.note
    context = {
        "slot": slot,
        "state": _slot_state(slot),
        "kind": kind,
        "kind_label": TaskKind(kind).label,
        "construction": construction,
        "note": note,
        "dimension": construction.get_dimension_display(),
        "definition": DIMENSION_DEFINITIONS.get(construction.dimension, ""),
        "context_parts": context_parts(note, plot=kind == TaskKind.QUESTION_CHOICE),
        "context_label": "Story plot" if kind == TaskKind.QUESTION_CHOICE else "",
        "progress": _progress(request.user, kind),
        "error": error,
        "timeout_minutes": int(task_timeout().total_seconds() // 60),
        **extra,
    }
    template = {
        TaskKind.EXTRACT: "extract.html",
        TaskKind.PARAPHRASE_REVIEW: "paraphrase.html",
        TaskKind.QUESTION_CHOICE: "question.html",
    }[kind]
    return render(request, f"{TEMPLATES}/{template}", context, status=status)


def _refused(
    request: HttpRequest,
    assignment_id: int,
    kind: str,
    exc: WorkflowError,
    extra: Callable[[TaskAssignment], dict[str, Any]],
) -> HttpResponse:
    slot = _slot(request, assignment_id, kind)
    status = 409 if ALREADY in str(exc) else 422
    message = f"{exc}; nothing was changed." if status == 409 else str(exc)
    return _screen(request, slot, kind, extra(slot), error=message, status=status)


def _spans_from_post(request: HttpRequest, note_text: str) -> Any:
    """The page's spans (JSON, code points), or fragments typed without JavaScript."""
    raw = request.POST.get("spans", "").strip()
    if raw:
        return spans_parse(raw)
    fragments = request.POST.get("fragments", "")
    if fragments.strip():
        return spans_from_fragments(note_text, fragments.splitlines())
    return []


def span_widget(text: str, spans: Any) -> dict[str, Any]:
    """What the span widget renders: tokens, the spans as JSON, the fragments' text.

    Spans sent back after a refusal are shown again only if they are valid; anything
    else starts the widget empty rather than marking text that was never selectable.
    """
    try:
        valid = spans_clean(text, spans, allow_empty=True)
    except WorkflowError:
        valid = []
    return {
        "tokens": token_rows(text, valid),
        "spans_json": json.dumps(valid),
        "span_texts": [key_note_text(text, [span]) for span in valid],
    }


def _extract_context(slot: TaskAssignment, spans: Any = None) -> dict[str, Any]:
    text = slot.task.construction.note.note_text
    if spans is None:
        spans = slot.answer.get("spans", []) if slot.submitted_at else []
    return span_widget(text, spans)


@require_GET
@annotator_required
def extract_screen(request: HttpRequest, assignment_id: int) -> HttpResponse:
    slot = _slot(request, assignment_id, TaskKind.EXTRACT)
    return _screen(request, slot, TaskKind.EXTRACT, _extract_context(slot))


@require_POST
@annotator_required
def extract_submit(request: HttpRequest, assignment_id: int) -> HttpResponse:
    slot = _slot(request, assignment_id, TaskKind.EXTRACT)
    note_text = slot.task.construction.note.note_text
    spans: Any = []
    try:
        spans = _spans_from_post(request, note_text)
        extraction_submit(
            assignment_id=assignment_id,
            annotator=request.user,
            spans=spans,
            no_key_note=request.POST.get("no_key_note") == "1",
        )
    except WorkflowError as exc:
        return _refused(
            request,
            assignment_id,
            TaskKind.EXTRACT,
            exc,
            lambda s: _extract_context(s, None if s.submitted_at else spans),
        )
    messages.success(request, "Key note saved.")
    return _take_next(request, TaskKind.EXTRACT)


def _paraphrase_context(slot: TaskAssignment, text: str | None = None) -> dict[str, Any]:
    construction = slot.task.construction
    original = slot.answer.get("original", construction.description)
    if text is None:
        text = slot.answer.get("text", original) if slot.submitted_at else original
    return {
        "original": original,
        "text": text,
        "diff": diff_segments(original, text) if text != original else [],
    }


@require_GET
@annotator_required
def paraphrase_screen(request: HttpRequest, assignment_id: int) -> HttpResponse:
    slot = _slot(request, assignment_id, TaskKind.PARAPHRASE_REVIEW)
    return _screen(request, slot, TaskKind.PARAPHRASE_REVIEW, _paraphrase_context(slot))


@require_POST
@annotator_required
def paraphrase_submit(request: HttpRequest, assignment_id: int) -> HttpResponse:
    slot = _slot(request, assignment_id, TaskKind.PARAPHRASE_REVIEW)
    accept = request.POST.get("accept") == "1"
    text = slot.task.construction.description if accept else request.POST.get("text", "")
    try:
        construction = paraphrase_review_submit(
            assignment_id=assignment_id, annotator=request.user, text=text
        )
    except WorkflowError as exc:
        return _refused(
            request,
            assignment_id,
            TaskKind.PARAPHRASE_REVIEW,
            exc,
            lambda s: _paraphrase_context(s, None if s.submitted_at else text),
        )
    edited = construction.description != slot.task.construction.description
    messages.success(request, "Description edited." if edited else "Description accepted.")
    return _take_next(request, TaskKind.PARAPHRASE_REVIEW)


def _question_context(
    slot: TaskAssignment, picked: int | None = None, text: str | None = None
) -> dict[str, Any]:
    construction = slot.task.construction
    candidates = candidates_for(construction)
    kept = [c for c in candidates if c.kept][:4]
    if slot.submitted_at:
        picked, text = slot.answer.get("candidate"), slot.answer.get("text", "")
    return {
        "kept": kept,
        "dropped": [c for c in candidates if not c.kept],
        "picked": picked,
        "text": text or "",
    }


@require_GET
@annotator_required
def question_screen(request: HttpRequest, assignment_id: int) -> HttpResponse:
    slot = _slot(request, assignment_id, TaskKind.QUESTION_CHOICE)
    return _screen(request, slot, TaskKind.QUESTION_CHOICE, _question_context(slot))


@require_POST
@annotator_required
def question_submit(request: HttpRequest, assignment_id: int) -> HttpResponse:
    _slot(request, assignment_id, TaskKind.QUESTION_CHOICE)
    raw = request.POST.get("candidate", "")
    text = request.POST.get("text", "")
    picked: int | None = None
    try:
        try:
            picked = optional_number(raw, name="candidate")
        except BadNumber as exc:
            raise WorkflowError(str(exc)) from None
        if picked is None:
            raise WorkflowError("candidate: pick one of the questions shown for this task")
        nul_refused(text, field="text")
        # A blank box keeps the picked question as it is (the page without JavaScript).
        question_choose(
            assignment_id=assignment_id,
            annotator=request.user,
            candidate_id=picked,
            text=text if text.strip() else None,
        )
    except WorkflowError as exc:
        return _refused(
            request,
            assignment_id,
            TaskKind.QUESTION_CHOICE,
            exc,
            lambda s: _question_context(s, picked, text),
        )
    messages.success(request, "Question chosen.")
    return _take_next(request, TaskKind.QUESTION_CHOICE)


# --- qualification trial -------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@annotator_required
def qualification_index(request: HttpRequest) -> HttpResponse:
    """The annotator's trial and past attempts; researchers also create gold sets (POST)."""
    researcher = is_researcher(request.user)
    error = ""
    form = {
        "name": "",
        "threshold": "0.8",
        "gold": "",
        "retry_mode": QualificationSet.RetryMode.HIDE_GOLD,
        "items_per_attempt": "",
    }
    if request.method == "POST":
        if not researcher:
            raise Http404("no such page")
        form = {key: request.POST.get(key, default) for key, default in form.items()}
        try:
            try:
                threshold = float(form["threshold"])
            except ValueError:
                raise WorkflowError("threshold: a number between 0 and 1") from None
            items_per_attempt = _items_per_attempt(form["items_per_attempt"])
            # No lines: an empty draft, whose gold is marked item by item on its page.
            rows = quals.gold_rows_parse(form["gold"]) if form["gold"].strip() else []
            qset = quals.qualification_set_create(
                name=form["name"],
                threshold=threshold,
                rows=rows,
                created_by=request.user,
                retry_mode=form["retry_mode"],
                items_per_attempt=items_per_attempt,
            )
        except WorkflowError as exc:
            error = str(exc)
        else:
            if qset.is_active:
                messages.success(request, f"Qualification set {qset.name!r} created.")
            else:
                messages.success(
                    request,
                    f"Qualification set {qset.name!r} created as an inactive draft: add its "
                    "gold items, then activate it.",
                )
            return redirect("annotation:chartom-qualification-set", qset_id=qset.pk)
    qset = quals.trial_set()
    attempts = (
        list(qset.attempts.filter(annotator=request.user).order_by("-started_at")) if qset else []
    )
    context = {
        "qset": qset,
        "items": (qset.items_per_attempt or qset.items.count()) if qset else 0,
        "qualified": quals.annotator_qualified(request.user),
        "attempts": attempts,
        "open_attempt": next((a for a in attempts if a.finished_at is None), None),
        "researcher": researcher,
        "sets": list(QualificationSet.objects.all()[:50]) if researcher else [],
        "form": form,
        "retry_modes": QualificationSet.RetryMode.choices,
        "error": error,
    }
    return render(request, f"{TEMPLATES}/qualification.html", context, status=400 if error else 200)


@require_POST
@annotator_required
def qualification_start(request: HttpRequest) -> HttpResponse:
    try:
        attempt = quals.attempt_start(annotator=request.user)
    except WorkflowError as exc:
        messages.error(request, str(exc))
        return redirect("annotation:chartom-qualification")
    answered = set(attempt.answers.values_list("item__position", flat=True))
    positions = list(attempt.items.order_by("position").values_list("position", flat=True))
    position = next((p for p in positions if p not in answered), positions[0])
    return redirect(
        "annotation:chartom-qualification-item", attempt_id=attempt.pk, position=position
    )


def _own_attempt(request: HttpRequest, attempt_id: int):
    attempt = quals.attempt_get(attempt_id=attempt_id, user=request.user)
    if attempt is None:
        raise Http404("no such attempt")
    return attempt


@require_http_methods(["GET", "POST"])
@annotator_required
def qualification_item(request: HttpRequest, attempt_id: int, position: int) -> HttpResponse:
    """One gold item of the trial: the span widget, saved per item (idempotent)."""
    attempt = _own_attempt(request, attempt_id)
    if attempt.annotator_id != request.user.pk:
        raise Http404("no such attempt")
    if attempt.finished_at is not None:
        return redirect("annotation:chartom-qualification-attempt", attempt_id=attempt.pk)
    # Only the attempt's own items: with items drawn per attempt, another item of the
    # set is not this attempt's to answer (nor to look at).
    item = get_object_or_404(attempt.items.select_related("note", "note__book"), position=position)
    items = list(attempt.items.order_by("position").values_list("position", flat=True))
    number = items.index(item.position) + 1  # "item 2 of 3", whatever its set position
    answer = attempt.answers.filter(item=item).first()
    spans: Any = answer.spans if answer else []
    no_key_note = answer is not None and not answer.spans
    error = ""
    if request.method == "POST":
        no_key_note = request.POST.get("no_key_note") == "1"
        try:
            spans = _spans_from_post(request, item.note.note_text)
            _, changed = quals.qualification_answer_save(
                attempt_id=attempt.pk,
                annotator=request.user,
                item_id=item.pk,
                spans=spans,
                no_key_note=no_key_note,
            )
        except WorkflowError as exc:
            error = str(exc)
        else:
            messages.success(
                request,
                f"Item {number} saved." if changed else f"Item {number} unchanged.",
            )
            later = attempt.items.filter(position__gt=position).order_by("position").first()
            if later is not None:
                return redirect(
                    "annotation:chartom-qualification-item",
                    attempt_id=attempt.pk,
                    position=later.position,
                )
            return redirect("annotation:chartom-qualification-attempt", attempt_id=attempt.pk)
    answered = set(attempt.answers.values_list("item__position", flat=True))
    context = {
        "attempt": attempt,
        "item": item,
        "number": number,
        "note": item.note,
        "dimension": item.get_dimension_display(),
        "definition": DIMENSION_DEFINITIONS.get(item.dimension, ""),
        "context_parts": context_parts(item.note),
        "state": "open",
        **span_widget(item.note.note_text, spans),
        "no_key_note": no_key_note,
        "positions": [(p, p in answered, n) for n, p in enumerate(items, start=1)],
        "error": error,
    }
    return render(
        request, f"{TEMPLATES}/qualification_item.html", context, status=422 if error else 200
    )


@require_GET
@annotator_required
def qualification_attempt(request: HttpRequest, attempt_id: int) -> HttpResponse:
    """Before finishing: what is answered. After: the score, and per item where the
    answer differed from the gold: missed and extra text marked, or (when the set's
    retries come back to the same items) only the annotator's own selection marked
    as matching the gold or not, and how much of the gold they missed."""
    attempt = _own_attempt(request, attempt_id)
    show_gold = quals.feedback_shows_gold(attempt, request.user)
    rows = quals.attempt_items(attempt, show_gold=show_gold)
    return render(
        request,
        f"{TEMPLATES}/qualification_attempt.html",
        {
            "attempt": attempt,
            "rows": rows,
            "own": attempt.annotator_id == request.user.pk,
            "show_gold": show_gold,
            "unanswered": [r.item.position for r in rows if r.answer is None],
        },
    )


@require_POST
@annotator_required
def qualification_finish(request: HttpRequest, attempt_id: int) -> HttpResponse:
    try:
        attempt = quals.attempt_finish(attempt_id=attempt_id, annotator=request.user)
    except WorkflowError as exc:
        if quals.attempt_get(attempt_id=attempt_id, user=request.user) is None:
            raise Http404("no such attempt") from None
        messages.error(request, str(exc))
        return redirect("annotation:chartom-qualification-attempt", attempt_id=attempt_id)
    if attempt.passed:
        messages.success(request, f"You qualified with a mean F1 of {attempt.score:.2f}.")
    else:
        messages.warning(
            request,
            f"Mean F1 {attempt.score:.2f} is below {attempt.qset.threshold:.2f}: "
            "see where you differed, then try again.",
        )
    return redirect("annotation:chartom-qualification-attempt", attempt_id=attempt.pk)


def _set_page(
    request: HttpRequest,
    qset: QualificationSet,
    *,
    error: str = "",
    threshold: str | None = None,
    retry: dict[str, Any] | None = None,
    status: int = 200,
) -> HttpResponse:
    items = [
        {
            "item": item,
            "segments": span_compare_segments(
                item.note.note_text, item.gold_spans, item.gold_spans
            ),
        }
        for item in qset.items.select_related("note", "note__batch").order_by("position")
    ]
    attempts = list(quals.qset_attempts(qset))
    frozen = bool(attempts)
    context: dict[str, Any] = {
        "qset": qset,
        "items": items,
        "attempts": attempts,
        "frozen": frozen,
        "frozen_message": quals.FROZEN,
        "error": error,
        "threshold": qset.threshold if threshold is None else threshold,
        "retry_modes": QualificationSet.RetryMode.choices,
        "retry": retry
        or {"mode": qset.retry_mode, "items_per_attempt": qset.items_per_attempt or ""},
        "work_url": reverse("annotation:chartom-work", kwargs={"kind": TaskKind.EXTRACT}),
    }
    if not frozen:
        context.update(_gold_picker(None, ""))
    return render(request, f"{TEMPLATES}/qualification_set.html", context, status=status)


def _gold_picker(note: Any, dimension: str) -> dict[str, Any]:
    """The note and dimension choice of the gold-item builder (a GET form)."""
    choices, more = quals.gold_note_choices()
    return {
        "note_choices": choices,
        "more_notes": more,
        "picked_note": note.pk if note is not None else None,
        "picked_dimension": dimension,
        "dimensions": ToMDimension.choices,
    }


@require_GET
@researcher_required
def qualification_set(request: HttpRequest, qset_id: int) -> HttpResponse:
    """A gold set's items (gold marked in the note) and every attempt on it; while no
    one has attempted it, the forms that edit its gold and threshold."""
    return _set_page(request, get_object_or_404(QualificationSet, pk=qset_id))


@require_http_methods(["GET", "POST"])
@researcher_required
def qualification_gold_item(request: HttpRequest, qset_id: int) -> HttpResponse:
    """Add a gold item: GET ``?note=&dimension=`` opens the note in the span widget the
    annotators use; POST saves the gold spans (or "no key note") as the next item."""
    qset = get_object_or_404(QualificationSet, pk=qset_id)
    data = request.POST if request.method == "POST" else request.GET
    note_raw = data.get("note", "").strip()
    dimension = data.get("dimension", "").strip()
    no_key_note = request.POST.get("no_key_note") == "1"
    note: Any = None
    spans: Any = []
    error = ""
    try:
        if note_raw:
            note = quals.gold_note_get(note_id=note_raw)
        if dimension:
            quals.dimension_clean(dimension)
    except WorkflowError as exc:
        error = str(exc)
    if request.method == "POST":
        try:
            if note is not None:
                spans = _spans_from_post(request, note.note_text)
            item = quals.qualification_item_add(
                qset_id=qset.pk,
                note_id=note_raw,
                dimension=dimension,
                spans=spans,
                no_key_note=no_key_note,
                user=request.user,
            )
        except WorkflowError as exc:
            error = str(exc)
        else:
            messages.success(
                request, f"Gold item {item.position} added ({item.get_dimension_display()})."
            )
            url = reverse("annotation:chartom-qualification-set", kwargs={"qset_id": qset.pk})
            return redirect(f"{url}#item-{item.position}")
    frozen = quals.gold_set_frozen(qset)
    context: dict[str, Any] = {
        "qset": qset,
        "frozen": frozen,
        "frozen_message": quals.FROZEN,
        "item_count": qset.items.count(),
        "error": error,
        **_gold_picker(note, dimension),
    }
    if note is not None and dimension in ToMDimension.values and not frozen:
        context.update(
            {
                "note": note,
                "dimension_value": dimension,
                "dimension": ToMDimension(dimension).label,
                "definition": DIMENSION_DEFINITIONS.get(dimension, ""),
                "context_parts": context_parts(note),
                "state": "open",
                "no_key_note": no_key_note,
                "open_context": False,
                **span_widget(note.note_text, spans),
            }
        )
    return render(
        request,
        f"{TEMPLATES}/qualification_gold_item.html",
        context,
        status=422 if error else 200,
    )


def _set_refused(
    request: HttpRequest, qset_id: int, exc: WorkflowError, **kwargs: Any
) -> HttpResponse:
    qset = get_object_or_404(QualificationSet, pk=qset_id)
    return _set_page(request, qset, error=str(exc), status=422, **kwargs)


@require_POST
@researcher_required
def qualification_item_remove(request: HttpRequest, qset_id: int, item_id: int) -> HttpResponse:
    """Remove a gold item (refused once the set has attempts)."""
    qset = get_object_or_404(QualificationSet, pk=qset_id)
    item = QualificationItem.objects.filter(pk=item_id, qset=qset).first()
    if item is None:
        # A replayed remove finds its item gone; removing by id (not by position) means
        # it can never take the item that moved up into that place.
        return _set_page(
            request,
            qset,
            error="item: not in this set (already removed?); nothing was changed.",
            status=409,
        )
    try:
        quals.qualification_item_remove(item_id=item.pk, user=request.user)
    except WorkflowError as exc:
        return _set_refused(request, qset.pk, exc)
    messages.success(request, f"Gold item {item.position} removed; the items after it moved up.")
    return redirect("annotation:chartom-qualification-set", qset_id=qset.pk)


@require_POST
@researcher_required
def qualification_threshold(request: HttpRequest, qset_id: int) -> HttpResponse:
    """Change the set's pass mark (refused once the set has attempts)."""
    qset = get_object_or_404(QualificationSet, pk=qset_id)
    raw = request.POST.get("threshold", "").strip()
    try:
        try:
            threshold = float(raw)
        except ValueError:
            raise WorkflowError("threshold: a number between 0 and 1") from None
        qset = quals.qualification_threshold_set(
            qset_id=qset.pk, threshold=threshold, user=request.user
        )
    except WorkflowError as exc:
        return _set_refused(request, qset.pk, exc, threshold=raw)
    messages.success(request, f"Threshold set to {qset.threshold:.2f}.")
    return redirect("annotation:chartom-qualification-set", qset_id=qset.pk)


def _items_per_attempt(raw: str) -> int | None:
    try:
        return optional_number(
            raw.strip(), name="items_per_attempt", maximum=quals.MAX_ITEMS_PER_ATTEMPT
        )
    except BadNumber as exc:
        raise WorkflowError(str(exc)) from None


@require_POST
@researcher_required
def qualification_retry(request: HttpRequest, qset_id: int) -> HttpResponse:
    """Choose how a failed annotator retries: same items with the gold hidden from the
    feedback, or other items each attempt (refused once the set has attempts)."""
    qset = get_object_or_404(QualificationSet, pk=qset_id)
    retry = {
        "mode": request.POST.get("retry_mode", ""),
        "items_per_attempt": request.POST.get("items_per_attempt", ""),
    }
    try:
        qset = quals.qualification_retry_set(
            qset_id=qset.pk,
            retry_mode=retry["mode"],
            items_per_attempt=_items_per_attempt(retry["items_per_attempt"]),
            user=request.user,
        )
    except WorkflowError as exc:
        return _set_refused(request, qset.pk, exc, retry=retry)
    messages.success(request, f"Retries: {qset.get_retry_mode_display()}.")
    return redirect("annotation:chartom-qualification-set", qset_id=qset.pk)


@require_POST
@researcher_required
def qualification_activate(request: HttpRequest, qset_id: int) -> HttpResponse:
    """Make the set the trial annotators take, or retire it."""
    qset = get_object_or_404(QualificationSet, pk=qset_id)
    active = request.POST.get("active") == "1"
    try:
        qset = quals.qualification_set_activate(qset_id=qset.pk, active=active, user=request.user)
    except WorkflowError as exc:
        return _set_refused(request, qset.pk, exc)
    messages.success(
        request,
        f"{qset.name!r} is active: annotators take it as their trial."
        if qset.is_active
        else f"{qset.name!r} is inactive.",
    )
    return redirect("annotation:chartom-qualification-set", qset_id=qset.pk)
