"""Researcher pages for DynToM generation: start a job, watch it, see each stage's status.

Every view checks the researcher role itself (raters and annotators get 403). The job
page's progress region polls itself with htmx every 2 s and gets 286 (stop polling)
once the job has finished, as the run pages do.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling

from accounts.decorators import researcher_required

from ...models import GenerationJob
from . import selectors, services
from .forms import GenerationJobForm
from .prompts import generation_templates_ensure_defaults

JOBS_PER_PAGE = 50
PROGRESS_PARTIAL = "annotation/generation_job_detail.html#job-progress"


@require_http_methods(["GET", "POST"])
@researcher_required
def generation_index(request: HttpRequest) -> HttpResponse:
    """GET: the new-job form and recent jobs. POST: start a job, then go to its page."""
    # The default templates exist before the first job, so they can be edited first.
    generation_templates_ensure_defaults()
    form = GenerationJobForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            job = services.generation_job_create(**form.service_kwargs(), created_by=request.user)
        except ValueError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Generation job {job.pk} queued.")
            return redirect("annotation:generation-job", job_id=job.pk)
    page = Paginator(selectors.generation_job_list(), JOBS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    rows = [(job, selectors.generation_job_status_label(job=job)) for job in page]
    status = 400 if request.method == "POST" else 200
    return render(
        request,
        "annotation/generation_index.html",
        {"form": form, "page": page, "rows": rows},
        status=status,
    )


def _progress_context(job: GenerationJob) -> dict[str, Any]:
    return {
        "job": job,
        "status_label": selectors.generation_job_status_label(job=job),
        "stages": list(selectors.generated_stages(job=job)),
    }


@require_GET
@researcher_required
def generation_job(request: HttpRequest, job_id: int) -> HttpResponse:
    job = get_object_or_404(
        selectors.with_stage_counts(GenerationJob.objects.all()).select_related(
            "backend",
            "run",
            "relationship_template",
            "trajectory_template",
            "scenarios_template",
            "retry_template",
        ),
        pk=job_id,
    )
    if request.htmx:
        response = render(request, PROGRESS_PARTIAL, _progress_context(job))
        if job.is_finished:
            return HttpResponseStopPolling(response.content)
        return response
    return render(request, "annotation/generation_job_detail.html", _progress_context(job))
