"""Replication package pages, for researchers: the packages page (upload a package,
the packages imported here, every study to export), a study's export options and its
download. The study's responses page links to the export options."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.decorators import researcher_required
from benchmarks.services import import_upload_start
from benchmarks.uploads import UploadRefused
from modeling.models import Run
from studies.models import Study

from ..models import ReplicationImport
from .downloads import BadOptions, PackageOptions, options_from_query, package_file_response
from .exporting import PLATFORM_WARNING, ExportRefused, package_runs
from .upload import PACKAGE_FORMAT

RESEARCHERS_ONLY = "Replication packages are for researchers only."
RECENT_IMPORTS = 50


def upload_max_bytes() -> int:
    return int(getattr(settings, "TOMLAB_UPLOAD_MAX_BYTES", 1024 * 1024 * 1024))


class PackageUploadForm(forms.Form):
    package = forms.FileField(
        label="Replication package (.zip)",
        help_text="A zip made by “Download replication package” or manage.py export_study.",
        widget=forms.ClearableFileInput(attrs={"accept": ".zip,application/zip"}),
    )
    strict = forms.BooleanField(
        label="Refuse it if a rebuilt report differs from the packaged one",
        required=False,
    )

    def clean_package(self) -> Any:
        upload = self.cleaned_data["package"]
        if upload.size > upload_max_bytes():
            raise forms.ValidationError(
                f"The file is {upload.size:,} bytes, over the {upload_max_bytes():,}-byte limit."
            )
        if not upload.name.lower().endswith(".zip"):
            raise forms.ValidationError(f"{upload.name} is not a .zip file.")
        return upload


def _index_context(form: PackageUploadForm) -> dict[str, Any]:
    imports = ReplicationImport.objects.select_related("study", "imported_by")[:RECENT_IMPORTS]
    return {
        "form": form,
        "imports": imports,
        "studies": Study.objects.exclude(status=Study.Status.DRAFT).order_by("benchmark", "pk"),
    }


@require_GET
@researcher_required(RESEARCHERS_ONLY)
def package_index(request: HttpRequest) -> HttpResponse:
    return render(request, "reports/package_index.html", _index_context(PackageUploadForm()))


@require_POST
@researcher_required(RESEARCHERS_ONLY)
def package_upload(request: HttpRequest) -> HttpResponse:
    """Store the package and queue its import for a worker; its page follows the job."""
    form = PackageUploadForm(request.POST, request.FILES)
    if form.is_valid():
        try:
            job = import_upload_start(
                user=request.user,
                format_name=PACKAGE_FORMAT,
                files=[form.cleaned_data["package"]],
                options={"strict": "yes" if form.cleaned_data["strict"] else ""},
            )
        except UploadRefused as exc:
            form.add_error("package", exc.message)
        else:
            messages.success(request, f"Package queued for import (import {job.pk}).")
            return redirect("benchmarks:import-job", job_id=job.pk)
    return render(request, "reports/package_index.html", _index_context(form), status=400)


@require_GET
@researcher_required(RESEARCHERS_ONLY)
def package_export_page(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study, pk=study_id)
    runs = package_runs(study, "all")
    return render(
        request,
        "reports/package_export.html",
        {
            "study": study,
            "runs": runs,
            "platform_warning": PLATFORM_WARNING,
            "running": Run.objects.filter(
                benchmark=study.benchmark, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
            ).count(),
        },
    )


@require_GET
@researcher_required(RESEARCHERS_ONLY)
def package_download(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study, pk=study_id)
    try:
        options: PackageOptions = options_from_query(request.GET)
        return package_file_response(study, options)
    except (BadOptions, ExportRefused) as exc:
        return render(
            request,
            "reports/package_export.html",
            {
                "study": study,
                "runs": package_runs(study, "all"),
                "platform_warning": PLATFORM_WARNING,
                "error": str(exc),
            },
            status=400,
        )
