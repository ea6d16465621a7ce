"""CharToM-QA board pages: batches and progress, provenance, bonus point and distractor review.

Annotators (and researchers, who may annotate too) see one card per task kind at
``/annotation/chartom/``; researchers also upload new batches there, follow a batch's
progress, retry failed LLM steps, read a construction's provenance and export it.
Permission checks are in each view. Both review screens work without JavaScript (the
lists are plain form fields); ``static/js/chartom_lists.js`` adds the keyboard list
editor. A refused submit answers 422 with the message and the annotator's input kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from accounts.decorators import researcher_required
from accounts.roles import is_researcher
from common.request_params import BadNumber, optional_number, parse_number
from modeling.models import Backend

from ..dyntom.validation.views import annotator_required
from . import board, exports_board
from .batch_upload import BatchUploadError, note_batch_upload
from .bonus_review import bonus_review_submit, bonus_review_take
from .demo import DEMO_BACKEND_URL
from .distractor_review import distractor_review_submit, distractor_review_take
from .forms_board import NoteBatchUploadForm, json_list, lines
from .llm_steps import stale_steps
from .misleadings import construction_distractors_redo
from .models import Construction, NoteBatch, TaskAssignment, TaskKind
from .notes_import import note_batch_start
from .review_slot import review_slot_get
from .text_edits import nul_refused
from .workflow import WorkflowError, batch_retry_all, construction_retry, task_timeout

BATCH_PAGE = "annotation/chartom/board/batch.html"
PROGRESS_PARTIAL = f"{BATCH_PAGE}#batch-progress"
BONUS_PAGE = "annotation/chartom/board/bonus_review.html"
DISTRACTOR_PAGE = "annotation/chartom/board/distractor_review.html"
QUEUED_SHOWN = 20  # queued steps listed with a Retry button; "send all again" covers the rest

# Where each card's Start button goes: (URL name, its arguments, method). The board's
# own kinds take a task here; the construction screens have one generic take; expert
# judgement is taken per sample, from the checks page. A name not routed shows the
# card without a button.
START_URLS: dict[str, tuple[str, dict[str, str], str]] = {
    TaskKind.NOTE_CHECK: ("annotation:chartom-note-check-take", {}, "post"),
    TaskKind.EXTRACT: ("annotation:chartom-take", {"kind": TaskKind.EXTRACT}, "post"),
    TaskKind.PARAPHRASE_REVIEW: (
        "annotation:chartom-take",
        {"kind": TaskKind.PARAPHRASE_REVIEW},
        "post",
    ),
    TaskKind.QUESTION_CHOICE: (
        "annotation:chartom-take",
        {"kind": TaskKind.QUESTION_CHOICE},
        "post",
    ),
    TaskKind.BONUS_REVIEW: ("annotation:chartom-bonus-take", {}, "post"),
    TaskKind.DISTRACTOR_REVIEW: ("annotation:chartom-distractor-take", {}, "post"),
    TaskKind.JUDGEMENT: ("annotation:chartom-checks", {}, "get"),
}


def _start(kind: str) -> dict[str, str]:
    name, kwargs, method = START_URLS[kind]
    try:
        url = reverse(name, kwargs={k: str(v) for k, v in kwargs.items()})
    except NoReverseMatch:
        url = ""
    return {"url": url, "method": method}


# --- the board ---------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@annotator_required
def board_index(request: HttpRequest) -> HttpResponse:
    """GET: the task cards (and, for researchers, the batches). POST: upload a batch."""
    researcher = is_researcher(request.user)
    form = None
    if researcher:
        form = NoteBatchUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST":
        if form is None:
            raise PermissionDenied("Only researchers create note batches.")
        if form.is_valid():
            try:
                batch = note_batch_upload(**form.service_kwargs(), created_by=request.user)
            except BatchUploadError as exc:
                field = exc.field if exc.field in form.fields else None
                form.add_error(field, exc.message)
            else:
                messages.success(request, f"Note batch {batch.name!r} imported.")
                return redirect("annotation:chartom-batch", batch_id=batch.pk)
    cards = [{"card": c, **_start(c.kind)} for c in board.annotator_cards(request.user)]
    context = {
        "cards": cards,
        "researcher": researcher,
        "form": form,
        "batches": list(board.batch_list()[:100]) if researcher else [],
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "annotation/chartom/board/index.html", context, status=status)


def _batch(batch_id: int) -> NoteBatch:
    try:
        return board.batch_get(batch_id)
    except NoteBatch.DoesNotExist:
        raise Http404("no such note batch") from None


def _progress_context(batch: NoteBatch) -> dict[str, Any]:
    stage_rows = board.batch_stage_progress(batch)
    queued = sum(row.states.get(Construction.State.QUEUED, 0) for row in stage_rows)
    return {
        "batch": batch,
        "busy": board.batch_is_busy(batch),
        "stage_rows": stage_rows,
        "states": [(s, board.STATE_HEADS.get(s, s)) for s in board.STATES],
        "needs_retry": list(board.batch_needs_retry(batch)),
        # Steps still "running" whose worker is gone (dead, or its lease expired).
        "stale_steps": stale_steps(note__batch=batch),
        # A batch without a backend has the start form for its queued steps instead.
        "queued_count": queued if batch.backend_id else 0,
        "queued_steps": (
            list(board.batch_queued_steps(batch)[:QUEUED_SHOWN])
            if queued and batch.backend_id
            else []
        ),
        "annotators": board.batch_annotator_progress(batch),
        # The demo's backend answers only what the demo recorded: its failures are where
        # the recording ends, which the page says plainly instead of a connection error.
        "recorded_backend": bool(batch.backend_id and batch.backend.base_url == DEMO_BACKEND_URL),
    }


@require_GET
@researcher_required
def batch_detail(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Progress per stage and annotator, the LLM run, needs-retry; htmx polls the progress."""
    batch = _batch(batch_id)
    context = _progress_context(batch)
    if request.htmx:
        response = render(request, PROGRESS_PARTIAL, context)
        if not context["busy"]:
            return HttpResponseStopPolling(response.content)
        return response
    context["constructions"] = list(board.batch_constructions(batch))
    context["backends"] = list(Backend.objects.order_by("name")) if not batch.backend_id else []
    return render(request, BATCH_PAGE, context)


@require_POST
@researcher_required
def batch_start(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Give a batch imported without a backend its LLM and queue its waiting steps."""
    batch = _batch(batch_id)
    try:
        backend = Backend.objects.get(pk=parse_number(request.POST.get("backend"), name="backend"))
    except (BadNumber, Backend.DoesNotExist):
        messages.error(request, "backend: choose one of the backends")
        return redirect("annotation:chartom-batch", batch_id=batch.pk)
    try:
        # At most 18 digits 0-9 (a "²" passes isdigit() and then fails int()), which
        # fits the 64-bit column.
        budget = optional_number(
            request.POST.get("budget_tokens", "").strip(), name="budget_tokens"
        )
        if budget is not None and budget < 1:
            raise BadNumber("budget_tokens: a whole number of tokens, at least 1")
    except BadNumber as exc:
        messages.error(request, str(exc))
        return redirect("annotation:chartom-batch", batch_id=batch.pk)
    try:
        queued = note_batch_start(
            batch_id=batch.pk,
            backend=backend,
            model=request.POST.get("model", "").strip(),
            budget_tokens=budget,
        )
    except WorkflowError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{queued} LLM steps queued on {backend.name}.")
    return redirect("annotation:chartom-batch", batch_id=batch.pk)


@require_POST
@researcher_required
def batch_retry_all_view(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Queue every failed LLM step of the batch again (answered calls are not paid twice).

    With ``queued=1``, send every still-queued step again instead (lost messages).
    """
    batch = _batch(batch_id)
    if request.POST.get("queued") == "1":
        sent = batch_retry_all(batch_id=batch.pk, user=request.user, queued=True)
        messages.success(request, f"{sent} queued LLM steps sent again.")
    else:
        sent = batch_retry_all(batch_id=batch.pk, user=request.user)
        messages.success(request, f"{sent} failed LLM steps queued again.")
    return redirect("annotation:chartom-batch", batch_id=batch.pk)


@require_POST
@researcher_required
def construction_retry_view(request: HttpRequest, construction_id: int) -> HttpResponse:
    """Queue a failed or still-queued LLM step again; answered calls are never paid twice."""
    try:
        construction = board.construction_get(construction_id)
    except Construction.DoesNotExist:
        raise Http404("no such construction") from None
    try:
        construction_retry(construction_id=construction.pk, user=request.user)
    except WorkflowError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{construction} queued again.")
    return redirect("annotation:chartom-batch", batch_id=construction.note.batch_id)


@require_POST
@researcher_required
def distractors_redo(request: HttpRequest, construction_id: int) -> HttpResponse:
    """Appendix J: send a published item back for distractors guided by judge defects."""
    try:
        construction = board.construction_get(construction_id)
    except Construction.DoesNotExist:
        raise Http404("no such construction") from None
    try:
        defects = construction_distractors_redo(construction_id=construction.pk, user=request.user)
    except WorkflowError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"New distractors queued with {len(defects)} misleading directions."
        )
    return redirect("annotation:chartom-construction", construction_id=construction.pk)


@require_GET
@annotator_required
def construction_detail(request: HttpRequest, construction_id: int) -> HttpResponse:
    """Every field with its provenance; researchers, and annotators who worked on it."""
    try:
        construction = board.construction_get(construction_id)
    except Construction.DoesNotExist:
        raise Http404("no such construction") from None
    if not board.construction_visible_to(request.user, construction):
        raise Http404("no such construction")
    choice = getattr(construction, "question_choice", None)
    context = {
        "construction": construction,
        "history": board.construction_history(construction),
        "candidates": list(construction.candidates.all()),
        "choice": choice,
        "rejected": list(choice.rejected.all()) if choice else [],
        "researcher": is_researcher(request.user),
    }
    return render(request, "annotation/chartom/board/construction.html", context)


@require_GET
@researcher_required
def batch_export(request: HttpRequest, batch_id: str, table: str, fmt: str) -> HttpResponse:
    """The batch's constructions (or their field changes) with provenance, as JSON or CSV."""
    batch = _batch(int(batch_id))  # the pattern allows at most 18 digits
    if (table, fmt) == ("constructions", "json"):
        body = json.dumps(exports_board.batch_export_json(batch), ensure_ascii=False, indent=1)
        content_type = "application/json; charset=utf-8"
    elif (table, fmt) == ("constructions", "csv"):
        body = exports_board.constructions_csv(batch)
        content_type = "text/csv; charset=utf-8"
    elif (table, fmt) == ("provenance", "csv"):
        body = exports_board.provenance_csv(batch)
        content_type = "text/csv; charset=utf-8"
    else:
        raise Http404("no such export")
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = (
        f'attachment; filename="chartom-batch-{batch.pk}-{table}.{fmt}"'
    )
    return response


# --- the two review screens ----------------------------------------------------------


def _take(
    request: HttpRequest, take: Callable[[], TaskAssignment | None], screen: str
) -> HttpResponse:
    """Claim the annotator's next task (one claim at a time, :func:`.board.task_claim`)."""
    taken = board.task_claim(annotator=request.user, take=take)
    if taken is None:
        messages.info(request, "Nothing is waiting for you in this queue: thank you.")
        return redirect("annotation:chartom")
    return redirect(screen, assignment_id=taken.pk)


def _open_slot(request: HttpRequest, assignment_id: int, kind: str) -> TaskAssignment:
    """The annotator's own slot of ``kind``, or 404 (also for another annotator's id)."""
    slot = review_slot_get(assignment_id=assignment_id, annotator=request.user, kind=kind)
    if slot is None:
        raise Http404("no such task in your queue")
    return slot


def _slot_closed(request: HttpRequest, slot: TaskAssignment) -> HttpResponse | None:
    """Where a submitted or timed-out slot's screen sends the annotator instead."""
    if slot.submitted_at is not None:
        messages.info(request, "This task was already submitted; nothing changed.")
        return redirect("annotation:chartom")
    if slot.taken_at < timezone.now() - task_timeout():
        messages.warning(request, "This task was open too long and went back to the queue.")
        return redirect("annotation:chartom")
    return None


def _refused(
    request: HttpRequest, assignment_id: int, kind: str, exc: WorkflowError
) -> HttpResponse | None:
    """A replay or a dead slot: say so and go back to the board; None for bad input."""
    slot = review_slot_get(assignment_id=assignment_id, annotator=request.user, kind=kind)
    if slot is None:
        raise Http404(str(exc))
    closed = _slot_closed(request, slot)
    if closed is not None:
        return closed
    return None


@require_POST
@annotator_required
def bonus_take(request: HttpRequest) -> HttpResponse:
    return _take(
        request, lambda: bonus_review_take(annotator=request.user), "annotation:chartom-bonus"
    )


def _bonus_page(
    request: HttpRequest,
    slot: TaskAssignment,
    *,
    points: list[str] | None = None,
    operations_json: str = "",
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    construction = slot.task.construction
    shown = points if points is not None else [str(p) for p in construction.bonus_points]
    context = {
        "slot": slot,
        "construction": construction,
        "note": construction.note,
        "points": shown,
        "points_text": "\n".join(shown),
        # A refused submit keeps the editor's log, so the retry still records all of it.
        "operations_json": operations_json,
        "error": error,
    }
    return render(request, BONUS_PAGE, context, status=status)


@require_GET
@annotator_required
def bonus_review(request: HttpRequest, assignment_id: int) -> HttpResponse:
    slot = _open_slot(request, assignment_id, TaskKind.BONUS_REVIEW)
    return _slot_closed(request, slot) or _bonus_page(request, slot)


@require_POST
@annotator_required
def bonus_submit(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """The list from the editor (JSON with the operation log) or the textarea, one per line."""
    points: list[Any] = lines(request.POST.get("points_text", ""))
    try:
        if request.POST.get("points_json"):
            points = json_list(request.POST, "points_json", field="bonus_points")
        operations: list[Any] = []
        if request.POST.get("operations_json"):
            operations = json_list(request.POST, "operations_json", field="operations")
        nul_refused(points, field="bonus_points")
        nul_refused(operations, field="operations")
        bonus_review_submit(
            assignment_id=assignment_id,
            annotator=request.user,
            points=points,
            operations=operations,
        )
    except WorkflowError as exc:
        closed = _refused(request, assignment_id, TaskKind.BONUS_REVIEW, exc)
        if closed is not None:
            return closed
        slot = _open_slot(request, assignment_id, TaskKind.BONUS_REVIEW)
        shown = [p if isinstance(p, str) else json.dumps(p) for p in points]
        return _bonus_page(
            request,
            slot,
            points=shown,
            operations_json=request.POST.get("operations_json", ""),
            error=str(exc),
            status=422,
        )
    messages.success(request, "Bonus points saved; the distractors are being written.")
    return _take(
        request, lambda: bonus_review_take(annotator=request.user), "annotation:chartom-bonus"
    )


@require_POST
@annotator_required
def distractor_take(request: HttpRequest) -> HttpResponse:
    return _take(
        request,
        lambda: distractor_review_take(annotator=request.user),
        "annotation:chartom-distractor",
    )


def _distractor_page(
    request: HttpRequest,
    slot: TaskAssignment,
    *,
    choices: list[str] | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    construction = slot.task.construction
    shown = choices if choices is not None else [str(d) for d in construction.distractors]
    shown = [*shown, "", "", ""][: max(3, len(shown))]
    context = {
        "slot": slot,
        "construction": construction,
        "note": construction.note,
        "choices": [(i, text) for i, text in enumerate(shown, start=1)],
        "error": error,
    }
    return render(request, DISTRACTOR_PAGE, context, status=status)


@require_GET
@annotator_required
def distractor_review(request: HttpRequest, assignment_id: int) -> HttpResponse:
    slot = _open_slot(request, assignment_id, TaskKind.DISTRACTOR_REVIEW)
    return _slot_closed(request, slot) or _distractor_page(request, slot)


@require_POST
@annotator_required
def distractor_submit(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """Three fields ``choice_1..3``; publishes the item, then shows it."""
    choices = [request.POST.get(f"choice_{i}", "") for i in (1, 2, 3)]
    try:
        nul_refused(choices, field="distractors")
        distractor_review_submit(
            assignment_id=assignment_id, annotator=request.user, distractors=choices
        )
    except WorkflowError as exc:
        closed = _refused(request, assignment_id, TaskKind.DISTRACTOR_REVIEW, exc)
        if closed is not None:
            return closed
        slot = _open_slot(request, assignment_id, TaskKind.DISTRACTOR_REVIEW)
        return _distractor_page(request, slot, choices=choices, error=str(exc), status=422)
    return redirect("annotation:chartom-distractor-done", assignment_id=assignment_id)


@require_GET
@annotator_required
def distractor_done(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """The item the annotator's review published, and the button to the next task."""
    slot = _open_slot(request, assignment_id, TaskKind.DISTRACTOR_REVIEW)
    construction = slot.task.construction
    if slot.submitted_at is None or construction.qa_item is None:
        return redirect("annotation:chartom-distractor", assignment_id=slot.pk)
    item = construction.qa_item
    context = {
        "slot": slot,
        "construction": construction,
        "item": item,
        "choices": [item.answer, *item.misleading_choices],
    }
    return render(request, "annotation/chartom/board/distractor_done.html", context)
