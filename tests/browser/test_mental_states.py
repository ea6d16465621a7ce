"""A researcher opens a ToMPro run's stage-1 records from the run page."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from modeling.models import MentalStateRecord, Run
from modeling.runs.executor import run_execute
from modeling.runs.services import run_create
from tests.browser.test_model_runs import log_in
from tests.modeling import conftest as run_fixtures
from tests.modeling.test_speaker_guess_pipeline import gold_answers, responder_for
from tests.module_rows import build_friends

pytestmark = pytest.mark.django_db(transaction=True)

openai_backend = run_fixtures.openai_backend


def test_mental_state_records_page(
    live_server, page, screenshot, researcher, openai_backend, llm_server, shared_data: Path
):
    build_friends(shared_data)
    selection = {"scene_limit": 4}
    llm_server.responder = responder_for(gold_answers("tvshowguess", "tompro", {}, selection))
    run = run_create(
        benchmark="tvshowguess",
        method="tompro",
        backend=openai_backend,
        selection=selection,
        enqueue=False,
    )
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    records = MentalStateRecord.objects.filter(run=run)
    assert records.exists()

    log_in(page, live_server)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.get_by_test_id("mental-states-link").click()
    table = page.get_by_test_id("mental-states")
    expect(table.locator("tbody tr")).to_have_count(records.count())
    expect(table).to_contain_text("steady and kind")
    screenshot("run-mental-states")

    page.get_by_role("link", name="rachel").click()
    expect(table.locator("tbody tr")).to_have_count(
        records.filter(character__name="rachel").count()
    )
