"""DynToM tables: Table 3, accuracy by time span (Tables 4-5) and Figure 3.

- ``accuracy`` (Table 3): per run, accuracy by mental state x Understanding /
  Transformation, overall with a 95% CI (bootstrap over stages), unparseable answers
  counted separately (and as wrong);
- ``accuracy-sd``: the standard deviation of every cell across samples, for runs that
  answered several times (cells of ``accuracy`` are then means over samples);
- ``by-question-type``: Understanding and Transformation-1/2/3;
- ``time-span`` (Figure 4, line chart) and ``time-span-by-length`` (Table 4): accuracy of
  transformation questions per span of consecutive scenarios;
- ``compositional`` (Figure 3): fully correct / local / restoration / full errors.

Runs are compared on the same questions only: those every selected run answered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from benchmarks.models import DynToMQuestion
from reports import selectors
from reports.metrics import (
    DynToMOutcome,
    accuracy,
    accuracy_ci,
    compositional_analysis,
    mean_sd,
    time_span_accuracy,
)
from reports.report_types import Cell, Chart, Report, Table
from reports.tables import N_RESAMPLES, pct, prediction_stats, run_label, runs_table

STATES = ("belief", "emotion", "intention", "action")
UNDERSTANDING = DynToMQuestion.QuestionType.UNDERSTANDING.value
QUESTION_TYPES = [(t.value, t.label) for t in DynToMQuestion.QuestionType]
CELLS = [(state, kind) for state in STATES for kind in ("U", "T")]
CELL_COLUMNS = [f"{state.title()} {kind} %" for state, kind in CELLS]
COMPOSITIONAL = (
    ("fully_correct", "Fully correct %"),
    ("local_error", "Local error %"),
    ("restoration_error", "Restoration error %"),
    ("full_error", "Full error %"),
)


def table3_cell(question_type: str, mental_state: str) -> tuple[str, str] | None:
    """The (state, U|T) cell of Table 3 a question counts in, or ``None``.

    An influence question ("how does belief&emotion influence intention") is about its
    target state, the one after ``->``: that is the state whose change it explains.
    """
    state = (mental_state or "").rsplit("->", 1)[-1].strip()
    if state not in STATES:
        return None
    return state, "U" if question_type == UNDERSTANDING else "T"


def build(report: Report, runs: list[dict[str, Any]], *, seed: int) -> None:
    predictions = list(selectors.dyntom_prediction_rows([r["id"] for r in runs]))
    report.tables.append(runs_table(runs, prediction_stats(predictions)))
    answered: dict[int, set[int]] = {r["id"]: set() for r in runs}
    for p in predictions:
        answered[p["run_id"]].add(p["question_id"])
    shared = set.intersection(*answered.values()) if runs else set()
    rows = [p for p in predictions if p["question_id"] in shared]
    by_run: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for p in rows:
        by_run[p["run_id"]].append(p)
    questions = {p["question_id"]: p for p in rows}
    total = report.facts.get("questions", 0)
    scope = (
        f"Questions every selected run answered: {len(shared)} of {total}."
        if len(runs) > 1
        else f"Questions answered: {len(shared)} of {total}."
    )
    report.facts["compared_questions"] = len(shared)

    report.tables.append(_accuracy_table(runs, by_run, len(shared), scope, seed=seed))
    report.charts.append(
        Chart(
            key="accuracy",
            title="Overall accuracy (95% CI)",
            kind="bar",
            table="accuracy",
            x="System",
            series=["Overall %"],
            error_low=["CI low %"],
            error_high=["CI high %"],
            y_label="accuracy (%)",
        )
    )
    if any(_samples(by_run[r["id"]]) > 1 for r in runs):
        report.tables.append(_sd_table(runs, by_run, scope))
    report.tables.append(_type_table(runs, by_run, scope))
    report.charts.append(
        Chart(
            key="by-question-type",
            title="Accuracy by question type",
            kind="bar",
            table="by-question-type",
            x="System",
            series=[f"{label} %" for _, label in QUESTION_TYPES],
            y_label="accuracy (%)",
        )
    )
    report.tables.append(_time_span_table(runs, by_run, questions.values(), scope, seed=seed))
    report.charts.append(
        Chart(
            key="time-span",
            title="Transformation accuracy by time span",
            kind="line",
            table="time-span",
            x="Span start",
            series=[f"{run_label(r)} %" for r in runs],
            y_label="accuracy (%)",
        )
    )
    report.tables.append(_time_span_length_table(runs, by_run, scope, seed=seed))
    report.tables.append(_compositional_table(runs, by_run, scope))
    report.charts.append(
        Chart(
            key="compositional",
            title="Compositional analysis of transformation answers",
            kind="bar",
            table="compositional",
            x="Group",
            series=[column for _, column in COMPOSITIONAL],
            y_label="share of primary questions (%)",
        )
    )


def _samples(predictions: Iterable[dict[str, Any]]) -> int:
    return len({p["sample_index"] for p in predictions})


def _by_sample(predictions: Iterable[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    samples: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for p in predictions:
        samples[p["sample_index"]].append(p)
    return dict(sorted(samples.items()))


def _correct(p: dict[str, Any]) -> bool:
    # Unparseable/refused/missing answers are stored as False: wrong, never dropped.
    return p["correct"] is True


def _cell_accuracies(predictions: Sequence[dict[str, Any]]) -> dict[Any, float | None]:
    """One sample's accuracy per Table 3 cell, per question type, and overall."""
    groups: dict[Any, list[bool]] = defaultdict(list)
    for p in predictions:
        outcome = _correct(p)
        cell = table3_cell(p["question_type"], p["mental_state"])
        if cell is not None:
            groups[cell].append(outcome)
        groups[p["question_type"]].append(outcome)
        groups["overall"].append(outcome)
    return {key: accuracy(values) for key, values in groups.items()}


def _mean_sd_cells(
    predictions: Sequence[dict[str, Any]],
) -> dict[Any, tuple[float | None, float | None]]:
    """Mean and sd over samples of every cell (a single sample has sd ``None``)."""
    per_sample = [_cell_accuracies(s) for s in _by_sample(predictions).values()]
    keys = {k for cells in per_sample for k in cells}
    return {k: mean_sd([cells.get(k) for cells in per_sample]) for k in keys}


def _accuracy_table(runs, by_run, shared: int, scope: str, *, seed: int) -> Table:
    rows: list[list[Cell]] = []
    for run in runs:
        predictions = by_run[run["id"]]
        cells = _mean_sd_cells(predictions)
        estimate = accuracy_ci(
            [_correct(p) for p in predictions],
            clusters=[p["stage_id"] for p in predictions],
            n_resamples=N_RESAMPLES,
            seed=seed,
        )
        unparseable = sum(p["parse_status"] != "ok" for p in predictions)
        overall_mean, overall_sd = cells.get("overall", (None, None))
        rows.append(
            [
                run_label(run),
                run["model"],
                run["method"],
                _samples(predictions),
                shared,
                *(pct(cells.get(cell, (None, None))[0]) for cell in CELLS),
                pct(overall_mean),
                pct(estimate.ci_low),
                pct(estimate.ci_high),
                pct(overall_sd),
                unparseable,
                pct(unparseable / len(predictions)) if predictions else None,
            ]
        )
    return Table(
        key="accuracy",
        title="Accuracy by mental state and question type (U: understanding, T: transformation)",
        columns=[
            "System",
            "Model",
            "Method",
            "Samples",
            "Questions",
            *CELL_COLUMNS,
            "Overall %",
            "CI low %",
            "CI high %",
            "Overall sd %",
            "Unparseable",
            "Unparseable %",
        ],
        rows=rows,
        note=(
            f"{scope} With several samples a cell is the mean over samples and 'Overall sd' "
            "their standard deviation. 95% CI: percentile bootstrap over stages (all "
            "samples of a stage together). Unparseable answers count as wrong. Influence "
            "questions count under the state they explain (after '->')."
        ),
    )


def _sd_table(runs, by_run, scope: str) -> Table:
    rows: list[list[Cell]] = []
    for run in runs:
        predictions = by_run[run["id"]]
        cells = _mean_sd_cells(predictions)
        rows.append(
            [
                run_label(run),
                _samples(predictions),
                *(pct(cells.get(cell, (None, None))[1]) for cell in CELLS),
                pct(cells.get("overall", (None, None))[1]),
            ]
        )
    return Table(
        key="accuracy-sd",
        title="Standard deviation across samples",
        columns=["System", "Samples", *CELL_COLUMNS, "Overall %"],
        rows=rows,
        note=f"{scope} Sample standard deviation (n - 1) of each cell's accuracy.",
    )


def _type_table(runs, by_run, scope: str) -> Table:
    rows: list[list[Cell]] = []
    for run in runs:
        cells = _mean_sd_cells(by_run[run["id"]])
        rows.append(
            [run_label(run), *(pct(cells.get(t, (None, None))[0]) for t, _ in QUESTION_TYPES)]
        )
    return Table(
        key="by-question-type",
        title="Accuracy by question type",
        columns=["System", *(f"{label} %" for _, label in QUESTION_TYPES)],
        rows=rows,
        note=f"{scope} Means over samples.",
    )


def _outcomes(predictions: Iterable[dict[str, Any]], *, per_sample: bool) -> list[DynToMOutcome]:
    return [
        DynToMOutcome(
            stage=(p["sample_index"], p["stage_id"]) if per_sample else p["stage_id"],
            question_type=p["question_type"],
            mental_state=p["mental_state"],
            scenario_from=p["scenario_from"],
            scenario_to=p["scenario_to"],
            correct=_correct(p),
            scenario_count=p["scenario_count"],
        )
        for p in predictions
    ]


def _time_span_table(runs, by_run, questions, scope: str, *, seed: int) -> Table:
    # Pooled over stage lengths: span 1-2 of a 5- and of a 7-scenario stage together.
    spans: dict[tuple[int, int], dict[int, float | None]] = defaultdict(dict)
    for run in runs:
        outcomes = [
            replace(o, scenario_count=None) for o in _outcomes(by_run[run["id"]], per_sample=False)
        ]
        for span in time_span_accuracy(outcomes, n_resamples=N_RESAMPLES, seed=seed):
            key = (span.scenario_from, span.scenario_to)
            spans[key][run["id"]] = span.estimate.accuracy
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for q in questions:
        first, last = q["scenario_from"], q["scenario_to"]
        if q["question_type"] != UNDERSTANDING and first is not None and last == first + 1:
            counts[(first, last)] += 1
    rows: list[list[Cell]] = [
        [f"{first}-{last}", first, counts[(first, last)]]
        + [pct(spans[(first, last)].get(run["id"])) for run in runs]
        for first, last in sorted(spans)
    ]
    return Table(
        key="time-span",
        title="Transformation accuracy by time span",
        columns=["Span", "Span start", "Questions", *(f"{run_label(r)} %" for r in runs)],
        rows=rows,
        note=(
            f"{scope} Transformation questions about two consecutive scenarios (span k-(k+1)), "
            "stages of every length pooled; all samples pooled."
        ),
    )


def _time_span_length_table(runs, by_run, scope: str, *, seed: int) -> Table:
    results = {
        run["id"]: time_span_accuracy(
            _outcomes(by_run[run["id"]], per_sample=False), n_resamples=N_RESAMPLES, seed=seed
        )
        for run in runs
    }
    span_keys = sorted({(s.scenario_from, s.scenario_to) for r in results.values() for s in r})
    lengths = sorted({s.scenario_count for r in results.values() for s in r}, key=lambda c: c or 0)
    rows: list[list[Cell]] = []
    for run in runs:
        table = {(s.scenario_count, s.scenario_from, s.scenario_to): s for s in results[run["id"]]}
        for length in lengths:
            cells = [table.get((length, *key)) for key in span_keys]
            if not any(cells):
                continue
            rows.append(
                [run_label(run), length] + [pct(c.estimate.accuracy) if c else None for c in cells]
            )
    return Table(
        key="time-span-by-length",
        title="Transformation accuracy by time span and number of scenarios",
        columns=["System", "Scenarios", *(f"{a}-{b} %" for a, b in span_keys)],
        rows=rows,
        note=f"{scope} Empty where a stage of that length has no such span.",
    )


def _compositional_table(runs, by_run, scope: str) -> Table:
    rows: list[list[Cell]] = []
    for run in runs:
        analysis = compositional_analysis(_outcomes(by_run[run["id"]], per_sample=True))
        groups = [*analysis.by_state.items(), ("all", analysis.overall)]
        for state, counts in groups:
            shares = counts.shares()
            rows.append(
                [
                    f"{run_label(run)} · {state}",
                    run_label(run),
                    state,
                    counts.total,
                    *(pct(shares[name]) for name, _ in COMPOSITIONAL),
                    counts.incomplete,
                ]
            )
    return Table(
        key="compositional",
        title="Compositional analysis of transformation questions",
        columns=[
            "Group",
            "System",
            "Mental state",
            "Questions",
            *(column for _, column in COMPOSITIONAL),
            "Incomplete",
        ],
        rows=rows,
        note=(
            f"{scope} Each transformation question (C) against the understanding questions "
            "(D) of the states it names in the scenarios it covers: fully correct = C and "
            "all D right; local error = all D right, C wrong; restoration error = C right, "
            "some D wrong; full error = both wrong. Incomplete: some D not answered "
            "(left out). All samples pooled."
        ),
    )
