"""The runs a generic study's ``widest comparison`` design compares people with.

Studies may not import the run engine; this app reads both, so it gives studies the
runs on a mapped benchmark and their accuracy per item
(``studies.choice.model_side``), counted as the benchmark's report counts them: each
run's share of correct samples on the item, a missing, refused or unparseable answer
wrong; several runs are averaged item by item.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from benchmarks.models import Benchmark
from studies.choice.model_side import ModelSide

from . import selectors
from .tables import run_label


def work_runs(work_id: int) -> list[tuple[int, str]]:
    return [
        (r["id"], run_label(r)) for r in selectors.report_runs(Benchmark.GENERIC, work_id=work_id)
    ]


def item_accuracy(run_ids: Sequence[int], work_id: int) -> dict[int, float]:
    outcomes: dict[int, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for p in selectors.generic_prediction_rows(run_ids, work_id):
        outcomes[p["run_id"]][p["item_id"]].append(bool(p["correct"]))
    out = {}
    for row in selectors.generic_item_rows(work_id):
        scores = [
            sum(o) / len(o) if (o := outcomes[run_id].get(row["id"])) else 0.0 for run_id in run_ids
        ]
        out[row["id"]] = sum(scores) / len(scores)
    return out


MODEL_SIDE = ModelSide(runs=work_runs, accuracy=item_accuracy)
