"""The researcher page at /annotation/generation/: start a job, watch it, see its stages."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.dyntom.generation.services import generation_job_create, generation_job_run
from annotation.models import GenerationJob
from modeling.models import Backend, PromptTemplate

from .test_generation import GenerationResponder, backend, pools

__all__ = ["backend", "pools"]  # fixtures used below

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
URL = "/annotation/generation/"


@pytest.fixture
def client_researcher(client, researcher):
    client.force_login(researcher)
    return client


def test_url_names():
    assert reverse("annotation:generation") == URL
    assert reverse("annotation:generation-job", args=[3]) == f"{URL}3/"


def test_only_researchers(client, rater, annotator, backend):
    assert client.get(URL).status_code == 302  # to the login page
    for user in (rater, annotator):
        client.force_login(user)
        assert client.get(URL).status_code == 403
        assert client.post(URL, {"backend": backend.pk}).status_code == 403
    assert GenerationJob.objects.count() == 0


def test_start_a_job_then_watch_it_finish(
    client_researcher, backend, pools, llm_server, researcher
):
    page = client_researcher.get(URL)
    assert page.status_code == 200
    # The default templates exist from the first visit, editable before any job.
    assert set(
        PromptTemplate.objects.filter(name__startswith="dyntom-gen-").values_list("name", flat=True)
    ) == {
        "dyntom-gen-relationship",
        "dyntom-gen-trajectory",
        "dyntom-gen-scenarios",
        "dyntom-gen-retry",
    }
    assert b'name="scenario_count"' in page.content and b'value="5"' in page.content

    response = client_researcher.post(
        URL, {"backend": backend.pk, "stage_count": 2, "scenario_count": 4, "seed": 5}
    )

    job = GenerationJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"{URL}{job.pk}/"
    assert (job.stage_count, job.scenario_count, job.seed) == (2, 4, 5)
    assert job.created_by == researcher and job.status == "queued"
    detail = client_researcher.get(f"{URL}{job.pk}/")
    assert b'hx-trigger="every 2s"' in detail.content
    assert b"dyntom-gen-trajectory v1" in detail.content
    # Two stages of four scenarios each, not "2 of 4 scenarios" (issue 49's walk).
    assert b'data-testid="job-stages">2 stages, 4 scenarios each<' in detail.content

    # While it runs the partial keeps polling (200, region only).
    partial = client_researcher.get(f"{URL}{job.pk}/", headers=HX)
    assert partial.status_code == 200
    assert partial.content.lstrip().startswith(b'<section id="job-progress"')
    assert b"<html" not in partial.content

    llm_server.responder = GenerationResponder(bad={"scenarios": ["{}"] * 3})
    generation_job_run(job_id=job.pk)

    done = client_researcher.get(f"{URL}{job.pk}/", headers=HX)
    assert done.status_code == 286  # htmx stops polling
    text = done.content.decode()
    assert "hx-trigger" not in text
    assert "8</strong> / 8 steps done" in text
    # Stage 1's scenarios failed three times: its reason is shown; stage 2 waits.
    assert "needs attention" in text and "scenarios: 3 replies failed validation" in text
    assert "awaiting validation" in text
    # Succeeded, but not wholly: the badge says how many stages can be used (issue 25).
    partly = 'class="badge badge-warning" data-testid="job-status">succeeded: 1 of 2 stages usable<'
    assert partly in text
    assert partly in client_researcher.get(URL).content.decode()
    job.refresh_from_db()
    assert (
        f'href="/runs/{job.run_id}/"' in client_researcher.get(f"{URL}{job.pk}/").content.decode()
    )


def test_invalid_form_is_refused_with_the_field_named(client_researcher, backend):
    response = client_researcher.post(
        URL, {"backend": backend.pk, "stage_count": 1, "scenario_count": 8, "seed": 0}
    )
    assert response.status_code == 400
    assert b"Scenarios per stage" in response.content
    assert b"less than or equal to 7" in response.content
    assert GenerationJob.objects.count() == 0


def test_backend_without_a_model_is_a_form_error(client_researcher, llm_server):
    bare = Backend.objects.create(name="bare", kind="openai", base_url=llm_server.base_url)
    response = client_researcher.post(
        URL, {"backend": bare.pk, "stage_count": 1, "scenario_count": 5, "seed": 0}
    )
    assert response.status_code == 400
    assert b"backend bare has no default model" in response.content


def test_job_list_query_count_does_not_grow(client_researcher, backend):
    from annotation.dyntom.generation.services import generation_job_create

    def queries_for_page() -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client_researcher.get(URL)
        assert response.status_code == 200
        return len(captured)

    generation_job_create(backend=backend, seed=0, enqueue=False)
    one = queries_for_page()
    for seed in range(1, 6):
        generation_job_create(backend=backend, seed=seed, enqueue=False)
    assert queries_for_page() == one <= 8
    assert client_researcher.get(URL).content.count(b"badge-queued") == 6


def test_a_job_with_no_usable_stage_shows_needs_attention(
    client_researcher, backend, pools, llm_server, settings
):
    """Issue 25: "Succeeded, 4/4 steps done" was shown for a job whose only stage needed
    attention."""
    settings.TOMLAB_GENERATION_MAX_ATTEMPTS = 3
    llm_server.responder = GenerationResponder(bad={"relationship": [""] * 3})
    job = generation_job_create(backend=backend, stage_count=1, scenario_count=4, enqueue=False)
    generation_job_run(job_id=job.pk)

    done = client_researcher.get(f"{URL}{job.pk}/", headers=HX)
    assert done.status_code == 286  # finished: polling stops
    text = done.content.decode()
    badge = 'class="badge badge-needs_attention" data-testid="job-status">needs attention: 0 of 1'
    assert f"{badge} stage usable<" in text
    assert "no usable stage: 1 of 1 stage needs attention" in text
    assert "relationship: 3 replies failed validation" in text
    assert f"{badge} stage usable<" in client_researcher.get(URL).content.decode()


def test_a_job_no_worker_took_says_so_with_requeue(
    client_researcher, backend, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from common.models import QueuedJob
    from tests.celery_worker import purge_queues

    purge_queues()
    with django_capture_on_commit_callbacks(execute=True):
        job = generation_job_create(backend=backend, seed=0)
    QueuedJob.objects.filter(args=[job.pk], task="annotation.generation_job").update(
        queued_at=timezone.now() - timedelta(minutes=7)
    )
    page = client_researcher.get(f"{URL}{job.pk}/").content.decode()
    assert "Queued 7\xa0minutes ago, no worker has taken it." in page
    assert "Re-queue" in page
    purge_queues()
