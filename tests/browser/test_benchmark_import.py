"""A researcher imports the paper's CharToM-QA items in the admin, with the novels' folder
for their plot windows, and reads the import's report."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from benchmarks.models import QAItem

pytestmark = pytest.mark.django_db(transaction=True)


def test_researcher_imports_chartom_items_with_their_books(
    live_server, page, screenshot, log_in_as, researcher, shared_data
):
    log_in_as(page)
    page.goto(f"{live_server.url}/admin/benchmarks/work/")
    page.get_by_role("link", name="Import a benchmark file").click()
    expect(page.get_by_role("heading", name="Import a benchmark")).to_be_visible()
    page.get_by_label("Format").select_option("chartom-qa")
    page.get_by_label("File or folder").fill(
        str(shared_data / "chartom-qa" / "paper_examples.jsonl")
    )
    page.get_by_label("Split").select_option("test")
    page.get_by_label("Books folder (CharToM-QA)").fill(str(shared_data / "novels"))
    screenshot("benchmark-import-1-form")
    page.get_by_role("button", name="Import").click()
    report = page.get_by_test_id("import-report")
    expect(report).to_contain_text("plot windows: 2 of 2 items got context_1000/context_2000")
    expect(report).to_contain_text("cut from father_goriot_pg1237.txt")
    screenshot("benchmark-import-2-report")
    assert QAItem.objects.filter(context_2000__isnull=False).count() == 2
