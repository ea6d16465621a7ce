"""The DynToM report from per-run packed outcomes gives exactly the row path's tables.

``dyntom_report_golden.json`` holds the reports that the row path (``reports/tables/
dyntom.py`` reading every prediction row, commit fb01d8c, before the packed outcomes
replaced it) built on the data made by ``_runs`` below: the 24 real DynToM stages, runs
that answered different question subsets, several samples per question, unparseable
answers, a ``correct`` of ``None``, predictions stored in shuffled order (so the stage
order the bootstrap resamples in is not the id order) and a run with no predictions.
Every value, note and CI bound (same seed) must match. Run ids differ between
databases, so run labels are written with the run's name instead of its id.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from benchmarks.models import DynToMQuestion
from modeling.models import Prediction, Run
from reports.models import DynToMRunOutcomes
from reports.tables import build_report

# The 24 real DynToM stages (imported here so pytest registers the fixture).
from tests.modeling.conftest import dyntom_stages  # noqa: F401

pytestmark = pytest.mark.django_db

GOLDEN = Path(__file__).parent / "dyntom_report_golden.json"
SELECTIONS = {
    "three runs, different subsets": ["full", "subset", "samples"],
    "every run, one without predictions": None,
    "one run with samples": ["samples"],
    "subset and full": ["subset", "full"],
}


def _runs(stages) -> dict[str, Run]:
    """Four runs over the real stages, seeded so the data is the same everywhere."""
    rng = random.Random(17)
    questions = list(
        DynToMQuestion.objects.order_by("stage__work__key", "key").values_list(
            "pk", "stage__work__key", "gold_letter"
        )
    )
    stage_keys = sorted({q[1] for q in questions})
    runs = {
        name: Run.objects.create(
            name=name, benchmark="dyntom", method="vanilla", model=f"{name}-model", imported=True
        )
        for name in ("full", "subset", "samples", "empty")
    }
    kept_stages = set(stage_keys[: 2 * len(stage_keys) // 3])
    plan: list[tuple[str, int, int]] = []  # (run, question pk, sample)
    for pk, _, _ in questions:
        plan.append(("full", pk, 0))
    subset = [q for q in questions if q[1] in kept_stages and rng.random() < 0.9]
    for sample in range(3):
        plan += [("subset", pk, sample) for pk, _, _ in subset]
    for sample in range(2):
        plan += [
            ("samples", pk, sample) for pk, _, _ in questions if sample == 0 or rng.random() < 0.8
        ]
    rng.shuffle(plan)
    gold = {pk: letter for pk, _, letter in questions}
    skill = {"full": 0.75, "subset": 0.55, "samples": 0.65}
    rows = []
    for name, pk, sample in plan:
        roll = rng.random()
        if roll < 0.04:
            status, answer, correct = "unparseable", "", False
        elif roll < 0.05:
            status, answer, correct = "missing", "", None
        elif roll < 0.05 + skill[name] * 0.95:
            status, answer, correct = "ok", gold[pk], True
        else:
            status, answer, correct = "ok", "z", False
        rows.append(
            Prediction(
                run=runs[name],
                dyntom_question_id=pk,
                sample_index=sample,
                parse_status=status,
                parsed_answer=answer,
                correct=correct,
            )
        )
    Prediction.objects.bulk_create(rows, batch_size=2000)
    return runs


def _normalized(report, runs: dict[str, Run]) -> dict[str, Any]:
    text = json.dumps(report.as_json(), sort_keys=True)
    for name, run in runs.items():
        text = text.replace(f'"#{run.pk} {name}', f'"#{name}')
    data = json.loads(text)
    names = {run.pk: name for name, run in runs.items()}
    for table in data["tables"]:
        if table["key"] == "runs":
            for row in table["rows"]:
                row["Run"] = names[row["Run"]]
    return data


def _reports(runs: dict[str, Run]) -> dict[str, Any]:
    return {
        label: _normalized(
            build_report(
                "dyntom",
                run_ids=None if names is None else [runs[n].pk for n in names],
                seed=5,
            ),
            runs,
        )
        for label, names in SELECTIONS.items()
    }


def test_packed_outcomes_give_the_row_paths_tables(dyntom_stages):  # noqa: F811
    runs = _runs(dyntom_stages)
    reports = _reports(runs)
    if os.environ.get("TOMLAB_WRITE_DYNTOM_GOLDEN"):
        GOLDEN.write_text(json.dumps(reports, indent=1, sort_keys=True) + "\n")
        pytest.skip("golden written")
    golden = json.loads(GOLDEN.read_text())
    assert sorted(reports) == sorted(golden)
    for label in golden:
        assert reports[label]["facts"] == golden[label]["facts"], label
        assert reports[label]["charts"] == golden[label]["charts"], label
        got = {t["key"]: t for t in reports[label]["tables"]}
        want = {t["key"]: t for t in golden[label]["tables"]}
        assert list(got) == list(want), label
        for key in want:
            assert got[key] == want[key], (label, key)
    # The tables were read from packed outcomes, stored for each run with predictions.
    assert set(DynToMRunOutcomes.objects.values_list("run_id", flat=True)) == {
        runs[name].pk for name in ("full", "subset", "samples")
    }
