"""A researcher sees a job no worker has taken on its page; the operator's list of
every queued job re-queues it, in the browser."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from common.models import QueuedJob
from common.queueing import job_key
from reports.services import REPORT_TASK_NAME, report_job_create
from tests.celery_worker import purge_queues

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_waiting_job_is_shown_and_requeued(
    live_server, page, screenshot, researcher, log_in_as, nav
):
    purge_queues()
    job = report_job_create(benchmark="dyntom")  # no worker runs in this test
    envelope = QueuedJob.objects.get(key=job_key(REPORT_TASK_NAME, (job.pk,)))
    QueuedJob.objects.filter(pk=envelope.pk).update(queued_at=timezone.now() - timedelta(minutes=7))
    log_in_as(page)

    page.goto(f"{live_server.url}/reports/jobs/{job.pk}/")
    notice = page.get_by_test_id("queued-job")
    expect(notice).to_contain_text("Queued 7\xa0minutes ago, no worker has taken it.")
    screenshot("queued-1-report-job")

    # The list shows every workspace's jobs: the operator's (a superuser).
    page.get_by_role("button", name="Log out").click()
    get_user_model().objects.create_superuser("operator", password="pw-op-123!")
    log_in_as(page, "operator", "pw-op-123!")
    nav(page, "Admin", "Queued jobs")
    table = page.get_by_test_id("queued-jobs")
    expect(table).to_contain_text(REPORT_TASK_NAME)
    expect(table.get_by_role("row")).to_have_count(2)  # the head and this job
    screenshot("queued-2-list")
    table.get_by_role("button", name="Re-queue").click()
    expect(page.get_by_text(f"Re-queued {REPORT_TASK_NAME} ({job.pk},).")).to_be_visible()
    expect(table).to_contain_text("2 times")
    assert QueuedJob.objects.get(pk=envelope.pk).sends == 2
    table.get_by_role("link", name=f"#{envelope.pk}").click()
    expect(page).to_have_url(f"{live_server.url}/reports/jobs/{job.pk}/")
    purge_queues()
