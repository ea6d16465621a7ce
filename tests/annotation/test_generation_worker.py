"""A generation job queued from the service and run by a real Celery worker process.

Runs on SQLite + the filesystem broker and, in CI's second pass, on PostgreSQL + Redis.
The worker calls the loopback server of this process over its socket.
"""

from __future__ import annotations

import time

import pytest

from annotation.dyntom.generation.services import generated_stage_keep, generation_job_create
from annotation.dyntom.validation.selectors import waiting_generated_stages
from annotation.models import GenerationJob, ValidationBatch
from benchmarks.models import DynToMQuestion
from modeling.models import Run
from tests.celery_worker import purge_queues, start_worker, stop_worker

from .test_generation import MALFORMED, GenerationResponder, backend, pools

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
