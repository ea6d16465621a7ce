"""The DynToM validation report at /reports/validation/: page, CSV/XLSX/JSON, charts.

Built by ``reports.tables.validation`` and rendered with the same table display,
exports and chart renderer as the benchmark reports. ``?batch=<id>`` limits it to one
validation batch; without it every batch counts. Researchers only, as every report.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotation.models import ValidationBatch
from common.request_params import BadNumber, optional_number

from . import exports
from .report_types import Report
from .services import validation_report_cached
from .tables.validation import KEY
from .views import (
    XLSX_TYPE,
    _chart_response,
    _download,
    _table_response,
    chart_layout,
    display_table,
    format_cell,
    researcher_required,
    with_narrow_layout,
)


def _batch_ids(request: HttpRequest) -> list[int] | None:
    try:
        batch = optional_number(request.GET.get("batch"), name="batch")
    except BadNumber as exc:
        raise Http404(str(exc)) from None
    return None if batch is None else [batch]


def _report(request: HttpRequest) -> tuple[Report, str, str]:
    batch_ids = _batch_ids(request)
    query = f"?batch={batch_ids[0]}" if batch_ids else ""
    stem = f"{KEY}-report" + (f"-batch{batch_ids[0]}" if batch_ids else "")
    return validation_report_cached(batch_ids=batch_ids), query, stem


@require_GET
@researcher_required
def validation_report(request: HttpRequest) -> HttpResponse:
    report, query, _ = _report(request)
    tables = []
    for table in report.tables:
        shown = display_table(table)
        shown.csv_url = reverse("reports:validation-table-csv", args=[table.key]) + query
        shown.charts = [
            {
                "chart": c,
                "svg_url": reverse("reports:validation-chart", args=[c.key, "svg"]) + query,
                "svg_narrow_url": with_narrow_layout(
                    reverse("reports:validation-chart", args=[c.key, "svg"]) + query
                ),
                "png_url": reverse("reports:validation-chart", args=[c.key, "png"]) + query,
            }
            for c in report.charts
            if c.table == table.key
        ]
        tables.append(shown)
    context = {
        "report": report,
        "tables": tables,
        "facts": [
            (name.replace("_", " ").capitalize(), format_cell(value, percent=False).text)
            for name, value in report.facts.items()
        ],
        "batches": ValidationBatch.objects.order_by("-pk").only("pk", "name")[:100],
        "query": query,
        "selected": _batch_ids(request),
        "downloads": {
            fmt: reverse("reports:validation-export", args=[fmt]) + query
            for fmt in ("csv", "xlsx", "json")
        },
    }
    return render(request, "annotation/validation_report.html", context)


@require_GET
@researcher_required
def validation_export(request: HttpRequest, fmt: str) -> HttpResponse:
    """``csv``: every table in a zip; ``xlsx``: a workbook; ``json``: the report's JSON."""
    report, _, stem = _report(request)
    if fmt == "csv":
        return _download(exports.tables_zip(report), "application/zip", f"{stem}-tables.zip")
    if fmt == "xlsx":
        return _download(exports.report_xlsx(report), XLSX_TYPE, f"{stem}.xlsx")
    response = JsonResponse(report.as_json())
    response["Content-Disposition"] = f'attachment; filename="{stem}.json"'
    return response


@require_GET
@researcher_required
def validation_table_csv(request: HttpRequest, key: str) -> HttpResponse:
    report, _, stem = _report(request)
    return _table_response(report, key, stem)


@require_GET
@researcher_required
def validation_chart(request: HttpRequest, key: str, fmt: str) -> HttpResponse:
    report, _, stem = _report(request)
    return _chart_response(report, key, fmt, stem, layout=chart_layout(request))
