"""A run split across engine processes (MODELING_RUN_PROCESSES): the same predictions as
in one process, the window kept in all, and one process where a budget is kept.

Runs in this process call ``run_execute``; its engine processes are real children that
open the suite's database (SQLite file or PostgreSQL) and call the loopback server.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
from decimal import Decimal

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import F
from django.test import override_settings

from benchmarks.models import DynToMQuestion
from modeling.models import Backend, CachedResponse, Prediction, Run, RunCall
from modeling.runs.executor import run_execute
from modeling.runs.processes import engine_processes
from modeling.runs.services import run_create, run_resume
from tests.celery_worker import database_url

from .conftest import prompt_keys

pytestmark = pytest.mark.django_db(transaction=True)


def _letter(key: str, seed: int) -> str:
    return "abcd"[hashlib.sha256(f"{key}/{seed}".encode()).digest()[0] % 4]


def varied_answers(request_json: dict) -> str:
    """A letter per question that depends on the question and the request's seed, so a
    reply recorded against the wrong call shows up as a wrong prediction."""
    seed = request_json["seed"]
    return json.dumps({key: _letter(key, seed) for key in prompt_keys(request_json)})


def _run(backend, processes: int) -> tuple[Run, list[tuple]]:
    run = run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=backend,
        selection={},
        params={"samples": 3, "seed": 7},
        enqueue=False,
    )
    with override_settings(MODELING_RUN_PROCESSES=processes):
        assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    run.refresh_from_db()
    keys = dict(DynToMQuestion.objects.values_list("pk", "key"))
    predictions = sorted(
        (keys[p.dyntom_question_id], p.sample_index, p.parsed_answer, p.parse_status, p.correct)
        for p in Prediction.objects.filter(run=run)
    )
    return run, predictions


def test_three_engine_processes_give_the_predictions_of_one(
    openai_backend, llm_server, dyntom_stages, caplog
):
    openai_backend.max_concurrency = 6
    openai_backend.save()
    llm_server.fixed_latency = 0.05
    llm_server.responder = varied_answers
    calls = 24 * 3

    with caplog.at_level(logging.INFO, logger="modeling.runs.processes"):
        split, split_predictions = _run(openai_backend, processes=3)
    assert f"run {split.pk}: {calls} calls in 3 engine processes" in caplog.text
    assert split.done_calls == split.total_calls == calls
    assert llm_server.request_count == calls  # each call asked once
    assert llm_server.max_in_flight <= 6  # the window is the backend's, in all
    assert RunCall.objects.filter(run=split, status=RunCall.Status.DONE).count() == calls
    # Each prediction holds the letter the server gave for its question and sample.
    assert all(answer == _letter(key, 7 + sample) for key, sample, answer, *_ in split_predictions)

    # The same requests again in one process, the cache emptied so every one is sent.
    CachedResponse.objects.all().delete()
    llm_server.reset()
    llm_server.fixed_latency = 0.05
    llm_server.responder = varied_answers
    single, single_predictions = _run(openai_backend, processes=1)
    assert llm_server.request_count == calls
    assert len(split_predictions) == Prediction.objects.filter(run=single).count() > calls
    assert split_predictions == single_predictions
    assert len({answer for _, _, answer, _, _ in split_predictions}) == 4
    # Per-run counters, summed by the engine processes, equal one process's.
    assert (split.prompt_tokens, split.completion_tokens) == (
        single.prompt_tokens,
        single.completion_tokens,
    )


def test_a_resume_with_fewer_calls_than_processes_makes_just_those(
    openai_backend, llm_server, dyntom_stages
):
    """Two calls left, four processes: two get a call each, two none, and all end."""
    llm_server.responder = varied_answers
    run, before = _run(openai_backend, processes=1)
    left = list(RunCall.objects.filter(run=run).order_by("pk")[:2])
    Prediction.objects.filter(call__in=left).delete()
    RunCall.objects.filter(pk__in=[c.pk for c in left]).update(
        status=RunCall.Status.PENDING, raw_output=""
    )
    CachedResponse.objects.all().delete()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.STOPPED, done_calls=F("done_calls") - 2)
    llm_server.reset()
    llm_server.responder = varied_answers
    run_resume(run_id=run.pk, enqueue=False)
    with override_settings(MODELING_RUN_PROCESSES=4):
        assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    assert llm_server.request_count == 2
    run.refresh_from_db()
    assert run.done_calls == run.total_calls == 24 * 3
    keys = dict(DynToMQuestion.objects.values_list("pk", "key"))
    after = sorted(
        (keys[p.dyntom_question_id], p.sample_index, p.parsed_answer, p.parse_status, p.correct)
        for p in Prediction.objects.filter(run=run)
    )
    assert after == before


def test_a_run_with_a_budget_or_a_batching_backend_stays_in_one_process(
    openai_backend, dyntom_stages
):
    run = run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=openai_backend,
        selection={},
        params={},
        enqueue=False,
    )
    with override_settings(MODELING_RUN_PROCESSES=8):
        assert engine_processes(run) == openai_backend.max_concurrency == 4
        run.budget_cost = Decimal("1.00")
        assert engine_processes(run) == 1
        run.budget_cost = None
        run.backend.kind = Backend.Kind.TRANSFORMERS
        assert engine_processes(run) == 1
    run.backend.kind = Backend.Kind.OPENAI
    with override_settings(MODELING_RUN_PROCESSES=1):
        assert engine_processes(run) == 1


def test_run_model_processes_splits_a_run_made_in_the_foreground(
    openai_backend, llm_server, dyntom_stages
):
    llm_server.responder = varied_answers
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "run_model",
            *("--benchmark", "dyntom", "--method", "vanilla", "--backend", openai_backend.name),
            *("--samples", "2", "--seed", "3", "--processes", "2"),
        ],
        cwd=settings.BASE_DIR,
        env={
            **os.environ,
            "DATABASE_URL": database_url(),
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    run = Run.objects.get()
    assert f"run {run.pk}: 48 calls in 2 engine processes" in result.stderr
    assert f"run {run.pk} succeeded: 48/48 calls" in result.stdout
    assert llm_server.request_count == 48


def test_run_model_processes_refuses_what_it_cannot_do(openai_backend, dyntom_stages):
    args = ["--benchmark", "dyntom", "--method", "vanilla", "--backend", openai_backend.name]
    with pytest.raises(CommandError, match="--processes must be at least 1"):
        call_command("run_model", *args, "--processes", "0")
    with pytest.raises(CommandError, match="workers use MODELING_RUN_PROCESSES"):
        call_command("run_model", *args, "--processes", "2", "--background")
    assert not Run.objects.exists()
