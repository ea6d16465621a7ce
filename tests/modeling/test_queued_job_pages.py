"""A run no worker has taken says so on its page, and is listed on /jobs/ with a link."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from common.models import QueuedJob
from common.queueing import job_key
from modeling.runs.services import RUN_TASK_NAME, run_create
from tests.celery_worker import purge_queues

pytestmark = pytest.mark.django_db


def test_run_page_shows_the_waiting_job_until_a_worker_takes_it(
    client, researcher, openai_backend, dyntom_stages, django_capture_on_commit_callbacks
):
    purge_queues()
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(benchmark="dyntom", method="vanilla", backend=openai_backend, selection={})
    envelope = QueuedJob.objects.get(key=job_key(RUN_TASK_NAME, (run.pk,)))
    QueuedJob.objects.filter(pk=envelope.pk).update(
        queued_at=timezone.now() - timedelta(minutes=12)
    )
    client.force_login(researcher)
    url = reverse("modeling:run-detail", args=[run.pk])
    page = client.get(url).content.decode()
    assert "Queued 12\xa0minutes ago, no worker has taken it." in page
    assert reverse("queued-job-requeue", args=[envelope.pk]) in page
    client.force_login(get_user_model().objects.create_superuser("operator", password="pw-op-1!"))
    listing = client.get(reverse("queued-jobs")).content.decode()  # the operator's page
    assert f'<a href="{url}">#{envelope.pk}</a>' in listing

    QueuedJob.objects.filter(pk=envelope.pk).update(taken_at=timezone.now())
    assert "no worker has taken it" not in client.get(url).content.decode()
    purge_queues()
