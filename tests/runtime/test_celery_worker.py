"""A real Celery worker process runs queued imports on whatever broker is configured.

On SQLite this exercises the embedded default (kombu's filesystem transport); in CI's
second pass, DATABASE_URL/CELERY_BROKER_URL point at PostgreSQL + Redis.
"""

import time

import pytest
from django.core.management import call_command

from benchmarks.models import DynToMQuestion, DynToMStage, ImportJob
from benchmarks.services import import_job_create
from tests.celery_worker import purge_queues, start_worker, stop_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def worker(tmp_path):
    purge_queues()
    proc = start_worker(tmp_path / "worker.log")
    yield proc
    stop_worker(proc)


def _wait_finished(job_id: int, timeout: float = 90) -> ImportJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = ImportJob.objects.get(pk=job_id)
        if job.status in (ImportJob.Status.SUCCEEDED, ImportJob.Status.FAILED):
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} still {job.status} after {timeout}s")


def test_worker_runs_queued_import(worker, shared_data, tmp_path):
    job = import_job_create(format_name="dyntom", path=shared_data / "dyntom", split="test")
    done = _wait_finished(job.pk)
    assert done.status == ImportJob.Status.SUCCEEDED, done.error
    assert done.progress_done == 24
    assert DynToMStage.objects.count() == 24
    assert DynToMQuestion.objects.count() == 1719
    assert done.report["created"]["DynToMQuestion"] == 1719

    bad = import_job_create(format_name="dyntom", path=tmp_path / "nowhere", split="")
    failed = _wait_finished(bad.pk)
    assert failed.status == ImportJob.Status.FAILED
    assert str(tmp_path / "nowhere") in failed.error
    assert DynToMStage.objects.count() == 24


def test_background_flag_queues_a_job(shared_data, capsys):
    call_command("import_benchmark", "dyntom", str(shared_data / "dyntom"), "--background")
    job = ImportJob.objects.get()
    assert job.status == ImportJob.Status.QUEUED
    assert f"queued import job {job.pk}" in capsys.readouterr().out
