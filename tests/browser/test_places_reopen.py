"""Places reopen after an exclusion (issue 49, item 1), in the browser on the real
Friends scenes: two raters fill a study of 2 scenes x 2 raters, a third is told every
scene has all its participants, the researcher excludes one finisher on the study
page, the page's counts drop to the counted answers, and a fourth participant gets
the freed scenes and answers them; the study page's counts then equal the report's.
Screenshots land in var/screenshots/.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache
from playwright.sync_api import expect

from studies.participation import services as participation_services
from studies.scene import services as scene_services
from tests.browser.conftest import SCREENSHOTS
from tests.browser.test_practice_not_counted import _submit_open_scene
from tests.browser.test_study_recruitment import answer_scene, keep, start
from tests.studies import conftest as study_fixtures

pytestmark = pytest.mark.django_db(transaction=True)

friends = study_fixtures.friends
live_study = study_fixtures.live_study


def _finish(study, label: str):
    """A rater who answers every scene they are given (through the services)."""
    (rater,) = participation_services.participants_invite(study=study, labels=[label])
    participation_services.participant_consent(participant=rater)
    session = scene_services.familiarity_declare(
        participant=rater, study_work=study.study_works.get(), seen=False
    )
    scene_services.history_confirm(participant=rater, session=session)
    while scene_services.participant_next_step(participant=rater).kind == "scene":
        _submit_open_scene(rater)
    rater.refresh_from_db()
    assert rater.finished_at is not None
    return rater


def _counts(page) -> tuple[str, str]:
    """The study page's "N / M scene answers" and "Scenes complete"."""
    answers = page.locator(".progress-head span").first.inner_text()
    complete = page.locator("dl.ledger-tiles div", has_text="Scenes complete").locator("dd")
    return answers, complete.inner_text()


def test_an_excluded_finishers_places_go_to_the_next_participant(
    live_server, page, screenshot, screenshot_of, log_in_as, live_study
):
    cache.clear()
    keep(live_study, 2)
    _finish(live_study, "first")
    second = _finish(live_study, "second")

    # A third arrives: every scene has its two raters, so there is nothing to answer.
    (third,) = participation_services.participants_invite(study=live_study, labels=["third"])
    page.goto(f"{live_server.url}/s/{third.token}/")
    page.get_by_role("button", name="I agree, start").click()
    expect(
        page.get_by_text("Everything in this study already has all the participants it needs.")
    ).to_be_visible()

    researcher = page.context.browser.new_page(viewport={"width": 1280, "height": 900})
    log_in_as(researcher)
    study_url = f"{live_server.url}/studies/{live_study.pk}/"
    researcher.goto(study_url)
    assert _counts(researcher) == ("4 / 4 scene answers", "2 / 2")

    # The researcher excludes the second finisher on the study page.
    row = researcher.get_by_test_id("ledger").locator(f"tr[data-participant='{second.pk}']")
    row.get_by_text("Override").click()
    row.get_by_label(f"Decision for {second}").select_option("exclude")
    row.get_by_label("Reason").fill("the same person as first")
    row.get_by_role("button", name="Save").click()
    expect(researcher.get_by_text("second is excluded now. Their places are open")).to_be_visible()
    assert _counts(researcher) == ("2 / 4 scene answers", "0 / 2")
    expect(researcher.get_by_test_id("count-excluded")).to_have_text("1")
    scenes = researcher.get_by_test_id("scene-progress").locator("tbody tr")
    expect(scenes).to_have_count(2)
    for i in range(2):
        expect(scenes.nth(i).locator("td").nth(2)).to_have_text("1 / 2")  # assigned
        expect(scenes.nth(i).locator("td").nth(3)).to_have_text("1 / 2")  # submitted
    screenshot_of(researcher, "places-reopen-1-excluded")

    # A fourth participant gets both freed scenes and answers them.
    (fourth,) = participation_services.participants_invite(study=live_study, labels=["fourth"])
    start(page, fourth, live_server)
    expect(page.get_by_test_id("progress")).to_have_text("Scene 1 / 2")
    screenshot("places-reopen-2-fourth-participant")
    answer_scene(page, fourth)
    expect(page.get_by_test_id("progress")).to_have_text("Scene 2 / 2")
    answer_scene(page, fourth)
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()

    researcher.goto(study_url)
    assert _counts(researcher) == ("4 / 4 scene answers", "2 / 2")
    screenshot_of(researcher, "places-reopen-3-refilled")

    # The report counts the same answers: 4 scene answers from 2 counted raters.
    researcher.goto(f"{live_server.url}/reports/tvshowguess/")
    table = researcher.locator("#table-human-studies")
    headers = table.locator("thead th").all_inner_texts()
    cells = table.locator("tbody tr", has_text="Friends guessing").locator("td").all_inner_texts()
    values = dict(zip(headers, cells, strict=True))
    assert values["Scene answers"] == "4" and values["Raters"] == "2"
    assert values["Excluded"] == "1" and values["Scenes"] == "2"
    table.screenshot(path=str(SCREENSHOTS / "places-reopen-4-report.png"))
