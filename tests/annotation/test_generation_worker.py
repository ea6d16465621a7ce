"""A generation job queued from the service and run by a real Celery worker process.

Runs on SQLite + the filesystem broker and, in CI's second pass, on PostgreSQL + Redis.
The worker calls the loopback server of this process over its socket.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from typing import Any

import pytest

from annotation.dyntom.generation.services import (
    GENERATION_TASK_NAME,
    generated_stage_keep,
    generation_job_create,
)
from annotation.dyntom.validation.selectors import waiting_generated_stages
from annotation.models import GenerationJob, ValidationBatch
from benchmarks.models import DynToMQuestion
from common.models import QueuedJob
from common.queueing import job_key
from common.tasks import task_send
from modeling.models import Run, RunCall
from tests.celery_worker import pool_children, purge_queues, start_worker, stop_worker, wait_for

from .test_generation import MALFORMED, GenerationResponder, backend, pools, step_of

__all__ = ["backend", "pools"]  # fixtures used below

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_worker_generates_with_live_progress_and_a_retried_reply(
    backend, pools, llm_server, tmp_path
):
    llm_server.responder = GenerationResponder(bad={"trajectory": [MALFORMED]})
    # 0.2 s a reply, so the polling below sees the progress of steps between calls.
    llm_server.fixed_latency = 0.2
    purge_queues()
    log = tmp_path / "worker.log"
    worker = start_worker(log, name="generation")
    seen_progress: set[int] = set()
    try:
        job = generation_job_create(backend=backend, stage_count=2, scenario_count=4, seed=9)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            current = GenerationJob.objects.get(pk=job.pk)
            seen_progress.add(current.progress_done)
            if current.is_finished:
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"the worker did not finish the job\n{log.read_text()[-3000:]}")
    finally:
        stop_worker(worker)

    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    assert job.progress_done == job.progress_total == 8
    # Progress was written as the job went, not only at the end.
    assert len(seen_progress - {0, 8}) >= 1
    stages = list(job.stages.order_by("index"))
    assert [s.status for s in stages] == ["awaiting_validation"] * 2
    assert [c["valid"] for c in stages[0].calls if c["step"] == "trajectory"] == [False, True]
    run = Run.objects.get(pk=job.run_id)
    assert (run.status, run.done_calls, run.error_calls) == ("succeeded", 7, 0)

    # The task queued both finished stages for validation by itself, k = 4 per object.
    batch = ValidationBatch.objects.get(name=f"Generation job {job.pk}")
    assert batch.k == 4
    assert sorted(batch.stages.values_list("generated__index", flat=True)) == [1, 2]
    assert not waiting_generated_stages().exists()

    work = generated_stage_keep(stage=stages[1], reason="kept in the worker test")
    assert DynToMQuestion.objects.filter(stage__work=work).count() == 56


def test_a_job_sent_twice_runs_once_and_a_killed_pool_process_is_taken_over(
    backend, pools, llm_server, tmp_path, monkeypatch
):
    """Two pool processes: the job's second delivery leaves it to the live holder; when
    the holder is killed mid-call, the sweep sends its job again and it is taken over."""
    backend.timeout_s = 60  # the held call must not time out before the kill
    backend.save(update_fields=["timeout_s"])
    valid = GenerationResponder()
    lock = threading.Lock()
    state = {"trajectories": 0, "hold": True}
    release = threading.Event()

    def responder(body: dict[str, Any]) -> str:
        if step_of(body) == "trajectory":
            with lock:
                state["trajectories"] += 1
                hold = state["hold"] and state["trajectories"] == 1
            if hold:
                release.wait(120)
        return valid(body)

    llm_server.responder = responder
    purge_queues()
    monkeypatch.setenv("TOMLAB_SWEEP_EVERY_S", "1")
    log = tmp_path / "worker.log"
    worker = start_worker(log, name="generation-prefork", pool="prefork", concurrency=2)
    try:
        wait_for(lambda: len(pool_children(worker)) == 2, timeout=60, what="the pool", log=log)
        job = generation_job_create(backend=backend, stage_count=1, scenario_count=4, seed=9)
        wait_for(
            lambda: llm_server.request_count == 2 and len(llm_server.answered) == 1,
            timeout=90,
            what="the job's trajectory call to be in flight",
            log=log,
        )
        first = QueuedJob.objects.get(key=job_key(GENERATION_TASK_NAME, [job.pk]))
        host, _, pid = first.taken_by.rpartition(":")
        holder = int(pid)
        assert host == socket.gethostname() and holder in pool_children(worker)

        # The job sent a second time (a message delivered again, a person's re-send):
        # the other pool process finds it held by a live process and leaves it.
        second = task_send(GENERATION_TASK_NAME, (job.pk,), queue="default")
        wait_for(
            lambda: QueuedJob.objects.get(pk=second.pk).finished_at is not None,
            timeout=30,
            what="the second delivery to be done",
            log=log,
        )
        assert llm_server.request_count == 2  # it asked nothing
        assert GenerationJob.objects.get(pk=job.pk).status == "running"

        os.kill(holder, signal.SIGKILL)
        in_flight = llm_server.requests[-1]
        with lock:
            state["hold"] = False
        wait_for(
            lambda: GenerationJob.objects.get(pk=job.pk).is_finished,
            timeout=90,
            what="the job to be taken over and finished",
            log=log,
        )
        answered = llm_server.answered  # before the held reply is let go
        assert worker.poll() is None
    finally:
        release.set()
        stop_worker(worker)

    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    assert job.lease_holder_pid is None
    stage = job.stages.get()
    assert stage.status == "awaiting_validation"
    assert ValidationBatch.objects.filter(name=f"Generation job {job.pk}").count() == 1
    # Every answered (paid) request was asked once; only the one in flight, unanswered,
    # when its process died was asked again.
    bodies = [json.dumps(r, sort_keys=True) for r in llm_server.requests]
    paid = [json.dumps(r, sort_keys=True) for r in answered]
    assert len(paid) == len(set(paid)) == 3
    assert len(bodies) == 4
    assert {b for b in bodies if bodies.count(b) > 1} == {json.dumps(in_flight, sort_keys=True)}
    run = Run.objects.get(pk=job.run_id)
    assert (run.status, run.done_calls) == ("succeeded", 3)
    assert RunCall.objects.filter(run=run).count() == 3
    text = log.read_text()
    assert "took over from dead process" in text
    assert "is running in process" in text  # the second delivery named the holder
