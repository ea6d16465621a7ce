"""Human multiple-choice studies beside the model runs on the same items.

CharToM-QA (paper Table 3):
- ``human-table3``: accuracy of people who had read the book and of people who had not,
  with the short plot window (c = 0, their first answer) and after the long one (c = 2k,
  their final answer), on all study questions and on the indirect ones; below them each
  multiple-choice run on the same questions at its context (0 or 2000 tokens);
- ``human-by-dimension``: the same groups by ToM dimension.

DynToM (paper Table 3's human row):
- ``human-participants``: each participant's accuracy by mental state x U/T;
- ``human-vs-models``: the mean ± sd across participants beside each run on the same
  questions.

Withdrawn participants, unfinished assignments and practice or attention items are left
out, excluded participants too unless the report includes them (``human_choice_rows``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from benchmarks.models import ToMDimension
from metrics import accuracy, accuracy_ci, mean_sd
from reports import selectors
from reports.report_types import Cell, Report, Table
from reports.tables import N_RESAMPLES, excluded_note, pct, run_label
from reports.tables.dyntom import CELL_COLUMNS, CELLS, table3_cell

DIMENSIONS = [d.value for d in ToMDimension]
READ, NOT_READ = "Humans who had read the book", "Humans who had not"
WINDOWS = (("0", 1, "c=0"), ("2000", 2, "c=2k"))


def build(
    report: Report,
    runs: list[dict[str, Any]],
    studies: list[dict[str, Any]],
    *,
    seed: int,
    include_excluded: bool = False,
) -> None:
    """Add the human tables when the report covers multiple-choice studies with answers."""
    rows = list(
        selectors.human_choice_rows([s["id"] for s in studies], include_excluded=include_excluded)
    )
    if not rows:
        return
    excluded = excluded_note(studies, include_excluded=include_excluded)
    report.facts["human_answers"] = len(rows)
    report.facts["participants"] = len({r["participant_id"] for r in rows})
    if report.benchmark == "chartom-qa":
        _chartom(report, runs, rows, seed=seed, excluded=excluded)
    else:
        _dyntom(report, runs, rows, excluded=excluded)


def _estimate(outcomes: list[bool | None], clusters: list[Any], *, seed: int) -> list[Cell]:
    if not outcomes:
        return [0, None, None, None]
    e = accuracy_ci(outcomes, clusters=clusters, n_resamples=N_RESAMPLES, seed=seed)
    return [e.n, pct(e.accuracy), pct(e.ci_low), pct(e.ci_high)]


def _model_picks(runs: list[dict[str, Any]], items: set[int]) -> dict[tuple[int, str], list]:
    """First-sample multiple-choice predictions on ``items``, per (run, context)."""
    out: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    params = {r["id"]: (r["params"] or {}) for r in runs}
    methods = {r["id"]: r["method"] for r in runs}
    for p in selectors.chartom_prediction_rows(list(params)):
        details = p["details"] or {}
        task = details.get("task") or methods[p["run_id"]]
        if p["sample_index"] or p["item_id"] not in items or task == "generative":
            continue
        context = str(details.get("context", params[p["run_id"]].get("context", "0")))
        out[(p["run_id"], context)].append({**p, "correct": bool(p["correct"])})
    return out


def _by_dimension(picks: list[dict[str, Any]]) -> list[Cell]:
    return [pct(accuracy([p["correct"] for p in picks if p["dimension"] == d])) for d in DIMENSIONS]


def _chartom(report: Report, runs, rows, *, seed: int, excluded: str) -> None:
    items = {r["qa_item_id"] for r in rows}
    indirect = {r["qa_item_id"] for r in rows if r["directness"] == "indirect"}
    labelled = {r["qa_item_id"] for r in rows if r["directness"]}
    groups: list[tuple[str, Callable[[dict], bool], str]] = [
        (READ, lambda r: r["seen"], "human"),
        (NOT_READ, lambda r: not r["seen"], "human"),
    ]
    table_rows: list[list[Cell]] = []
    by_dimension: list[list[Cell]] = []

    def cells(picks: Iterable[dict[str, Any]], key: str) -> list[Cell]:
        picks = list(picks)
        out: list[Cell] = []
        for subset in (items, indirect):
            chosen = [p for p in picks if p[key] in subset]
            out += _estimate([p["correct"] for p in chosen], [p[key] for p in chosen], seed=seed)
        return out

    for label, keep, _ in groups:
        for _context, round_, window in WINDOWS:
            picks = [r for r in rows if keep(r) and r["round"] == round_]
            table_rows.append([label, window, *cells(picks, "qa_item_id")])
            by_dimension.append([label, window, *_by_dimension(picks)])
    models = _model_picks(runs, items)
    by_run = {r["id"]: r for r in runs}
    for (run_id, context), picks in sorted(models.items()):
        window = {"0": "c=0", "1000": "c=1k", "2000": "c=2k"}.get(context, f"c={context}")
        label = f"{run_label(by_run[run_id])} ({by_run[run_id]['model']})"
        table_rows.append([label, window, *cells(picks, "item_id")])
        by_dimension.append([label, window, *_by_dimension(picks)])
    columns = ["System", "Window"]
    for subset in ("All", "Indirect"):
        columns += [f"{subset} n", f"{subset} %", f"{subset} CI low %", f"{subset} CI high %"]
    report.tables.append(
        Table(
            key="human-table3",
            title="Human study: read the book or not, c = 0 then c = 2k, beside models (Table 3)",
            columns=columns,
            rows=table_rows,
            note=(
                f"The study's {len(items)} questions answered by people "
                f"({len(labelled)} labelled direct/indirect, {len(indirect)} indirect). "
                "People's c = 0 is their first answer, c = 2k their final one after the "
                "longer passage. Models: multiple-choice runs on the same questions at their "
                "plot window, first sample. 95% CI: percentile bootstrap over questions." + excluded
            ),
        )
    )
    report.tables.append(
        Table(
            key="human-by-dimension",
            title="Human study by ToM dimension",
            columns=["System", "Window", *(f"{d.title()} %" for d in DIMENSIONS)],
            rows=by_dimension,
            note="Same answers as the table above, split by the question's ToM dimension.",
        )
    )


def _cell_accuracies(picks: list[dict[str, Any]]) -> dict[Any, float | None]:
    groups: dict[Any, list[bool | None]] = defaultdict(list)
    for p in picks:
        cell = table3_cell(p["question_type"] or "", p["mental_state"] or "")
        if cell is not None:
            groups[cell].append(p["correct"])
        groups["overall"].append(p["correct"])
    return {k: accuracy(v) for k, v in groups.items()}


def _dyntom(report: Report, runs, rows, *, excluded: str) -> None:
    by_person: dict[int, list[dict[str, Any]]] = defaultdict(list)
    names: dict[int, str] = {}
    for r in rows:
        by_person[r["participant_id"]].append(r)
        names[r["participant_id"]] = r["participant"] or f"participant {r['participant_id']}"
    people = []
    person_rows: list[list[Cell]] = []
    for pid, picks in sorted(by_person.items()):
        cells = _cell_accuracies(picks)
        people.append(cells)
        person_rows.append(
            [names[pid], len(picks), *(pct(cells.get(c)) for c in CELLS), pct(cells["overall"])]
        )
    report.tables.append(
        Table(
            key="human-participants",
            title="Human baseline: each participant",
            columns=["Participant", "Questions", *CELL_COLUMNS, "Overall %"],
            rows=person_rows,
            note="Final answers of finished stages; withdrawn participants are left out."
            + excluded,
        )
    )
    keys = [*CELLS, "overall"]
    stats = {k: mean_sd([cells.get(k) for cells in people]) for k in keys}
    questions = {r["question_id"] for r in rows}
    compare: list[list[Cell]] = [
        [f"Human mean ({len(people)} participants)", len(questions)]
        + [pct(stats[k][0]) for k in keys],
        ["Human sd", len(questions)] + [pct(stats[k][1]) for k in keys],
    ]
    model_picks: dict[int, list[dict[str, Any]]] = defaultdict(list)
    # Only the people's questions, first sample: never every prediction of the runs.
    for p in selectors.dyntom_prediction_rows(
        [r["id"] for r in runs], question_ids=sorted(questions), sample_index=0
    ):
        # Unparseable and refused answers count as wrong, as in every accuracy.
        model_picks[p["run_id"]].append({**p, "correct": bool(p["correct"])})
    for run in runs:
        picks = model_picks.get(run["id"], [])
        if not picks:
            continue
        cells = _cell_accuracies(picks)
        compare.append([run_label(run), len(picks)] + [pct(cells.get(k)) for k in keys])
    report.tables.append(
        Table(
            key="human-vs-models",
            title="Human baseline (mean ± sd across participants) beside models (Table 3)",
            columns=["System", "Questions", *CELL_COLUMNS, "Overall %"],
            rows=compare,
            note=(
                "People: each participant's accuracy per cell, then the mean and sample sd "
                "across participants, as the paper reports its ten annotators. Models: first "
                "sample, on the questions people answered. Unparseable answers count as wrong."
            ),
        )
    )
