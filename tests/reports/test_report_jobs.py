"""Background report jobs: the service, the Celery task, the polled job page, the admin,
and one job on a real Celery worker."""

from __future__ import annotations

import io
import time
from datetime import timedelta

import pandas as pd
import pytest
from django.urls import reverse
from django.utils import timezone

from modeling.models import Run
from reports import services
from reports.models import ReportJob
from reports.tables import build_report
from reports.tasks import build_report_task
from tests.celery_worker import drain_queue, purge_queues, start_worker, stop_worker
from tests.modeling import conftest as run_fixtures
from tests.reports import test_views as view_tests
from tests.reports.test_views import HX, make_dyntom_run

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("dyntom_stages", "dyntom_runs")]

# Fixtures shared with the page tests (this folder has no conftest of its own).
dyntom_stages = run_fixtures.dyntom_stages
dyntom_runs = view_tests.dyntom_runs
client_researcher = view_tests.client_researcher
_fresh_report_cache = view_tests._fresh_report_cache


# --- service and task ----------------------------------------------------------------------


def test_create_queues_the_task_once_committed(
    dyntom_runs, researcher, django_capture_on_commit_callbacks
):
    first, _ = dyntom_runs
    with django_capture_on_commit_callbacks() as callbacks:
        job = services.report_job_create(
            benchmark="dyntom", run_ids=[first.pk, first.pk], created_by=researcher
        )
    assert len(callbacks) == 1
    job.refresh_from_db()
    assert (job.status, job.run_ids, job.seed, job.created_by) == (
        ReportJob.Status.QUEUED,
        [first.pk],
        0,
        researcher,
    )
    assert job.result is None and job.report() is None


def test_create_sends_the_job_id_to_the_broker(dyntom_runs, django_capture_on_commit_callbacks):
    purge_queues()
    with django_capture_on_commit_callbacks(execute=True):
        job = services.report_job_create(benchmark="dyntom")
    assert drain_queue() == [("reports.build_report", [job.pk])]


def test_create_rejects_runs_of_another_benchmark(dyntom_runs):
    with pytest.raises(ValueError, match="no chartom-qa run with id"):
        services.report_job_create(benchmark="chartom-qa", run_ids=[dyntom_runs[0].pk])
    with pytest.raises(ValueError, match="unknown benchmark"):
        services.report_job_create(benchmark="nosuch")
    assert ReportJob.objects.count() == 0


def test_task_builds_and_stores_the_report(dyntom_runs):
    second = dyntom_runs[1]
    job = services.report_job_create(benchmark="dyntom", run_ids=[second.pk], enqueue=False)
    assert build_report_task(job.pk) == ReportJob.Status.SUCCEEDED
    job.refresh_from_db()
    assert job.status == ReportJob.Status.SUCCEEDED
    assert (job.progress_done, job.progress_total, job.percent) == (1, 1, 100)
    assert job.started_at <= job.finished_at
    expected = build_report("dyntom", run_ids=[second.pk]).as_json()
    assert {k: job.result[k] for k in expected} == expected
    # The stored JSON becomes the same Report again.
    assert job.report().as_json() == expected


def test_executing_twice_does_nothing_the_second_time(dyntom_runs):
    job = services.report_job_create(benchmark="dyntom", enqueue=False)
    assert services.report_job_execute(job_id=job.pk) == ReportJob.Status.SUCCEEDED
    finished = ReportJob.objects.get(pk=job.pk).finished_at
    assert services.report_job_execute(job_id=job.pk) == ReportJob.Status.SUCCEEDED
    assert ReportJob.objects.get(pk=job.pk).finished_at == finished


def test_a_running_job_is_left_alone_unless_stale(dyntom_runs):
    job = services.report_job_create(benchmark="dyntom", enqueue=False)
    ReportJob.objects.filter(pk=job.pk).update(
        status=ReportJob.Status.RUNNING, started_at=timezone.now()
    )
    assert services.report_job_execute(job_id=job.pk) == ReportJob.Status.RUNNING
    assert ReportJob.objects.get(pk=job.pk).result is None
    # A worker that died long ago left it running: the next delivery takes it over.
    ReportJob.objects.filter(pk=job.pk).update(started_at=timezone.now() - timedelta(hours=1))
    assert services.report_job_execute(job_id=job.pk) == ReportJob.Status.SUCCEEDED


def test_a_failing_build_marks_the_job_failed(dyntom_runs):
    first, _ = dyntom_runs
    job = services.report_job_create(benchmark="dyntom", run_ids=[first.pk], enqueue=False)
    Run.objects.filter(pk=first.pk).delete()  # gone before the worker got to it
    assert build_report_task(job.pk) == ReportJob.Status.FAILED
    job.refresh_from_db()
    assert job.status == ReportJob.Status.FAILED
    assert job.error == f"ValueError: no dyntom run with id {first.pk}"
    assert job.finished_at is not None and job.result is None


# --- pages ----------------------------------------------------------------------------------


def test_build_in_background_button_creates_a_job(
    client_researcher, dyntom_runs, researcher, django_capture_on_commit_callbacks
):
    first, _ = dyntom_runs
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_researcher.post(
            reverse("reports:job-create", args=["dyntom"]), {"runs": str(first.pk)}
        )
    job = ReportJob.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("reports:job", args=[job.pk])
    assert (job.run_ids, job.created_by, len(callbacks)) == ([first.pk], researcher, 1)
    page = client_researcher.get(response.url)
    assert f"Report job {job.pk} queued." in page.content.decode()


def test_bad_job_request_goes_back_with_a_message(client_researcher, dyntom_runs):
    url = reverse("reports:job-create", args=["dyntom"])
    response = client_researcher.post(url, {"runs": "999999"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("reports:report", args=["dyntom"])
    assert "no dyntom run with id 999999" in response.content.decode()
    assert client_researcher.get(url).status_code == 405
    assert ReportJob.objects.count() == 0


def test_job_page_polls_until_finished_then_shows_the_report(client_researcher, dyntom_runs):
    job = services.report_job_create(benchmark="dyntom", enqueue=False)
    url = reverse("reports:job", args=[job.pk])

    full = client_researcher.get(url)
    assert full.status_code == 200
    content = full.content.decode()
    assert "<html" in content
    assert f'hx-get="{url}" hx-trigger="every 2s"' in content
    assert 'data-testid="job-status">queued<' in content

    partial = client_researcher.get(url, headers=HX)
    assert partial.status_code == 200
    assert "<html" not in partial.content.decode()
    assert 'id="job-progress"' in partial.content.decode()

    services.report_job_execute(job_id=job.pk)
    done = client_researcher.get(url, headers=HX)
    assert done.status_code == 286  # htmx: swap this in and stop polling
    body = done.content.decode()
    assert "hx-trigger" not in body
    assert 'data-testid="job-status">succeeded<' in body
    # The finished region carries the report, its charts and downloads from the job.
    job.refresh_from_db()
    report = job.report()
    for chart in report.charts:
        assert reverse("reports:job-chart", args=[job.pk, chart.key, "svg"]) in body
    assert 'id="table-accuracy"' in body
    assert reverse("reports:job-export", args=[job.pk, "xlsx"]) in body
    assert reverse("reports:tidy-csv", args=["dyntom"]) in body


def test_failed_job_shows_its_error_and_stops_polling(client_researcher, dyntom_runs):
    first, _ = dyntom_runs
    job = services.report_job_create(benchmark="dyntom", run_ids=[first.pk], enqueue=False)
    Run.objects.filter(pk=first.pk).delete()
    services.report_job_execute(job_id=job.pk)
    response = client_researcher.get(reverse("reports:job", args=[job.pk]), headers=HX)
    assert response.status_code == 286
    assert f"no dyntom run with id {first.pk}" in response.content.decode()


def test_job_charts_and_exports_come_from_the_stored_report(client_researcher, dyntom_runs):
    job = services.report_job_create(benchmark="dyntom", enqueue=False)
    chart = reverse("reports:job-chart", args=[job.pk, "accuracy", "svg"])
    assert client_researcher.get(chart).status_code == 404  # not built yet
    services.report_job_execute(job_id=job.pk)
    # New predictions after the build do not change what the job shows.
    make_dyntom_run("after the job", wrong_every=7)

    svg = client_researcher.get(chart)
    assert svg.status_code == 200 and svg.content.startswith(b"<?xml")
    png = client_researcher.get(reverse("reports:job-chart", args=[job.pk, "accuracy", "png"]))
    assert png.content.startswith(b"\x89PNG")
    table = client_researcher.get(reverse("reports:job-table-csv", args=[job.pk, "runs"]))
    assert f"dyntom-report-job{job.pk}-runs.csv" in table["Content-Disposition"]
    assert len(pd.read_csv(io.BytesIO(table.content))) == 2
    xlsx = client_researcher.get(reverse("reports:job-export", args=[job.pk, "xlsx"]))
    sheets = pd.read_excel(io.BytesIO(xlsx.content), sheet_name=None, engine="openpyxl")
    assert len(sheets["runs"]) == 2
    zipped = client_researcher.get(reverse("reports:job-export", args=[job.pk, "csv"]))
    assert zipped["Content-Type"] == "application/zip"
    assert (
        client_researcher.get(reverse("reports:job-export", args=[job.pk, "json"])).status_code
        == 404
    )


def test_job_pages_are_for_researchers_only(client, rater, dyntom_runs):
    job = services.report_job_create(benchmark="dyntom", enqueue=False)
    url = reverse("reports:job", args=[job.pk])
    assert client.get(url).status_code == 302
    client.force_login(rater)
    assert client.get(url).status_code == 403
    assert client.get(url, headers=HX).status_code == 403
    assert (
        client.get(reverse("reports:job-chart", args=[job.pk, "accuracy", "svg"])).status_code
        == 403
    )


def test_report_page_lists_recent_jobs(client_researcher, dyntom_runs):
    job = services.report_job_create(benchmark="dyntom", enqueue=False)
    content = client_researcher.get(reverse("reports:report", args=["dyntom"])).content.decode()
    assert f'href="{reverse("reports:job", args=[job.pk])}"' in content
    assert "badge badge-queued" in content


# --- admin ----------------------------------------------------------------------------------


def test_admin_lists_jobs_and_builds_them_again(client, dyntom_runs, django_user_model):
    admin_user = django_user_model.objects.create_superuser("boss", "boss@example.org", "pw")
    client.force_login(admin_user)
    job = services.report_job_create(benchmark="dyntom", enqueue=False)
    services.report_job_execute(job_id=job.pk)
    changelist = client.get(reverse("admin:reports_reportjob_changelist"))
    assert changelist.status_code == 200
    assert "succeeded" in changelist.content.decode()
    change = client.get(reverse("admin:reports_reportjob_change", args=[job.pk]))
    assert change.status_code == 200
    text = change.content.decode()
    assert reverse("reports:job", args=[job.pk]) in text
    assert "tables," in text  # the size of the stored report, not the JSON itself
    assert client.get(reverse("admin:reports_reportjob_add")).status_code == 403
    response = client.post(
        reverse("admin:reports_reportjob_changelist"),
        {"action": "build_again", "_selected_action": [job.pk]},
    )
    assert response.status_code == 302
    assert ReportJob.objects.count() == 2
    assert ReportJob.objects.exclude(pk=job.pk).get().status == ReportJob.Status.QUEUED


# --- a real worker --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_builds_the_report(dyntom_stages, tmp_path):
    run = make_dyntom_run("worker run", wrong_every=3)
    purge_queues()
    log = tmp_path / "worker.log"
    worker = start_worker(log, name="reports")
    try:
        job = services.report_job_create(benchmark="dyntom", run_ids=[run.pk])
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.is_finished:
                break
            time.sleep(0.2)
    finally:
        stop_worker(worker)
    assert job.status == ReportJob.Status.SUCCEEDED, (job.error, log.read_text()[-3000:])
    assert job.report().table("runs").rows[0][0] == run.pk
