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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.models import QAItem, ToMDimension
from metrics import (
    accuracy_ci_of_counts,
    bonus_point_coverage,
    bonus_point_coverage_ci_of_counts,
    length_ratio,
)
from modeling.pipelines.chartom_qa import (
    REFERENCE,
    STRICT,
    UNJUDGED,
    UNPARSEABLE,
    ResponseScore,
)
from reports import selectors
from reports.chartom_answers import GENERATIVE, MULTICHOICE, RunAnswers, run_answers, run_task
from reports.report_types import Cell, Chart, Report, Table
from reports.tables import (
    N_RESAMPLES,
    chartom_construction,
    pct,
    run_label,
    runs_table,
)

ALL = "All"
UNLABELLED = "(unlabelled)"
UNKNOWN_CONTEXT = "(unknown)"
CONTEXTS = ["0", "1000", "2000"]
DIMENSIONS = [d.value for d in ToMDimension]


def build(report: Report, runs: list[dict[str, Any]], *, seed: int) -> None:
    # Each run as packed (``reports.chartom_answers``); ``runs`` carry their counts.
    packed = run_answers([r["id"] for r in runs], counts={r["id"]: r for r in runs})
    stats = {
        run_id: {"predictions": a.predictions, "unparseable": a.unparseable, "samples": a.samples}
        for run_id, a in packed.items()
    }
    report.tables.append(runs_table(runs, stats))
    tasks = {run["id"]: run_task(packed[run["id"]], run["method"]) for run in runs}
    generative = [r for r in runs if tasks[r["id"]] == GENERATIVE]
    multichoice = [r for r in runs if tasks[r["id"]] == MULTICHOICE]
    labels = selectors.chartom_item_labels()
    answers = {
        run["id"]: _Answers.of(packed[run["id"]], labels, (run["params"] or {}).get("context"))
        for run in runs
    }

    if generative:
        table = _generative_table(generative, answers, seed=seed)
        report.tables.append(table)
        report.tables.append(_reference_table(generative, answers))
        report.charts.append(
            _chart(table, generative, "BPC", title="Bonus point coverage by ToM dimension")
        )
    if multichoice:
        table = _multichoice_table(multichoice, answers, seed=seed)
        report.tables.append(table)
        report.charts.append(
            _chart(table, multichoice, "accuracy", title="Multiple-choice accuracy by dimension")
        )
    if runs:
        report.tables.append(_directness_table(generative, multichoice, answers, seed=seed))
        report.tables.append(_context_table(generative, multichoice, answers, seed=seed))
    # Note checks, qualification and Table 7 (human construction and judgement work).
    chartom_construction.build(report, generative, packed, seed=seed)


def _objects(values: Sequence[Any]) -> np.ndarray:
    """``values`` as a one-dimensional object array, whatever each value is."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


@dataclass(frozen=True)
class _Scored:
    """One scoring mode's verdicts on a run's answers, one entry per answer.

    ``covered`` and ``penalised`` are -1 where that half has no verdict (unjudged, or
    unreadable under strict scoring). Character counts stay Python values, summed as
    ``length_ratio`` sums them, over the answers ``with_lengths`` selects.
    """

    judged: np.ndarray
    covered: np.ndarray
    total: np.ndarray
    penalised: np.ndarray
    unparseable: np.ndarray
    with_lengths: np.ndarray
    response_chars: np.ndarray
    answer_chars: np.ndarray

    @classmethod
    def of(cls, columns: dict[str, list[Any]]) -> _Scored:
        """From a pack's scores, one list per :class:`ResponseScore` field."""
        bonus_status = _objects(columns["bonus_status"])
        defects_status = _objects(columns["defects_status"])
        response_chars, answer_chars = columns["response_chars"], columns["answer_chars"]
        return cls(
            judged=(bonus_status != UNJUDGED) | (defects_status != UNJUDGED),
            covered=np.array([-1 if c is None else c for c in columns["covered"]], dtype=np.int64),
            total=np.array(columns["total"], dtype=np.int64).reshape(len(bonus_status)),
            penalised=np.array(
                [-1 if p is None else p for p in columns["penalised"]], dtype=np.int64
            ),
            unparseable=(bonus_status == UNPARSEABLE) | (defects_status == UNPARSEABLE),
            with_lengths=np.array(
                [
                    r is not None and bool(a)
                    for r, a in zip(response_chars, answer_chars, strict=True)
                ],
                dtype=bool,
            ),
            response_chars=_objects(response_chars),
            answer_chars=_objects(answer_chars),
        )


def _unjudged(n: int) -> dict[str, list[Any]]:
    return {field: [None] * n for field in ResponseScore._fields} | {
        "total": [0] * n,
        "bonus_status": [UNJUDGED] * n,
        "defects_status": [UNJUDGED] * n,
    }


@dataclass(frozen=True)
class _Answers:
    """A run's first-sample answers as arrays, for the tables to count per group.

    Every table groups the same answers (by dimension, directness or context length)
    and counts a few values in each group and run: as arrays, a cell is a few masked
    sums rather than a pass over row dicts, which at 100,000 answers took most of the
    report's build.
    """

    dimension: np.ndarray
    directness: np.ndarray
    context: np.ndarray
    correct: np.ndarray
    strict: _Scored
    reference: _Scored

    @classmethod
    def of(
        cls, answers: RunAnswers, labels: dict[int, tuple[str, str | None]], run_context: Any
    ) -> _Answers:
        """``labels`` is ``selectors.chartom_item_labels()``; ``run_context`` the run's
        context length, for answers that do not name theirs."""
        items = [labels[item] for item in answers.items]
        contexts = [
            context if given else run_context
            for context, given in zip(answers.contexts, answers.context_given, strict=True)
        ]
        return cls(
            dimension=_objects([dimension for dimension, _ in items]),
            directness=_objects([directness or UNLABELLED for _, directness in items]),
            context=_objects([UNKNOWN_CONTEXT if c is None else str(c) for c in contexts]),
            correct=np.array([c is True for c in answers.correct], dtype=bool),
            # A run that is not generative has no verdicts: every answer unjudged.
            strict=_Scored.of(answers.strict or _unjudged(len(items))),
            reference=_Scored.of(answers.reference or _unjudged(len(items))),
        )

    def groups(self, by: str) -> set[Any]:
        """The groups these answers fall in, "All" included (none without answers)."""
        if not len(self.dimension):
            return set()
        if by == "context":
            contexts = set(self.context.tolist())
            return set(zip(self.context.tolist(), self.dimension.tolist(), strict=True)) | {
                (c, ALL) for c in contexts
            }
        return set(getattr(self, by).tolist()) | {ALL}

    def mask(self, by: str, group: Any) -> np.ndarray:
        if by == "context":
            context, dimension = group
            return (self.context == context) & self.mask("dimension", dimension)
        if group == ALL:
            return np.ones(len(self.dimension), dtype=bool)
        return getattr(self, by) == group


def _grouped(
    runs: Sequence[dict[str, Any]],
    answers: dict[int, _Answers],
    by: str,
    order: Callable[[Any], Any],
) -> list[tuple[Any, dict[int, np.ndarray]]]:
    """Each group any of ``runs`` has answers in, in ``order``, with each run's mask."""
    groups: set[Any] = set()
    for run in runs:
        groups |= answers[run["id"]].groups(by)
    return [
        (group, {run["id"]: answers[run["id"]].mask(by, group) for run in runs})
        for group in sorted(sorted(groups), key=order)
    ]


def _dimension_order(group: str) -> tuple[int, str]:
    if group in DIMENSIONS:
        return (DIMENSIONS.index(group), group)
    return (len(DIMENSIONS) + (group == ALL), group)


def _directness_order(group: str) -> tuple[int, str]:
    order = [QAItem.Directness.DIRECT.value, QAItem.Directness.INDIRECT.value, UNLABELLED, ALL]
    return (order.index(group) if group in order else len(order), group)


def _ratio(part: np.ndarray, whole: np.ndarray) -> float | None:
    """sum(part) / sum(whole) in Python numbers, as the metrics compute it (None for 0)."""
    whole_sum = int(whole.sum())
    return int(part.sum()) / whole_sum if whole_sum else None


def _penalty_rate(scored: _Scored, judged: np.ndarray) -> float | None:
    """PR over the judged answers with a defect verdict, as ``metrics.penalty_rate``."""
    penalised = scored.penalised[judged & (scored.penalised >= 0)]
    return int(penalised.sum()) / len(penalised) if len(penalised) else None


def _bpc_cells(scored: _Scored, mask: np.ndarray, *, seed: int, ci: bool = True) -> list[Cell]:
    """n, BPC, its CI (``None`` without ``ci``), PR and unparseable replies, scored strict.

    A reply strict cannot read is never taken as zero points or no defect: that half
    of the response is left out of BPC or PR and counted as unparseable.
    """
    judged = mask & scored.judged
    with_bonus = judged & (scored.covered >= 0)
    covered, total = scored.covered[with_bonus], scored.total[with_bonus]
    if (covered > total).any():  # the metric's own refusal, with its message
        bonus_point_coverage(list(zip(covered.tolist(), total.tolist(), strict=True)))
    low = high = None
    if ci:  # each interval draws with its own generator: leaving one out changes no other
        # Each (covered, total) as one number, in the same order as the pairs sort.
        base = int(total.max(initial=0)) + 1
        kinds, counts = np.unique(covered * base + total, return_counts=True)
        low, high = bonus_point_coverage_ci_of_counts(
            (kinds // base).tolist(),
            (kinds % base).tolist(),
            counts.tolist(),
            n_resamples=N_RESAMPLES,
            seed=seed,
        )
    return [
        int(judged.sum()),
        pct(_ratio(covered, total)),
        pct(low),
        pct(high),
        pct(_penalty_rate(scored, judged)),
        int((judged & scored.unparseable).sum()),
    ]


def _generative_table(runs, answers: dict[int, _Answers], *, seed: int) -> Table:
    rows: list[list[Cell]] = []
    for group, masks in _grouped(runs, answers, "dimension", _dimension_order):
        row: list[Cell] = [group]
        for run in runs:
            row += _bpc_cells(answers[run["id"]].strict, masks[run["id"]], seed=seed)
        rows.append(row)
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


def _reference_cells(scored: _Scored, mask: np.ndarray) -> list[Cell]:
    judged = mask & scored.judged
    with_bonus = judged & (scored.covered >= 0)
    with_lengths = judged & scored.with_lengths
    return [
        int(judged.sum()),
        pct(_ratio(scored.covered[with_bonus], scored.total[with_bonus])),
        pct(_penalty_rate(scored, judged)),
        int((judged & scored.unparseable).sum()),
        _round(
            length_ratio(
                scored.response_chars[with_lengths].tolist(),
                scored.answer_chars[with_lengths].tolist(),
            )
        ),
    ]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _reference_table(runs, answers: dict[int, _Answers]) -> Table:
    rows: list[list[Cell]] = []
    for group, masks in _grouped(runs, answers, "dimension", _dimension_order):
        row: list[Cell] = [group]
        for run in runs:
            row += _reference_cells(answers[run["id"]].reference, masks[run["id"]])
        rows.append(row)
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


def _accuracy_cells(answers: _Answers, mask: np.ndarray, *, seed: int) -> list[Cell]:
    # Unparseable choices are stored as correct=False: they count as wrong here.
    estimate = accuracy_ci_of_counts(
        int(mask.sum()), int((mask & answers.correct).sum()), n_resamples=N_RESAMPLES, seed=seed
    )
    return [estimate.n, pct(estimate.accuracy), pct(estimate.ci_low), pct(estimate.ci_high)]


def _multichoice_table(runs, answers: dict[int, _Answers], *, seed: int) -> Table:
    rows: list[list[Cell]] = []
    for group, masks in _grouped(runs, answers, "dimension", _dimension_order):
        row: list[Cell] = [group]
        for run in runs:
            row += _accuracy_cells(answers[run["id"]], masks[run["id"]], seed=seed)
        rows.append(row)
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


def _directness_table(generative, multichoice, answers: dict[int, _Answers], *, seed: int) -> Table:
    rows: list[list[Cell]] = []
    runs = [*generative, *multichoice]
    for group, masks in _grouped(runs, answers, "directness", _directness_order):
        row: list[Cell] = [group]
        for run in generative:
            scored = answers[run["id"]].strict
            row += _bpc_cells(scored, masks[run["id"]], seed=seed, ci=False)[:2]
        for run in multichoice:
            row += _accuracy_cells(answers[run["id"]], masks[run["id"]], seed=seed)[:2]
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


def _context_table(generative, multichoice, answers: dict[int, _Answers], *, seed: int) -> Table:
    rows: list[list[Cell]] = []
    runs = [*generative, *multichoice]
    for group, masks in _grouped(runs, answers, "context", _context_order):
        row: list[Cell] = list(group)
        for run in generative:
            scored = answers[run["id"]].strict
            n, bpc, _, _, pr, unparseable = _bpc_cells(
                scored, masks[run["id"]], seed=seed, ci=False
            )
            row += [n, bpc, pr, unparseable]
        for run in multichoice:
            row += _accuracy_cells(answers[run["id"]], masks[run["id"]], seed=seed)[:2]
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
