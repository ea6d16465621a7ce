"""A researcher previews and starts a DynToM run in the browser and watches it finish."""

import re

import pytest
from playwright.sync_api import expect

from modeling.models import Prediction, PromptTemplate, Run, RunCall
from modeling.runs import executor, prompt_templates, services
from tests.browser.conftest import sign_in
from tests.modeling import conftest as run_fixtures
from tests.modeling.conftest import gold_responder

pytestmark = pytest.mark.django_db(transaction=True)

# The run fixtures live in tests/modeling/conftest.py, which this folder does not see.
openai_backend = run_fixtures.openai_backend
dyntom_stages = run_fixtures.dyntom_stages


def log_in(page, live_server) -> None:
    sign_in(page, live_server.url, "res", "pw-res-123!")


def test_preview_start_and_watch_a_run(
    live_server, page, screenshot, researcher, openai_backend, dyntom_stages, llm_server
):
    # One question per stage answered wrongly, so the accuracy is not a round 100%.
    wrong = {stage.questions.order_by("pk").first().key for stage in dyntom_stages}
    llm_server.responder = gold_responder(dyntom_stages, wrong=wrong)
    log_in(page, live_server)

    page.goto(f"{live_server.url}/runs/new/")
    page.get_by_label("Benchmark").select_option("dyntom")
    page.get_by_label("Method").select_option("vanilla")
    page.get_by_label("Backend").select_option(label="local-test")
    page.get_by_label("Limit", exact=True).fill("2")
    page.get_by_role("button", name="Preview (dry run)").click()

    plan = page.locator("#run-plan")
    expect(plan.get_by_test_id("plan-calls")).to_have_text("2")
    expect(plan.locator("pre.prompt").first).to_contain_text("Read the story below")
    assert Run.objects.count() == 0
    assert llm_server.request_count == 0
    # No tokenizer configured for this backend: the heuristic, labelled an estimate.
    expect(plan.get_by_test_id("plan-tokens")).to_contain_text(
        "tokens (estimate, about 4 characters a token)"
    )
    page.set_viewport_size({"width": 1280, "height": 800})
    screenshot("runs-new-preview")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot("runs-new-preview-phone")
    page.set_viewport_size({"width": 1200, "height": 800})

    page.get_by_role("button", name="Start this run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run = Run.objects.get()
    status = page.get_by_test_id("run-status")
    expect(status).to_have_text(re.compile("queued", re.IGNORECASE))
    expect(page.get_by_text(f"Run {run.pk} queued.")).to_be_visible()

    # No Celery worker here: execute the run in the test; the page polls every 2 s.
    page.evaluate("window.notReloaded = true")
    assert executor.run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    expect(status).to_have_text(re.compile("succeeded", re.IGNORECASE), timeout=10_000)
    predictions = Prediction.objects.filter(run=run)
    percent = round(100 * predictions.filter(correct=True).count() / predictions.count())
    assert 0 < percent < 100
    expect(page.get_by_test_id("accuracy")).to_have_text(f"{percent}%")
    expect(page.get_by_test_id("vs-chance")).to_contain_text("chance")
    assert page.evaluate("window.notReloaded") is True
    expect(page.locator("#run-progress")).not_to_have_attribute("hx-trigger", re.compile("."))
    # The calls panel came with the last poll (issue 25: it said "No calls yet" until a
    # reload), and no region polls any more.
    calls = page.locator("#run-calls")
    expect(calls.locator("tbody tr")).to_have_count(2)
    expect(calls).not_to_contain_text("No calls yet")
    for call in RunCall.objects.filter(run=run):
        expect(calls).to_contain_text(call.unit_key)
    assert page.evaluate("window.notReloaded") is True
    expect(page.locator("[hx-trigger]")).to_have_count(0)
    screenshot("runs-detail-finished")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot("runs-detail-phone")
    page.set_viewport_size({"width": 1200, "height": 800})

    page.get_by_role("link", name=str(run.template)).click()
    expect(page.get_by_role("heading", name="Revise")).to_be_visible()
    expect(page.locator("pre.prompt")).to_contain_text("Read the story below")
    screenshot("template-detail")

    # A few more runs so the list shows every status badge.
    for status in (Run.Status.RUNNING, Run.Status.FAILED, Run.Status.BUDGET_EXHAUSTED):
        other = services.run_create(
            benchmark="dyntom",
            method="vanilla",
            backend=openai_backend,
            selection={"limit": 1},
            name=f"{status} example",
            enqueue=False,
        )
        Run.objects.filter(pk=other.pk).update(status=status)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/runs/")
    expect(page.get_by_role("link", name=run.name)).to_be_visible()
    # Nothing but the table's own scroll box may be wider than the phone.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot("runs-list-phone")


def test_statuses_say_when_answers_could_not_be_read(
    live_server, page, screenshot, researcher, openai_backend, dyntom_stages, llm_server
):
    """Issue 25: a run with unreadable answers was listed as plainly succeeded."""
    unreadable = dyntom_stages.first().characters_information
    gold = gold_responder(dyntom_stages)

    def some_prose(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        return "I would rather not <guess> & say." if unreadable in prompt else gold(body)

    statuses = {}
    # Different temperatures: the second run must not be answered from the first's cache.
    for temperature, name, responder in (
        (0.0, "some unreadable", some_prose),
        (0.5, "all prose", lambda body: "Who knows?"),
    ):
        llm_server.responder = responder
        run = services.run_create(
            benchmark="dyntom",
            method="vanilla",
            backend=openai_backend,
            selection={"limit": 2},
            params={"temperature": temperature},
            name=name,
            enqueue=False,
        )
        statuses[name] = (run, executor.run_execute(run_id=run.pk))
    assert [status for _, status in statuses.values()] == [Run.Status.SUCCEEDED, Run.Status.FAILED]
    partly, failed = (run for run, _ in statuses.values())
    missed = Prediction.objects.filter(run=partly).exclude(parse_status="ok").count()
    log_in(page, live_server)

    page.goto(f"{live_server.url}/runs/")
    rows = page.locator("table.runs tbody tr")
    warning = rows.filter(has_text="some unreadable").get_by_test_id("run-status")
    expect(warning).to_have_text(f"succeeded with {missed} unparseable")
    expect(warning).to_have_class(re.compile("badge-warning"))
    # The warning colour, not the success green.
    assert warning.evaluate("e => getComputedStyle(e).color") == "rgb(138, 90, 0)"
    expect(rows.filter(has_text="all prose").get_by_test_id("run-status")).to_have_text(
        "failed: no parseable reply"
    )
    screenshot("runs-list-unparseable")

    page.goto(f"{live_server.url}/runs/{failed.pk}/")
    expect(page.get_by_test_id("run-status")).to_have_text("failed: no parseable reply")
    expect(page.get_by_test_id("first-reply").locator("pre")).to_have_text("Who knows?")
    expect(page.get_by_role("button", name="Resume run")).to_have_count(0)
    screenshot("runs-detail-no-parseable-reply")


def test_revise_error_is_shown_next_to_the_field(live_server, page, screenshot, researcher):
    prompt_templates.prompt_templates_ensure_defaults()
    template = PromptTemplate.objects.get(name="dyntom-vanilla", version=1)
    log_in(page, live_server)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/runs/templates/{template.pk}/")
    page.get_by_label("User").fill("Story: {story} and {mood}")
    page.get_by_role("button", name="Save as version 2").click()
    expect(page.get_by_role("alert")).to_contain_text("unknown field(s) {mood}")
    expect(page.locator("#id_user_error")).to_contain_text("{mood}")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot("template-revise-error-phone")
