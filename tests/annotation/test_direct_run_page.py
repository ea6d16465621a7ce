"""A direct-call run's page names the job that makes its calls and offers no resume of
its own: a CharToM-QA construction batch's run stays "running", every call so far done,
while annotators work, and the engine refuses to resume it (the job must)."""

from __future__ import annotations

import pytest
from django.test import Client

from annotation.models import NoteBatch
from modeling.models import Backend, Run
from modeling.runs.direct import run_direct_create
from tests.factories import generation_job
from tests.page_text import without_csrf

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


@pytest.fixture
def backend(db) -> Backend:
    return Backend.objects.create(name="b", kind=Backend.Kind.OPENAI, default_model="m")


def _direct_run(backend: Backend, name: str) -> Run:
    return run_direct_create(
        name=name, benchmark="chartom-qa-build", method="construct", backend=backend
    )


def test_a_construction_batchs_running_run_links_its_batch_and_offers_no_resume(client_, backend):
    run = _direct_run(backend, "CharToM-QA construction: notes")
    batch = NoteBatch.objects.create(name="notes", backend=backend, run=run)

    page = without_csrf(client_.get(f"/runs/{run.pk}/").content.decode())

    assert run.status == Run.Status.RUNNING
    assert f'href="/annotation/chartom/batches/{batch.pk}/"' in page
    assert "the CharToM-QA construction batch &#x27;notes&#x27;" in page
    assert "while that job has steps to come" in page
    assert "Resume run" not in page
    assert "Cancel run" in page


def test_a_generation_jobs_failed_run_links_its_job_and_offers_no_resume(client_, backend):
    run = _direct_run(backend, "DynToM generation")
    job = generation_job(backend, run=run)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)

    page = without_csrf(client_.get(f"/runs/{run.pk}/").content.decode())

    assert f'href="/annotation/generation/{job.pk}/"' in page
    assert f"DynToM generation job {job.pk}" in page
    assert "steps to come" not in page
    assert "Resume run" not in page


def test_a_direct_run_whose_job_was_deleted_says_so(client_, backend):
    run = _direct_run(backend, "orphan")

    page = client_.get(f"/runs/{run.pk}/").content.decode()

    assert "a job (since deleted)" in page
    assert "Resume run" not in page


def test_an_engine_runs_page_still_offers_resume_and_names_no_job(client_, backend):
    run = Run.objects.create(
        name="engine run",
        benchmark="dyntom",
        method="vanilla",
        backend=backend,
        status=Run.Status.FAILED,
    )

    page = client_.get(f"/runs/{run.pk}/").content.decode()

    assert "Resume run" in page
    assert 'data-testid="direct-owner"' not in page
