"""Queued work is never lost: a worker killed with jobs queued, a restart, one sweep.

Runs on SQLite + kombu's filesystem broker and, in CI's second pass, on PostgreSQL +
Redis. The filesystem transport deletes a message when a worker fetches it; Redis
keeps an unacknowledged one for its visibility timeout (an hour): either way the
killed worker's job would wait or be lost without the envelope sweep.
"""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from common.models import QueuedJob
from common.queueing import job_key, queued_job_create
from modeling.models import Run, RunCall
from modeling.runs.services import RUN_TASK_NAME, run_create
from reports.models import ReportJob
from reports.services import REPORT_TASK_NAME, report_job_create
from tests.celery_worker import purge_queues, start_worker, stop_worker, wait_for

from .conftest import prompt_keys

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_killed_worker_with_jobs_queued_every_job_finishes_once(
    openai_backend, llm_server, dyntom_stages, tmp_path, monkeypatch
):
    openai_backend.max_concurrency = 1
    openai_backend.save()
    lock = threading.Lock()
    state = {"seen": 0, "hold": True}
    release = threading.Event()

    def responder(body: dict) -> str:
        # The first request is held unanswered: the first worker dies inside its run.
        with lock:
            state["seen"] += 1
            hold = state["hold"] and state["seen"] == 1
        if hold:
            release.wait(90)
        return json.dumps(dict.fromkeys(prompt_keys(body), "a"))

    llm_server.responder = responder
    purge_queues()
    log = tmp_path / "worker.log"
    # The first worker never sweeps on its own (a long delay), the second sweeps once.
    monkeypatch.setenv("TOMLAB_REQUEUE_AFTER_S", "3600")
    monkeypatch.setenv("TOMLAB_SWEEP_EVERY_S", "0")
    first = start_worker(log, name="first")
    second = None
    try:
        # Three temperatures: three sets of prompts, none answered from another's cache.
        runs = [
            run_create(
                benchmark="dyntom",
                method="vanilla",
                backend=openai_backend,
                selection={},
                params={"temperature": t},
            )
            for t in (0.0, 0.1, 0.2)
        ]
        reports = [report_job_create(benchmark="dyntom") for _ in range(2)]
        # A report whose message was never sent: the web process died between the
        # commit and the send.
        unsent = report_job_create(benchmark="dyntom", enqueue=False)
        queued_job_create(REPORT_TASK_NAME, (unsent.pk,))

        wait_for(
            lambda: llm_server.request_count == 1,
            timeout=90,
            what="the first worker to send its first (held) call",
            log=log,
        )
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        taken = QueuedJob.objects.filter(taken_at__isnull=False)
        assert [j.key for j in taken] == [job_key(RUN_TASK_NAME, (runs[0].pk,))]
        assert not taken.get().finished_at
        assert ReportJob.objects.get(pk=unsent.pk).status == ReportJob.Status.QUEUED

        with lock:
            state["hold"] = False
        # Every envelope is due at once: the messages still on the broker are sent a
        # second time, and those second deliveries must do nothing.
        monkeypatch.setenv("TOMLAB_REQUEUE_AFTER_S", "0")
        second = start_worker(log, name="second")
        jobs = [*runs, *reports, unsent]
        wait_for(
            lambda: all(
                type(job).objects.get(pk=job.pk).status in ("succeeded", "failed") for job in jobs
            ),
            timeout=180,
            what="the second worker to finish every job",
            log=log,
        )
        # Duplicates still on the broker are taken and dropped before the worker stops.
        wait_for(
            lambda: not QueuedJob.objects.filter(taken_at__isnull=True).exists(),
            timeout=60,
            what="every envelope to be taken",
            log=log,
        )
        answered = llm_server.answered  # the held reply is let go only after this
    finally:
        release.set()
        stop_worker(first)
        if second is not None:
            stop_worker(second)

    for run in runs:
        run.refresh_from_db()
        assert run.status == Run.Status.SUCCEEDED, run.error
        assert (run.done_calls, run.total_calls, run.error_calls) == (24, 24, 0)
        assert RunCall.objects.filter(run=run).count() == 24
    for job in [*reports, unsent]:
        job.refresh_from_db()
        assert job.status == ReportJob.Status.SUCCEEDED, job.error

    # No paid call twice: every answered request body is distinct (the held first
    # call was never answered to the dead worker; the second worker asked it again).
    paid = [json.dumps(r, sort_keys=True) for r in answered]
    assert len(paid) == len(set(paid)) == 72
    assert llm_server.request_count == 73

    # Each job's envelope ran to its end exactly once; the sweep re-sent the killed
    # worker's run and the never-sent report, and the re-sent copies of messages
    # still on the broker were dropped as duplicates.
    for key in [job_key(RUN_TASK_NAME, (r.pk,)) for r in runs] + [
        job_key(REPORT_TASK_NAME, (j.pk,)) for j in [*reports, unsent]
    ]:
        envelopes = list(QueuedJob.objects.filter(key=key))
        finished = [e for e in envelopes if e.finished_at]
        assert len(finished) >= 1, key
        assert all(e.sends == 2 for e in envelopes if e.key.startswith(REPORT_TASK_NAME)), key
    text = log.read_text()
    assert "sweep: re-sent" in text
    assert "duplicate delivery: skipped" in text
