"""A model run on a real Celery worker, killed mid-run and finished by a new worker.

Runs on SQLite + the filesystem broker and, in CI's second pass, on PostgreSQL + Redis.
"""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from benchmarks.models import DynToMQuestion
from modeling.models import Prediction, Run, RunCall
from modeling.runs.services import run_create
from tests.celery_worker import purge_queues, start_worker, stop_worker, wait_for

from .conftest import prompt_keys

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ANSWERED_BEFORE_KILL = 5


def test_killed_worker_run_resumes_without_paying_twice(
    openai_backend, llm_server, dyntom_stages, tmp_path
):
    openai_backend.max_concurrency = 2
    openai_backend.save()
    lock = threading.Lock()
    state = {"seen": 0, "hold": True}
    release = threading.Event()

    def responder(body: dict) -> str:
        # After the first few answers, hold every reply until the test lets go: the
        # worker is killed while two calls are in flight and unanswered.
        with lock:
            state["seen"] += 1
            hold = state["hold"] and state["seen"] > ANSWERED_BEFORE_KILL
        if hold:
            release.wait(60)
        return json.dumps(dict.fromkeys(prompt_keys(body), "a"))

    llm_server.responder = responder
    purge_queues()
    log = tmp_path / "worker.log"
    first = start_worker(log, name="first")
    second = None
    try:
        run = run_create(benchmark="dyntom", method="vanilla", backend=openai_backend, selection={})
        wait_for(
            lambda: (
                llm_server.request_count == ANSWERED_BEFORE_KILL + 2
                and Run.objects.get(pk=run.pk).done_calls == ANSWERED_BEFORE_KILL
            ),
            timeout=90,
            what="the first worker to get two calls in flight",
            log=log,
        )
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        killed = Run.objects.get(pk=run.pk)
        assert killed.status == Run.Status.RUNNING  # orphaned: nobody will finish it
        in_flight_at_kill = llm_server.requests[ANSWERED_BEFORE_KILL:]

        with lock:
            state["hold"] = False
        second = start_worker(log, name="second")
        wait_for(
            lambda: Run.objects.get(pk=run.pk).is_finished,
            timeout=120,
            what="the second worker to finish the run",
            log=log,
        )
        answered = llm_server.answered  # before the held replies are let go
    finally:
        release.set()
        stop_worker(first)
        if second is not None:
            stop_worker(second)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert (run.done_calls, run.total_calls, run.error_calls) == (24, 24, 0)
    assert RunCall.objects.filter(run=run).count() == 24

    # Every answered (paid) request was asked exactly once; only the two calls that were
    # in flight, unanswered, when the worker died were asked again.
    bodies = [json.dumps(r, sort_keys=True) for r in llm_server.requests]
    paid = [json.dumps(r, sort_keys=True) for r in answered]
    assert len(paid) == len(set(paid)) == 24
    assert llm_server.request_count == 26
    repeated = {b for b in bodies if bodies.count(b) > 1}
    assert repeated == {json.dumps(r, sort_keys=True) for r in in_flight_at_kill}

    # One prediction per question, none twice.
    assert Prediction.objects.filter(run=run).count() == DynToMQuestion.objects.count() == 1719


def test_a_worker_splits_a_run_across_engine_processes(
    openai_backend, llm_server, dyntom_stages, tmp_path
):
    """MODELING_RUN_PROCESSES on a prefork worker, as deployed: its pool child starts
    the engine processes, which open the worker's database and finish the run."""
    llm_server.responder = lambda body: json.dumps(dict.fromkeys(prompt_keys(body), "b"))
    purge_queues()
    log = tmp_path / "worker.log"
    worker = start_worker(
        log, name="split", pool="prefork", environment={"MODELING_RUN_PROCESSES": "2"}
    )
    try:
        run = run_create(benchmark="dyntom", method="vanilla", backend=openai_backend, selection={})
        wait_for(
            lambda: Run.objects.get(pk=run.pk).is_finished,
            timeout=120,
            what="the worker to finish the run",
            log=log,
        )
    finally:
        stop_worker(worker)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert (run.done_calls, run.total_calls, run.error_calls) == (24, 24, 0)
    assert f"run {run.pk}: 24 calls in 2 engine processes" in log.read_text()
    assert llm_server.request_count == 24
    assert Prediction.objects.filter(run=run).count() == DynToMQuestion.objects.count()
