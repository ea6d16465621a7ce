"""The exit questionnaire builder in the browser (issue 49, item 3): the researcher writes
a questionnaire with every item type and one conditional question in its editor; a
participant on a desktop answers it (an error from the server first, answers kept, the
conditional question appearing as its answer is chosen) and one on a phone (390 by 844)
answers it without the conditional question; the export has one column per item.
PNG screenshots land in var/screenshots/exit-*.png.
"""

from __future__ import annotations

import pytest
from django.test import Client
from playwright.sync_api import expect

from studies import exports
from studies.participation import services as participation_services
from tests.browser.axe import axe_violations, describe
from tests.browser.conftest import SCREENSHOTS
from tests.studies import conftest as study_fixtures
from tests.studies.test_exports import _answer_scene
from tests.studies.test_questionnaire import EVERY_TYPE
from tests.studies.test_rater_views import keep_scenes, to_scenes

pytestmark = pytest.mark.django_db(transaction=True)

friends = study_fixtures.friends
live_study = study_fixtures.live_study

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
ITEMS = ["q1", "q2", "q3_1", "q3_2", "q3_3", "q4", "q5_1", "q5_2", "q6", "q7", "q8"]


def png(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"exit-{name}.png"), full_page=True)


def at_exit(study, label: str):
    """A participant who has answered their one scene (through the pages, server side):
    their next page is the exit questionnaire."""
    (participant,) = participation_services.participants_invite(study=study, labels=[label])
    client = Client()
    to_scenes(client, participant)
    _answer_scene(client, participant)
    return participant


def beside(page, key: str, value: str) -> None:
    """The option's radio or box sits just left of its text, on the same line."""
    option = page.locator(f"input[name='{key}'][value='{value}']")
    box = option.bounding_box()
    text = option.locator("xpath=..").get_by_text(value, exact=True).bounding_box()
    assert 0 <= text["x"] - (box["x"] + box["width"]) <= 16, (box, text)
    assert abs((text["y"] + text["height"] / 2) - (box["y"] + box["height"] / 2)) <= 8


def test_a_questionnaire_with_every_item_type_on_desktop_and_phone(
    live_server, browser, page, log_in_as, live_study
):
    keep_scenes(live_study, 1)
    log_in_as(page)
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/studies/{live_study.pk}/")
    page.get_by_role("link", name="Edit the exit questionnaire").click()
    box = page.get_by_role("textbox", name="Questions, one a line")
    box.fill("Age [number 18-99]\nDevices [multy]: Phone | Laptop")
    page.get_by_role("button", name="Save the questionnaire").click()
    errors = page.get_by_test_id("exit-syntax-errors")
    expect(errors).to_contain_text("line 2: unknown tag [multy]; did you mean [multi]?")
    expect(box).to_have_value("Age [number 18-99]\nDevices [multy]: Phone | Laptop")
    box.fill(EVERY_TYPE)
    page.get_by_role("button", name="Save the questionnaire").click()
    expect(page.get_by_test_id("exit-version")).to_have_text("version 2")
    preview = page.get_by_test_id("exit-preview")
    expect(preview.get_by_test_id("exit-q8")).to_be_hidden()  # waits for q2=Yes
    preview.get_by_label("Yes").check()
    expect(preview.get_by_test_id("exit-q8")).to_be_visible()
    png(page, "editor-1280")

    # A participant on a desktop.
    ann = at_exit(live_study, "Ann")
    page.goto(f"{live_server.url}/s/{ann.token}/")
    expect(page.get_by_role("heading", name="A few last questions")).to_be_visible()
    found = axe_violations(page)
    assert not found, describe(found)
    expect(page.get_by_test_id("exit-q8")).to_be_hidden()
    expect(page.get_by_role("button", name="Skip")).to_have_count(0)  # q1 is required
    page.get_by_label("How old are you?").fill("17")
    page.get_by_label("Yes").check()
    expect(page.get_by_test_id("exit-q8")).to_be_visible()
    for key, value in (("q2", "Yes"), ("q3", "Laptop"), ("q8", "The Office")):
        beside(page, key, value)
    page.get_by_label("Phone").check()
    page.get_by_label("Laptop").check()
    # The Likert item with the keyboard: the first point, then two steps right.
    page.locator("input[name='q4'][value='1']").focus()
    page.keyboard.press("Space")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    expect(page.locator("input[name='q4'][value='3']")).to_be_checked()
    page.locator("input[name='q5_1'][value='4']").check()
    page.locator("input[name='q5_2'][value='2']").check()
    page.get_by_label("Hours of TV a day").fill("2,5")
    page.get_by_label("Any comments?").fill("Fun, mostly")
    page.get_by_role("button", name="Send and finish").click()

    # The server refuses the age (out of range) and the unanswered required q8.
    expect(page.get_by_test_id("exit-errors")).to_contain_text("Please check 2 answers")
    expect(page.locator("#error-q1")).to_have_text("Enter a whole number from 18 to 99.")
    expect(page.locator("#error-q8")).to_have_text("Choose an answer.")
    expect(page.get_by_label("How old are you?")).to_have_value("17")  # answers kept
    expect(page.get_by_label("Laptop")).to_be_checked()
    expect(page.locator("input[name='q5_2'][value='2']")).to_be_checked()
    expect(page.get_by_test_id("exit-q8")).to_be_visible()  # q2 is still Yes
    png(page, "errors-1280")
    page.get_by_label("How old are you?").fill("34")
    page.get_by_label("The Office").check()
    png(page, "answered-1280")
    page.get_by_role("button", name="Send and finish").click()
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()

    # A participant on a phone: q2 is No, so q8 never shows.
    ben = at_exit(live_study, "Ben")
    phone = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        mobile = phone.new_page()
        mobile.goto(f"{live_server.url}/s/{ben.token}/")
        expect(mobile.get_by_role("heading", name="A few last questions")).to_be_visible()
        mobile.get_by_label("How old are you?").fill("61")
        mobile.get_by_label("No", exact=True).check()
        mobile.locator("input[name='q4'][value='5']").check()
        mobile.locator("input[name='q5_1'][value='1']").check()
        expect(mobile.get_by_test_id("exit-q8")).to_be_hidden()
        width = mobile.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the page is {width} px wide on a phone"
        beside(mobile, "q2", "No")
        png(mobile, "answered-390")
        mobile.get_by_role("button", name="Send and finish").click()
        expect(mobile.get_by_role("heading", name="Thank you — you are done")).to_be_visible()
    finally:
        phone.close()

    export = exports.exit_wide_export(live_study)
    assert export.columns[-len(ITEMS) :] == ITEMS
    rows = {r["participant_id"]: {k: r[k] for k in ITEMS} for r in export.rows}
    assert rows[ann.pk] == {
        "q1": "34",
        "q2": "Yes",
        "q3_1": "1",
        "q3_2": "0",
        "q3_3": "1",
        "q4": "3",
        "q5_1": "4",
        "q5_2": "2",
        "q6": "2.5",
        "q7": "Fun, mostly",
        "q8": "The Office",
    }
    assert rows[ben.pk] == dict.fromkeys(ITEMS, "") | {
        "q1": "61",
        "q2": "No",
        "q4": "5",
        "q5_1": "1",
    }
    codebook = {r["column"]: r["question"] for r in exports.exit_codebook(live_study).rows}
    assert codebook["q8"] == "Which series do you watch most?"
