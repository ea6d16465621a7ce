"""Researcher pages for imports from uploaded files, under ``/data/``.

Upload (the format's own options and accepted files), a dry run page (what Confirm
would create or update, warnings, located errors, the first records), Confirm or
Cancel, then the job page: a progress bar whose region polls itself with htmx every
2 s while a worker imports, and gets 286 (stop polling) once the job is finished, as
the other job pages do. Every view checks the researcher role; an upload belongs to
the researcher who made it (others get 404).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from . import selectors, services
from .forms import ImportUploadForm
from .models import ImportJob
from .uploads import OPTION_LABELS, UploadRefused

FIELDS_PARTIAL = "benchmarks/import_new.html#format-fields"
MAPPING_PARTIAL = "benchmarks/import_new.html#mapping-field"
# What a GET (the htmx swaps, or the no-script "fill from preset" button) carries over.
GET_FIELDS = ("format", "name", "version", "split", "preset", "save_as")
PROGRESS_PARTIAL = "benchmarks/import_job.html#job-progress"
JOBS_PER_PAGE = 30
MESSAGE = "Importing data is for researchers only."
# benchmarks sits below accounts in the layers, so its role decorators are out of
# reach: the researcher group holds every benchmarks permission
# (accounts.services.roles_ensure), raters and annotators none.
IMPORT_PERMISSION = "benchmarks.add_importjob"


def researcher_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Anonymous users go to the login page; others without the permission get 403."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.has_perm(IMPORT_PERMISSION):
            # The styled 403 page, as accounts.decorators.forbidden renders it.
            return render(request, "403.html", {"message": MESSAGE}, status=403)
        return view(request, *args, **kwargs)

    return wrapped


def _job_for(request: HttpRequest, job_id: int) -> ImportJob:
    job = get_object_or_404(ImportJob.objects.select_related("created_by"), pk=job_id)
    if job.created_by_id is not None and job.created_by_id != request.user.pk:
        raise Http404("No such import.")
    return job


@require_http_methods(["GET", "POST"])
@researcher_required
def import_new(request: HttpRequest) -> HttpResponse:
    """GET: the upload form (htmx: only the chosen format's fields). POST: dry run."""
    refused: UploadRefused | None = None
    if request.method == "POST":
        form = ImportUploadForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                job = services.import_upload_start(user=request.user, **form.service_kwargs())
            except UploadRefused as exc:
                if exc.field in form.fields and exc.file is None and exc.record is None:
                    form.add_error(exc.field, exc.message)
                else:
                    refused = exc
            else:
                return redirect("benchmarks:import-job", job_id=job.pk)
    else:
        form = ImportUploadForm(initial=_initial(request))
    context: dict[str, Any] = {
        "form": form,
        "source": form.chosen_source(),
        "refused": refused,
        "options": OPTION_LABELS,
    }
    if request.htmx and request.method == "GET":
        partial = MAPPING_PARTIAL if request.GET.get("part") == "mapping" else FIELDS_PARTIAL
        return render(request, partial, context)
    status = 400 if request.method == "POST" else 200
    return render(request, "benchmarks/import_new.html", context, status=status)


def _initial(request: HttpRequest) -> dict[str, Any]:
    """The form as a GET left it; a chosen preset fills the mapping, pretty-printed so a
    researcher can edit it."""
    initial = {name: request.GET.get(name, "") for name in GET_FIELDS}
    if initial["preset"]:
        try:
            mapping = selectors.mapping_preset_get(initial["preset"])
        except LookupError:
            initial["preset"] = ""
        else:
            initial["mapping"] = json.dumps(mapping, indent=2, ensure_ascii=False)
    return initial


@require_GET
@researcher_required
def import_list(request: HttpRequest) -> HttpResponse:
    """This researcher's imports (and the command's background ones), newest first."""
    jobs = ImportJob.objects.filter(Q(created_by=request.user) | Q(created_by__isnull=True)).defer(
        "preview", "report", "dry_run"
    )
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "benchmarks/import_list.html", {"page": page})


def _job_context(job: ImportJob) -> dict[str, Any]:
    done, total = services.import_job_progress(job)
    percent = min(100, round(100 * done / total)) if total else job.percent
    return {
        "job": job,
        "done": done,
        "total": total,
        "percent": percent,
        "background": services.import_upload_background(job) if job.upload else True,
        "polling": job.status in (ImportJob.Status.QUEUED, ImportJob.Status.RUNNING),
        "mapping_json": (
            json.dumps(job.options["mapping"], indent=2, ensure_ascii=False)
            if isinstance(job.options, dict) and job.options.get("mapping")
            else ""
        ),
    }


@require_GET
@researcher_required
def import_job(request: HttpRequest, job_id: int) -> HttpResponse:
    """The dry run (Confirm / Cancel), the progress of the import, or its final report."""
    job = _job_for(request, job_id)
    context = _job_context(job)
    if request.htmx:
        response = render(request, PROGRESS_PARTIAL, context)
        if not context["polling"]:
            return HttpResponseStopPolling(response.content)
        return response
    return render(request, "benchmarks/import_job.html", context)


@require_POST
@researcher_required
def import_confirm(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job_for(request, job_id)
    try:
        job = services.import_upload_confirm(job=job)
    except UploadRefused as exc:
        messages.error(request, exc.message)
    else:
        # A finished import's page says so itself; a message would repeat it.
        if job.status == ImportJob.Status.FAILED:
            messages.error(request, "The import failed; nothing was written.")
        elif job.status == ImportJob.Status.QUEUED:
            messages.success(request, f"Import {job.pk} queued for a worker.")
    return redirect("benchmarks:import-job", job_id=job.pk)


@require_POST
@researcher_required
def import_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job_for(request, job_id)
    try:
        services.import_upload_cancel(job=job)
    except UploadRefused as exc:
        messages.error(request, exc.message)
        return redirect("benchmarks:import-job", job_id=job.pk)
    messages.success(request, "Import cancelled; the uploaded files were deleted.")
    return redirect("benchmarks:import")
