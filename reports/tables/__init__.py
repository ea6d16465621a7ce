"""Report builders: the papers' tables and the charts that draw them, per benchmark.

``build_report(benchmark, run_ids=..., study_ids=..., seed=..., include_excluded=...,
samples=...)`` reads plain rows through
``reports.selectors``, computes every number with ``metrics`` and returns a
:class:`~reports.report_types.Report`. Pages, exports, the API and the ``report``
command only render it, so all of them show the same numbers.

Conventions every builder follows:
- one ``runs`` table first (what each run is, how many predictions, unparseable);
- percentages in percent, rounded to 2 decimals, in columns ending in ``%``;
- a run is named ``#<id> <name>`` in column headers and row labels (names repeat);
- ``seed`` feeds every bootstrap, so a report rebuilt from the same rows is identical;
- excluded participants are left out of every human number unless ``include_excluded``,
  and the facts say how many (``excluded_participants_left_out`` or ``_included``);
- a run with several samples per item counts the mean over them where a benchmark's
  report averages samples (``SAMPLE_MEANS``), or its first sample only with
  ``samples="first"`` (the fact ``samples: first`` and the notes say so); the other
  benchmarks always score the first sample, as their papers' systems answer once.

The generic benchmark is many researcher-named benchmarks, one Work each: its report
covers one of them (``work_id``), its runs and studies those on that work's items.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from typing import Any

from benchmarks.models import Benchmark
from common.gc_pause import gc_paused
from reports import selectors
from reports.report_types import SAMPLES, SAMPLES_FIRST, SAMPLES_MEAN, Cell, Report, Table

# Imported on first use: the builder modules import helpers from this package.
BUILDERS = {
    Benchmark.DYNTOM.value: "reports.tables.dyntom",
    Benchmark.CHARTOM_QA.value: "reports.tables.chartom_qa",
    Benchmark.TOM_IN_AMC.value: "reports.tables.tom_in_amc",
    Benchmark.TVSHOWGUESS.value: "reports.tables.tvshowguess",
    Benchmark.GENERIC.value: "reports.tables.generic",
}
N_RESAMPLES = 1000
# The benchmarks whose reports average a run's samples of an item (``samples="mean"``)
# unless asked for the first sample only; the others always read the first sample.
SAMPLE_MEANS = (Benchmark.GENERIC.value, Benchmark.DYNTOM.value)


# The builds keep every row of a report's data alive at once (100,000 dicts and more):
# with the collector's full passes over them, a CharToM-QA build took a third longer.
@gc_paused()
def build_report(
    benchmark: str,
    *,
    run_ids: list[int] | None = None,
    study_ids: list[int] | None = None,
    seed: int = 0,
    counts: dict[int, dict[str, int]] | None = None,
    include_excluded: bool = False,
    work_id: int | None = None,
    samples: str = SAMPLES_MEAN,
) -> Report:
    """The report of ``benchmark`` over ``run_ids`` (default: every run of it) and the
    human studies ``study_ids`` (default: ``selectors.report_studies``', i.e. every
    study but drafts and closed studies without a counted answer; ``[]`` for none).

    The generic benchmark's report is one named benchmark's: ``work_id`` is required
    there (and refused elsewhere), and runs and studies are those on its items.

    Excluded participants (``Participant.excluded_at``) count only with
    ``include_excluded``. ``samples``: a run's several samples per item are averaged
    (``"mean"``) or only its first counts (``"first"``), where the benchmark averages
    them at all (``SAMPLE_MEANS``). ``counts`` is ``selectors.run_prediction_counts``
    of (at least) these runs when the caller has it. Raises ``ValueError`` for an unknown
    benchmark, a run or study id that is not one of its own, a missing or unknown
    work, or another ``samples`` (callers turn it into a usage error / HTTP 400).
    """
    if benchmark not in BUILDERS:
        raise ValueError(f"unknown benchmark {benchmark!r}; expected one of {list(BUILDERS)}")
    if samples not in SAMPLES:
        raise ValueError(f"samples: expected one of {list(SAMPLES)}, got {samples!r}")
    work = report_work(benchmark, work_id)
    runs = selectors.report_runs(benchmark, run_ids=run_ids, counts=counts or True, work_id=work_id)
    studies = selectors.report_studies(
        benchmark, study_ids=study_ids, include_excluded=include_excluded, work_id=work_id
    )
    module = import_module(BUILDERS[benchmark])
    label = selectors.generic_work_label(work) if work else Benchmark(benchmark).label
    report = Report(benchmark=benchmark, title=f"{label} report")
    report.facts = facts(benchmark, runs, work_id=work_id)
    sampled = {"samples": samples} if benchmark in SAMPLE_MEANS else {}
    if work is not None:
        module.build(
            report, work, runs, studies, seed=seed, include_excluded=include_excluded, **sampled
        )
    elif benchmark in selectors.SPEAKER_BENCHMARKS:
        module.build(report, runs, studies=studies, seed=seed, include_excluded=include_excluded)
    else:
        module.build(report, runs, seed=seed, **sampled)
        # Multiple-choice human studies (CharToM-QA, DynToM) beside the same runs.
        import_module("reports.tables.human_choice").build(
            report, runs, studies, seed=seed, include_excluded=include_excluded
        )
    if studies:
        report.facts.update(excluded_facts(studies, include_excluded=include_excluded))
    if samples == SAMPLES_FIRST:
        # Only when asked: the default reports keep the facts they always had.
        report.facts["samples"] = SAMPLES_FIRST
    return report


def report_work(benchmark: str, work_id: int | None) -> dict[str, Any] | None:
    """The generic benchmark's work a report covers (``selectors.generic_work``), or
    ``None`` for a built-in benchmark; ``ValueError`` for a generic report without a
    work or with one this workspace does not read, or a built-in one with a work."""
    if benchmark != Benchmark.GENERIC:
        if work_id is not None:
            raise ValueError(f"a {benchmark} report covers the whole benchmark: no work id")
        return None
    if work_id is None:
        raise ValueError("a generic report covers one named benchmark: give its work id")
    work = selectors.generic_work(work_id)
    if work is None:
        raise ValueError(f"no generic benchmark with work id {work_id}")
    return work


def excluded_facts(studies: Sequence[dict[str, Any]], *, include_excluded: bool) -> dict[str, int]:
    """How many excluded (not withdrawn) participants of ``studies`` the report left
    out, or, with ``include_excluded``, counted."""
    n = selectors.excluded_count(studies)
    key = "included" if include_excluded else "left_out"
    return {f"excluded_participants_{key}": n}


def excluded_note(studies: Sequence[dict[str, Any]], *, include_excluded: bool) -> str:
    """The sentence a human table's note carries about excluded participants."""
    n = selectors.excluded_count(studies)
    if include_excluded:
        return f' Excluded participants are included ({n}): the "include excluded" switch is on.'
    return (
        f" Excluded participants (by the study's rule or a researcher) are left out: {n}; "
        'the "include excluded" switch counts them.'
    )


def report_json(report: Report) -> dict[str, Any]:
    """``Report.as_json()`` plus what a benchmark publishes at the top level.

    TVShowGuess adds ``dependence``, ``reasoning`` and ``evidence``: the authors'
    annotation shares in percent, keyed by type, as in their paper's tables.
    """
    data = report.as_json()
    module = import_module(BUILDERS[report.benchmark])
    extra = getattr(module, "json_extras", None)
    if extra is not None:
        data.update(extra(report))
    return data


def facts(
    benchmark: str, runs: Sequence[dict[str, Any]], *, work_id: int | None = None
) -> dict[str, Any]:
    """Counts shown above the tables: items by kind, runs, predictions, unparseable.

    ``runs`` come from ``report_runs(..., counts=True)``.
    """
    return {
        **selectors.item_counts(benchmark, work_id=work_id),
        "runs": len(runs),
        "predictions": sum(r["predictions"] for r in runs),
        "unparseable": sum(r["unparseable"] for r in runs),
    }


# -- helpers shared by the builders ---------------------------------------------------


def pct(value: float | None, digits: int = 2) -> float | None:
    """A fraction as a percentage rounded for display (``None`` stays ``None``)."""
    return None if value is None else round(100 * value, digits)


def run_label(run: dict[str, Any]) -> str:
    return f"#{run['id']} {run['name']}"


def first_samples_note(samples: str) -> str:
    """The sentence a table's note carries when the runs' first samples alone count."""
    if samples != SAMPLES_FIRST:
        return ""
    return " Runs with several samples: the first sample only (samples=first), not their mean."


def runs_table(runs: Sequence[dict[str, Any]], stats: dict[int, dict[str, int]]) -> Table:
    """What each run is and how many answers it has.

    ``stats[run_id]`` holds ``predictions``, ``unparseable`` and ``samples``.
    """
    rows: list[list[Cell]] = []
    for run in runs:
        s = stats.get(run["id"], {})
        predictions = s.get("predictions", 0)
        unparseable = s.get("unparseable", 0)
        template = (
            f"{run['template_name']} v{run['template_version']}" if run["template_name"] else ""
        )
        rows.append(
            [
                run["id"],
                run["name"],
                run["model"],
                run["method"],
                template,
                "imported" if run["imported"] else run["status"],
                s.get("samples", 0),
                predictions,
                unparseable,
                pct(unparseable / predictions) if predictions else None,
            ]
        )
    return Table(
        key="runs",
        title="Runs",
        columns=[
            "Run",
            "Name",
            "Model",
            "Method",
            "Template",
            "Status",
            "Samples",
            "Predictions",
            "Unparseable",
            "Unparseable %",
        ],
        rows=rows,
        note="Unparseable, refused and missing answers count as wrong in every accuracy.",
    )


def single_unit_note(labels: Sequence[str], unit: str) -> str:
    """The rows whose interval rests on one ``unit`` (a scene, a stage, an item), for a
    table's note: the bootstrap gives none there (``metrics.bootstrap.resamplable``), so
    the page shows a dash, the CSV an empty cell and the API null, and the note says why."""
    if not labels:
        return ""
    return f" n = 1, no interval (one {unit}): {', '.join(labels)}."


def single_unit_rows(labels: Sequence[str], unit: str) -> dict[str, str]:
    """The same rows as :func:`single_unit_note`, for ``Table.no_interval``: the page's
    dash in their interval cells says "one stage: no interval" when pointed at."""
    return {label: f"one {unit}: no interval" for label in labels}


def unparsed_note(runs: Sequence[dict[str, Any]], stats: dict[int, dict[str, int]]) -> str:
    """The runs none of whose answers parsed, for a common set's note (``stats`` as for
    :func:`runs_table`).

    Their answers count as wrong, so such a run stays in the common set at 0%: the note
    says why, rather than let 0% read as a model that answered and erred.
    """
    names = [
        f"{run_label(run)} (all {s['predictions']:,} replies unparseable)"
        for run in runs
        if (s := stats.get(run["id"])) and s["predictions"] and s["unparseable"] == s["predictions"]
    ]
    if not names:
        return ""
    return f" No parseable answer, in it at 0% (every answer counted wrong): {', '.join(names)}."


def prediction_stats(predictions: Sequence[dict[str, Any]]) -> dict[int, dict[str, int]]:
    """Predictions, unparseable answers and samples per run, from prediction rows."""
    stats: dict[int, dict[str, Any]] = {}
    for p in predictions:
        s = stats.setdefault(p["run_id"], {"predictions": 0, "unparseable": 0, "samples": set()})
        s["predictions"] += 1
        s["unparseable"] += p["parse_status"] != "ok"
        s["samples"].add(p["sample_index"])
    return {
        run_id: {**s, "samples": len(s["samples"])}  # type: ignore[dict-item]
        for run_id, s in stats.items()
    }
