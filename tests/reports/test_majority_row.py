"""The report's Majority row is ``train_baseline majority``: one definition (issue 27).

Screenplay imports keep their history scenes unmasked (no ``char_map``); the report
must count them the way the baseline does, never fall back to the evaluated scenes'
gold answers, and say "no training scenes" only for works that truly have none.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from benchmarks.models import SpeakerInstance
from metrics import majority_choice
from modeling.baselines.data import history_counts
from modeling.models import Prediction, Run
from reports.tables import build_report

pytestmark = pytest.mark.django_db

SCRIPTS = ("dead_poets_society.txt", "star_wars_a_new_hope.txt", "big_fish.fountain")


def _row(table, first_cell) -> dict:
    (record,) = [r for r in table.records() if r[table.columns[0]] == first_cell]
    return record


def test_majority_row_equals_train_baseline_majority_on_screenplays(shared_data: Path, settings):
    settings.TOMLAB_BASELINE_CHECKPOINT_DIR = shared_data / "unused"  # counting writes none
    for name in SCRIPTS:
        call_command(
            "import_benchmark", "screenplay", str(shared_data / "screenplays" / name),
            "--split", "test", verbosity=0,
        )  # fmt: skip
    call_command("train_baseline", "majority", "--eval-split", "test", stdout=StringIO())
    run = Run.objects.get(method="majority")
    assert run.status == Run.Status.SUCCEEDED

    report = build_report("tom-in-amc", run_ids=[run.pk], study_ids=[])

    accuracy = report.table("accuracy")
    majority = _row(accuracy, "Majority")
    (baseline,) = [r for r in accuracy.records() if r["Method"] == "majority"]
    n = SpeakerInstance.objects.count()
    assert majority["Instances"] == baseline["Instances"] == n > 250
    assert majority["Accuracy %"] == baseline["Accuracy %"]
    # Not only the same figure: the same guess for every masked speaker.
    counts, with_history = history_counts(benchmark="tom-in-amc")
    assert len(with_history) == 3
    guesses = {
        i.pk: majority_choice(
            list(i.candidates), {c: counts.get((i.scene.work_id, c), 0) for c in i.candidates}
        )
        for i in SpeakerInstance.objects.select_related("scene")
    }
    predicted = dict(
        Prediction.objects.filter(run=run).values_list("speaker_instance_id", "parsed_answer")
    )
    assert predicted == guesses
    # The row's figure is the share of those guesses that are right.
    golds = dict(SpeakerInstance.objects.values_list("pk", "gold_character__name"))
    assert sum(guesses[k] == golds[k] for k in golds) / n * 100 == pytest.approx(
        majority["Accuracy %"], abs=0.005
    )
    assert "no training scenes" not in accuracy.note


def test_only_works_without_history_say_so(shared_data: Path):
    call_command(
        "import_benchmark", "screenplay", str(shared_data / "screenplays" / SCRIPTS[0]),
        verbosity=0,
    )  # fmt: skip
    call_command(
        "import_benchmark", "tvshowguess", str(shared_data / "tvshowguess" / "friends.raw"),
        verbosity=0,
    )  # fmt: skip

    amc = build_report("tom-in-amc", study_ids=[]).table("accuracy")
    tvshow = build_report("tvshowguess", study_ids=[]).table("accuracy")

    assert "no training scenes" not in amc.note
    assert "1 work(s) have no training scenes" in tvshow.note
    assert _row(tvshow, "Majority")["Accuracy %"] is not None
