"""Report services: build a report for a request (through a short-lived cache), and
create and execute background report jobs for reports too big for a request.

A page shows a report and then the browser asks for each of its charts separately;
without the cache every chart request would rebuild the whole report (bootstraps
included). The cache key carries a fingerprint of the data the report reads, so new
predictions or runs make a new key rather than a stale page.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from annotation.dyntom.validation import selectors as validation_selectors
from benchmarks.models import Benchmark, MCItem
from common.queueing import job_tasks_register
from common.scoping import current_workspace_id, scoped_to
from common.tasks import task_send_on_commit
from modeling.models import Run

from . import selectors
from .chartom_answers import run_answers
from .dyntom_outcomes import run_outcomes
from .models import ReportJob
from .report_types import SAMPLES, SAMPLES_MEAN, Chart, Report, Table
from .run_packs import (
    PACKED_BENCHMARKS,
    RUN_PACK_TASK_NAME,
    pack_generation,
    packed_run_ids,
    unpacked_predictions,
)
from .tables.validation import build_validation_report

logger = logging.getLogger(__name__)

# Seconds a built report is reused for identical requests (same data fingerprint).
CACHE_SECONDS = 600
# Predictions above which the page offers a background build instead of building inline.
INLINE_MAX_PREDICTIONS_DEFAULT = 100_000
# A job still "running" this long after it started was left by a dead worker.
STALE_RUNNING = timedelta(minutes=30)

REPORT_TASK_NAME = "reports.build_report"
job_tasks_register("reports.reportjob", REPORT_TASK_NAME, page="reports:job")


# What packs a run of each packed benchmark (``reports.run_packs``).
PACKERS = {Benchmark.DYNTOM: run_outcomes, Benchmark.CHARTOM_QA: run_answers}


def runs_pack(run_ids: list[int]) -> bool:
    """Pack those of these runs whose benchmark is packed; whether there were any."""
    by_benchmark = packed_run_ids(run_ids)  # other benchmarks' runs: nothing to do
    for benchmark, ids in by_benchmark.items():
        # A failure here must not fail the run or the import: the report packs on
        # first use whatever is missing or stale.
        try:
            PACKERS[benchmark](ids)
        except Exception:
            logger.exception("packing %s runs %s failed", benchmark, ids)
    return bool(by_benchmark)


def run_pack_queue(*, run_id: int) -> None:
    """Pack a run that has just finished, in a worker once its end commits, so its first
    report reads the pack and the engine (and the worker running it) need not wait."""
    task_send_on_commit(RUN_PACK_TASK_NAME, (run_id,))


def run_pack_build(*, run_id: int) -> str:
    """The worker's side of :func:`run_pack_queue`: "skipped" for a run running again
    (its next end queues another) or of a benchmark that is not packed. A redelivery
    finds the pack current and stores nothing."""
    finished = Run.objects.filter(pk=run_id).exclude(status=Run.Status.RUNNING)
    return "packed" if runs_pack(list(finished.values_list("pk", flat=True))) else "skipped"


def inline_max_predictions() -> int:
    return int(getattr(settings, "REPORTS_INLINE_MAX_PREDICTIONS", INLINE_MAX_PREDICTIONS_DEFAULT))


def report_too_big(
    *,
    benchmark: str,
    run_ids: Sequence[int] | None,
    size: dict[str, int],
    counts: dict[int, dict[str, int]],
) -> bool:
    """Whether a page should offer a background build rather than build inline.

    Other benchmarks read every prediction row, so their selected predictions count.
    DynToM and CharToM-QA read each run packed (``reports.run_packs``: a million DynToM
    answers in about a second), so only the predictions still to be packed count: a
    run imported or finished moments ago whose packing has not happened, or data
    written behind the engine's back. ``counts`` is
    ``selectors.run_prediction_counts(benchmark=...)``.
    """
    if benchmark not in PACKED_BENCHMARKS:
        return size["predictions"] > inline_max_predictions()
    chosen = counts if run_ids is None else {i: counts[i] for i in run_ids if i in counts}
    return unpacked_predictions(chosen) > inline_max_predictions()


def _build(
    benchmark: str,
    run_ids: Sequence[int] | None,
    seed: int,
    counts: dict[int, dict[str, int]] | None = None,
    *,
    study_ids: Sequence[int] | None = None,
    include_excluded: bool = False,
    work_id: int | None = None,
    samples: str = SAMPLES_MEAN,
) -> Report:
    # Imported here: the table builders pull in every metric; pages that never build
    # (index, job progress) do not pay for that import.
    from .tables import build_report

    return build_report(
        benchmark,
        run_ids=list(run_ids) if run_ids is not None else None,
        study_ids=list(study_ids) if study_ids is not None else None,
        seed=seed,
        counts=counts,
        include_excluded=include_excluded,
        work_id=work_id,
        samples=samples,
    )


def _ids_key(ids: Sequence[int] | None) -> str:
    """A selection in a cache key: "all" (the default) is not "none" ([])."""
    if ids is None:
        return "all"
    return ",".join(map(str, sorted(ids))) or "none"


def report_data_size(
    *,
    benchmark: str,
    run_ids: Sequence[int] | None = None,
    counts: dict[int, dict[str, int]] | None = None,
    work_id: int | None = None,
) -> dict[str, Any]:
    """Predictions (count, highest id) of the selected runs and the benchmark's runs
    (count, highest id, running): the report's size and its cache fingerprint. A
    generic benchmark's are its work's (``work_id``), with its items' count and last
    change (an edited gold rescores the people's picks).

    CharToM-QA's construction tables change with human checks and text-similarity
    scores, which add no prediction: their counts join the fingerprint, as do the
    packed runs' generations (``run_packs.pack_generation``).

    ``counts`` is ``selectors.run_prediction_counts`` of the benchmark's runs when the
    caller already has it (one pass over the predictions serves the page).
    """
    benchmark_runs = Run.objects.filter(benchmark=benchmark)
    if work_id is not None:
        benchmark_runs = benchmark_runs.filter(pk__in=selectors.generic_work_runs(work_id))
    runs = list(benchmark_runs.values_list("pk", "status", pack_generation()))
    ids = [pk for pk, _, _ in runs]
    if counts is None:
        counts = selectors.run_prediction_counts(run_ids=ids)
    # The benchmark's runs (the work's, for a generic one) by default: ``counts`` may
    # hold more than these.
    chosen = [counts[i] for i in (ids if run_ids is None else run_ids) if i in counts]
    size: dict[str, Any] = {
        "predictions": sum(c["predictions"] for c in chosen),
        "last_prediction": max((c["last_prediction"] for c in chosen), default=0),
        "runs": len(runs),
        "last_run": max(ids, default=0),
        "running": sum(status == Run.Status.RUNNING for _, status, _ in runs),
    }
    if benchmark in PACKED_BENCHMARKS:
        # Answers changed in place (a re-import, merged verdicts or text scores) keep
        # count and ids, but move their runs' pack generation on.
        size["pack_generations"] = sum(generation or 0 for _, _, generation in runs)
    if benchmark == Benchmark.CHARTOM_QA:
        from .tables.chartom_construction import data_fingerprint

        size.update(data_fingerprint(ids))
    if work_id is not None:
        size.update(
            MCItem.objects.filter(work_id=work_id).aggregate(
                items=Count("pk"), items_changed=Max("updated_at")
            )
        )
    return size


def report_build_cached(
    *,
    benchmark: str,
    run_ids: Sequence[int] | None = None,
    study_ids: Sequence[int] | None = None,
    include_excluded: bool = False,
    seed: int = 0,
    size: dict[str, int] | None = None,
    counts: dict[int, dict[str, int]] | None = None,
    work_id: int | None = None,
    samples: str = SAMPLES_MEAN,
) -> Report:
    """``build_report`` for a request, reused while the data it reads is unchanged.

    ``size`` is ``report_data_size``'s answer and ``counts``
    ``selectors.run_prediction_counts(benchmark=...)`` when the caller already has them.
    ``work_id``: the generic benchmark's work the report covers; ``samples``: how a
    run's several samples count (``build_report``).
    """
    if size is None:
        # One pass over the predictions for the fingerprint and, on a miss, the build.
        if counts is None:
            counts = selectors.run_prediction_counts(benchmark=benchmark)
        size = report_data_size(
            benchmark=benchmark, run_ids=run_ids, counts=counts, work_id=work_id
        )
    # Human answers change the tables too: a new answer, a withdrawal or an exclusion
    # must not wait out the cache.
    human = selectors.human_response_size(benchmark, work_id=work_id)
    fingerprint = hashlib.sha1(
        repr((sorted(size.items()), sorted(human.items()))).encode()
    ).hexdigest()[:16]
    # Every part of the selection: a first-sample report is never the mean's.
    selection = f"{_ids_key(run_ids)}:{_ids_key(study_ids)}:{int(include_excluded)}:{samples}"
    if work_id is not None:
        selection = f"work{work_id}:{selection}"
    # Each workspace reads its own studies and runs: its reports are cached apart.
    key = f"reports:report:v3:{current_workspace_id()}:{benchmark}:{seed}:{selection}:{fingerprint}"
    report = cache.get(key)
    if report is None:
        report = _build(
            benchmark,
            run_ids,
            seed,
            counts,
            study_ids=study_ids,
            include_excluded=include_excluded,
            work_id=work_id,
            samples=samples,
        )
        # A running run changes under us: cache it briefly so progress shows up soon.
        cache.set(key, report, 15 if size["running"] else CACHE_SECONDS)
    return report


# Bumped whenever reports/charts.py draws differently, so no cached drawing outlives it.
CHART_DRAWING_VERSION = 1


def chart_render_cached(report: Report, key: str, fmt: str, *, layout: str = "wide") -> bytes:
    """``reports.charts.render`` of the chart ``key``, reused for the same numbers.

    Drawing a chart costs 0.15-0.5 s of CPU (matplotlib lays it out, then encodes it),
    and a report page asks for several each time it is opened. Keyed by a digest of
    what is drawn (the chart, its table, the format and layout), not by the request:
    the same numbers give the same bytes (the charts carry no date), and a new answer
    or another selection changes the numbers and so the key. A workspace never gets
    another's drawing unless its own numbers are the same. KeyError for no such chart.
    """
    # matplotlib is imported only when a chart is drawn (0.6 s; see reports.views).
    from . import charts

    chart = charts.chart_by_key(report, key)
    table = report.table(chart.table)
    cache_key = chart_cache_key(chart, table, fmt, layout=layout)
    data = cache.get(cache_key)
    if data is None:
        data = charts.render(chart, table, fmt, layout=layout)  # type: ignore[arg-type]
        cache.set(cache_key, data, CACHE_SECONDS)
    return data


def chart_cache_key(chart: Chart, table: Table, fmt: str, *, layout: str = "wide") -> str:
    """The cache key of a drawing: a digest of everything the drawing is made from."""
    drawn = repr((CHART_DRAWING_VERSION, fmt, layout, chart, table))
    return f"reports:chart:{hashlib.sha256(drawn.encode()).hexdigest()}"


def validation_report_cached(*, batch_ids: list[int] | None = None, seed: int = 0) -> Report:
    """``build_validation_report`` for a request, reused while nothing it reads changed.

    Its agreement bootstraps read every score (at 1,000 stages x 4 annotators, a few
    hundred thousand): the page, its CSV, XLSX, JSON and charts each ask for it, and
    the fingerprint (counts and newest marks, no rows) tells when it must be built again.
    """
    size = validation_selectors.report_size(batch_ids=batch_ids)
    fingerprint = hashlib.sha1(repr(sorted(size.items())).encode()).hexdigest()[:16]
    key = (
        f"reports:validation:v3:{current_workspace_id()}:{seed}:{_ids_key(batch_ids)}:{fingerprint}"
    )
    report = cache.get(key)
    if report is None:
        report = build_validation_report(batch_ids=batch_ids, seed=seed)
        cache.set(key, report, CACHE_SECONDS)
    return report


@transaction.atomic
def report_job_create(
    *,
    benchmark: str,
    run_ids: Sequence[int] | None = None,
    study_ids: Sequence[int] | None = None,
    include_excluded: bool = False,
    seed: int = 0,
    created_by=None,
    enqueue: bool = True,
    work_id: int | None = None,
    samples: str = SAMPLES_MEAN,
) -> ReportJob:
    """Record a background report build and, once committed, queue it for a worker.

    Raises ``ValueError`` for an unknown benchmark or ids that are not its runs or
    studies (a generic report: a missing or unknown work, runs or studies not on it),
    or another ``samples``, so a job never fails later for a typo. The job keeps the
    study selection, "include excluded", the work and ``samples``, so it builds the
    report that was asked for.
    """
    from .tables import report_work

    if samples not in SAMPLES:
        raise ValueError(f"samples: expected one of {list(SAMPLES)}, got {samples!r}")
    report_work(benchmark, work_id)
    selectors.report_runs(benchmark, run_ids=run_ids, work_id=work_id)
    if study_ids is not None:
        selectors.report_studies(benchmark, study_ids=study_ids, work_id=work_id)
    job = ReportJob.objects.create(
        benchmark=benchmark,
        work_id=work_id,
        run_ids=sorted(set(run_ids)) if run_ids is not None else None,
        study_ids=sorted(set(study_ids)) if study_ids is not None else None,
        include_excluded=include_excluded,
        samples=samples,
        seed=seed,
        created_by=created_by,
    )
    if enqueue:
        task_send_on_commit(REPORT_TASK_NAME, (job.pk,))
    return job


def _claim(job_id: int) -> datetime | None:
    """Take the job with one conditional UPDATE; None if another worker has it or it is done.

    Returns the claim's ``started_at``: the build stores its result only while the job
    still carries it, so a build overtaken by a withdrawal (which queues the job again,
    :func:`report_jobs_rebuild_after_withdrawal`) or by a stale-claim takeover stores
    nothing.
    """
    now = timezone.now()
    claimed = (
        ReportJob.objects.filter(pk=job_id)
        .filter(
            Q(status=ReportJob.Status.QUEUED)
            | Q(status=ReportJob.Status.RUNNING, started_at__lt=now - STALE_RUNNING)
        )
        .update(
            status=ReportJob.Status.RUNNING,
            started_at=now,
            progress_done=0,
            progress_total=1,
            error="",
        )
    )
    return now if claimed else None


def report_job_execute(*, job_id: int) -> str:
    """Build the job's report and store it; returns the job's final status.

    Safe to call twice (a redelivered task): the second call finds the job claimed or
    finished and does nothing. A failure is recorded on the job, not raised, so Celery
    does not retry a report that fails for a reason a retry cannot fix.
    """
    started = _claim(job_id)
    if started is None:
        return ReportJob.objects.values_list("status", flat=True).get(pk=job_id)
    job = ReportJob.objects.get(pk=job_id)
    mine = ReportJob.objects.filter(pk=job_id, status=ReportJob.Status.RUNNING, started_at=started)
    try:
        # The worker reads as a member of the job's workspace: its studies and runs only.
        with scoped_to(job.workspace_id):
            report = _build(
                job.benchmark,
                job.run_ids,
                job.seed,
                study_ids=job.study_ids,
                include_excluded=job.include_excluded,
                work_id=job.work_id,
                samples=job.samples,
            )
        result = report.as_json()
    except Exception as exc:
        logger.exception("report job %s failed", job_id)
        mine.update(
            status=ReportJob.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            finished_at=timezone.now(),
        )
        return ReportJob.objects.values_list("status", flat=True).get(pk=job_id)
    mine.update(
        status=ReportJob.Status.SUCCEEDED,
        result=result,
        progress_done=1,
        finished_at=timezone.now(),
    )
    return ReportJob.objects.values_list("status", flat=True).get(pk=job_id)


@transaction.atomic
def report_jobs_rebuild_after_withdrawal(*, benchmark: str, since: datetime) -> list[int]:
    """Delete the stored results that could hold a withdrawn participant's rows, and
    queue those jobs to be built again (without them: the tables leave withdrawn
    participants out). Returns the ids of the jobs queued again.

    Affected: the benchmark's jobs that succeeded, or are running, on data read since
    ``since`` (when the participant joined; a job built before cannot hold them).
    A running build is overtaken: it finds its claim gone and stores nothing. Each job
    records when (``rebuilt_after_withdrawal_at``), and its page says so.
    """
    now = timezone.now()
    ids = list(
        ReportJob.objects.select_for_update()
        .filter(
            benchmark=benchmark,
            status__in=(ReportJob.Status.SUCCEEDED, ReportJob.Status.RUNNING),
            started_at__gte=since,
        )
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    ReportJob.objects.filter(pk__in=ids).update(
        status=ReportJob.Status.QUEUED,
        result=None,
        progress_done=0,
        progress_total=0,
        error="",
        started_at=None,
        finished_at=None,
        rebuilt_after_withdrawal_at=now,
    )
    for job_id in ids:
        task_send_on_commit(REPORT_TASK_NAME, (job_id,))
    return ids
