"""Report pages for researchers: the benchmark index, a benchmark's report (tables,
charts, downloads, run selector), its chart images and exports, and background report
jobs whose progress region polls itself with htmx and gets 286 once finished.

Every view checks the researcher role itself; raters and annotators get 403 on pages,
images and downloads alike. ``?runs=1,2`` (or ``runs=1&runs=2`` from the selector's
checkboxes), ``?studies=…``, ``?include_excluded=1`` and ``?samples=first`` pick what a
report compares (``reports.selection``); every download link carries the same selection.

The generic benchmark is many named benchmarks (one Work each): ``/reports/generic/``
lists them, and ``?work=<id>`` picks the one a report, its downloads and its jobs cover.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import wraps
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseStopPolling

from accounts.roles import is_researcher
from benchmarks.models import Benchmark
from benchmarks.selectors import item_bank_counts
from common.request_params import BadNumber, number_list, optional_number
from modeling.models import Run
from modeling.pipelines import pipeline_benchmarks

from . import exports, selectors, services
from .models import ReportJob
from .report_types import SAMPLES_FIRST, SAMPLES_MEAN, Cell, Report, Table
from .selection import (
    BadSelection,
    ReportSelection,
    selection_and_studies,
    selection_from_query,
    work_from_query,
)
from .tables import SAMPLE_MEANS
from .tables.training import training_report

if TYPE_CHECKING:
    from . import charts

JOB_PROGRESS_PARTIAL = "reports/job_detail.html#job-progress"
RECENT_JOBS = 5
MISSING = "\u2013"  # en dash, shown for an empty cell
XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
# The benchmark-bank column that counts a benchmark's items.
# The page's "Repeated samples" choice, as ``reports.selection`` reads it.
SAMPLE_CHOICES = ((SAMPLES_MEAN, "average"), (SAMPLES_FIRST, "first only"))
ITEM_COUNT_KEY = {
    Benchmark.TOM_IN_AMC: "instances",
    Benchmark.TVSHOWGUESS: "instances",
    Benchmark.CHARTOM_QA: "qa_items",
    Benchmark.DYNTOM: "questions",
}


def researcher_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Anonymous users go to the login page; logged-in non-researchers get 403."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_researcher(request.user):
            raise PermissionDenied("Reports are for researchers only.")
        return view(request, *args, **kwargs)

    return wrapped


# --- request parsing ----------------------------------------------------------------------


def _benchmark(benchmark: str) -> str:
    if benchmark not in Benchmark.values:
        raise Http404(f"no benchmark {benchmark!r}")
    return benchmark


def _file_stem(benchmark: str, selection: ReportSelection, job: ReportJob | None = None) -> str:
    stem = f"{benchmark}-report"
    if selection.work_id is not None:
        stem = f"{benchmark}-work{selection.work_id}-report"
    if job is not None:
        stem += f"-job{job.pk}"
    for name, ids in (("runs", selection.run_ids), ("studies", selection.study_ids)):
        if ids is not None:
            stem += f"-{name}-" + ("-".join(map(str, ids)) or "none")
    if selection.include_excluded:
        stem += "-with-excluded"
    if selection.samples == SAMPLES_FIRST:
        stem += "-first-sample"
    return stem


def _download(data: bytes, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(data, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# --- table display ------------------------------------------------------------------------


@dataclass
class DisplayCell:
    text: str
    numeric: bool = False
    missing: bool = False
    title: str = ""  # a tooltip: why a value is missing

    @property
    def long(self) -> bool:
        # Long text (notes, prompts) wraps; short labels keep to one line.
        return len(self.text) > 60


@dataclass
class DisplayTable:
    table: Table
    headers: list[DisplayCell]
    rows: list[list[DisplayCell]]
    charts: list[dict[str, Any]] = field(default_factory=list)
    csv_url: str = ""


_LOW = re.compile(r"(?i)\b(low|lower)\b")
_HIGH = {"low": "high", "lower": "upper", "Low": "High", "Lower": "Upper", "LOW": "HIGH"}


def _interval_pairs(columns: list[str]) -> dict[int, int]:
    """Column index pairs (low -> high) such as "CI low %" / "CI high %": shown as one
    "[low, high]" column headed "CI %"."""
    pairs = {}
    for i, name in enumerate(columns):
        match = _LOW.search(name)
        if not match:
            continue
        word = match.group(1)
        partner = name[: match.start()] + _HIGH.get(word, "high") + name[match.end() :]
        if partner in columns:
            pairs[i] = columns.index(partner)
    return pairs


def _interval_header(name: str) -> str:
    return re.sub(r"\s{2,}", " ", _LOW.sub("", name)).strip(" _-") or name


def format_cell(value: Cell, *, percent: bool) -> DisplayCell:
    """A cell for HTML: percent with 1 decimal, other numbers at a useful precision."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DisplayCell(MISSING, numeric=True, missing=True)
    if isinstance(value, bool):
        return DisplayCell("yes" if value else "no")
    if isinstance(value, int):
        return DisplayCell(f"{value:,}", numeric=True)
    if isinstance(value, float):
        if percent:
            return DisplayCell(f"{value:.1f}", numeric=True)
        if value == 0 or abs(value) >= 0.001:
            return DisplayCell(f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3f}", True)
        return DisplayCell(f"{value:.1e}", numeric=True)
    return DisplayCell(str(value))


def display_table(table: Table) -> DisplayTable:
    """The table as the page shows it: CI pairs merged into "[low, high]", numbers formatted."""
    pairs = _interval_pairs(table.columns)
    highs = set(pairs.values())
    shown = [i for i in range(len(table.columns)) if i not in highs]
    rows = []
    for row in table.rows:
        cells = []
        # A row resting on one unit: its empty intervals say so (Table.no_interval).
        why = table.no_interval.get(str(row[0])) if row else None
        for i in shown:
            percent = table.columns[i].rstrip().endswith("%")
            if i in pairs:
                low = format_cell(row[i], percent=percent)
                high = format_cell(row[pairs[i]], percent=percent)
                if low.missing and high.missing:
                    cells.append(DisplayCell(MISSING, numeric=True, missing=True, title=why or ""))
                else:
                    cells.append(DisplayCell(f"[{low.text}, {high.text}]", numeric=True))
            else:
                cells.append(format_cell(row[i], percent=percent))
        rows.append(cells)
    headers = []
    for position, i in enumerate(shown):
        name = _interval_header(table.columns[i]) if i in pairs else table.columns[i]
        numeric = bool(rows) and all(r[position].numeric for r in rows)
        headers.append(DisplayCell(name, numeric=numeric))
    return DisplayTable(table=table, headers=headers, rows=rows)


# --- report body (shared by the live report and a finished job) -----------------------------


def _report_body(
    report: Report, *, url: Callable[..., str], query: str, long_query: str
) -> dict[str, Any]:
    """Tables with their charts and every download URL. ``url(name, **kwargs)`` reverses
    the live or the job variant of a route; ``long_query`` is the selection of the
    long-format exports, which always stream from the database."""
    benchmark = report.benchmark
    tables = []
    placed: set[str] = set()
    by_table: dict[str, list[dict[str, Any]]] = {}
    for chart in report.charts:
        by_table.setdefault(chart.table, []).append(
            {
                "chart": chart,
                "svg_url": url("chart", key=chart.key, fmt="svg") + query,
                "svg_narrow_url": with_narrow_layout(
                    url("chart", key=chart.key, fmt="svg") + query
                ),
                "png_url": url("chart", key=chart.key, fmt="png") + query,
            }
        )
    for table in report.tables:
        shown = display_table(table)
        shown.charts = by_table.get(table.key, [])
        placed.add(table.key)
        shown.csv_url = url("table-csv", key=table.key) + query
        tables.append(shown)
    return {
        "report": report,
        "facts": [
            (str(name).replace("_", " ").capitalize(), format_cell(value, percent=False).text)
            for name, value in report.facts.items()
        ],
        "tables": tables,
        "orphan_charts": [c for key, cs in by_table.items() if key not in placed for c in cs],
        "downloads": {
            "zip": url("export", fmt="csv") + query,
            "xlsx": url("export", fmt="xlsx") + query,
            "json": reverse("reports:export", args=[benchmark, "json"]) + long_query,
            "tidy": reverse("reports:tidy-csv", args=[benchmark]) + long_query,
        },
    }


def _live_urls(benchmark: str) -> Callable[..., str]:
    def url(name: str, **kwargs: Any) -> str:
        return reverse(f"reports:{name}", kwargs={"benchmark": benchmark, **kwargs})

    return url


def _job_urls(job: ReportJob) -> Callable[..., str]:
    def url(name: str, **kwargs: Any) -> str:
        return reverse(f"reports:job-{name}", kwargs={"job_id": job.pk, **kwargs})

    return url


# --- pages --------------------------------------------------------------------------------


def _generic_rows() -> list[dict[str, Any]]:
    """The named generic benchmarks as rows of the index and of /reports/generic/."""
    base = reverse("reports:report", args=[Benchmark.GENERIC.value])
    return [
        {
            **work,
            "label": selectors.generic_work_label(work),
            "items_text": f"{work['items']:,}",
            "url": f"{base}?work={work['id']}",
        }
        for work in selectors.generic_works()
    ]


@require_GET
@researcher_required
def report_index(request: HttpRequest) -> HttpResponse:
    counts = item_bank_counts()  # in Benchmark order
    runs = dict(
        Run.objects.order_by()
        .values_list("benchmark")
        .annotate(n=Count("pk"))
        .values_list("benchmark", "n")
    )
    # The built-in benchmarks, one report each; the generic one is a report per named
    # benchmark (work), listed apart.
    rows = [
        {
            "value": b.value,
            "label": b.label,
            "works": c["works"],
            "items": c[ITEM_COUNT_KEY[b]],
            "items_text": f"{c[ITEM_COUNT_KEY[b]]:,}",
            "runs": runs.get(b.value, 0),
        }
        for b, c in zip(Benchmark, counts, strict=True)
        if b in ITEM_COUNT_KEY
    ]
    # The named benchmarks' query only where the bank counted a generic work.
    generic_works = next(
        c["works"] for b, c in zip(Benchmark, counts, strict=True) if b == Benchmark.GENERIC
    )
    generic = _generic_rows() if generic_works else []
    jobs = ReportJob.objects.select_related("created_by").defer("result")[:RECENT_JOBS]
    return render(
        request,
        "reports/report_index.html",
        {"benchmarks": rows, "generic": generic, "jobs": jobs},
    )


def _generic_index(request: HttpRequest) -> HttpResponse:
    """``/reports/generic/`` without a work: the named benchmarks, each with its report."""
    return render(
        request,
        "reports/generic_index.html",
        {"benchmarks": _generic_rows(), "label": Benchmark.GENERIC.label},
    )


@require_GET
@researcher_required
@selectors.shared_reads()  # the studies' answer counts read once for the whole page
def report_detail(request: HttpRequest, benchmark: str) -> HttpResponse:
    benchmark = _benchmark(benchmark)
    if benchmark == Benchmark.GENERIC and "work" not in request.GET:
        return _generic_index(request)
    try:
        work_id = work_from_query(request.GET, benchmark=benchmark)
    except BadSelection as exc:
        return _bad_selection(exc)
    work = selectors.generic_work(work_id) if work_id is not None else None
    benchmark_runs = Run.objects.filter(benchmark=benchmark)
    jobs_of = ReportJob.objects.filter(benchmark=benchmark)
    if work_id is not None:
        benchmark_runs = benchmark_runs.filter(pk__in=selectors.generic_work_runs(work_id))
        jobs_of = jobs_of.filter(work_id=work_id)
    runs = list(
        benchmark_runs.order_by("pk").only("pk", "name", "model", "method", "status", "imported")
    )
    # One pass over the predictions: run list, report size and what is still to pack.
    counts = selectors.run_prediction_counts(run_ids=[run.pk for run in runs])
    for run in runs:
        run.prediction_count = counts.get(run.pk, {}).get("predictions", 0)
        run.prediction_text = f"{run.prediction_count:,}"
    jobs = list(jobs_of.defer("result")[:RECENT_JOBS])
    # The page's own URL with nothing picked: the work is part of it, not a selection.
    default = ReportSelection(work_id=work_id)
    context: dict[str, Any] = {
        "benchmark": benchmark,
        "label": selectors.generic_work_label(work) if work else Benchmark(benchmark).label,
        "work": work,
        "benchmark_label": Benchmark(benchmark).label,
        "default_url": reverse("reports:report", args=[benchmark]) + default.query(),
        "runs": runs,
        "jobs": jobs,
        # "Start one" only where the run form has a pipeline for this benchmark.
        "runnable": benchmark in pipeline_benchmarks(),
    }
    try:
        selection, studies = selection_and_studies(request.GET, benchmark=benchmark)
    except BadSelection as exc:
        context.update(
            error=str(exc),
            selection=default,
            selection_params=default.params().items(),
            selected=set(),
            studies=selectors.study_choices(benchmark, work_id=work_id),
            selected_studies=set(),
        )
        return render(request, "reports/report_detail.html", context, status=400)
    run_ids = selection.run_ids
    query = selection.query()
    if "picked" in request.GET:
        # The form sends every ticked box; the canonical URL is the one to share.
        return redirect(reverse("reports:report", args=[benchmark]) + query)
    selected_studies = (
        set(selection.study_ids)
        if selection.study_ids is not None
        else {s["id"] for s in studies if s["default"]}
    )
    selected = set(run_ids) if run_ids is not None else {r.pk for r in runs}
    size = services.report_data_size(
        benchmark=benchmark, run_ids=run_ids, counts=counts, work_id=work_id
    )
    big = services.report_too_big(benchmark=benchmark, run_ids=run_ids, size=size, counts=counts)
    context.update(
        selection=selection,
        selection_params=selection.params().items(),
        run_ids_text=",".join(map(str, run_ids or [])),
        selected=selected,
        # "Repeated samples: average / first only" where the report averages samples
        # and a selected run has several (its highest sample index is above 0).
        sample_choices=SAMPLE_CHOICES
        if benchmark in SAMPLE_MEANS
        and any(counts.get(pk, {}).get("last_sample") for pk in selected)
        else (),
        studies=studies,
        selected_studies=selected_studies,
        # The switch's count: the excluded participants of the studies in this report.
        excluded_count=selectors.excluded_count(s for s in studies if s["id"] in selected_studies),
        size=size,
        big=big,
        query=query,
        # Something picked beyond the page's own URL (a generic report's work is not).
        custom_selection=query != default.query(),
    )
    if not big:
        report = services.report_build_cached(
            benchmark=benchmark, **selection.build_kwargs(), size=size, counts=counts
        )
        context.update(
            _report_body(report, url=_live_urls(benchmark), query=query, long_query=query)
        )
    return render(request, "reports/report_detail.html", context)


@selectors.shared_reads()
def _live_report(request: HttpRequest, benchmark: str) -> tuple[Report, ReportSelection]:
    """The report behind a chart or table download (BadSelection, Http404 if too big)."""
    selection = selection_from_query(request.GET, benchmark=_benchmark(benchmark))
    run_ids = selection.run_ids
    counts = selectors.run_prediction_counts(benchmark=benchmark)
    size = services.report_data_size(
        benchmark=benchmark, run_ids=run_ids, counts=counts, work_id=selection.work_id
    )
    if services.report_too_big(benchmark=benchmark, run_ids=run_ids, size=size, counts=counts):
        raise Http404("This report is built in the background: start a report job.")
    report = services.report_build_cached(
        benchmark=benchmark, **selection.build_kwargs(), size=size, counts=counts
    )
    return report, selection


def _bad_selection(exc: BadSelection) -> HttpResponse:
    """400 naming the parameter; 404 for a work this workspace does not read."""
    if exc.status == 404:
        raise Http404(str(exc))
    return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")


def chart_layout(request: HttpRequest) -> charts.Layout:
    """``?layout=narrow`` (the page's phone picture), else the wide layout."""
    return "narrow" if request.GET.get("layout") == "narrow" else "wide"


def with_narrow_layout(url: str) -> str:
    return url + ("&" if "?" in url else "?") + "layout=narrow"


def _chart_response(
    report: Report, key: str, fmt: str, stem: str, *, layout: charts.Layout = "wide"
) -> HttpResponse:
    # Imported here, not with the URLconf: matplotlib is 0.6 s of CPU, and every web
    # worker paid it on its first request, rater pages included (issue 31, item 4).
    from . import charts

    try:
        data = services.chart_render_cached(report, key, fmt, layout=layout)
    except KeyError:
        raise Http404(f"no chart {key!r}") from None
    response = HttpResponse(data, content_type=charts.CONTENT_TYPES[fmt])
    suffix = "-narrow" if layout == "narrow" else ""
    response["Content-Disposition"] = f'inline; filename="{stem}-{key}{suffix}.{fmt}"'
    if fmt == "svg":
        # Opened directly, an SVG is a document: allow its inline styles and nothing else.
        response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    return response


def _tables_response(report: Report, fmt: str, stem: str) -> HttpResponse:
    if fmt == "csv":
        return _download(exports.tables_zip(report), "application/zip", f"{stem}-tables.zip")
    if fmt == "xlsx":
        return _download(exports.report_xlsx(report), XLSX_TYPE, f"{stem}.xlsx")
    raise Http404(f"no {fmt} export of a stored report")


def _table_response(report: Report, key: str, stem: str) -> HttpResponse:
    try:
        table = report.table(key)
    except KeyError:
        raise Http404(f"no table {key!r}") from None
    return _download(exports.table_csv(table), "text/csv; charset=utf-8", f"{stem}-{key}.csv")


@require_GET
@researcher_required
def report_chart(request: HttpRequest, benchmark: str, key: str, fmt: str) -> HttpResponse:
    try:
        report, selection = _live_report(request, benchmark)
    except BadSelection as exc:
        return _bad_selection(exc)
    layout = chart_layout(request)
    return _chart_response(report, key, fmt, _file_stem(benchmark, selection), layout=layout)


@require_GET
@researcher_required
def run_training_chart(request: HttpRequest, run_id: int, key: str, fmt: str) -> HttpResponse:
    """A trained-baseline run's curve (``loss`` or ``accuracy``) by epoch, for its run page."""
    run = get_object_or_404(
        Run.objects.only("pk", "name", "benchmark", "metrics"), pk=run_id, kind=Run.Kind.TRAINED
    )
    report = training_report(
        run_id=run.pk, name=run.name, benchmark=run.benchmark, metrics=run.metrics or []
    )
    return _chart_response(report, key, fmt, f"run-{run.pk}-training", layout=chart_layout(request))


@require_GET
@researcher_required
def report_export(request: HttpRequest, benchmark: str, fmt: str) -> HttpResponse:
    """``csv``: every table in a zip; ``xlsx``: a workbook; ``json``: the long-format rows."""
    benchmark = _benchmark(benchmark)
    try:
        if fmt == "json":
            selection = selection_from_query(request.GET, benchmark=benchmark)
            rows = selectors.long_format_rows(benchmark, **selection.build_kwargs())
            return _stream(
                exports.long_format_json(rows),
                "application/json",
                f"{_file_stem(benchmark, selection)}-long.json",
            )
        report, selection = _live_report(request, benchmark)
    except BadSelection as exc:
        return _bad_selection(exc)
    return _tables_response(report, fmt, _file_stem(benchmark, selection))


@require_GET
@researcher_required
def report_table_csv(request: HttpRequest, benchmark: str, key: str) -> HttpResponse:
    try:
        report, selection = _live_report(request, benchmark)
    except BadSelection as exc:
        return _bad_selection(exc)
    return _table_response(report, key, _file_stem(benchmark, selection))


@require_GET
@researcher_required
def report_tidy_csv(request: HttpRequest, benchmark: str) -> HttpResponse:
    """One row per prediction or human answer, streamed: ``pandas.read_csv`` reads it as is."""
    benchmark = _benchmark(benchmark)
    try:
        selection = selection_from_query(request.GET, benchmark=benchmark)
    except BadSelection as exc:
        return _bad_selection(exc)
    rows = selectors.long_format_rows(benchmark, **selection.build_kwargs())
    columns = selectors.long_format_columns(benchmark, work_id=selection.work_id)
    return _stream(
        exports.tidy_csv(rows, columns),
        "text/csv; charset=utf-8",
        f"{_file_stem(benchmark, selection)}-tidy.csv",
    )


def _stream(chunks: Iterable[bytes], content_type: str, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# --- CharToM-QA text similarity --------------------------------------------------------------


@require_POST
@researcher_required
def chartom_text_similarity(request: HttpRequest) -> HttpResponse:
    """Queue RougeL / BERTScore scoring of the selected CharToM-QA runs on a GPU worker."""
    from modeling.pipelines.chartom_qa.text_similarity import (
        bertscore_model,
        text_similarity_enqueue,
    )

    benchmark = Benchmark.CHARTOM_QA.value
    try:
        run_ids = _run_ids_from(request.POST.get("runs", ""))
        runs = selectors.report_runs(benchmark, run_ids=run_ids)
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect("reports:report", benchmark=benchmark)
    ids = [r["id"] for r in runs]
    if not ids:
        messages.error(request, "No CharToM-QA run to score.")
        return redirect("reports:report", benchmark=benchmark)
    text_similarity_enqueue(run_ids=ids)
    bert = "and BERTScore" if bertscore_model() else "(BERTScore: no model configured)"
    messages.success(
        request,
        f"RougeL {bert} of run(s) {', '.join(map(str, ids))} queued for a GPU worker; "
        "Table 7 shows them once scored.",
    )
    return redirect(
        reverse("reports:report", args=[benchmark]) + ReportSelection(run_ids=run_ids).query()
    )


# --- background jobs ----------------------------------------------------------------------


@require_POST
@researcher_required
def report_job_create(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Queue a background build of the report with the posted selection."""
    benchmark = _benchmark(benchmark)
    try:
        selection = selection_from_query(request.POST, benchmark=benchmark)
        job = services.report_job_create(
            benchmark=benchmark, **selection.build_kwargs(), created_by=request.user
        )
    except BadSelection as exc:
        if exc.status == 404:  # another workspace's work: not found, as any of its objects
            raise Http404(str(exc)) from None
        messages.error(request, str(exc))
        return redirect(_page_of(benchmark, request.POST.get("work")))
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect(_page_of(benchmark, request.POST.get("work")))
    messages.success(request, f"Report job {job.pk} queued.")
    return redirect("reports:job", job_id=job.pk)


def _page_of(benchmark: str, work: str | None) -> str:
    """The report page to go back to (a generic one with its work, when it is a number)."""
    url = reverse("reports:report", args=[benchmark])
    try:
        work_id = optional_number((work or "").strip(), name="work")
    except BadNumber:
        return url
    return f"{url}?work={work_id}" if work_id is not None else url


def _job_selection(job: ReportJob) -> ReportSelection:
    """What a job's file names and long-format links carry: its runs, its work and how
    it read several samples."""
    return ReportSelection(run_ids=job.run_ids, work_id=job.work_id, samples=job.samples)


def _job_label(job: ReportJob) -> str:
    if job.work_id is not None:
        work = selectors.generic_work(job.work_id)
        if work is not None:
            return selectors.generic_work_label(work)
    return Benchmark(job.benchmark).label


def _run_ids_from(text: str) -> list[int] | None:
    try:
        ids = sorted(set(number_list(text, name="runs")))
    except BadNumber as exc:
        raise BadSelection("runs", f"not a list of run ids: {exc}") from None
    return ids or None


def _job_context(job: ReportJob) -> dict[str, Any]:
    context: dict[str, Any] = {
        "job": job,
        "label": _job_label(job),
        "report_url": reverse("reports:report", args=[job.benchmark])
        + ReportSelection(work_id=job.work_id).query(),
    }
    report = job.report()
    if report is not None:
        context.update(
            _report_body(
                report,
                url=_job_urls(job),
                query="",
                long_query=_job_selection(job).query(),
            )
        )
    return context


@require_GET
@researcher_required
def report_job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = get_object_or_404(ReportJob.objects.select_related("created_by"), pk=job_id)
    if request.htmx:
        # The polling region alone; 286 tells htmx to swap it in and stop polling.
        response = render(request, JOB_PROGRESS_PARTIAL, _job_context(job))
        if job.is_finished:
            return HttpResponseStopPolling(response.content)
        return response
    return render(request, "reports/job_detail.html", _job_context(job))


def _finished_report(job_id: int) -> tuple[ReportJob, Report]:
    job = get_object_or_404(ReportJob, pk=job_id)
    report = job.report()
    if report is None:
        rebuilding = (
            " (it is being rebuilt after a withdrawal)" if job.rebuilt_after_withdrawal_at else ""
        )
        raise Http404(f"the job has no report yet{rebuilding}")
    return job, report


@require_GET
@researcher_required
def report_job_chart(request: HttpRequest, job_id: int, key: str, fmt: str) -> HttpResponse:
    job, report = _finished_report(job_id)
    stem = _file_stem(job.benchmark, _job_selection(job), job)
    return _chart_response(report, key, fmt, stem, layout=chart_layout(request))


@require_GET
@researcher_required
def report_job_export(request: HttpRequest, job_id: int, fmt: str) -> HttpResponse:
    job, report = _finished_report(job_id)
    return _tables_response(report, fmt, _file_stem(job.benchmark, _job_selection(job), job))


@require_GET
@researcher_required
def report_job_table_csv(request: HttpRequest, job_id: int, key: str) -> HttpResponse:
    job, report = _finished_report(job_id)
    return _table_response(report, key, _file_stem(job.benchmark, _job_selection(job), job))
