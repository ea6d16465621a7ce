"""Trained baselines stop, die and resume from their checkpoints without changing the result.

Every random draw of a mini-batch is seeded from (seed, epoch, batch), so a run resumed
from a checkpoint must end with the same per-epoch losses, dev accuracies and
predictions as the same run left alone: that is what these tests compare.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from django.conf import settings
from django.core.management import call_command

from modeling.baselines.services import baseline_run_create
from modeling.baselines.training import Hooks, baseline_train, checkpoint_dir
from modeling.models import Run
from modeling.runs.executor import run_execute
from tests.celery_worker import database_url

ROOT = Path(settings.BASE_DIR)
PARAMS = {
    "max_length": 256,
    "attention_window": 16,
    "batch_size": 4,
    "epochs": 3,
    "max_steps": 6,
    "update_every": 2,
    "checkpoint_every": 1,
    "support_batches": 2,
    "seed": 5,
}


def _run(encoder: Path) -> Run:
    return baseline_run_create(
        method="protonet", encoder=str(encoder), params=PARAMS, enqueue=False
    )


def _outcome(run: Run) -> tuple[list, list]:
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    curve = [(m["epoch"], m["train_loss"], m["dev_accuracy"]) for m in run.metrics]
    answers = sorted(run.predictions.values_list("speaker_instance_id", "parsed_answer"))
    return curve, answers


def _assert_same(resumed: Run, reference: Run) -> None:
    (curve, answers), (ref_curve, ref_answers) = _outcome(resumed), _outcome(reference)
    assert answers == ref_answers
    assert len(curve) == len(ref_curve) == PARAMS["epochs"]
    for (epoch, loss, dev), (ref_epoch, ref_loss, ref_dev) in zip(curve, ref_curve, strict=True):
        assert epoch == ref_epoch and dev == ref_dev
        assert loss == pytest.approx(ref_loss, abs=1e-5)


@pytest.mark.django_db
def test_a_stop_mid_accumulation_checkpoints_and_resumes_to_the_same_result(movies, tiny_encoder):
    reference = _run(tiny_encoder)
    run_execute(run_id=reference.pk)

    run = _run(tiny_encoder)
    asked = 0

    def keep_going() -> bool:
        nonlocal asked
        asked += 1
        return asked <= 9  # stop before epoch 2's 4th batch: half an accumulation

    outcome = baseline_train(run=run, hooks=Hooks(keep_going=keep_going))
    assert outcome.stopped and outcome.message == "stopped at epoch 2, batch 3"
    saved = torch.load(checkpoint_dir(run.pk) / "last.pt", weights_only=False)
    assert (saved["state"]["epoch"], saved["state"]["batch"]) == (1, 3)
    assert any(g is not None for g in saved["grads"])  # batch 3's gradient, not yet applied
    assert run.predictions.count() == 0

    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED)
    run_execute(run_id=run.pk)
    _assert_same(run, reference)
    epoch_2 = Run.objects.get(pk=run.pk).metrics[1]
    assert epoch_2["resumed_at_batch"] == 3


@pytest.mark.django_db(transaction=True)
def test_a_killed_training_process_resumes_from_its_last_checkpoint(movies, tiny_encoder):
    reference = _run(tiny_encoder)
    run_execute(run_id=reference.pk)

    run = _run(tiny_encoder)
    checkpoint = checkpoint_dir(run.pk) / "last.pt"
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "TOMLAB_BASELINE_CHECKPOINT_DIR": str(settings.TOMLAB_BASELINE_CHECKPOINT_DIR),
        "MODELING_RUN_LEASE_S": "120",
        "OMP_NUM_THREADS": "1",  # as in this process (see the tiny_encoder fixture)
    }
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "train_baseline", "--resume", str(run.pk)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not checkpoint.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "no checkpoint within 60 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)  # no handler, no final checkpoint: a power cut
    proc.wait(timeout=10)
    proc.stderr.close()
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.predictions.count() == 0
    saved = torch.load(checkpoint, weights_only=False)["state"]
    at = [saved["epoch"], saved["batch"]]
    assert saved["steps"] >= 1 and not saved["finished"]

    # The dead holder's lease (120 s) is taken over at once: same host, process gone.
    call_command("train_baseline", "--resume", str(run.pk))
    _assert_same(run, reference)
    final = torch.load(checkpoint, weights_only=False)["state"]
    assert final["resumed_at"] == [at]
