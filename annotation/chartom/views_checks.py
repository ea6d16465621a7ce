"""CharToM-QA checks: note checks (section 4.1) and expert judgement (Appendix E).

``/annotation/chartom/checks/`` lists both queues with the annotator's progress, and
for researchers the two sampling forms. An annotator takes a task (POST), sees it on
its own screen, and submits it; the submit takes the next task of the same queue. With
htmx a refused submit answers 422 with the message in place; without JavaScript the
page is rendered again with the message (422). A submit sent twice changes nothing and
says so. A slot id of another annotator is "not found".
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from accounts.roles import is_researcher
from annotation.dyntom.validation.views import annotator_required
from common.request_params import BadNumber, optional_number

from . import judgement, note_checks
from .board import task_claim
from .forms_checks import JudgementSampleForm, NoteCheckSampleForm
from .models import JudgementSample, NoteBatch, NoteCheckLabel, TaskAssignment
from .workflow import WorkflowError, task_timeout

INDEX_PAGE = "annotation/chartom/checks/index.html"
NOTE_PAGE = "annotation/chartom/checks/note_check.html"
JUDGEMENT_PAGE = "annotation/chartom/checks/judgement.html"
# Keys 1-3 on the note-check screen, in this order.
LABEL_KEYS = [(str(i + 1), value, label) for i, (value, label) in enumerate(NoteCheckLabel.choices)]
# Keys 0-9 give scores 0.0-0.9; "p" (or "=") gives 1.0.
SCORE_KEYS = [str(i) for i in range(10)] + ["p"]


def _expired(slot: TaskAssignment) -> bool:
    return slot.submitted_at is None and slot.taken_at < timezone.now() - task_timeout()


def _redirect(request: HttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


# --- the index -------------------------------------------------------------------------


def _index(
    request: HttpRequest,
    *,
    notes_form: NoteCheckSampleForm | None = None,
    judgement_form: JudgementSampleForm | None = None,
    status: int = 200,
) -> HttpResponse:
    researcher = is_researcher(request.user)
    context: dict[str, Any] = {
        "researcher": researcher,
        "note_batches": note_checks.note_check_batches(),
        "notes_done": note_checks.note_check_done(annotator=request.user),
        "samples": judgement.judgement_samples(),
    }
    if researcher:
        context["notes_form"] = notes_form or NoteCheckSampleForm()
        context["judgement_form"] = judgement_form or JudgementSampleForm()
    return render(request, INDEX_PAGE, context, status=status)


@require_GET
@annotator_required
def checks_index(request: HttpRequest) -> HttpResponse:
    return _index(request)


def _researcher_only(request: HttpRequest) -> None:
    if not is_researcher(request.user):
        raise PermissionDenied("Only researchers draw samples.")


@require_POST
@annotator_required
def note_check_sample(request: HttpRequest) -> HttpResponse:
    """Draw (or extend) a batch's seeded sample of filtered notes to check."""
    _researcher_only(request)
    form = NoteCheckSampleForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        batch: NoteBatch = data["batch"]
        try:
            created = note_checks.note_check_sample(
                batch=batch,
                size=data["size"],
                seed=data["seed"],
                k=data["k"],
                created_by=request.user,
            )
        except WorkflowError as exc:
            form.add_error(None, str(exc))
        else:
            available = note_checks.filtered_notes(batch).count()
            if data["size"] > available:
                messages.warning(
                    request,
                    f"{batch.name!r} has only {available} filtered note(s): all are sampled.",
                )
            messages.success(
                request,
                f"{created} note(s) added to the checks of {batch.name!r}"
                + ("" if created else " (they were sampled already)")
                + ".",
            )
            return redirect("annotation:chartom-checks")
    return _index(request, notes_form=form, status=400)


@require_POST
@annotator_required
def judgement_sample_create(request: HttpRequest) -> HttpResponse:
    """A researcher samples generative answers of some runs for the experts."""
    _researcher_only(request)
    form = JudgementSampleForm(request.POST)
    if form.is_valid():
        try:
            sample = judgement.judgement_sample_create(
                **form.service_kwargs(), created_by=request.user
            )
        except WorkflowError as exc:
            form.add_error(None, str(exc))
        else:
            answers = sample.tasks.count()
            if answers < sample.size:
                messages.warning(
                    request, f"Only {answers} answer(s) to judge in these runs: all are sampled."
                )
            messages.success(request, f"Sample {sample.name!r}: {answers} answer(s) to judge.")
            return redirect("annotation:chartom-checks")
    return _index(request, judgement_form=form, status=400)


# --- note checks -----------------------------------------------------------------------


def _next_note(request: HttpRequest, batch: NoteBatch | None = None) -> HttpResponse:
    slot = task_claim(
        annotator=request.user,
        take=lambda: note_checks.note_check_take(annotator=request.user, batch=batch),
    )
    if slot is None:
        messages.info(request, "No note left for you to check: thank you.")
        return _redirect(request, reverse("annotation:chartom-checks"))
    return _redirect(request, reverse("annotation:chartom-note-check", args=[slot.pk]))


@require_POST
@annotator_required
def note_check_take(request: HttpRequest) -> HttpResponse:
    """Take the next note to check (of the posted batch, if one is named)."""
    try:
        batch_id = optional_number(request.POST.get("batch"), name="batch")
    except BadNumber as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    batch = get_object_or_404(NoteBatch, pk=batch_id) if batch_id is not None else None
    return _next_note(request, batch)


def _note_slot(request: HttpRequest, assignment_id: int) -> TaskAssignment:
    slot = note_checks.note_check_slot(assignment_id=assignment_id, annotator=request.user)
    if slot is None:
        raise Http404(note_checks.NOT_FOUND)
    return slot


def _note_page(
    request: HttpRequest, slot: TaskAssignment, *, error: str = "", status: int = 200
) -> HttpResponse:
    note = slot.task.note
    context = {
        "slot": slot,
        "note": note,
        "verdicts": note_checks.note_verdicts(note),
        "labels": LABEL_KEYS,
        "chosen": (slot.answer or {}).get("label"),
        "expired": _expired(slot),
        "done": note_checks.note_check_done(annotator=request.user),
        "error": error,
    }
    if error and request.htmx:
        return render(request, f"{NOTE_PAGE}#submit-status", context, status=422)
    return render(request, NOTE_PAGE, context, status=status)


@require_GET
@annotator_required
def note_check_screen(request: HttpRequest, assignment_id: int) -> HttpResponse:
    return _note_page(request, _note_slot(request, assignment_id))


@require_POST
@annotator_required
def note_check_submit(request: HttpRequest, assignment_id: int) -> HttpResponse:
    label = request.POST.get("label", "")
    try:
        note_checks.note_check_submit(
            assignment_id=assignment_id, annotator=request.user, label=label
        )
    except WorkflowError as exc:
        slot = _note_slot(request, assignment_id)
        if slot.submitted_at is None:
            return _note_page(request, slot, error=str(exc), status=422)
        first = NoteCheckLabel((slot.answer or {}).get("label")).label
        messages.info(request, f"This note was already submitted ({first}); nothing changed.")
        return _next_note(request, slot.task.batch)
    slot = _note_slot(request, assignment_id)
    return _next_note(request, slot.task.batch)


# --- expert judgement ------------------------------------------------------------------


def _next_answer(request: HttpRequest, sample: JudgementSample) -> HttpResponse:
    slot = task_claim(
        annotator=request.user,
        take=lambda: judgement.judgement_take(annotator=request.user, sample=sample),
    )
    if slot is None:
        messages.info(request, f"No answer of {sample.name!r} left for you to score: thank you.")
        return _redirect(request, reverse("annotation:chartom-checks"))
    return _redirect(request, reverse("annotation:chartom-judgement", args=[slot.pk]))


@require_POST
@annotator_required
def judgement_take(request: HttpRequest, sample_id: int) -> HttpResponse:
    return _next_answer(request, get_object_or_404(JudgementSample, pk=sample_id))


def _judgement_slot(request: HttpRequest, assignment_id: int) -> TaskAssignment:
    slot = judgement.judgement_slot(assignment_id=assignment_id, annotator=request.user)
    if slot is None:
        raise Http404(judgement.NOT_FOUND)
    return slot


def _judgement_page(
    request: HttpRequest,
    slot: TaskAssignment,
    *,
    error: str = "",
    status: int = 200,
    posted: dict[str, str] | None = None,
) -> HttpResponse:
    answer = slot.answer or {}
    score = answer.get("score")
    if posted is not None:
        score = posted.get("score")
    context = {
        "slot": slot,
        "sample_name": slot.task.sample.name,
        "shown": judgement.judgement_screen(slot),
        "scores": [
            (f"{value:.1f}", key) for value, key in zip(judgement.SCORES, SCORE_KEYS, strict=True)
        ],
        "chosen": f"{float(score):.1f}" if _number(score) else "",
        "comment": (posted or answer).get("comment", ""),
        "expired": _expired(slot),
        "error": error,
    }
    if error and request.htmx:
        return render(request, f"{JUDGEMENT_PAGE}#submit-status", context, status=422)
    return render(request, JUDGEMENT_PAGE, context, status=status)


def _number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


@require_GET
@annotator_required
def judgement_screen(request: HttpRequest, assignment_id: int) -> HttpResponse:
    return _judgement_page(request, _judgement_slot(request, assignment_id))


@require_POST
@annotator_required
def judgement_submit(request: HttpRequest, assignment_id: int) -> HttpResponse:
    posted = {"score": request.POST.get("score", ""), "comment": request.POST.get("comment", "")}
    try:
        judgement.judgement_submit(
            assignment_id=assignment_id,
            annotator=request.user,
            score=judgement.score_clean(posted["score"]),
            comment=posted["comment"],
        )
    except WorkflowError as exc:
        slot = _judgement_slot(request, assignment_id)
        if slot.submitted_at is None:
            return _judgement_page(request, slot, error=str(exc), status=422, posted=posted)
        first = (slot.answer or {}).get("score")
        messages.info(request, f"This answer was already scored ({first}); nothing changed.")
        return _next_answer(request, slot.task.sample)
    slot = _judgement_slot(request, assignment_id)
    return _next_answer(request, slot.task.sample)
