"""Replication package pages, for researchers: the packages page (upload a package,
the packages imported here, every study to export), a study's export options and its
download. The study's responses page links to the export options."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.decorators import researcher_required
from modeling.models import Run
from studies.models import Study

from ..models import ReplicationImport
from .downloads import BadOptions, PackageOptions, options_from_query, package_file_response
from .exporting import PLATFORM_WARNING, ExportRefused, package_runs
from .importing import PackageError, package_import

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
    form = PackageUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "reports/package_index.html", _index_context(form), status=400)
    upload = form.cleaned_data["package"]
    handle, temp_path = tempfile.mkstemp(prefix="tomlab-upload-", suffix=".zip")
    try:
        with os.fdopen(handle, "wb") as sink:
            for chunk in upload.chunks():
                sink.write(chunk)
        result = package_import(
            temp_path, user=request.user, strict=form.cleaned_data["strict"], name=upload.name
        )
    except PackageError as exc:
        form.add_error("package", str(exc))
        return render(request, "reports/package_index.html", _index_context(form), status=400)
    finally:
        os.unlink(temp_path)
    for message in result.messages:
        (messages.success if result.created else messages.info)(request, message)
    for report, differences in result.differences.items():
        if differences:
            messages.warning(
                request, f"{report} differs from the packaged one: " + "; ".join(differences[:3])
            )
        else:
            messages.success(request, f"{report}: equal to the packaged one.")
    return redirect(reverse("reports:package-index"))


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
