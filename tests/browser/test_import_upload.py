"""A researcher uploads a screenplay in the browser, reads the dry run (with the warning
for a cue the parser cannot read and the first masked scene), confirms, and finds the
movie on the New study page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from benchmarks.models import ImportJob, Work
from tests.benchmarks.test_uploads import screenplay_text
from tests.browser.axe import axe_violations, describe
from tests.browser.conftest import SCREENSHOT_QUALITY, SCREENSHOTS

pytestmark = pytest.mark.django_db(transaction=True)


def shot(page, name: str) -> None:
    """Save a screenshot to look at, and check the page with axe-core while it is up."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"upload-{name}.jpg"
    page.screenshot(path=str(path), full_page=True, quality=SCREENSHOT_QUALITY)
    found = axe_violations(page)
    assert not found, describe(found)


def test_upload_dry_run_confirm_and_the_work_is_there(live_server, page, log_in_as, researcher):
    log_in_as(page)
    page.get_by_test_id("import-link").click()
    expect(page.get_by_role("heading", name="Import files")).to_be_visible()

    # Choosing the format brings its own fields (htmx swaps them in).
    page.get_by_label("Format").select_option("screenplay")
    expect(page.get_by_test_id("format-help")).to_contain_text(".txt, .fountain")
    expect(page.get_by_label("Title")).to_be_visible()
    expect(page.get_by_label("Run name")).to_have_count(0)
    page.get_by_label("Files").set_input_files(
        files=[
            {
                "name": "lighthouse.txt",
                "mimeType": "text/plain",
                "buffer": screenplay_text().encode(),
            }
        ]
    )
    page.get_by_label("Title").fill("The Lighthouse Test")
    shot(page, "1-upload-form")
    page.get_by_role("button", name="Upload and dry run").click()

    expect(page.get_by_test_id("job-status")).to_have_text("dry run, waiting for confirmation")
    warnings = page.get_by_test_id("import-warnings")
    expect(warnings).to_contain_text("line 75: 'WREN'")
    expect(page.locator("[data-testid=count-Work] td").nth(1)).to_have_text("1")
    preview = page.get_by_test_id("preview-scene").first
    expect(preview).to_contain_text("P0")
    expect(preview).to_contain_text("The Lighthouse Test")
    shot(page, "2-dry-run")
    assert not Work.objects.exists()

    page.get_by_role("button", name="Confirm import").click()
    expect(page.get_by_test_id("job-status")).to_have_text("succeeded")
    expect(page.get_by_test_id("import-report")).to_contain_text("What was imported")
    shot(page, "3-imported")
    assert Work.objects.get().title == "The Lighthouse Test"

    page.get_by_role("link", name="New scene study").first.click()
    expect(page.get_by_text("The Lighthouse Test")).to_be_visible()
    shot(page, "4-new-study")

    page.goto(f"{live_server.url}/data/imports/")
    job = ImportJob.objects.get()
    expect(page.get_by_role("link", name=f"Import {job.pk}")).to_be_visible()
    shot(page, "5-list")


def test_a_refused_upload_shows_where_and_keyboard_reaches_the_form(
    live_server, page, log_in_as, researcher
):
    log_in_as(page)
    page.goto(f"{live_server.url}/data/import/?format=tom-in-amc")
    page.get_by_label("Files").set_input_files(
        files=[{"name": "movies.json", "mimeType": "application/json", "buffer": b'{"test": [1]}'}]
    )
    page.get_by_label("Files").focus()
    page.keyboard.press("Tab")  # to the split, then the button
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    refused = page.get_by_test_id("import-refused")
    expect(refused).to_contain_text("Nothing was imported")
    expect(page.get_by_test_id("refused-file")).to_have_text("movies.json")
    expect(page.get_by_test_id("refused-record")).to_have_text("test")
    shot(page, "6-refused")
    assert not ImportJob.objects.exists()


def test_a_large_upload_shows_its_progress_bar_while_a_worker_imports(
    live_server, page, log_in_as, researcher, settings
):
    from benchmarks import uploads

    settings.TOMLAB_IMPORT_BACKGROUND_BYTES = 100
    log_in_as(page)
    page.goto(f"{live_server.url}/data/import/?format=screenplay")
    page.get_by_label("Files").set_input_files(
        files=[{"name": "big.txt", "mimeType": "text/plain", "buffer": screenplay_text().encode()}]
    )
    page.get_by_role("button", name="Upload and dry run").click()
    expect(page.get_by_test_id("dry-run-note")).to_contain_text("on a background worker")
    page.get_by_role("button", name="Confirm import").click()
    expect(page.get_by_test_id("job-status")).to_have_text("queued")
    expect(page.get_by_role("progressbar")).to_be_visible()

    # No worker runs in this test: play one, writing progress as a worker does. The page
    # polls (htmx, every 2 s) and shows it without a reload.
    job = ImportJob.objects.get()
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.RUNNING)
    uploads.ProgressFile(uploads.upload_folder(job.upload), total=job.progress_total)(5)
    expect(page.get_by_test_id("progress-done")).to_have_text("5", timeout=10_000)
    expect(page.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "5")
    shot(page, "7-progress")

    from benchmarks.services import import_job_run

    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.QUEUED)
    import_job_run(job_id=job.pk)
    expect(page.get_by_test_id("job-status")).to_have_text("succeeded", timeout=10_000)
    expect(page.get_by_test_id("import-report")).to_contain_text("What was imported")
    shot(page, "8-finished-by-polling")
    assert Work.objects.count() == 1
