"""DynToM validation pages: the annotator's queue, the scoring screen, the researcher's batch.

Annotators (role "annotator"; researchers may score too) take the next stage of a batch,
then score its objects one at a time while the whole stage stays visible. Each radio
button saves its score at once through htmx (:func:`score_save`, idempotent); the
submit button posts the whole form as well, so the page works without JavaScript and a
reload resumes where the annotator was. An annotator only ever sees their own scores.
Researchers see every score, the decisions with their reasons, the override form and
the accepted-set versions at ``/annotation/validation/<batch>/``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import researcher_required
from accounts.roles import ANNOTATOR, has_role, is_researcher
from common.request_params import BadNumber, optional_number

from ...models import ValidationBatch, ValidationObject, ValidationStage
from . import selectors, services
from .forms import BatchCreateForm, OverrideForm, scores_from_post
from .rubrics import KIND_LABELS
from .rules import OUTCOMES

SCORE_PAGE = "annotation/validation_score.html"
SAVE_STATUS = "annotation/validation_score.html#save-status"


def annotator_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Annotators and researchers; anyone else logged in gets 403."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not (has_role(request.user, ANNOTATOR) or is_researcher(request.user)):
            raise PermissionDenied("Validation scoring is for annotators.")
        return view(request, *args, **kwargs)

    return wrapped


@require_http_methods(["GET", "POST"])
@annotator_required
def validation_index(request: HttpRequest) -> HttpResponse:
    """The annotator's stages with progress, the batches to take work from; researchers
    also get the batch list and (POST) the new-batch form."""
    researcher = is_researcher(request.user)
    form = BatchCreateForm(request.POST or None) if researcher else None
    if request.method == "POST":
        if form is None:
            raise PermissionDenied("Only researchers create batches.")
        if form.is_valid():
            try:
                batch = services.validation_batch_create(
                    **form.service_kwargs(), created_by=request.user
                )
            except services.ValidationError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Validation batch {batch.name!r} created.")
                return redirect("annotation:validation-batch", batch_id=batch.pk)
    queue = selectors.annotator_queue(annotator=request.user)
    context = {
        "queue": queue,
        "batches": list(selectors.open_batches()[:50]),
        "done": sum(r["done"] for r in queue),
        "total": sum(r["total"] for r in queue),
        "researcher": researcher,
        "form": form,
        "waiting_generated": selectors.waiting_generated_stages().count() if researcher else 0,
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "annotation/validation_index.html", context, status=status)


@require_POST
@annotator_required
def validation_take(request: HttpRequest, batch_id: int) -> HttpResponse:
    batch = get_object_or_404(ValidationBatch, pk=batch_id)
    vstage = services.validation_stage_take(batch=batch, annotator=request.user)
    if vstage is None:
        messages.info(request, f"Nothing left in {batch.name!r} for you: thank you.")
        return redirect("annotation:validation")
    return redirect("annotation:validation-stage", vstage_id=vstage.pk)


def _render_stage(
    request: HttpRequest,
    vstage: ValidationStage,
    *,
    current_id: int | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    slots = selectors.annotator_assignments(annotator=request.user, vstage=vstage)
    if not slots:
        raise Http404("You have no objects of this stage to score.")
    by_id = {a.pk: a for a in slots}
    current = by_id.get(current_id) if current_id else None
    if current is None:
        # Resume: the first object not yet submitted, else the last one.
        current = next((a for a in slots if a.submitted_at is None), slots[-1])
    content = selectors.stage_content(vstage)
    obj = current.object
    context = {
        "vstage": vstage,
        "content": content,
        "slots": slots,
        "current": current,
        "object": obj,
        "kind_label": KIND_LABELS[obj.kind],
        "question": content["questions"].get(obj.ref) if obj.kind == "question" else None,
        "scenario_number": int(obj.ref) if obj.kind == "scenario" else None,
        "criteria": selectors.criteria_rows(current),
        "done": sum(1 for a in slots if a.submitted_at is not None),
        "total": len(slots),
        "error": error,
    }
    return render(request, SCORE_PAGE, context, status=status)


def _vstage(vstage_id: int) -> ValidationStage:
    try:
        return selectors.vstage_for_scoring(vstage_id)
    except ValidationStage.DoesNotExist:
        raise Http404("no such stage") from None


@require_GET
@annotator_required
def validation_stage(request: HttpRequest, vstage_id: int) -> HttpResponse:
    """The scoring screen: ``?slot=<assignment id>`` opens that object, else resumes."""
    try:
        current_id = optional_number(request.GET.get("slot"), name="slot")
    except BadNumber:
        current_id = None  # a mangled link still opens the stage where it was left
    return _render_stage(request, _vstage(vstage_id), current_id=current_id)


def _own_slot(request: HttpRequest, assignment_id: int) -> None:
    """404 unless ``assignment_id`` is the annotator's own slot in this workspace."""
    if selectors.annotator_assignment(annotator=request.user, assignment_id=assignment_id) is None:
        raise Http404("no such slot in your queue")


@require_POST
@annotator_required
def score_save(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """Save the scores in the POST (one criterion from htmx) and the comment, if sent.

    A refused value stores nothing and answers 422 with the message (htmx shows it).
    Another annotator's slot, or one of another workspace, is not found, even when the
    POST holds nothing to save.
    """
    try:
        values = scores_from_post(request.POST)
        if not values and "comment" not in request.POST:
            _own_slot(request, assignment_id)  # nothing to save, but never another's slot
        for criterion, value in values.items():
            services.validation_score_record(
                assignment_id=assignment_id,
                annotator=request.user,
                criterion=criterion,
                value=value,
            )
        if "comment" in request.POST:
            services.validation_comment_record(
                assignment_id=assignment_id,
                annotator=request.user,
                comment=request.POST["comment"][:5000],
            )
    except services.ValidationError as exc:
        _own_slot(request, assignment_id)
        if request.htmx:
            return render(request, SAVE_STATUS, {"error": str(exc)}, status=422)
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    if request.htmx:
        return render(request, SAVE_STATUS, {"saved": True})
    return redirect("annotation:validation")


@require_POST
@annotator_required
def score_submit(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """Save the whole form (the no-JS path), submit the object, go to the next one."""
    try:
        values = scores_from_post(request.POST)
        assignment = services.validation_submit(
            assignment_id=assignment_id,
            annotator=request.user,
            values=values,
            comment=request.POST.get("comment", "")[:5000] if "comment" in request.POST else None,
        )
    except services.ValidationError as exc:
        slot = selectors.annotator_assignment(annotator=request.user, assignment_id=assignment_id)
        if slot is None:
            raise Http404(str(exc)) from None
        return _render_stage(
            request, _vstage(slot.vstage_id), current_id=slot.pk, error=str(exc), status=400
        )
    return redirect("annotation:validation-stage", vstage_id=assignment.vstage_id)


@require_GET
@researcher_required
def validation_batch(request: HttpRequest, batch_id: int) -> HttpResponse:
    """Every object's scores, decision with reason and override; accepted-set versions."""
    batch = get_object_or_404(ValidationBatch, pk=batch_id)
    return render(
        request,
        "annotation/validation_batch.html",
        {
            "batch": batch,
            "objects": selectors.batch_objects(batch),
            "stages": batch.stages.order_by("position"),
            "progress": selectors.batch_progress(batch),
            "accepted_sets": selectors.accepted_sets(batch),
            "outcomes": OUTCOMES,
        },
    )


@require_POST
@researcher_required
def decision_override(request: HttpRequest, object_id: int) -> HttpResponse:
    obj = get_object_or_404(ValidationObject, pk=object_id)
    form = OverrideForm(request.POST)
    if form.is_valid():
        try:
            services.validation_decision_override(
                obj=obj,
                outcome=form.cleaned_data["outcome"],
                reason=form.cleaned_data["reason"],
                overridden_by=request.user,
            )
        except services.ValidationError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Decision on {obj.label!r} overridden.")
    else:
        messages.error(request, "; ".join(e for errs in form.errors.values() for e in errs))
    return redirect("annotation:validation-batch", batch_id=obj.batch_id)
