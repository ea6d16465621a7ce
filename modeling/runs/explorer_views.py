"""The prediction explorer and run comparison, for researchers only.

A run's predictions filtered by status, work, question type (or dimension) and text
in the prompt or reply, each
opening the prompt sent, the raw reply, the parse and the gold; the filtered set as
CSV or JSONL. Two runs of one benchmark compared item by item. Every row shown or
exported comes from one selector (:func:`selectors.prediction_rows`,
:func:`selectors.run_compare`), so a page and its export cannot disagree.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from accounts.decorators import researcher_required as researcher_only
from common.csv_safe import csv_stream

from ..models import Prediction, Run
from . import selectors

PREDICTIONS_PER_PAGE = 50
researcher_required = researcher_only("Model runs are for researchers only.")


def _export(
    rows: Iterable[dict[str, Any]], columns: tuple[str, ...], *, fmt: str, filename: str
) -> StreamingHttpResponse:
    if fmt == "csv":
        response = StreamingHttpResponse(csv_stream(rows, columns), content_type="text/csv")
    else:
        response = StreamingHttpResponse(_jsonl(rows, columns), content_type="application/jsonl")
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    return response


def _jsonl(rows: Iterable[dict[str, Any]], columns: tuple[str, ...]) -> Iterator[str]:
    for row in rows:
        yield json.dumps({c: row[c] for c in columns}, ensure_ascii=False) + "\n"


@require_GET
@researcher_required
def prediction_list(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=run_id)
    filters = {key: request.GET.get(key, "") for key in ("status", "work", "kind", "q")}
    error = ""
    try:
        filters["q"] = selectors.prediction_search_clean(filters["q"])
    except ValueError as exc:
        error, filters["q"] = str(exc), ""
    choices = selectors.prediction_filter_choices(run=run)
    # Only values the run has: anything else (a typo, bytes a database refuses) is named.
    for key, allowed in (("work", choices["works"]), ("kind", choices["kinds"])):
        if filters[key] and filters[key] not in allowed:
            error = f"{key}: this run has no prediction with {key} {filters[key]!r}"
            filters[key] = ""
    try:
        rows = selectors.prediction_rows(run=run, **filters)
    except ValueError as exc:
        error = str(exc)
        filters["status"] = ""
        rows = selectors.prediction_rows(run=run, **filters)
    fmt = request.GET.get("format", "")
    if fmt in ("csv", "jsonl") and not error:
        return _export(
            rows.iterator(),
            selectors.PREDICTION_COLUMNS,
            fmt=fmt,
            filename=f"run-{run.pk}-predictions",
        )
    page = Paginator(rows, PREDICTIONS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "run": run,
        "filters": filters,
        "error": error,
        "page": page,
        "counts": selectors.prediction_status_counts(
            run=run, work=filters["work"], kind=filters["kind"], q=filters["q"]
        ),
        "choices": choices,
    }
    return render(request, "modeling/predictions.html", context)


@require_GET
@researcher_required
def prediction_detail(request: HttpRequest, run_id: int, prediction_id: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=run_id)
    try:
        detail = selectors.prediction_detail(run=run, prediction_id=prediction_id)
    except Prediction.DoesNotExist:
        raise Http404("No such prediction in this run.") from None
    return render(request, "modeling/predictions_detail.html", {"run": run, "detail": detail})


@require_GET
@researcher_required
def run_compare(request: HttpRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    runs: dict[str, Run | None] = {}
    for field in ("a", "b"):
        raw = request.GET.get(field, "")
        run = Run.objects.filter(pk=int(raw)).first() if raw.isdigit() else None
        if run is None:
            errors[field] = f"{field}: give the id of an existing run (got {raw!r})."
        runs[field] = run
    only_differ = request.GET.get("differ") == "1"
    comparison = None
    if not errors:
        try:
            comparison = selectors.run_compare(a=runs["a"], b=runs["b"], only_differ=only_differ)
        except ValueError as exc:
            errors["b"] = str(exc)
    if comparison is not None and request.GET.get("format") == "csv":
        return _export(
            comparison.rows,
            selectors.COMPARE_COLUMNS,
            fmt="csv",
            filename=f"compare-{comparison.a.pk}-{comparison.b.pk}",
        )
    page = Paginator(comparison.rows if comparison else [], PREDICTIONS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    context = {
        "comparison": comparison,
        "runs": runs,
        "errors": errors,
        "only_differ": only_differ,
        "page": page,
    }
    return render(request, "modeling/run_compare.html", context, status=400 if errors else 200)
