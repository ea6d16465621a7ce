"""A researcher finds a run's unparseable answers from the run page and reads one."""

import re

import pytest
from playwright.sync_api import expect

from modeling.models import Prediction, Run
from modeling.runs import executor, services
from tests.browser.axe import axe_violations, describe
from tests.modeling import conftest as run_fixtures
from tests.modeling.conftest import gold_responder
from tests.modeling.test_prediction_explorer import GARBAGE, garbled_responder

pytestmark = pytest.mark.django_db(transaction=True)

# The run fixtures live in tests/modeling/conftest.py, which this folder does not see.
openai_backend = run_fixtures.openai_backend
dyntom_stages = run_fixtures.dyntom_stages


def test_unparseable_count_opens_the_rows_and_a_row_its_prompt_and_reply(
    live_server, page, screenshot, log_in_as, researcher, openai_backend, dyntom_stages, llm_server
):
    stages = list(dyntom_stages[:2])
    llm_server.responder = garbled_responder(stages, stages[1])
    run = services.run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=openai_backend,
        selection={"limit": 2},
        enqueue=False,
    )
    assert executor.run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    unparseable = Prediction.objects.filter(run=run).exclude(parse_status="ok").count()
    assert unparseable > 0

    log_in_as(page)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    link = page.get_by_test_id("predictions-unparseable")
    expect(link).to_have_text(f"{unparseable} unparseable")
    screenshot("run-detail-prediction-links")
    link.click()
    page.wait_for_url(re.compile(r"/predictions/\?status=unparseable$"))
    rows = page.get_by_test_id("prediction-row")
    expect(rows).to_have_count(min(unparseable, 50))
    expect(rows.first).to_contain_text("unparseable")
    screenshot("predictions-unparseable")
    assert not (found := axe_violations(page)), describe(found)

    rows.first.get_by_role("link").click()
    page.wait_for_url(re.compile(r"/predictions/\d+/$"))
    expect(page.get_by_test_id("raw-reply")).to_have_text(GARBAGE)
    expect(page.get_by_test_id("prompt-message").last).to_contain_text(stages[1].main_character)
    screenshot("prediction-detail")
    assert not (found := axe_violations(page)), describe(found)

    # A second run of the benchmark answers everything right: compare the two.
    llm_server.responder = gold_responder(stages)
    other = services.run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=openai_backend,
        selection={"limit": 2},
        params={"temperature": 0.1},
        enqueue=False,
    )
    assert executor.run_execute(run_id=other.pk) == Run.Status.SUCCEEDED
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.get_by_test_id("compare-form").scroll_into_view_if_needed()
    screenshot("run-detail-compare")
    page.get_by_label("Compare with…").select_option(str(other.pk))
    page.get_by_test_id("compare-form").get_by_role("button", name="Compare").click()
    page.wait_for_url(re.compile(r"/runs/compare/\?"))
    differ = Prediction.objects.filter(run=run).exclude(correct=True).count()
    expect(page.get_by_test_id("count-only_b")).to_have_text(str(differ))
    expect(page.get_by_test_id("compare-row")).to_have_count(min(differ, 50))
    screenshot("run-compare")
    assert not (found := axe_violations(page)), describe(found)
