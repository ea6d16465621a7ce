"""Envelopes of queued jobs: the sweep, the job pages' notice and Re-queue.

The messages go to this run's own broker (tests never run tasks eagerly here); the
kill-the-worker test in tests/modeling/test_queued_jobs_worker.py has a real worker.
"""

from __future__ import annotations

import os
import socket
import subprocess
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from common.models import QueuedJob
from common.queueing import (
    job_key,
    queued_job_create,
    queued_job_take,
    queued_job_waiting_for,
    queued_jobs_sweep,
)
from reports.models import ReportJob
from reports.services import REPORT_TASK_NAME, report_job_create
from tests.celery_worker import purge_queues

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _empty_broker():
    purge_queues()
    yield
    purge_queues()


def _report_job(django_capture_on_commit_callbacks) -> tuple[ReportJob, QueuedJob]:
    with django_capture_on_commit_callbacks(execute=True):
        job = report_job_create(benchmark="dyntom")
    return job, QueuedJob.objects.get(key=job_key(REPORT_TASK_NAME, (job.pk,)))


def _age(envelope: QueuedJob, minutes: int) -> None:
    QueuedJob.objects.filter(pk=envelope.pk).update(
        queued_at=timezone.now() - timedelta(minutes=minutes)
    )


def test_sending_records_the_envelope_in_the_callers_transaction(
    django_capture_on_commit_callbacks,
):
    job, envelope = _report_job(django_capture_on_commit_callbacks)
    assert envelope.task == REPORT_TASK_NAME and envelope.args == [job.pk]
    assert envelope.sends == 1 and envelope.taken_at is None
    assert queued_job_waiting_for(job) == envelope


def test_sweep_resends_only_what_waited_too_long(settings, django_capture_on_commit_callbacks):
    settings.TOMLAB_REQUEUE_AFTER_S = 300
    _, old = _report_job(django_capture_on_commit_callbacks)
    _, fresh = _report_job(django_capture_on_commit_callbacks)
    _age(old, 7)
    result = queued_jobs_sweep()
    assert result.untaken == [old.pk] and result.orphaned == []
    old.refresh_from_db()
    fresh.refresh_from_db()
    assert (old.sends, fresh.sends) == (2, 1)
    assert old.queued_at > timezone.now() - timedelta(minutes=1)  # waits afresh
    assert queued_jobs_sweep().count == 0  # a second sweep finds nothing due


def test_sweep_resends_a_job_whose_worker_died_and_leaves_a_live_ones(
    django_capture_on_commit_callbacks,
):
    _, dead = _report_job(django_capture_on_commit_callbacks)
    _, alive = _report_job(django_capture_on_commit_callbacks)
    gone = subprocess.Popen(["true"])
    gone.wait()
    host = socket.gethostname()
    QueuedJob.objects.filter(pk=dead.pk).update(
        taken_at=timezone.now(), taken_by=f"{host}:{gone.pid}"
    )
    QueuedJob.objects.filter(pk=alive.pk).update(
        taken_at=timezone.now(), taken_by=f"{host}:{os.getppid()}"
    )
    assert queued_jobs_sweep().orphaned == [dead.pk]
    dead.refresh_from_db()
    assert dead.taken_at is None and dead.sends == 2
    assert QueuedJob.objects.get(pk=alive.pk).taken_at is not None


def test_a_second_delivery_cannot_take_a_taken_envelope():
    envelope = queued_job_create(REPORT_TASK_NAME, (1,))
    assert queued_job_take(envelope.pk) is True
    assert queued_job_take(envelope.pk) is False


def test_job_page_says_no_worker_has_taken_it_and_researchers_requeue(
    client, researcher, rater, django_capture_on_commit_callbacks
):
    job, envelope = _report_job(django_capture_on_commit_callbacks)
    _age(envelope, 7)
    client.force_login(researcher)
    page = client.get(reverse("reports:job", args=[job.pk])).content.decode()
    assert "Queued 7\xa0minutes ago, no worker has taken it." in page
    # The list of every workspace's queued jobs is the operator's (issue 46).
    assert client.get(reverse("queued-jobs")).status_code == 403
    operator = get_user_model().objects.create_superuser("operator", password="pw-op-123!")
    client.force_login(operator)
    listing = client.get(reverse("queued-jobs")).content.decode()
    assert f"#{envelope.pk}" in listing and REPORT_TASK_NAME in listing

    url = reverse("queued-job-requeue", args=[envelope.pk])
    client.force_login(rater)
    assert client.post(url).status_code == 403
    assert client.get(reverse("queued-jobs")).status_code == 403
    assert QueuedJob.objects.get(pk=envelope.pk).sends == 1

    client.force_login(researcher)
    back = reverse("reports:job", args=[job.pk])
    response = client.post(url, {"next": back}, follow=True)
    assert response.redirect_chain[-1][0] == back
    assert "Re-queued reports.build_report" in response.content.decode()
    assert QueuedJob.objects.get(pk=envelope.pk).sends == 2
    # Elsewhere than this site: back to the queued-jobs page instead (the operator's).
    client.force_login(operator)
    response = client.post(url, {"next": "https://evil.example/"})
    assert response["Location"] == reverse("queued-jobs")
    assert QueuedJob.objects.get(pk=envelope.pk).sends == 3

    # Once a worker has taken it, the notice goes and Re-queue refuses.
    queued_job_take(envelope.pk)
    assert "no worker has taken it" not in client.get(back).content.decode()
    response = client.post(url, follow=True)
    assert "already taken" in response.content.decode()
    assert QueuedJob.objects.get(pk=envelope.pk).sends == 3


def test_a_redelivery_takes_over_from_a_dead_taker_on_this_host():
    envelope = queued_job_create(REPORT_TASK_NAME, (1,))
    gone = subprocess.Popen(["true"])
    gone.wait()
    QueuedJob.objects.filter(pk=envelope.pk).update(
        taken_at=timezone.now(), taken_by=f"{socket.gethostname()}:{gone.pid}"
    )
    assert queued_job_take(envelope.pk) is True
    envelope.refresh_from_db()
    assert envelope.taken_by == f"{socket.gethostname()}:{os.getpid()}"
    # A live taker (this process) keeps it; a finished one is never taken again.
    assert queued_job_take(envelope.pk) is False
    QueuedJob.objects.filter(pk=envelope.pk).update(
        taken_by=f"{socket.gethostname()}:{gone.pid}", finished_at=timezone.now()
    )
    assert queued_job_take(envelope.pk) is False
