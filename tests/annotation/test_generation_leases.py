"""Leases of DynToM generation jobs: who holds a running job, and who may take it over.

A job "running" in a process that is gone (dead on this host, or its lease expired) is
taken over by the next delivery of its task and sent again when a worker starts; a job
held by a live process is left to it (before leases, a second delivery ran it a second
time beside the first, asking its calls twice). Calls answered before a takeover come
back from their RunCall rows.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from annotation.dyntom.generation.services import (
    GENERATION_TASK_NAME,
    generation_job_create,
    generation_job_run,
)
from annotation.dyntom.generation.tasks import generation_job_task, requeue_stale_generation_jobs
from annotation.models import GeneratedStage, GenerationJob, ValidationBatch
from common.models import QueuedJob
from common.queueing import job_key
from modeling.models import Run
from modeling.runs.leases import LeaseHeld, _process_started_at

from .test_generation import GenerationResponder, backend, pools, step_of

__all__ = ["backend", "pools"]  # fixtures used below

pytestmark = pytest.mark.django_db


def _job(backend, **kwargs: Any) -> GenerationJob:
    return generation_job_create(
        backend=backend, enqueue=False, stage_count=1, scenario_count=4, seed=5, **kwargs
    )


def a_dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def hold(
    job: GenerationJob, *, pid: int, host: str | None = None, started_at=None, seconds=300
) -> None:
    """Mark the job running under a lease held by ``pid`` (on this host by default)."""
    GenerationJob.objects.filter(pk=job.pk).update(
        status="running",
        finished_at=None,
        lease_expires_at=timezone.now() + timedelta(seconds=seconds),
        lease_holder_host=socket.gethostname() if host is None else host,
        lease_holder_pid=pid,
        lease_holder_started_at=started_at,
    )


def test_a_job_held_by_a_live_process_is_left_to_it(backend, pools, llm_server) -> None:
    llm_server.responder = GenerationResponder()
    here, elsewhere = _job(backend), _job(backend)
    me = os.getpid()
    hold(here, pid=me, started_at=_process_started_at(me))
    hold(elsewhere, pid=4242, host="other-host.example", seconds=120)

    assert generation_job_run(job_id=here.pk) == "skipped"
    assert generation_job_task.apply(args=(here.pk,)).get() == "skipped"
    with pytest.raises(LeaseHeld, match=r"generation job \d+ is held by process 4242") as held:
        generation_job_run(job_id=elsewhere.pk)
    assert 100 < held.value.seconds <= 120
    # The task tries again when that lease would expire (eagerly: it gives up at once).
    assert generation_job_task.apply(args=(elsewhere.pk,)).get() == "skipped"

    assert llm_server.request_count == 0
    assert not GeneratedStage.objects.exists() and not ValidationBatch.objects.exists()
    assert set(GenerationJob.objects.values_list("status", flat=True)) == {"running"}


def test_a_job_whose_holder_died_is_taken_over_and_asks_nothing_twice(
    backend, pools, llm_server
) -> None:
    responder = GenerationResponder()
    llm_server.responder = responder
    job = _job(backend)
    assert generation_job_run(job_id=job.pk) == "succeeded"
    stage = job.stages.get()
    # As if the worker had died after the trajectory: the job says "running", its lease
    # has minutes left, its holder is dead, and the task is delivered again.
    GeneratedStage.objects.filter(pk=stage.pk).update(
        status="generating", scenarios={}, questions={}
    )
    hold(job, pid=a_dead_pid())
    asked = llm_server.request_count

    assert generation_job_task.apply(args=(job.pk,)).get() == "succeeded"

    job.refresh_from_db()
    assert (job.status, job.lease_holder_pid, job.lease_expires_at) == ("succeeded", None, None)
    # The scenarios call was answered before: its RunCall holds the reply.
    assert llm_server.request_count == asked
    assert ValidationBatch.objects.filter(name=f"Generation job {job.pk}").exists()

    # A live PID that started at another time is another process (the PID was reused);
    # a lease that expired elsewhere is free too.
    for holder in (
        {"pid": os.getpid(), "started_at": timezone.now() - timedelta(days=3)},
        {"pid": 4242, "host": "gone-host.example", "seconds": -1},
    ):
        hold(job, **holder)
        assert generation_job_run(job_id=job.pk) == "succeeded"
    assert llm_server.request_count == asked


@pytest.mark.django_db(transaction=True)
def test_a_job_taken_over_meanwhile_stops_without_finishing(backend, pools, llm_server) -> None:
    job = _job(backend)
    valid = GenerationResponder()

    def responder(body: dict[str, Any]) -> str:
        if step_of(body) == "trajectory":
            # While this reply is on its way, another worker takes the job for dead (its
            # own connection, committed, as a worker's is).
            GenerationJob.objects.filter(pk=job.pk).update(
                lease_holder_host="other-host.example", lease_holder_pid=4242
            )
            connection.close()
        return valid(body)

    llm_server.responder = responder
    assert generation_job_run(job_id=job.pk) == "skipped"
    job.refresh_from_db()
    # Neither finished nor failed: the job is the other worker's now.
    assert (job.status, job.error, job.finished_at) == ("running", "", None)
    assert job.lease_holder_pid == 4242
    assert Run.objects.get(pk=job.run_id).status == "running"
    assert llm_server.request_count == 2  # relationship, trajectory; no scenarios asked


def test_a_starting_worker_sends_again_the_stale_jobs_no_envelope_brings_back(
    backend, django_capture_on_commit_callbacks
) -> None:
    live, expired, dead, waiting, done = (_job(backend) for _ in range(5))
    me = os.getpid()
    hold(live, pid=me, started_at=_process_started_at(me))
    hold(expired, pid=4242, host="gone-host.example", seconds=-60)
    hold(dead, pid=a_dead_pid())
    # A dead holder's envelope the sweep has just sent again: that message brings it back.
    hold(waiting, pid=a_dead_pid())
    QueuedJob.objects.create(
        task=GENERATION_TASK_NAME,
        args=[waiting.pk],
        key=job_key(GENERATION_TASK_NAME, [waiting.pk]),
    )
    GenerationJob.objects.filter(pk=done.pk).update(status="succeeded")

    with django_capture_on_commit_callbacks():
        requeue_stale_generation_jobs()

    sent = QueuedJob.objects.filter(task=GENERATION_TASK_NAME).values_list("args", flat=True)
    assert sorted(sent) == sorted([[expired.pk], [dead.pk], [waiting.pk]])
    with django_capture_on_commit_callbacks():
        requeue_stale_generation_jobs()  # a second start: their envelopes wait
    assert QueuedJob.objects.filter(task=GENERATION_TASK_NAME).count() == 3
