"""From New run, "Add a backend", save, back on New run with it selectable; then test
the connection against the stand-in server from the backend list: queued for a real
Celery worker, the cell polls (htmx) until the worker has recorded the outcome."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.celery_worker import purge_queues, start_worker, stop_worker

pytestmark = pytest.mark.django_db(transaction=True)


def test_add_backend_from_new_run_and_test_it(
    page, live_server, researcher, llm_server, log_in_as, screenshot, nav, tmp_path
):
    llm_server.enqueue("ready", prompt_tokens=9, completion_tokens=1)
    log_in_as(page)
    page.goto(f"{live_server.url}/runs/new/")
    page.get_by_role("link", name="Add a backend").click()
    page.wait_for_url("**/runs/backends/new/?next=/runs/new/")
    page.get_by_label("Name").fill("stand-in")
    page.get_by_label("Kind").select_option("openai")
    page.get_by_label("Base URL").fill(llm_server.base_url)
    page.get_by_label("Default model").fill("test-model")
    page.get_by_label("API key", exact=True).fill("sk-browser-secret-42")
    screenshot("backend_form")
    page.get_by_role("button", name="Save backend").click()

    page.wait_for_url(f"{live_server.url}/runs/new/")
    backend = page.get_by_label("Backend")
    backend.select_option(label="stand-in")
    expect(backend).to_have_value(
        backend.locator("option", has_text="stand-in").get_attribute("value")
    )

    nav(page, "Models", "Backends")
    row = page.get_by_test_id("backend-row-stand-in")
    expect(row).to_contain_text("stored")
    purge_queues()
    worker = start_worker(tmp_path / "worker.log", name="backend-test")
    try:
        row.get_by_role("button", name="Test connection").click()
        expect(row.get_by_test_id("test-reply")).to_have_text("“ready”", timeout=30_000)
        expect(row.get_by_test_id("test-tokens")).to_have_text("9 prompt + 1 completion tokens")
        assert "sk-browser-secret-42" not in page.content()
        screenshot("backend_list_tested")

        llm_server.enqueue(
            status=401,
            body='{"error": {"message": "Incorrect API key provided: sk-browser-secret-42"}}',
        )
        row.get_by_role("button", name="Test connection").click()
        expect(row.get_by_test_id("test-error")).to_contain_text(
            "Incorrect API key provided", timeout=30_000
        )
        assert "sk-browser-secret-42" not in page.content()
        screenshot("backend_list_test_failed")
    finally:
        stop_worker(worker)
