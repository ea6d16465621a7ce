"""axe-core (vendored, run in the browser) finds no serious or critical violation on
the rater's pages and the researcher's pages (issue 16)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from studies.models import StudyItem
from studies.participation import services as participation_services
from tests.browser.axe import axe_violations, describe
from tests.browser.conftest import sign_in
from tests.studies import conftest as study_fixtures

pytestmark = pytest.mark.django_db(transaction=True)

friends = study_fixtures.friends
live_study = study_fixtures.live_study


def check(page, name: str) -> None:
    found = axe_violations(page)
    assert not found, f"{name} ({page.url}):\n{describe(found)}"


def log_in(page, live_server) -> None:
    sign_in(page, live_server.url, "res", "pw-res-123!")


def test_rater_pages_have_no_serious_violations(live_server, page, live_study):
    live_study.allow_cant_tell = True
    live_study.ask_confidence = True
    live_study.one_to_one = True
    live_study.exit_questions = [{"key": "q1", "label": "Age band", "choices": ["18-24", "25+"]}]
    live_study.save()
    keep = live_study.study_items.order_by("position").values_list("pk", flat=True)[:1]
    StudyItem.objects.filter(study=live_study).exclude(pk__in=list(keep)).update(held_back=True)
    (participant,) = participation_services.participants_invite(study=live_study, labels=["a11y"])
    page.goto(f"{live_server.url}/s/{participant.token}/")
    check(page, "consent")
    page.get_by_role("button", name="I agree, start").click()
    check(page, "seen it?")
    page.get_by_role("button", name="No, I have not").click()
    expect(page.get_by_test_id("progress")).to_have_text("Scene 1 / 1")
    check(page, "scene")
    page.get_by_role("button", name="Submit scene").click()
    expect(page.locator("#submit-error")).to_be_visible()
    check(page, "scene with unanswered speakers")
    for group in page.get_by_role("radiogroup").all()[:-1]:
        group.locator("input[type=radio]").last.check()  # can't tell
    page.get_by_role("button", name="Submit scene").click()
    expect(page.get_by_role("heading", name="A few last questions")).to_be_visible()
    check(page, "exit questionnaire")
    page.get_by_role("button", name="Skip").click()
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()
    check(page, "done")
    page.get_by_role("link", name="Withdraw my data").click()
    check(page, "withdraw")


def test_researcher_pages_have_no_serious_violations(live_server, page, live_study, researcher):
    log_in(page, live_server)
    for path in (
        "/",
        "/studies/",
        "/studies/new/",
        f"/studies/{live_study.pk}/",
        f"/studies/{live_study.pk}/leaks/",
        f"/studies/{live_study.pk}/responses/",
        f"/studies/{live_study.pk}/close/",
        f"/studies/{live_study.pk}/preview/",
        f"/studies/{live_study.pk}/preview/?n=0",
        f"/studies/{live_study.pk}/preview/?step=refused",
        "/runs/",
        "/runs/new/",
        "/reports/",
        "/reports/tvshowguess/",
        "/accounts/users/",
    ):
        page.goto(f"{live_server.url}{path}")
        if path.endswith("/leaks/"):  # scenes with snippets and folds, checked too
            expect(page.get_by_test_id("leak-snippet").first).to_be_visible()
        check(page, path)
