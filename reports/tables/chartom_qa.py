"""CharToM-QA tables: generative QA (Table 1) and multiple choice (Tables 2-3).

- ``generative``: per ToM dimension, each generative run's Bonus Point Coverage (with a
  95% CI resampling responses), Penalty Rate and unparseable judge replies, scored
  ``strict`` (the default: an unreadable reply is left out and counted);
- ``generative-reference``: the same scored as the published evaluator aggregates
  (``reference`` mode: an unreadable bonus reply counts 3 points, an unreadable
  defect reply is a penalty), with its "rate of token numbers", to set beside
  published numbers;
- ``multichoice``: per dimension, each multiple-choice run's accuracy with 95% CI;
- ``directness``: the same split into direct and indirect questions (Table 3);
- ``by-context``: BPC / PR and accuracy by dimension and context length (the plot
  window shown to the model, 0, 1000 or 2000 tokens; Table 1's columns);
- then the construction tables of ``reports/tables/chartom_construction.py``: note
  checks, their agreement, qualification trials and Table 7 (RougeL, BERTScore and
  the experts' correlation with each metric).

A run is generative or multiple choice by its predictions' ``details["task"]`` (the
import convention), falling back to ``Run.method``; its context length by
``details["context"]``, falling back to ``Run.params["context"]``. First sample only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.models import QAItem, ToMDimension
from metrics import (
    accuracy_ci,
    bonus_point_coverage,
    bonus_point_coverage_ci,
    length_ratio,
    penalty_rate,
)
from modeling.pipelines.chartom_qa import (
    REFERENCE,
    STRICT,
    UNJUDGED,
    UNPARSEABLE,
    ResponseScore,
)
from reports import selectors
from reports.report_types import Cell, Chart, Report, Table
from reports.tables import (
    N_RESAMPLES,
    chartom_construction,
    pct,
    prediction_stats,
    run_label,
    runs_table,
)
from reports.tables.chartom_construction import prediction_scores

GENERATIVE = "generative"
MULTICHOICE = "multichoice"
ALL = "All"
UNLABELLED = "(unlabelled)"
UNKNOWN_CONTEXT = "(unknown)"
CONTEXTS = ["0", "1000", "2000"]
DIMENSIONS = [d.value for d in ToMDimension]


def build(report: Report, runs: list[dict[str, Any]], *, seed: int) -> None:
    predictions = list(selectors.chartom_report_rows([r["id"] for r in runs]))
    report.tables.append(runs_table(runs, prediction_stats(predictions)))
    tasks: dict[int, str] = {}
    first: dict[int, list[dict[str, Any]]] = {r["id"]: [] for r in runs}
    for p in predictions:
        task = (p["details"] or {}).get("task")
        if task in (GENERATIVE, MULTICHOICE):
            tasks.setdefault(p["run_id"], task)
        if p["sample_index"] == 0:
            first[p["run_id"]].append(p)
    for run in runs:
        if run["id"] not in tasks:
            tasks[run["id"]] = GENERATIVE if run["method"] == GENERATIVE else MULTICHOICE
    generative = [r for r in runs if tasks[r["id"]] == GENERATIVE]
    multichoice = [r for r in runs if tasks[r["id"]] == MULTICHOICE]

    def by_dimension(p: dict[str, Any]) -> list[str]:
        return [p["dimension"], ALL]

    if generative:
        for run in generative:  # each answer scored once per mode, for every table
            prediction_scores(first[run["id"]], STRICT)
            prediction_scores(first[run["id"]], REFERENCE)
        # Both tables group the same answers the same way.
        grouped = _grouped(generative, first, by_dimension)
        table = _generative_table(generative, grouped, _dimension_order, seed=seed)
        report.tables.append(table)
        report.tables.append(_reference_table(generative, grouped))
        report.charts.append(
            _chart(table, generative, "BPC", title="Bonus point coverage by ToM dimension")
        )
    if multichoice:
        grouped = _grouped(multichoice, first, by_dimension)
        table = _multichoice_table(multichoice, grouped, _dimension_order, seed=seed)
        report.tables.append(table)
        report.charts.append(
            _chart(table, multichoice, "accuracy", title="Multiple-choice accuracy by dimension")
        )
    if runs:
        report.tables.append(_directness_table(generative, multichoice, first, seed=seed))
        run_contexts = {r["id"]: (r["params"] or {}).get("context") for r in runs}
        report.tables.append(
            _context_table(generative, multichoice, first, run_contexts, seed=seed)
        )
    # Note checks, qualification and Table 7 (human construction and judgement work).
    chartom_construction.build(report, generative, first, seed=seed)


def _dimension_order(group: str) -> tuple[int, str]:
    if group in DIMENSIONS:
        return (DIMENSIONS.index(group), group)
    return (len(DIMENSIONS) + (group == ALL), group)


def _directness_order(group: str) -> tuple[int, str]:
    order = [QAItem.Directness.DIRECT.value, QAItem.Directness.INDIRECT.value, UNLABELLED, ALL]
    return (order.index(group) if group in order else len(order), group)


def _grouped(
    runs: Sequence[dict[str, Any]],
    first: dict[int, list[dict[str, Any]]],
    groups_of: Callable[[dict[str, Any]], list[Any]],
) -> tuple[list[Any], dict[int, dict[Any, list[dict[str, Any]]]]]:
    per_run: dict[int, dict[Any, list[dict[str, Any]]]] = {}
    groups: set[Any] = set()
    for run in runs:
        run_groups: defaultdict[Any, list[dict[str, Any]]] = defaultdict(list)
        for p in first[run["id"]]:
            for group in groups_of(p):
                run_groups[group].append(p)
        per_run[run["id"]] = run_groups
        groups.update(run_groups)
    return sorted(groups), per_run


def _scores(predictions: list[dict[str, Any]], mode: str) -> list[ResponseScore]:
    """Each judged response's score in ``mode``; responses the judge never saw are left out."""
    scores = prediction_scores(predictions, mode)
    return [s for s in scores if (s.bonus_status, s.defects_status) != (UNJUDGED, UNJUDGED)]


def _unparseable(scores: list[ResponseScore]) -> int:
    """Responses with an unreadable judge reply (bonus or defects), as strict reads them."""
    return sum(UNPARSEABLE in (s.bonus_status, s.defects_status) for s in scores)


def _bpc_cells(predictions: list[dict[str, Any]], *, seed: int, ci: bool = True) -> list[Cell]:
    """n, BPC, its CI (``None`` without ``ci``), PR and unparseable replies, scored strict.

    A reply strict cannot read is never taken as zero points or no defect: that half
    of the response is left out of BPC or PR and counted as unparseable.
    """
    scores = _scores(predictions, STRICT)
    pairs = [(s.covered, s.total) for s in scores if s.covered is not None]
    low = high = None
    if ci:  # each interval draws with its own generator: leaving one out changes no other
        low, high = bonus_point_coverage_ci(pairs, n_resamples=N_RESAMPLES, seed=seed)
    return [
        len(scores),
        pct(bonus_point_coverage(pairs)),
        pct(low),
        pct(high),
        pct(penalty_rate([s.penalised for s in scores if s.penalised is not None])),
        _unparseable(scores),
    ]


def _group_rows(runs, grouped, order, cells) -> list[list[Cell]]:
    """One row per group of ``grouped`` (``_grouped``'s answer, in ``order``): the group,
    then ``cells(predictions)`` per run."""
    groups, per_run = grouped
    groups = sorted(groups, key=order)
    rows: list[list[Cell]] = []
    for group in groups:
        row: list[Cell] = [group]
        for run in runs:
            row += cells(per_run[run["id"]].get(group, []))
        rows.append(row)
    return rows


def _generative_table(runs, grouped, order, *, seed: int) -> Table:
    rows = _group_rows(runs, grouped, order, lambda preds: _bpc_cells(preds, seed=seed))
    columns = ["Dimension"]
    for run in runs:
        label = run_label(run)
        columns += [
            f"{label} n",
            f"{label} BPC %",
            f"{label} BPC CI low %",
            f"{label} BPC CI high %",
            f"{label} PR %",
            f"{label} judge unparseable",
        ]
    return Table(
        key="generative",
        title=(
            f"Generative QA: bonus point coverage (BPC) and penalty rate (PR), scoring: {STRICT}"
        ),
        columns=columns,
        rows=rows,
        note=(
            "BPC: judged-included bonus points over all bonus points (pooled over "
            "responses); PR: share of responses with at least one defect. 95% CI: "
            f"percentile bootstrap over responses. Scoring {STRICT}: a judge reply not in "
            "the asked format is unparseable, left out of BPC (bonus reply) or PR (defect "
            "reply) and counted under 'judge unparseable' (responses with either reply "
            f"unreadable); the '{REFERENCE}' table scores them as the published evaluator."
        ),
    )


def _reference_cells(predictions: list[dict[str, Any]]) -> list[Cell]:
    scores = _scores(predictions, REFERENCE)
    pairs = [(s.covered, s.total) for s in scores if s.covered is not None]
    with_lengths = [s for s in scores if s.response_chars is not None and s.answer_chars]
    return [
        len(scores),
        pct(bonus_point_coverage(pairs, bounded=False)),
        pct(penalty_rate([s.penalised for s in scores if s.penalised is not None])),
        _unparseable(scores),
        _round(
            length_ratio(
                [s.response_chars for s in with_lengths], [s.answer_chars for s in with_lengths]
            )
        ),
    ]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _reference_table(runs, grouped) -> Table:
    rows = _group_rows(runs, grouped, _dimension_order, _reference_cells)
    columns = ["Dimension"]
    for run in runs:
        label = run_label(run)
        columns += [
            f"{label} n",
            f"{label} BPC %",
            f"{label} PR %",
            f"{label} judge unparseable",
            f"{label} rate of token numbers",
        ]
    return Table(
        key="generative-reference",
        title=f"Generative QA as the published evaluator scores it, scoring: {REFERENCE}",
        columns=columns,
        rows=rows,
        note=(
            f"Scoring {REFERENCE}: the aggregation of the authors' evaluate_en.py, quirks "
            "included, for comparison with published numbers. A bonus reply it cannot read "
            'is stored as "Null" and counted as the set of its characters, 3 covered '
            "points (BPC can then pass 100%); a defect reply it cannot read, or any defect "
            "text without 'None', is a penalty. 'judge unparseable' counts the responses "
            "whose replies the strict reading rejects (they are counted, not left out, "
            "here). Rate of token numbers: characters of the responses (before truncation) "
            "over characters of the reference answers, as that script computes it."
        ),
    )


def _accuracy_cells(predictions: list[dict[str, Any]], *, seed: int) -> list[Cell]:
    # Unparseable choices are stored as correct=False: they count as wrong here.
    estimate = accuracy_ci(
        [p["correct"] is True for p in predictions], n_resamples=N_RESAMPLES, seed=seed
    )
    return [estimate.n, pct(estimate.accuracy), pct(estimate.ci_low), pct(estimate.ci_high)]


def _multichoice_table(runs, grouped, order, *, seed: int) -> Table:
    rows = _group_rows(runs, grouped, order, lambda preds: _accuracy_cells(preds, seed=seed))
    columns = ["Dimension"]
    for run in runs:
        label = run_label(run)
        columns += [
            f"{label} n",
            f"{label} accuracy %",
            f"{label} CI low %",
            f"{label} CI high %",
        ]
    return Table(
        key="multichoice",
        title="Multiple-choice QA accuracy",
        columns=columns,
        rows=rows,
        note="Unparseable answers count as wrong. 95% CI: percentile bootstrap over questions.",
    )


def _directness_table(generative, multichoice, first, *, seed: int) -> Table:
    def groups_of(p: dict[str, Any]) -> list[str]:
        return [p["directness"] or UNLABELLED, ALL]

    runs = [*generative, *multichoice]
    groups, per_run = _grouped(runs, first, groups_of)
    groups.sort(key=_directness_order)
    rows: list[list[Cell]] = []
    for group in groups:
        row: list[Cell] = [group]
        for run in generative:
            n, bpc = _bpc_cells(per_run[run["id"]].get(group, []), seed=seed, ci=False)[:2]
            row += [n, bpc]
        for run in multichoice:
            row += _accuracy_cells(per_run[run["id"]].get(group, []), seed=seed)[:2]
        rows.append(row)
    columns = ["Directness"]
    for run in generative:
        columns += [f"{run_label(run)} n", f"{run_label(run)} BPC %"]
    for run in multichoice:
        columns += [f"{run_label(run)} n", f"{run_label(run)} accuracy %"]
    return Table(
        key="directness",
        title=f"Direct and indirect questions (BPC scoring: {STRICT})",
        columns=columns,
        rows=rows,
        note=(
            "Direct: the answer or a synonym appears in the plot window; indirect: it "
            "needs the wider story. Questions without the label are counted apart."
        ),
    )


def _context_order(group: tuple[str, str]) -> tuple[int, tuple[int, str]]:
    context, dimension = group
    known = CONTEXTS.index(context) if context in CONTEXTS else len(CONTEXTS)
    return (known, _dimension_order(dimension))


def _context_table(generative, multichoice, first, run_contexts, *, seed: int) -> Table:
    def groups_of(p: dict[str, Any]) -> list[tuple[str, str]]:
        context = (p["details"] or {}).get("context", run_contexts[p["run_id"]])
        label = UNKNOWN_CONTEXT if context is None else str(context)
        return [(label, p["dimension"]), (label, ALL)]

    runs = [*generative, *multichoice]
    groups, per_run = _grouped(runs, first, groups_of)
    groups.sort(key=_context_order)
    rows: list[list[Cell]] = []
    for group in groups:
        row: list[Cell] = list(group)
        for run in generative:
            cells = _bpc_cells(per_run[run["id"]].get(group, []), seed=seed, ci=False)
            n, bpc, _, _, pr, unparseable = cells
            row += [n, bpc, pr, unparseable]
        for run in multichoice:
            row += _accuracy_cells(per_run[run["id"]].get(group, []), seed=seed)[:2]
        rows.append(row)
    columns = ["Context", "Dimension"]
    for run in generative:
        label = run_label(run)
        columns += [
            f"{label} n",
            f"{label} BPC %",
            f"{label} PR %",
            f"{label} judge unparseable",
        ]
    for run in multichoice:
        columns += [f"{run_label(run)} n", f"{run_label(run)} accuracy %"]
    return Table(
        key="by-context",
        title=(
            "BPC / PR and accuracy by dimension × context length, "  # noqa: RUF001
            f"BPC/PR scoring: {STRICT}"
        ),
        columns=columns,
        rows=rows,
        note=(
            "Context: the plot window shown to the model, in tokens; runs and predictions "
            f"that do not say are under {UNKNOWN_CONTEXT}. A run's cells are empty "
            "(n 0) in the contexts it did not run."
        ),
    )


def _chart(table: Table, runs: Sequence[dict[str, Any]], measure: str, *, title: str) -> Chart:
    labels = [run_label(r) for r in runs]
    if measure == "BPC":
        series = [f"{label} BPC %" for label in labels]
        low = [f"{label} BPC CI low %" for label in labels]
        high = [f"{label} BPC CI high %" for label in labels]
        y_label = "bonus point coverage (%)"
    else:
        series = [f"{label} accuracy %" for label in labels]
        low = [f"{label} CI low %" for label in labels]
        high = [f"{label} CI high %" for label in labels]
        y_label = "accuracy (%)"
    return Chart(
        key=table.key,
        title=title,
        kind="bar",
        table=table.key,
        x="Dimension",
        series=series,
        error_low=low,
        error_high=high,
        y_label=y_label,
    )
