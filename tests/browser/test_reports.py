"""A researcher opens the DynToM report in a browser: charts load, downloads work, and a
background build shows its report when the job finishes."""

from __future__ import annotations

import io
import json
import re
import zipfile

import pandas as pd
import pytest
from django.core.cache import cache
from playwright.sync_api import expect

from reports import services
from reports.models import ReportJob
from tests.browser.conftest import sign_in
from tests.modeling import conftest as run_fixtures
from tests.reports.test_views import make_dyntom_run

pytestmark = pytest.mark.django_db(transaction=True)

# The DynToM fixture lives in tests/modeling/conftest.py, which this folder does not see.
dyntom_stages = run_fixtures.dyntom_stages


def log_in(page, live_server) -> None:
    sign_in(page, live_server.url, "res", "pw-res-123!")


def wait_for_charts(page) -> int:
    """Wait until every chart <img> has loaded; returns how many there are."""
    charts = page.get_by_test_id("chart")
    count = charts.count()
    for i in range(count):
        charts.nth(i).scroll_into_view_if_needed()
        expect(charts.nth(i)).to_be_visible()
    page.wait_for_function(
        """() => [...document.querySelectorAll('img[data-testid="chart"]')]
                 .every(img => img.complete && img.naturalWidth > 0)""",
        timeout=30_000,
    )
    return count


def download(page, link) -> bytes:
    with page.expect_download() as info:
        link.click()
    path = info.value.path()
    return open(path, "rb").read()


@pytest.fixture
def runs(dyntom_stages):
    cache.clear()
    return [
        make_dyntom_run("vanilla gpt", wrong_every=3, model="gpt-test"),
        make_dyntom_run("cot llama", wrong_every=2, model="llama-test"),
    ]


def test_report_page_charts_and_downloads(live_server, page, screenshot, researcher, runs):
    log_in(page, live_server)
    page.goto(f"{live_server.url}/reports/")
    page.get_by_role("link", name="DynToM", exact=True).click()
    page.wait_for_url(f"{live_server.url}/reports/dyntom/")
    expect(page.get_by_role("heading", name="DynToM report")).to_be_visible()

    count = wait_for_charts(page)
    assert count >= 3
    widths = page.evaluate(
        "[...document.querySelectorAll('img[data-testid=chart]')].map(i => i.naturalWidth)"
    )
    assert all(w > 300 for w in widths), widths
    # Issue 16: every chart is drawn at one width and shown at that size, never
    # stretched, so its text is the same size in every chart.
    shown = page.evaluate(
        "[...document.querySelectorAll('img[data-testid=chart]')].map(i => i.clientWidth)"
    )
    assert set(shown) == {720} and set(widths) == {720}, (shown, widths)
    screenshot("reports-dyntom")

    # Downloads: every export opens with pandas.
    zipped = download(page, page.get_by_test_id("download-zip"))
    with zipfile.ZipFile(io.BytesIO(zipped)) as archive:
        accuracy = pd.read_csv(archive.open("accuracy.csv"))
    assert accuracy["System"].tolist() == [f"#{r.pk} {r.name}" for r in runs]
    xlsx = download(page, page.get_by_test_id("download-xlsx"))
    sheets = pd.read_excel(io.BytesIO(xlsx), sheet_name=None, engine="openpyxl")
    assert "accuracy" in sheets
    rows = json.loads(download(page, page.get_by_test_id("download-json")))
    assert len(rows) == 2 * 1719
    tidy = pd.read_csv(io.BytesIO(download(page, page.get_by_test_id("download-tidy"))))
    assert tidy["correct"].dtype == bool and len(tidy) == 2 * 1719
    figure = page.locator("figure.chart").first
    svg = download(page, figure.get_by_role("link", name="SVG", exact=True))
    assert svg.startswith(b"<?xml")
    png = download(page, figure.get_by_role("link", name="PNG", exact=True))
    assert png.startswith(b"\x89PNG")

    # Narrow the report to one run with the checkboxes.
    page.get_by_role("checkbox", name=re.compile("cot llama")).uncheck()
    page.get_by_role("button", name="Show report").click()
    page.wait_for_url(re.compile(rf"runs={runs[0].pk}$"))
    expect(page.locator("#table-runs tbody tr")).to_have_count(1)
    wait_for_charts(page)

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/reports/dyntom/")
    wait_for_charts(page)
    # Nothing but the tables' own scroll boxes may be wider than the phone.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    # The phone gets the narrow layout, whole (not cut) and near its natural size.
    phone = page.evaluate(
        """[...document.querySelectorAll('img[data-testid=chart]')]
             .map(i => [i.currentSrc, i.naturalWidth, i.getBoundingClientRect().right])"""
    )
    for src, natural, right in phone:
        assert "layout=narrow" in src and natural == 384 and right <= 390, (src, natural, right)
    screenshot("reports-dyntom-phone")


def test_background_build_shows_the_report_when_done(
    live_server, page, screenshot, researcher, runs
):
    log_in(page, live_server)
    page.goto(f"{live_server.url}/reports/")
    screenshot("reports-index")
    page.goto(f"{live_server.url}/reports/dyntom/?runs={runs[1].pk}")
    page.get_by_role("button", name="Build in background").click()
    page.wait_for_url(re.compile(r"/reports/jobs/\d+/$"))
    job = ReportJob.objects.get()
    assert job.run_ids == [runs[1].pk]
    status = page.get_by_test_id("job-status")
    expect(status).to_have_text(re.compile("queued", re.IGNORECASE))
    screenshot("reports-job-queued")

    # No Celery worker here: run the job in the test; the page polls every 2 s.
    page.evaluate("window.notReloaded = true")
    assert services.report_job_execute(job_id=job.pk) == ReportJob.Status.SUCCEEDED
    expect(status).to_have_text(re.compile("succeeded", re.IGNORECASE), timeout=10_000)
    assert page.evaluate("window.notReloaded") is True
    expect(page.locator("#job-progress")).not_to_have_attribute("hx-trigger", re.compile("."))
    assert wait_for_charts(page) >= 3
    screenshot("reports-job-finished")
