"""DynToM tables: Table 3, accuracy by time span (Tables 4-5) and Figure 3.

- ``accuracy`` (Table 3): per run, accuracy by mental state x Understanding /
  Transformation, overall with a 95% CI (bootstrap over stages), unparseable answers
  counted separately (and as wrong);
- ``accuracy-sd``: the standard deviation of every cell across samples, for runs that
  answered several times (cells of ``accuracy`` are then means over samples; with
  ``samples="first"`` only each run's first sample counts, everywhere, and there is
  no such table);
- ``by-question-type``: Understanding and Transformation-1/2/3;
- ``time-span`` (Figure 4, line chart) and ``time-span-by-length`` (Table 4): accuracy of
  transformation questions per span of consecutive scenarios;
- ``compositional`` (Figure 3): fully correct / local / restoration / full errors.

Each run is scored on every question it answered (its own set), so a run on other stages
or one still queued leaves the others' numbers alone; ``accuracy-common`` (with two runs
or more) compares them on the questions every run with an answer answered, and says
how many there are. Everything is counted from each run's packed outcomes and the
question bank's arrays (``reports.dyntom_outcomes``), never from prediction rows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from benchmarks.models import DynToMQuestion
from metrics import (
    CompositionalAnalysis,
    OutcomeColumns,
    cluster_accuracy_cis,
    compositional_analyses,
    first_seen_codes,
    mean_sd,
    time_span_accuracy,
)
from metrics.dyntom import QUESTION_TYPE_CODES
from reports.dyntom_outcomes import QuestionBank, RunOutcomes, question_bank, run_outcomes
from reports.report_types import SAMPLES_FIRST, SAMPLES_MEAN, Cell, Chart, Report, Table
from reports.tables import (
    N_RESAMPLES,
    first_samples_note,
    pct,
    run_label,
    runs_table,
    single_unit_note,
    single_unit_rows,
    unparsed_note,
)

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


@dataclass(frozen=True)
class _Answers:
    """One run's answers to the compared questions, in prediction id order.

    ``row`` is each answer's question as a row of the question bank; ``correct`` is a
    bool (unparseable, refused and missing answers are stored as False or null: wrong,
    never dropped).
    """

    row: np.ndarray
    sample: np.ndarray
    correct: np.ndarray
    parsed: np.ndarray

    @cached_property
    def samples(self) -> list[int]:
        """The sample indexes present (read by several tables: counted once)."""
        # Sample indexes are small: a count per index beats sorting the answers.
        return np.flatnonzero(np.bincount(self.sample)).tolist()


@dataclass(frozen=True)
class _Compared:
    """Each run's own answers, and the common set: ``shared`` marks the bank rows every
    run with an answer answered (a run without any is left out rather than emptying it),
    ``answered`` those any run answered; ``common`` holds each run's answers on
    ``shared``."""

    own: dict[int, _Answers]
    common: dict[int, _Answers]
    shared: np.ndarray
    answered: np.ndarray


def _compared(
    runs: list[dict[str, Any]], packed: dict[int, RunOutcomes], bank: QuestionBank
) -> _Compared:
    rows = {r["id"]: bank.positions(packed[r["id"]].question) for r in runs}
    answered_by = np.zeros(len(bank.ids), dtype=np.int64)
    with_answers = 0
    for positions in rows.values():
        answered = np.zeros(len(bank.ids), dtype=bool)
        answered[positions] = True  # once per question, however many samples
        answered_by += answered
        with_answers += bool(len(positions))
    shared = (answered_by == with_answers) & (answered_by > 0)
    own, common = {}, {}
    for run in runs:
        p, positions = packed[run["id"]], rows[run["id"]]
        own[run["id"]] = _Answers(
            row=positions, sample=p.sample, correct=p.correct == 1, parsed=p.parsed
        )
        keep = shared[positions]
        common[run["id"]] = _Answers(
            row=positions[keep],
            sample=p.sample[keep],
            correct=p.correct[keep] == 1,
            parsed=p.parsed[keep],
        )
    return _Compared(own, common, shared, answered_by > 0)


def build(
    report: Report, runs: list[dict[str, Any]], *, seed: int, samples: str = SAMPLES_MEAN
) -> None:
    """Fill ``report`` for ``runs``: every sample of each, or its first with
    ``samples="first"`` (the runs table counts every sample either way)."""
    packed = run_outcomes([r["id"] for r in runs], counts={r["id"]: r for r in runs})
    stats = {
        run_id: {
            "predictions": len(p),
            "unparseable": int((~p.parsed).sum()),
            "samples": len(np.flatnonzero(np.bincount(p.sample))),
        }
        for run_id, p in packed.items()
        if len(p)
    }
    report.tables.append(runs_table(runs, stats))
    first_only = samples == SAMPLES_FIRST
    if first_only:
        packed = {run_id: p.first_sample() for run_id, p in packed.items()}
    bank = question_bank()
    compared = _compared(runs, packed, bank)
    by_run = compared.own
    shared = int(compared.shared.sum())
    total = report.facts.get("questions", 0)
    scope = (
        f"Each run on every question it answered (Questions); any run answered "
        f"{int(compared.answered.sum())} of {total}."
    )
    # How the notes name the samples read: all of them, or the first alone.
    pooled = "first sample only" if first_only else "all samples pooled"
    report.facts["compared_questions"] = shared
    # Each bank row's Table 3 cell, for every run's answers and the common set's.
    cell_codes = _cell_codes(bank)
    cells = {r["id"]: _mean_sd_cells(by_run[r["id"]], cell_codes, bank) for r in runs}

    report.tables.append(
        _accuracy_table(runs, by_run, cells, bank, None, scope, seed=seed, samples=samples)
    )
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
    if len(runs) > 1:
        report.tables.append(
            _common_table(
                runs, compared, bank, cell_codes, total, stats, seed=seed, samples=samples
            )
        )
    if any(len(by_run[r["id"]].samples) > 1 for r in runs):
        report.tables.append(_sd_table(runs, by_run, cells, scope))
    report.tables.append(_type_table(runs, cells, scope, first_only=first_only))
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
    spans = _span_results(runs, by_run, bank)
    report.tables.append(_time_span_table(runs, spans, bank, compared.answered, scope, pooled))
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
    report.tables.append(_time_span_length_table(runs, spans, scope))
    report.tables.append(_compositional_table(runs, by_run, bank, scope, pooled))
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


def _cell_codes(bank: QuestionBank) -> np.ndarray:
    """Each bank row's Table 3 cell as an index into ``CELLS`` (-1: none)."""
    understanding = QUESTION_TYPE_CODES.index(UNDERSTANDING)
    by_label = np.array(
        [
            -1 if (cell := table3_cell(UNDERSTANDING, label)) is None else STATES.index(cell[0])
            for label in bank.labels
        ]
        or [-1],
        dtype=np.int64,
    )
    state = by_label[bank.mental_state]
    return np.where(state >= 0, 2 * state + (bank.question_type != understanding), -1)


def _mean_sd_cells(
    answers: _Answers, cell_codes: np.ndarray, bank: QuestionBank
) -> dict[Any, tuple]:
    """Mean and sd over samples of every cell, question type and overall accuracy.

    ``cell_codes`` is ``_cell_codes(bank)``. Each sample's accuracy per group is
    counted with ``bincount``; a group a sample has no answer in is left out of that
    sample (as ``accuracy`` of nothing).
    """
    cell = cell_codes[answers.row]
    kind = bank.question_type[answers.row]
    per_sample: list[dict[Any, float]] = []
    for sample in answers.samples:
        if len(answers.samples) == 1:  # every answer is of this sample: nothing to pick
            right, picked_cells, picked_kinds = answers.correct, cell, kind
        else:
            chosen = answers.sample == sample
            right, picked_cells, picked_kinds = (
                answers.correct[chosen],
                cell[chosen],
                kind[chosen],
            )
        accuracies: dict[Any, float] = {}
        for keys, codes in ((CELLS, picked_cells), (QUESTION_TYPE_CODES, picked_kinds)):
            known = codes >= 0
            n = np.bincount(codes[known], minlength=len(keys)).tolist()
            hits = np.bincount(codes[known], weights=right[known], minlength=len(keys))
            for key, count, hit in zip(keys, n, hits.tolist(), strict=True):
                if count:
                    accuracies[key] = int(hit) / count
        accuracies["overall"] = int(right.sum()) / int(right.size)
        per_sample.append(accuracies)
    keys = {k for cells in per_sample for k in cells}
    return {k: mean_sd([cells.get(k) for cells in per_sample]) for k in keys}


def _common_table(
    runs,
    compared: _Compared,
    bank: QuestionBank,
    cell_codes: np.ndarray,
    total: int,
    stats: dict[int, dict[str, int]],
    *,
    seed: int,
    samples: str,
) -> Table:
    """The accuracy table on the common set (empty, and saying so, when there is none)."""
    shared = int(compared.shared.sum())
    silent = [run_label(r) for r in runs if not len(compared.own[r["id"]].row)]
    left_out = f" Without any answer, left out of it: {', '.join(silent)}." if silent else ""
    cells = {r["id"]: _mean_sd_cells(compared.common[r["id"]], cell_codes, bank) for r in runs}
    left_out += unparsed_note(runs, stats)
    scope = f"Questions every run with an answer answered: {shared} of {total}.{left_out}"
    table = _accuracy_table(
        runs, compared.common, cells, bank, shared, scope, seed=seed, samples=samples
    )
    table.key = "accuracy-common"
    table.title = f"Common set: accuracy on the {shared} questions every run answered"
    table.alert = unparsed_note(runs, stats).strip()
    if not shared:
        # Short enough for the page to show it in full (longer notes fold away).
        table.rows = []
        table.no_interval = {}
        table.note = (
            "Common set: empty. No question was answered by every run; each run's own "
            "accuracy is in the table above." + left_out
        )
    return table


def _accuracy_table(
    runs, by_run, cells, bank, shared: int | None, scope: str, *, seed: int, samples: str
) -> Table:
    """Table 3 per run over ``by_run``; Questions: ``shared``, or (None) each run's own."""
    several = (
        first_samples_note(samples)
        if samples == SAMPLES_FIRST
        else " With several samples a cell is the mean over samples and 'Overall sd' their "
        "standard deviation."
    )
    rows: list[list[Cell]] = []
    single: list[str] = []
    clusters = []
    for run in runs:
        answers: _Answers = by_run[run["id"]]
        # Stages numbered as first met in prediction id order, as the bootstrap always has.
        stages = first_seen_codes(bank.stage[answers.row])
        clusters.append(
            (np.bincount(stages), np.bincount(stages, weights=answers.correct).astype(np.int64))
        )
    # Every run's interval at once: runs over as many stages share one product.
    estimates = cluster_accuracy_cis(clusters, n_resamples=N_RESAMPLES, seed=seed)
    for run, estimate in zip(runs, estimates, strict=True):
        answers = by_run[run["id"]]
        if estimate.units == 1:
            single.append(run_label(run))
        unparseable = int((~answers.parsed).sum())
        overall_mean, overall_sd = cells[run["id"]].get("overall", (None, None))
        rows.append(
            [
                run_label(run),
                run["model"],
                run["method"],
                len(answers.samples),
                shared if shared is not None else _distinct(answers.row),
                *(pct(cells[run["id"]].get(cell, (None, None))[0]) for cell in CELLS),
                pct(overall_mean),
                pct(estimate.ci_low),
                pct(estimate.ci_high),
                pct(overall_sd),
                unparseable,
                pct(unparseable / len(answers.row)) if len(answers.row) else None,
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
            f"{scope}{several} 95% CI: percentile bootstrap over stages (all "
            "samples of a stage together). Unparseable answers count as wrong. Influence "
            "questions count under the state they explain (after '->')."
            + single_unit_note(single, "stage")
        ),
        no_interval=single_unit_rows(single, "stage"),
    )


def _distinct(rows: np.ndarray) -> int:
    """How many different bank rows ``rows`` holds (a count per row: no sort)."""
    return int(np.count_nonzero(np.bincount(rows))) if rows.size else 0


def _sd_table(runs, by_run, cells, scope: str) -> Table:
    rows: list[list[Cell]] = []
    for run in runs:
        run_cells = cells[run["id"]]
        rows.append(
            [
                run_label(run),
                len(by_run[run["id"]].samples),
                *(pct(run_cells.get(cell, (None, None))[1]) for cell in CELLS),
                pct(run_cells.get("overall", (None, None))[1]),
            ]
        )
    return Table(
        key="accuracy-sd",
        title="Standard deviation across samples",
        columns=["System", "Samples", *CELL_COLUMNS, "Overall %"],
        rows=rows,
        note=f"{scope} Sample standard deviation (n - 1) of each cell's accuracy.",
    )


def _type_table(runs, cells, scope: str, *, first_only: bool) -> Table:
    rows: list[list[Cell]] = []
    for run in runs:
        run_cells = cells[run["id"]]
        rows.append(
            [run_label(run), *(pct(run_cells.get(t, (None, None))[0]) for t, _ in QUESTION_TYPES)]
        )
    return Table(
        key="by-question-type",
        title="Accuracy by question type",
        columns=["System", *(f"{label} %" for _, label in QUESTION_TYPES)],
        rows=rows,
        note=f"{scope} {'First sample only' if first_only else 'Means over samples'}.",
    )


def _columns(answers: _Answers, bank: QuestionBank, *, per_sample: bool) -> OutcomeColumns:
    """A run's answers as the metrics' outcome columns (stage per sample when asked)."""
    stage = bank.stage[answers.row]
    if per_sample:
        stage = answers.sample * (int(bank.stage.max(initial=0)) + 1) + stage
    return OutcomeColumns(
        stage=stage,
        question_type=bank.question_type[answers.row],
        mental_state=bank.mental_state[answers.row],
        labels=bank.labels,
        scenario_from=bank.scenario_from[answers.row],
        scenario_to=bank.scenario_to[answers.row],
        correct=answers.correct.astype(np.int64),
        scenario_count=bank.scenario_count[answers.row],
    )


def _span_results(runs, by_run, bank: QuestionBank) -> dict[int, list]:
    """Each run's transformation accuracy per (stage length, span), samples pooled."""
    return {
        run["id"]: time_span_accuracy(
            _columns(by_run[run["id"]], bank, per_sample=False), interval=False
        )
        for run in runs
    }


def _time_span_table(
    runs, results, bank: QuestionBank, shared: np.ndarray, scope: str, pooled: str
) -> Table:
    # Pooled over stage lengths: span 1-2 of a 5- and of a 7-scenario stage together,
    # i.e. their right answers over their answers.
    totals: dict[tuple[int, int], dict[int, tuple[int, int]]] = defaultdict(dict)
    for run in runs:
        for span in results[run["id"]]:
            key = (span.scenario_from, span.scenario_to)
            n, right = totals[key].get(run["id"], (0, 0))
            totals[key][run["id"]] = (n + span.estimate.n, right + span.estimate.correct)
    spans = {
        key: {run_id: right / n for run_id, (n, right) in per_run.items()}
        for key, per_run in totals.items()
    }
    first, last = bank.scenario_from[shared], bank.scenario_to[shared]
    consecutive = (
        (bank.question_type[shared] != QUESTION_TYPE_CODES.index(UNDERSTANDING))
        & (first >= 0)
        & (last == first + 1)
    )
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for start, n in zip(*np.unique(first[consecutive], return_counts=True), strict=True):
        counts[(int(start), int(start) + 1)] = int(n)
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
            f"stages of every length pooled; {pooled}."
        ),
    )


def _time_span_length_table(runs, results, scope: str) -> Table:
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


def _compositional_analyses(runs, by_run, bank: QuestionBank) -> dict[int, CompositionalAnalysis]:
    """Each run's Figure 3 counts: runs that answered the same questions the same
    number of times (a report's runs on one question set) are analysed together, so
    the questions' dependencies are worked out once for all of them."""
    groups: list[tuple[_Answers, list[int]]] = []
    for run in runs:
        answers: _Answers = by_run[run["id"]]
        for first, members in groups:
            if np.array_equal(first.row, answers.row) and np.array_equal(
                first.sample, answers.sample
            ):
                members.append(run["id"])
                break
        else:
            groups.append((answers, [run["id"]]))
    analyses: dict[int, CompositionalAnalysis] = {}
    for first, members in groups:
        results = compositional_analyses(
            _columns(first, bank, per_sample=True),
            [by_run[run_id].correct.astype(np.int64) for run_id in members],
        )
        analyses.update(zip(members, results, strict=True))
    return analyses


def _compositional_table(runs, by_run, bank: QuestionBank, scope: str, pooled: str) -> Table:
    rows: list[list[Cell]] = []
    analyses = _compositional_analyses(runs, by_run, bank)
    for run in runs:
        analysis = analyses[run["id"]]
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
            f"(left out). {pooled.capitalize()}."
        ),
    )
