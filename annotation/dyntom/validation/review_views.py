"""The reviewer queue of DynToM validation: disputed objects, side by side, settled.

Reviewers are the people :func:`accounts.roles.may_adjudicate` allows: researchers who
may change things, and annotators given the reviewer permission. Everyone else gets
403. An annotator-reviewer is not shown the objects they scored: annotators never see
each other's answers on their own work. Researchers set each batch's threshold here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import forbidden
from accounts.roles import is_researcher, may_adjudicate, may_change

from ...models import ValidationBatch, ValidationObject
from . import review, selectors, services
from .forms import (
    FROM_SETTLED,
    AdjudicationForm,
    ReviewThresholdForm,
    settled_from_post,
)

NO_PERMISSION = "Reviewing disagreements needs the reviewer permission: ask a researcher."


def reviewer_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Reviewers only; anyone else logged in gets the styled 403."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not may_adjudicate(request.user):
            return forbidden(request, NO_PERMISSION)
        return view(request, *args, **kwargs)

    return wrapped


def hidden_from(request: HttpRequest) -> AbstractBaseUser | None:
    """Whose own answers the reviewer must not see: none for a researcher."""
    # Researchers read every score on the batch page already; annotators do not.
    return None if is_researcher(request.user) else request.user


@require_GET
@reviewer_required
def review_index(request: HttpRequest) -> HttpResponse:
    """Batches with how many objects are disputed, to settle, and decisions changed."""
    rows = []
    changed = {}
    for batch in selectors.open_batches()[:30]:
        disputes = [
            d
            for d in review.batch_disputes(batch, hide_scored_by=hidden_from(request))
            if d.disputed
        ]
        changed[batch.pk] = sum(review.decisions_changed(batch_ids=[batch.pk]).values())
        rows.append(
            {
                "batch": batch,
                "disputed": len(disputes),
                "open": sum(1 for d in disputes if d.adjudication is None),
                "changed": changed[batch.pk],
            }
        )
    # The same queue's CharToM-QA part: conflicting note checks and expert scores, each
    # kind with its counts, settled on the CharToM-QA checks' review page.
    from annotation.chartom import check_review

    disputes = [
        d for d in check_review.check_disputes(hide_scored_by=hidden_from(request)) if d.disputed
    ]
    checks_changed = check_review.check_decisions_changed()
    checks = [
        {
            "kind": kind,
            "label": label,
            "disputed": sum(1 for d in disputes if d.kind == kind),
            "open": sum(1 for d in disputes if d.kind == kind and d.adjudication is None),
            "changed": checks_changed.get(kind, 0),
        }
        for kind, label in (
            (check_review.NOTE, "Note checks (labels differ)"),
            (check_review.JUDGEMENT, "Expert scores (spread at the sample's threshold)"),
        )
    ]
    context = {"rows": rows, "checks": checks}
    return render(request, "annotation/review_index.html", context)


@require_GET
@reviewer_required
def review_queue(request: HttpRequest, batch_id: int) -> HttpResponse:
    """A batch's disputed objects, those still to settle first."""
    batch = get_object_or_404(ValidationBatch, pk=batch_id)
    disputes = [
        d for d in review.batch_disputes(batch, hide_scored_by=hidden_from(request)) if d.disputed
    ]
    disputes.sort(key=lambda d: d.adjudication is not None)  # stable: stage order kept
    context = {
        "batch": batch,
        "disputes": disputes,
        "open": sum(1 for d in disputes if d.adjudication is None),
        "changed": sum(review.decisions_changed(batch_ids=[batch.pk]).values()),
        "threshold_form": ReviewThresholdForm(
            initial={"spread": batch.review_spread, "split": batch.review_split}
        )
        if may_change(request.user) and is_researcher(request.user)
        else None,
    }
    return render(request, "annotation/review_queue.html", context)


@require_POST
@reviewer_required
def review_threshold(request: HttpRequest, batch_id: int) -> HttpResponse:
    """The researcher sets the batch's threshold (reviewers who are annotators may not)."""
    if not is_researcher(request.user):
        return forbidden(request, "The researcher sets the threshold.")
    batch = get_object_or_404(ValidationBatch, pk=batch_id)
    form = ReviewThresholdForm(request.POST)
    if not form.is_valid():
        messages.error(
            request, "; ".join(f"{k}: {e}" for k, errs in form.errors.items() for e in errs)
        )
        return redirect("annotation:review-queue", batch_id=batch.pk)
    services.validation_review_threshold_set(
        batch=batch, spread=form.cleaned_data["spread"], split=form.cleaned_data["split"]
    )
    messages.success(request, "Threshold saved: the queue below follows it.")
    return redirect("annotation:review-queue", batch_id=batch.pk)


def _dispute(request: HttpRequest, obj: ValidationObject) -> review.Dispute:
    found = review.batch_disputes(
        obj.batch, object_ids=[obj.pk], hide_scored_by=hidden_from(request)
    )
    if not found:
        raise Http404("This object is not one you can review (not decided, or yours).")
    return found[0]


def _next_open(request: HttpRequest, obj: ValidationObject) -> int | None:
    """The next disputed object of the batch still to settle, after ``obj`` or before."""
    open_ids = [
        d.obj.pk
        for d in review.batch_disputes(obj.batch, hide_scored_by=hidden_from(request))
        if d.disputed and d.adjudication is None
    ]
    return open_ids[0] if open_ids else None


@require_http_methods(["GET", "POST"])
@reviewer_required
def review_object(request: HttpRequest, object_id: int) -> HttpResponse:
    """The annotators' answers side by side; the reviewer decides with a reason (POST),
    or undoes the decision in force (POST ``undo``)."""
    obj = get_object_or_404(ValidationObject.objects.select_related("batch"), pk=object_id)
    dispute = _dispute(request, obj)
    in_force = dispute.adjudication
    form = AdjudicationForm(
        request.POST or None,
        initial={"outcome": in_force.outcome, "reason": in_force.reason} if in_force else None,
    )
    error = ""
    if request.method == "POST":
        try:
            if "undo" in request.POST:
                services.validation_adjudicate(
                    obj=obj,
                    reviewer=request.user,
                    reason=request.POST.get("undo_reason", "")[:2000],
                    withdraw=True,
                )
                messages.success(request, f"Decision on {obj.label!r} undone: the rules decide.")
                return redirect("annotation:review-object", object_id=obj.pk)
            settled = settled_from_post(request.POST)
            if form.is_valid():
                outcome = form.cleaned_data["outcome"]
                services.validation_adjudicate(
                    obj=obj,
                    reviewer=request.user,
                    reason=form.cleaned_data["reason"],
                    outcome="" if outcome == FROM_SETTLED else outcome,
                    settled=settled,
                )
                messages.success(request, f"{obj.label}: decided.")
                following = _next_open(request, obj)
                if following is not None:
                    return redirect("annotation:review-object", object_id=following)
                return redirect("annotation:review-queue", batch_id=obj.batch_id)
        except services.ValidationError as exc:
            error = str(exc)
    content = selectors.stage_content(dispute.obj.vstage)
    if request.method == "POST":
        shown = _settled_shown(request)
    else:
        shown = in_force.settled_scores if in_force else {}
    context = {
        "dispute": dispute,
        "obj": obj,
        "batch": obj.batch,
        "content": content,
        "question": content["questions"].get(obj.ref) if obj.kind == "question" else None,
        "scenarios": [s for s in content["scenarios"] if str(s["number"]) == obj.ref]
        if obj.kind == "scenario"
        else [],
        "criteria": [
            {**c, "settled": shown.get(c["key"])} for c in review.settle_choices(dispute.criteria)
        ],
        "form": form,
        "error": error,
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "annotation/review_object.html", context, status=status)


def _settled_shown(request: HttpRequest) -> dict[str, int]:
    """The settled scores to show again after a refused POST (malformed ones dropped)."""
    try:
        return settled_from_post(request.POST)
    except services.ValidationError:
        return {}
