"""The reviewer queue of CharToM-QA checks: conflicting note checks and expert scores.

Reached from the checks page and the home page by reviewers (the DynToM queue's
``annotation.adjudicate`` permission and :func:`reviewer_required`); anyone else gets
the styled 403. An annotator-reviewer is not shown the tasks they answered. Researchers
set each judgement sample's threshold here and download the decisions.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import forbidden
from accounts.roles import is_researcher, may_change
from annotation.dyntom.validation.review_views import hidden_from, reviewer_required

from . import check_review, judgement, note_checks
from .check_review import JUDGEMENT, NOTE, CheckReviewError
from .forms_checks import CheckDecisionForm, ReviewSpreadForm
from .models import AnnotationTask, JudgementSample
from .views_checks import LABEL_KEYS, SCORE_KEYS

QUEUE_PAGE = "annotation/chartom/checks/review_queue.html"
TASK_PAGE = "annotation/chartom/checks/review_task.html"


def _researcher(request: HttpRequest) -> bool:
    return is_researcher(request.user) and may_change(request.user)


@require_GET
@reviewer_required
def check_review_queue(request: HttpRequest) -> HttpResponse:
    """Disputed note checks and expert judgements, those still to settle first."""
    disputes = [
        d for d in check_review.check_disputes(hide_scored_by=hidden_from(request)) if d.disputed
    ]
    disputes.sort(key=lambda d: d.adjudication is not None)  # stable: queue order kept
    researcher = _researcher(request)
    samples = list(JudgementSample.objects.order_by("-created_at", "-pk")) if researcher else []
    context: dict[str, Any] = {
        "notes": [d for d in disputes if d.kind == NOTE],
        "answers": [d for d in disputes if d.kind == JUDGEMENT],
        "open": sum(1 for d in disputes if d.adjudication is None),
        "disputed": len(disputes),
        "changed": check_review.check_decisions_changed(),
        "researcher": researcher,
        "samples": [
            (s, ReviewSpreadForm(initial={"spread": s.review_spread}, prefix=f"s{s.pk}"))
            for s in samples
        ],
    }
    return render(request, QUEUE_PAGE, context)


@require_POST
@reviewer_required
def check_review_threshold(request: HttpRequest, sample_id: int) -> HttpResponse:
    """The researcher sets a judgement sample's threshold (annotator-reviewers may not)."""
    if not _researcher(request):
        return forbidden(request, "The researcher sets the threshold.")
    sample = get_object_or_404(JudgementSample, pk=sample_id)
    form = ReviewSpreadForm(request.POST, prefix=f"s{sample.pk}")
    if not form.is_valid():
        messages.error(
            request,
            "; ".join(f"review spread: {e}" for errs in form.errors.values() for e in errs),
        )
        return redirect("annotation:chartom-check-review")
    check_review.judgement_review_spread_set(sample=sample, spread=form.cleaned_data["spread"])
    messages.success(request, f"{sample.name}: threshold saved, the queue follows it.")
    return redirect("annotation:chartom-check-review")


@require_GET
@reviewer_required
def check_decisions_csv(request: HttpRequest) -> HttpResponse:
    """Every decision on a check with its provenance (researchers, as the API)."""
    if not is_researcher(request.user):
        return forbidden(request, "The researcher downloads the decisions.")
    response = HttpResponse(
        check_review.check_decisions_csv(), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = 'attachment; filename="chartom-check-decisions.csv"'
    return response


def _dispute(request: HttpRequest, task: AnnotationTask) -> check_review.CheckDispute:
    found = check_review.check_disputes(task_ids=[task.pk], hide_scored_by=hidden_from(request))
    if not found:
        raise Http404("This task is not one you can review (yours, or not a check).")
    return found[0]


def _next_open(request: HttpRequest) -> int | None:
    open_ids = [
        d.task.pk
        for d in check_review.check_disputes(hide_scored_by=hidden_from(request))
        if d.disputed and d.adjudication is None
    ]
    return open_ids[0] if open_ids else None


@require_http_methods(["GET", "POST"])
@reviewer_required
def check_review_task(request: HttpRequest, task_id: int) -> HttpResponse:
    """The annotators' answers side by side; the reviewer picks the settled label or
    score with a reason (POST), or undoes the decision in force (POST ``undo``)."""
    task = get_object_or_404(AnnotationTask.objects.filter(kind__in=check_review.KINDS), pk=task_id)
    dispute = _dispute(request, task)
    in_force = dispute.adjudication
    form = CheckDecisionForm(
        request.POST or None,
        kind=task.kind,
        initial={"value": in_force.outcome, "reason": in_force.reason} if in_force else None,
    )
    error = ""
    if request.method == "POST":
        try:
            if "undo" in request.POST:
                check_review.check_adjudicate(
                    task=task,
                    reviewer=request.user,
                    reason=request.POST.get("undo_reason", "")[: check_review.MAX_REASON],
                    withdraw=True,
                )
                messages.success(request, "Decision undone: the annotators' answers count again.")
                return redirect("annotation:chartom-check-review-task", task_id=task.pk)
            if form.is_valid():
                check_review.check_adjudicate(
                    task=task,
                    reviewer=request.user,
                    reason=form.cleaned_data["reason"],
                    value=form.cleaned_data["value"],
                )
                messages.success(request, f"{task}: decided.")
                following = _next_open(request)
                if following is not None:
                    return redirect("annotation:chartom-check-review-task", task_id=following)
                return redirect("annotation:chartom-check-review")
        except CheckReviewError as exc:
            error = str(exc)
    chosen = form["value"].value() if request.method == "POST" else in_force and in_force.outcome
    context = {
        "dispute": dispute,
        "task": task,
        "form": form,
        "error": error,
        "chosen": chosen or "",
        "labels": LABEL_KEYS,
        "scores": [(f"{v:.1f}", key) for v, key in zip(judgement.SCORES, SCORE_KEYS, strict=True)],
        "note": task.note,
        "verdicts": note_checks.note_verdicts(task.note) if task.kind == NOTE else [],
        "shown": judgement.answer_screen(task.prediction_id) if task.kind == JUDGEMENT else None,
    }
    status = 400 if request.method == "POST" else 200
    return render(request, TASK_PAGE, context, status=status)
