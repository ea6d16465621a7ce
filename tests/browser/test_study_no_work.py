"""What a participant with nothing to answer sees (issue 26, item 5), in the browser:
a CharToM-QA reader who has read every book is told why, gets the way back to the
platform but no completion code; the researcher sees "no work available" and the
count. Screenshots land in var/screenshots/.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from studies.choice import services as cs
from studies.models import Participant, Study
from studies.participation.services import participants_invite
from studies.services import study_launch
from tests.studies.test_choice_services import _books

pytestmark = pytest.mark.django_db(transaction=True)

CODE = "C0DE42"


def test_reader_of_every_book_is_told_why_and_gets_no_code(
    live_server, page, screenshot, screenshot_of, log_in_as, researcher
):
    works = _books(2, 2)
    study = cs.choice_study_create(name="Novels study", benchmark="chartom-qa", works=works).study
    study_launch(study=study)
    Study.objects.filter(pk=study.pk).update(
        completion_code=CODE,
        completion_url=f"https://platform.example/complete?cc={CODE}",
    )
    (me,) = participants_invite(study=study, labels=["Avid reader"])

    page.goto(f"{live_server.url}/s/{me.token}/")
    page.get_by_role("button", name="I agree, start").click()
    expect(page.get_by_role("heading", name="Which of these books have you read?")).to_be_visible()
    for work in works:
        page.get_by_label(work.title).check()
    page.get_by_role("button", name="Continue").click()

    expect(page.get_by_role("heading", name="There is nothing for you to answer")).to_be_visible()
    expect(page.get_by_text("You have read every book in this study.")).to_be_visible()
    back = page.get_by_role("link", name="Return to the study platform")
    expect(back).to_have_attribute("href", "https://platform.example/")
    expect(page.get_by_test_id("completion")).to_have_count(0)
    assert CODE not in page.content()
    screenshot("no-work-1-participant")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot("no-work-1-participant-390")
    me.refresh_from_db()
    assert me.no_work_reason == Participant.NoWork.READ_ALL

    researcher_page = page.context.browser.new_page()
    log_in_as(researcher_page)
    researcher_page.goto(f"{live_server.url}/studies/{study.pk}/")
    expect(researcher_page.get_by_test_id("no-work-count")).to_have_text("1")
    expect(researcher_page.get_by_text("no work available (has read every book)")).to_be_visible()
    screenshot_of(researcher_page, "no-work-2-researcher")
