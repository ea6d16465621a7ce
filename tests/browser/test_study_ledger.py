"""Issue 28, "done when": a public-link ToM-in-AMC study (the demo film) with four
recruited participants, in the browser: one declines consent, one fails the attention
check, one finishes, one withdraws their data. Then the researcher's study page (the
ledger's tiles and table), raters.csv, platform-ids.csv, the report (page and API),
responses.csv and the study API must all tell the same story, and the excluded
participant counts in the report only with "include excluded".
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from playwright.sync_api import expect

from benchmarks.models import Work
from studies.models import Participant, StudyItem
from studies.participation import ledger, recruitment
from studies.services import study_create, study_go_live
from tests.browser.test_study_rater import log_in
from tests.browser.test_study_recruitment import answer_scene, current

pytestmark = pytest.mark.django_db(transaction=True)

DEMO_FILM = Path(settings.BASE_DIR) / "fixtures" / "demo" / "tom_in_amc.json"
DESKTOP = {"width": 1280, "height": 800}


@pytest.fixture
def study(researcher):
    call_command("import_benchmark", "tom-in-amc", str(DEMO_FILM))
    film = Work.objects.get(benchmark="tom-in-amc")
    study = study_create(
        name="Lighthouse keepers, recruited",
        benchmark="tom-in-amc",
        works=[film],
        overlap=4,
        created_by=researcher,
        instructions="Guess who speaks.",
    )
    items = list(study.study_items.order_by("position"))
    recruitment.item_roles_set(study=study, practice=None, attention=[items[-1]])
    study.completion_code = "LEDGER-OK"
    study.save(update_fields=["completion_code"])
    recruitment.public_link_set(study=study, cap=4)
    return study_go_live(study=study)


def join(browser, live_server, study, pid: str):
    """A new browser for one recruited participant, through the public link's Join."""
    page = browser.new_context(viewport=DESKTOP).new_page()
    page.goto(
        f"{live_server.url}/s/p/{study.public_token}/"
        f"?PROLIFIC_PID={pid}&STUDY_ID=prolific-study&SESSION_ID=session-{pid}"
    )
    page.get_by_role("button", name="Join the study").click()
    expect(page.get_by_role("heading", name="Welcome to the study")).to_be_visible()
    return page, Participant.objects.get(study=study, platform_ids__participant=pid)


def to_first_scene(page) -> None:
    page.get_by_role("button", name="I agree, start").click()
    page.get_by_role("button", name="No, I have not").click()
    expect(page.get_by_role("heading", name="Read the earlier scenes first")).to_be_visible()
    page.get_by_role("button", name="I have read it").click()
    expect(page.get_by_test_id("progress")).to_be_visible()


def answer_everything(page, participant, *, fail_checks: bool = False) -> None:
    while True:
        participant.refresh_from_db()
        if not participant.assignments.filter(status="assigned").exists():
            break
        attention = current(participant).study_item.role == StudyItem.Role.ATTENTION
        done = answer_scene(page, participant, wrong=("P0",) if attention and fail_checks else ())
        # The next scene's page, not this one's, before the server is asked again.
        expect(page.locator(f"form#guess-form[action$='/scenes/{done.pk}/submit/']")).to_have_count(
            0
        )
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()


def download_csv(page, url: str) -> list[dict[str, str]]:
    response = page.request.get(url)
    assert response.ok, url
    return list(csv.DictReader(io.StringIO(response.text())))


def api(page, url: str) -> dict:
    response = page.request.get(url)
    assert response.ok, f"{url}: {response.status}"
    return json.loads(response.text())


def test_four_participants_and_every_count_agrees(
    live_server, browser, page, screenshot, screenshot_of, study
):
    # 1. Declines consent.
    declined_page, _ = join(browser, live_server, study, "pp-declines")
    declined_page.get_by_role("button", name="I do not agree").click()
    expect(declined_page.get_by_text("You chose not to take part")).to_be_visible()
    declined_page.context.close()

    # 2. Fails the attention check (answers it wrong), reaches the end.
    careless_page, careless = join(browser, live_server, study, "pp-careless")
    to_first_scene(careless_page)
    answer_everything(careless_page, careless, fail_checks=True)
    careless_page.context.close()

    # 3. Finishes: every scene right, the completion code at the end.
    finisher_page, finisher = join(browser, live_server, study, "pp-finishes")
    to_first_scene(finisher_page)
    answer_everything(finisher_page, finisher)
    expect(finisher_page.get_by_test_id("completion")).to_contain_text("LEDGER-OK")
    screenshot_of(finisher_page, "ledger-0-finisher-done")
    finisher_page.context.close()

    # 4. Answers one scene, then withdraws their data.
    leaver_page, leaver = join(browser, live_server, study, "pp-withdraws")
    to_first_scene(leaver_page)
    answered = answer_scene(leaver_page, leaver)
    expect(leaver_page.get_by_test_id("progress")).to_have_text("Scene 2 / 4")
    assert leaver.assignments.filter(pk=answered.pk, status="submitted").exists()
    leaver_page.goto(f"{live_server.url}/s/{leaver.token}/withdraw/")
    leaver_page.get_by_role("button", name="Delete my answers").click()
    expect(leaver_page.get_by_text("Your data has been withdrawn")).to_be_visible()
    leaver_page.context.close()

    expected = {
        "pp-declines": "declined",
        "pp-careless": "excluded",
        "pp-finishes": "finished",
        "pp-withdraws": "withdrawn",
    }
    rows = ledger.study_ledger(study=study)
    assert {r.participant.platform_ids["participant"]: r.status.key for r in rows} == expected
    careless.refresh_from_db()
    assert careless.exclusion_source == "rule"
    assert careless.exclusion_reason == "attention checks: 1 of 1 failed (allowed 0)"
    counts = ledger.ledger_counts(rows)

    # The study page: tiles, the ledger table (with the rule and reason), the filter.
    log_in(page, live_server)
    detail = f"{live_server.url}/studies/{study.pk}/"
    page.goto(detail)
    for key in ("declined", "finished", "excluded", "withdrawn", "invited", "in_progress"):
        expect(page.get_by_test_id(f"count-{key}")).to_have_text(str(counts[key]))
    assert (counts["declined"], counts["finished"], counts["excluded"]) == (1, 1, 1)
    assert counts["withdrawn"] == 1 and sum(counts.values()) == 4
    table = page.get_by_test_id("ledger")
    for pid, key in expected.items():
        row = table.locator("tbody tr").filter(has_text=pid)
        expect(row.locator(f'[data-status="{key}"]')).to_have_count(1)
        expect(row.locator("time")).to_have_count(1)
    careless_row = table.locator("tbody tr").filter(has_text="pp-careless")
    expect(careless_row).to_contain_text("rule: attention checks: 1 of 1 failed (allowed 0)")
    # The invite table no longer says "not yet" for the decline.
    invites = page.get_by_test_id("invite-links")
    if invites.count():
        expect(invites.locator("tr").filter(has_text="public 1")).to_contain_text("declined")
    page.locator("#participants").scroll_into_view_if_needed()
    screenshot("ledger-1-study-page")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.locator("#participants").scroll_into_view_if_needed()
    screenshot("ledger-1-study-page-390")
    page.set_viewport_size(DESKTOP)

    page.locator(".ledger-filter").get_by_role("link", name="excluded (1)").click()
    expect(table.locator("tbody tr")).to_have_count(1)
    expect(table.locator("tbody tr")).to_contain_text("pp-careless")
    careless_row.get_by_text("Override").click()
    expect(careless_row.get_by_label("Reason")).to_be_visible()
    screenshot("ledger-2-filtered-excluded")

    # raters.csv and platform-ids.csv: the same statuses, and what to do on the platform.
    raters = download_csv(page, f"{detail}raters.csv")
    assert {r["platform_participant"]: r["status"] for r in raters} == expected
    by_pid = {r["platform_participant"]: r for r in raters}
    assert by_pid["pp-careless"]["excluded"] == "True"
    assert by_pid["pp-careless"]["exclusion_source"] == "rule"
    assert by_pid["pp-careless"]["attention_failed"] == "1"
    assert by_pid["pp-finishes"]["excluded"] == "False"
    ids = download_csv(page, f"{detail}platform-ids.csv")
    assert {r["platform_participant"]: r["status"] for r in ids} == expected
    assert {r["platform_participant"]: r["suggested_action"] for r in ids} == {
        "pp-declines": "return",
        "pp-careless": "reject",
        "pp-finishes": "approve",
        "pp-withdraws": "return",
    }
    assert {r["platform_session"] for r in ids} == {f"session-{pid}" for pid in expected}

    # responses.csv and the study API: the excluded participant only when asked for.
    answered = {finisher.pk}
    with_excluded = {finisher.pk, careless.pk}
    responses = download_csv(page, f"{detail}responses.csv")
    assert {int(r["participant_id"]) for r in responses} == answered
    assert all(r["excluded"] == "False" for r in responses)
    responses = download_csv(page, f"{detail}responses.csv?include_excluded=1")
    assert {int(r["participant_id"]) for r in responses} == with_excluded
    marked = [r for r in responses if int(r["participant_id"]) == careless.pk]
    assert all(r["excluded"] == "True" and "attention" in r["exclusion_reason"] for r in marked)
    study_api = f"{live_server.url}/api/studies/{study.pk}/responses/"
    rows = api(page, study_api)["results"]
    assert {r["participant_id"] for r in rows} == answered
    rows = api(page, study_api + "?include_excluded=1&page_size=500")["results"]
    assert {r["participant_id"] for r in rows} == with_excluded

    # The report: API and page, without and with "include excluded".
    report_api = f"{live_server.url}/api/reports/tom-in-amc/?studies={study.pk}"
    facts = api(page, report_api)["facts"]
    assert facts["human_participants"] == 1
    assert facts["excluded_participants_left_out"] == 1
    facts = api(page, report_api + "&include_excluded=1")["facts"]
    assert facts["human_participants"] == 2
    page.goto(f"{live_server.url}/reports/tom-in-amc/?studies={study.pk}")
    switch = page.get_by_role("switch", name="Include excluded participants (1)")
    expect(switch).not_to_be_checked()
    humans = page.locator("dt", has_text="Human participants").locator(
        "xpath=following-sibling::dd"
    )
    expect(humans).to_have_text("1")
    screenshot("ledger-3-report")
    switch.check()
    page.get_by_role("button", name="Show report").click()
    page.wait_for_url("**include_excluded=1**")
    expect(humans).to_have_text("2")
