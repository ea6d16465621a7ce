"""The export page: items as a task for Inspect or lm-evaluation-harness.

GET shows the form, prefilled from a link (the item set's report, a study's page);
POST "preview" (or any htmx POST) shows the sample count and the first samples, POST
"download" sends the zip. A refusal comes back as the form with the error at its
field, status 400; the page's script swaps that into place for htmx as well.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from accounts.decorators import researcher_required

from .export import ExportBundle, ExportError
from .exporting import export_build, sample_previews
from .forms import HarnessExportForm

PAGE = "interop/harness_export.html"
FORM_PARTIAL = f"{PAGE}#export-form"


def zip_response(bundle: ExportBundle) -> HttpResponse:
    """The bundle as a download; its file name is a slug of what was chosen."""
    return HttpResponse(
        bundle.zip_bytes(),
        content_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{bundle.filename}"'},
    )


@require_http_methods(["GET", "POST"])
@researcher_required("Exports for eval harnesses are for researchers only.")
def harness_export(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        form = HarnessExportForm(initial=HarnessExportForm.initial_from(request.GET))
        return _page(request, form)
    form = HarnessExportForm(request.POST)
    bundle = None
    if form.is_valid():
        try:
            bundle = export_build(form.export_request())
        except ExportError as exc:
            form.add_export_error(exc)
    if bundle is None:
        return _page(request, form, status=400)
    if request.htmx or request.POST.get("action") != "download":
        return _page(request, form, bundle=bundle)
    return zip_response(bundle)


def _page(
    request: HttpRequest,
    form: HarnessExportForm,
    *,
    bundle: ExportBundle | None = None,
    status: int = 200,
) -> HttpResponse:
    context: dict[str, Any] = {"form": form, "bundle": bundle}
    if bundle is not None:
        context["previews"] = sample_previews(bundle)
    return render(request, FORM_PARTIAL if request.htmx else PAGE, context, status=status)
