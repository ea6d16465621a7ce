"""Researcher pages on a 390 px phone (issue 49): the page never scrolls sideways, wide
tables scroll in their box with the first column kept in view, and the menu stays on
one line (it wrapped to four), its menus still opening in full."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from benchmarks.models import SpeakerInstance
from modeling.models import Prediction, Run
from tests.browser.conftest import SCREENSHOT_QUALITY, SCREENSHOTS
from tests.browser.test_study_recruitment import PHONE
from tests.studies import conftest as study_fixtures

pytestmark = pytest.mark.django_db(transaction=True)

friends = study_fixtures.friends
live_study = study_fixtures.live_study


def test_researcher_tables_and_menu_fit_a_phone(
    live_server, page, screenshot, log_in_as, live_study, researcher
):
    researcher.is_staff = True  # every menu shown: the longest navigation
    researcher.save(update_fields=["is_staff"])
    # A run with answers, one of them long: its page's tables are the widest a run has.
    run = Run.objects.create(
        name="zero-shot on a phone", benchmark="tvshowguess", method="zero-shot", model="m"
    )
    for i, instance in enumerate(SpeakerInstance.objects.order_by("pk")[:3]):
        Prediction.objects.create(
            run=run,
            speaker_instance=instance,
            raw_output="The speaker is most likely " + "someone who knows the others " * i,
            parsed_answer="",
            parse_status="unparseable",
            correct=False,
        )
    log_in_as(page)
    page.set_viewport_size(PHONE)
    menu = page.get_by_role("navigation", name="Main")
    for name, path in (
        ("study-list", "/studies/"),
        ("study-detail", f"/studies/{live_study.pk}/"),
        ("runs", "/runs/"),
        ("run", f"/runs/{run.pk}/"),
        ("run-predictions", f"/runs/{run.pk}/predictions/"),
        ("report", "/reports/tvshowguess/"),
    ):
        page.goto(f"{live_server.url}{path}")
        expect(menu).to_be_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{name} is {width} px wide"
        # One line: the bar is as tall as one menu title, not two (it was four).
        line = menu.locator("summary").first.bounding_box()["height"]
        assert menu.bounding_box()["height"] < 1.5 * line, name
        screenshot(f"phone-{name}-390")

    # The report's common set rests on one scene: its interval is a dash that says why
    # (issue 49), and the hidden words stay inside the table's box (they once widened
    # the page to 1,221 px).
    page.goto(f"{live_server.url}/reports/tvshowguess/")
    dash = page.locator("#table-accuracy-common td[title='one scene: no interval']")
    expect(dash.first).to_have_text("\u2013 (one scene: no interval)")
    expect(page.get_by_test_id("table-alert")).to_contain_text("all 3 replies unparseable")
    page.locator("#table-accuracy-common").screenshot(
        path=str(SCREENSHOTS / "phone-report-common-set-390.jpg"), quality=SCREENSHOT_QUALITY
    )

    # The study list's table scrolls in its box; the study's name stays in view.
    page.goto(f"{live_server.url}/studies/")
    box = page.locator(".table-scroll").first
    name_cell = box.locator("tbody td").first
    benchmark_cell = box.locator("tbody td").nth(1)
    left, benchmark_left = name_cell.bounding_box()["x"], benchmark_cell.bounding_box()["x"]
    box.evaluate("el => { el.scrollLeft = el.scrollWidth; }")
    page.wait_for_function("document.querySelector('.table-scroll').scrollLeft > 0")
    assert benchmark_cell.bounding_box()["x"] < benchmark_left  # the others slide under it
    assert abs(name_cell.bounding_box()["x"] - left) <= 1  # (its left border aside)
    expect(name_cell).to_contain_text(live_study.name)
    screenshot("phone-study-list-scrolled-390")

    # A menu scrolled into view from the bar's far end opens in full, under the bar.
    menu.locator("summary", has_text="Reports").click()
    links = menu.locator("details[open] > ul")
    expect(links).to_be_visible()
    spans = links.bounding_box()
    assert spans["x"] >= 0 and spans["x"] + spans["width"] <= PHONE["width"]
    screenshot("phone-menu-open-390")
    links.get_by_role("link", name="Replication packages").click()
    expect(page).to_have_url(f"{live_server.url}/reports/packages/")
