"""The DynToM report from per-run packed outcomes gives exactly the row path's tables.

``dyntom_report_golden.json`` holds the reports that the row path (``reports/tables/
dyntom.py`` reading every prediction row, commit fb01d8c, before the packed outcomes
replaced it) built on the data made by ``_runs`` below: the 24 real DynToM stages, runs
that answered different question subsets, several samples per question, unparseable
answers, a ``correct`` of ``None``, predictions stored in shuffled order (so the stage
order the bootstrap resamples in is not the id order) and a run with no predictions.
Every value, note and CI bound (same seed) must match. Run ids differ between
databases, so run labels are written with the run's name instead of its id.

Since issue 28 each run is scored on its own answers: the row path's ``accuracy`` (the
questions every run answered) is now ``accuracy-common``, equal to it row for row where
every run answered something; where one had no predictions the row path compared
nothing, and the rewritten golden holds every run's own numbers instead.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.cache import cache
from django.urls import reverse

from benchmarks.models import DynToMQuestion
from common.models import QueuedJob
from modeling.models import Prediction, Run
from modeling.runs.executor import run_execute
from modeling.runs.prediction_import import predictions_import
from modeling.runs.services import run_create
from reports.dyntom_outcomes import _pack, _read_question_bank, question_bank, run_outcomes
from reports.models import DynToMQuestionBankSnapshot, PackedRun
from reports.run_packs import (
    RUN_PACK_TASK_NAME,
    pack_store,
    packs_invalidate,
    unpacked_predictions,
)
from reports.selectors import run_prediction_counts
from reports.tables import build_report
from reports.tasks import run_pack_task

# The modeling suite's fixtures: the 24 real DynToM stages, a backend on the loopback
# OpenAI-compatible server (imported here so pytest registers them for this module).
from tests.modeling.conftest import (  # noqa: F401
    dyntom_stages,
    gold_responder,
    openai_backend,
)

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("dyntom_stages")]

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
        # Labels hold row ids, which differ by database (PostgreSQL's sequences are not
        # reset between tests): in cells and inside notes alike.
        text = re.sub(rf"#{run.pk} {re.escape(name)}\b", f"#{name}", text)
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
    assert set(PackedRun.objects.values_list("run_id", flat=True)) == {
        runs[name].pk for name in ("full", "subset", "samples")
    }


# -- staying current ---------------------------------------------------------------------


def _overall(run: Run) -> float:
    report = build_report("dyntom", run_ids=[run.pk])
    (row,) = report.table("accuracy").records()
    return row["Overall %"]


def _import(tmp_path: Path, name: str, answers: dict[DynToMQuestion, str]) -> Run:
    path = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "benchmark": "dyntom",
                    "work": q.stage.work.key,
                    "question": q.key,
                    "model": "m",
                    "answer": answer,
                }
            )
            + "\n"
            for q, answer in answers.items()
        )
    )
    predictions_import(path=path, name=name, benchmark="dyntom")
    return Run.objects.get(name__startswith=name, benchmark="dyntom")


def test_a_reimport_that_changes_answers_in_place_is_repacked(
    dyntom_stages,  # noqa: F811
    tmp_path,
    django_capture_on_commit_callbacks,
):
    questions = list(
        DynToMQuestion.objects.filter(stage__work__key="trial149").select_related("stage__work")
    )
    wrong = {q: "z" for q in questions}
    with django_capture_on_commit_callbacks(execute=True):
        run = _import(tmp_path, "imported", wrong)
    # Packed when the import committed, not on first use.
    packed = PackedRun.objects.get(run=run)
    assert packed.predictions == len(questions)
    assert _overall(run) == 0.0
    ids = set(run.predictions.values_list("pk", flat=True))

    half = {q: (q.gold_letter if i % 2 else "z") for i, q in enumerate(questions)}
    _import(tmp_path, "imported", half)  # no on-commit packing: the report must notice
    # Same predictions (ids and count), answers changed in place.
    assert set(run.predictions.values_list("pk", flat=True)) == ids
    assert _overall(run) == round(100 * (len(questions) // 2) / len(questions), 2)


def test_new_predictions_make_the_packed_copy_stale(dyntom_stages):  # noqa: F811
    run = Run.objects.create(name="r", benchmark="dyntom", method="vanilla", model="m")
    first, second = DynToMQuestion.objects.order_by("pk")[:2]
    Prediction.objects.create(run=run, dyntom_question=first, parse_status="ok", correct=True)
    assert _overall(run) == 100.0
    Prediction.objects.create(run=run, dyntom_question=second, parse_status="ok", correct=False)
    assert _overall(run) == 50.0
    Prediction.objects.filter(dyntom_question=second).delete()
    assert _overall(run) == 100.0
    assert PackedRun.objects.get(run=run).predictions == 1


def test_a_pack_read_before_an_invalidation_is_not_stored(dyntom_stages):  # noqa: F811
    run = Run.objects.create(name="r", benchmark="dyntom", method="vanilla", model="m")
    question = DynToMQuestion.objects.order_by("pk").first()
    prediction = Prediction.objects.create(
        run=run, dyntom_question=question, parse_status="ok", correct=True
    )
    run_outcomes([run.pk])
    started_from = PackedRun.objects.get(run=run).generation
    n, last, stale = _pack(run.pk)  # a slow build reads the old answer ...
    Prediction.objects.filter(pk=prediction.pk).update(correct=False)
    packs_invalidate(run_ids=[run.pk])  # ... the writer changes it meanwhile
    pack_store(run.pk, started_from, n, last, stale)  # ... and the build stores late
    assert PackedRun.objects.get(run=run).predictions is None
    assert _overall(run) == 0.0
    # Invalidating a run never packed leaves a placeholder a late first build cannot fill.
    other = Run.objects.create(name="o", benchmark="dyntom", method="vanilla", model="m")
    Prediction.objects.create(run=other, dyntom_question=question, parse_status="ok", correct=True)
    n, last, data = _pack(other.pk)
    packs_invalidate(run_ids=[other.pk])
    pack_store(other.pk, None, n, last, data)
    assert PackedRun.objects.get(run=other).predictions is None


def test_a_finished_engine_run_is_packed(
    openai_backend,  # noqa: F811
    llm_server,
    dyntom_stages,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    llm_server.responder = gold_responder(list(dyntom_stages))
    run = run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=openai_backend,
        selection={"works": ["trial149"]},
        enqueue=False,
    )
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    # Queued for a worker once the run's end commits; the engine did not pack it.
    job = QueuedJob.objects.get(task=RUN_PACK_TASK_NAME)
    assert job.args == [run.pk] and len(callbacks) == 1
    assert not PackedRun.objects.filter(run=run).exists()
    assert run_pack_task.apply(args=(run.pk,)).get() == "packed"
    packed = PackedRun.objects.get(run=run)
    assert packed.predictions == run.predictions.count() > 0
    assert unpacked_predictions(run_prediction_counts(run_ids=[run.pk])) == 0
    # A redelivery finds it packed; a run running again is left to its next end.
    assert run_pack_task.apply(args=(run.pk,)).get() == "packed"
    assert PackedRun.objects.get(run=run).generation == packed.generation
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    assert run_pack_task.apply(args=(run.pk,)).get() == "skipped"


def test_the_page_builds_packed_runs_inline_above_the_row_threshold(
    client,
    researcher,
    dyntom_stages,  # noqa: F811
    settings,
):
    settings.REPORTS_INLINE_MAX_PREDICTIONS = 100
    runs = _runs(dyntom_stages)
    client.force_login(researcher)
    url = reverse("reports:report", args=["dyntom"])
    # Nothing packed yet: thousands of predictions to read, so a background build.
    assert client.get(url).context.get("report") is None
    run_outcomes([r.pk for r in runs.values()])
    report = client.get(url).context["report"]
    assert report.facts["predictions"] > 100
    assert report.table("compositional").rows


def test_an_edited_question_is_read_afresh(dyntom_stages):  # noqa: F811
    """The question bank is cached under its fingerprint; an edit (the admin, a
    re-import) stamps ``updated_at`` and so changes it."""
    run = Run.objects.create(name="r", benchmark="dyntom", method="vanilla", model="m")
    question = DynToMQuestion.objects.filter(
        question_type="understanding", mental_state="belief"
    ).first()
    Prediction.objects.create(run=run, dyntom_question=question, parse_status="ok", correct=True)
    (row,) = build_report("dyntom", run_ids=[run.pk]).table("accuracy").records()
    assert (row["Belief U %"], row["Emotion U %"]) == (100.0, None)
    question.mental_state = "emotion"
    question.save(update_fields=["mental_state", "updated_at"])
    (row,) = build_report("dyntom", run_ids=[run.pk]).table("accuracy").records()
    assert (row["Belief U %"], row["Emotion U %"]) == (None, 100.0)
    # Only the current bank is kept as a packed row, and a cold cache reads it back.
    assert DynToMQuestionBankSnapshot.objects.count() == 1
    cache.clear()
    stored, direct = question_bank(), _read_question_bank()
    assert stored.labels == direct.labels
    for name in ("ids", "question_type", "mental_state", "scenario_from", "scenario_to"):
        assert np.array_equal(getattr(stored, name), getattr(direct, name)), name
    for name in ("stage", "scenario_count"):
        assert np.array_equal(getattr(stored, name), getattr(direct, name)), name
