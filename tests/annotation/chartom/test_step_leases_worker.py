"""A CharToM-QA question step on a real prefork worker whose pool process is killed.

Issue 26: ``kill -9`` of a worker's pool processes during question generation left the
constructions "LLM step running" for good: the job delivered again met the step's lease
and gave up. Here the pool process dies with a reply in flight; the worker's main
process lives on, its envelope sweep sends the job again, and the new pool process
takes the step over from the dead one and finishes it, paying for no answered call
twice. Runs on SQLite + the filesystem broker and, in CI's second pass, on PostgreSQL +
Redis.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from annotation.chartom.llm_steps import candidate_count
from annotation.chartom.workflow import STEP_TASK_NAME, step_enqueue
from annotation.models import Construction, NoteBatch
from common.models import QueuedJob
from common.queueing import job_key
from modeling.models import RunCall
from tests.celery_worker import pool_children, purge_queues, start_worker, stop_worker, wait_for

from .test_llm_steps import Script

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

HELD_SAMPLE = 2  # the third question sample is in flight when its process dies


def test_a_killed_pool_process_question_step_is_taken_over_and_paid_once(
    make_construction, chartom_backend, llm_server, tmp_path, monkeypatch
) -> None:
    # Long enough that the held call does not time out before the kill; one call at a
    # time, so the third sample is the one in flight.
    chartom_backend.timeout_s = 60
    chartom_backend.max_concurrency = 1
    chartom_backend.save(update_fields=["timeout_s", "max_concurrency"])
    construction = make_construction(
        stage="questions",
        state="queued",
        backend=chartom_backend,
        description="Vautrin flatters them on purpose.",
    )
    # A seed makes each sample's request its own (seed + sample index), so answered
    # requests can be told apart by their bodies.
    NoteBatch.objects.filter(pk=construction.note.batch_id).update(params={"seed": 11})

    script = Script()
    lock = threading.Lock()
    state = {"questions": 0, "hold": True}
    release = threading.Event()

    def responder(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if "ask a question about the" in prompt:
            with lock:
                state["questions"] += 1
                hold = state["hold"] and state["questions"] == HELD_SAMPLE + 1
            if hold:
                release.wait(120)
        return script(body)

    llm_server.responder = responder
    purge_queues()
    # The worker's main process sweeps every second: it sends again the envelope of a
    # job whose pool process died.
    monkeypatch.setenv("TOMLAB_SWEEP_EVERY_S", "1")
    log = tmp_path / "worker.log"
    worker = start_worker(log, name="chartom-prefork", pool="prefork", concurrency=1)
    try:
        wait_for(lambda: len(pool_children(worker)) == 1, timeout=60, what="the pool", log=log)
        with transaction.atomic():
            step_enqueue(construction.pk)
        wait_for(
            lambda: (
                llm_server.request_count == HELD_SAMPLE + 1
                and len(llm_server.answered) == HELD_SAMPLE
            ),
            timeout=90,
            what="the pool process to have its third question sample in flight",
            log=log,
        )
        (child,) = pool_children(worker)
        envelope = QueuedJob.objects.get(key=job_key(STEP_TASK_NAME, [construction.pk]))
        assert envelope.taken_by == f"{socket.gethostname()}:{child}"
        in_flight = llm_server.requests[-1]

        os.kill(child, signal.SIGKILL)
        wait_for(
            lambda: child not in pool_children(worker) and len(pool_children(worker)) == 1,
            timeout=30,
            what="the worker to replace its pool process",
            log=log,
        )
        assert Construction.objects.get(pk=construction.pk).state == "running"

        with lock:
            state["hold"] = False
        wait_for(
            lambda: Construction.objects.get(pk=construction.pk).stage == "question_choice",
            timeout=90,
            what="the step to be taken over and finished",
            log=log,
        )
        answered = llm_server.answered  # before the held reply is let go
        assert worker.poll() is None  # the main process lived through it
    finally:
        release.set()
        stop_worker(worker)

    construction.refresh_from_db()
    assert (construction.state, construction.error) == ("waiting_human", "")
    assert construction.lease_holder_pid is None  # released when the step ended
    n = candidate_count()
    positions = sorted(construction.candidates.values_list("position", flat=True))
    assert positions == list(range(n))
    assert construction.candidates.filter(kept=True).exists()

    # Every answered (paid) request was asked once; only the one in flight, unanswered,
    # when its process died was asked again.
    bodies = [json.dumps(r, sort_keys=True) for r in llm_server.requests]
    paid = [json.dumps(r, sort_keys=True) for r in answered]
    assert len(paid) == len(set(paid))
    assert len(bodies) == len(paid) + 1
    repeated = {b for b in bodies if bodies.count(b) > 1}
    assert repeated == {json.dumps(in_flight, sort_keys=True)}
    run = NoteBatch.objects.get(pk=construction.note.batch_id).run
    assert RunCall.objects.filter(run=run, status="done").count() == len(paid)
    assert "took over from dead process" in log.read_text()


def test_a_starting_worker_picks_up_a_step_abandoned_elsewhere(
    make_construction, chartom_backend, llm_server, tmp_path
) -> None:
    """A step a worker on another host left running: its lease expired, and no message
    or envelope will bring it back. The next worker to start sends it (worker_ready)."""
    llm_server.responder = Script()
    abandoned = make_construction(
        stage="filter", state="queued", dimension="belief", backend=chartom_backend
    )
    Construction.objects.filter(pk=abandoned.pk).update(
        state="running",
        lease_expires_at=timezone.now() - timedelta(minutes=1),
        lease_holder_host="gone-host.example",
        lease_holder_pid=4242,
    )
    purge_queues()
    log = tmp_path / "worker.log"
    worker = start_worker(log, name="chartom-start")
    try:
        wait_for(
            lambda: Construction.objects.get(pk=abandoned.pk).stage == "extract",
            timeout=60,
            what="the starting worker to send the abandoned step again",
            log=log,
        )
    finally:
        stop_worker(worker)
    abandoned.refresh_from_db()
    assert (abandoned.state, abandoned.filter_verdict) == ("waiting_human", "yes")
    assert llm_server.request_count == 1
    assert f"requeued stale CharToM-QA step(s) {abandoned.pk}" in log.read_text()
