"""A batch imported without a backend (the demo, ``--no-enqueue``) is given one later."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.chartom.demo import chartom_demo_load
from annotation.chartom.llm_steps import construction_step_run
from annotation.models import Construction, NoteBatch
from tests.factories import DEFAULT_PASSWORD, UserFactory

from .test_llm_steps import Script

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(shared_data) -> NoteBatch:
    return chartom_demo_load(shared_data)


def _client(client, role: str):
    user = UserFactory(username=f"start-{role}", role=role)
    assert client.login(username=user.username, password=DEFAULT_PASSWORD)
    return client


def test_a_batch_without_backend_waits_then_starts_once(client, demo, chartom_backend, llm_server):
    llm_server.responder = Script()
    researcher = _client(client, "researcher")
    page = researcher.get(reverse("annotation:chartom-batch", args=[demo.pk]))
    assert page.context["busy"] is False  # nothing polls a batch no step can move
    assert b"Start LLM steps" in page.content

    response = researcher.post(
        reverse("annotation:chartom-batch-start", args=[demo.pk]),
        {"backend": chartom_backend.pk, "budget_tokens": "50000"},
        follow=True,
    )
    assert "12 LLM steps queued on chartom-test" in response.content.decode()
    demo.refresh_from_db()
    assert (demo.backend, demo.model, demo.budget_tokens) == (
        chartom_backend,
        "test-model",
        50000,
    )
    # The queued steps now run on that backend (as the worker would).
    first = Construction.objects.filter(note__batch=demo).order_by("pk").first()
    assert construction_step_run(construction_id=first.pk) == "advanced:extract"

    again = researcher.post(
        reverse("annotation:chartom-batch-start", args=[demo.pk]),
        {"backend": chartom_backend.pk},
        follow=True,
    )
    assert "already runs on backend chartom-test" in again.content.decode()


def test_bad_start_input_and_roles(client, demo, chartom_backend):
    url = reverse("annotation:chartom-batch-start", args=[demo.pk])
    annotator = _client(client, "annotator")
    assert annotator.post(url, {"backend": chartom_backend.pk}).status_code == 403
    client.logout()
    researcher = _client(client, "researcher")
    response = researcher.post(url, {"backend": "nope"}, follow=True)
    assert "backend: choose one of the backends" in response.content.decode()
    response = researcher.post(url, {"backend": chartom_backend.pk, "budget_tokens": "-3"})
    demo.refresh_from_db()
    assert demo.backend is None


def test_retry_all_queues_every_failed_step_of_the_batch(client, make_construction):
    failed = [
        make_construction(dimension=d, state="needs_retry", error="filter: backend down")
        for d in ("belief", "desire")
    ]
    done = make_construction(dimension="emotion", stage="dropped", state="done")
    researcher = _client(client, "researcher")
    batch_id = done.note.batch_id
    page = researcher.get(reverse("annotation:chartom-batch", args=[batch_id]))
    assert b"Retry all 2" in page.content
    response = researcher.post(
        reverse("annotation:chartom-batch-retry", args=[batch_id]), follow=True
    )
    assert "2 failed LLM steps queued again." in response.content.decode()
    states = {c.pk: c.state for c in Construction.objects.all()}
    assert [states[c.pk] for c in failed] == ["queued", "queued"]
    assert states[done.pk] == "done"
    assert all(c.error == "" for c in Construction.objects.filter(pk__in=[f.pk for f in failed]))


@pytest.fixture
def eager_celery():
    """Queued tasks run in this process, as the message is sent (CELERY_TASK_ALWAYS_EAGER)."""
    from config.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield app
    app.conf.task_always_eager = before


def test_start_llm_steps_queues_the_steps_that_failed_for_want_of_a_backend(
    client,
    make_construction,
    chartom_backend,
    llm_server,
    eager_celery,
    django_capture_on_commit_callbacks,
):
    llm_server.responder = Script()
    waiting = [make_construction(dimension=d) for d in ("belief", "intention")]
    batch_id = waiting[0].note.batch_id
    # A worker took the steps before the batch had a backend: they failed, with a reason.
    for construction in waiting:
        assert construction_step_run(construction_id=construction.pk) == "needs_retry"
    researcher = _client(client, "researcher")
    url = reverse("annotation:chartom-batch", args=[batch_id])
    page = researcher.get(url).content.decode()
    assert "has no LLM backend; set one and retry" in page and "Start LLM steps" in page

    with django_capture_on_commit_callbacks(execute=True) as sent:
        response = researcher.post(
            reverse("annotation:chartom-batch-start", args=[batch_id]),
            {"backend": chartom_backend.pk},
            follow=True,
        )
    assert "2 LLM steps queued on chartom-test" in response.content.decode()
    assert len(sent) == 2  # one message per step, sent on commit
    # The worker (eager here) ran both steps on the backend just chosen.
    assert llm_server.request_count == 2
    for construction in waiting:
        construction.refresh_from_db()
        assert (construction.stage, construction.state, construction.error) == (
            "extract",
            "waiting_human",
            "",
        )
    page = researcher.get(url).content.decode()
    assert "has no LLM backend" not in page and "Start LLM steps" not in page
