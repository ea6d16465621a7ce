"""The researcher's pages at 1280 and 390 px (issue 16): home, study, leak check,
report and run form, each screenshotted at both widths and never wider than the
phone; the favicon is served and the rater's logo leads back to their study."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from studies.participation import services as participation_services
from tests.browser.conftest import sign_in
from tests.browser.test_study_recruitment import both_widths
from tests.studies import conftest as study_fixtures

pytestmark = pytest.mark.django_db(transaction=True)

friends = study_fixtures.friends
live_study = study_fixtures.live_study


def log_in(page, live_server) -> None:
    sign_in(page, live_server.url, "res", "pw-res-123!")


def test_researcher_pages_at_desktop_and_phone_widths(
    live_server, page, screenshot, live_study, researcher
):
    log_in(page, live_server)
    for name, path, heading in (
        ("home", "/", None),
        ("study", f"/studies/{live_study.pk}/", live_study.name),
        ("leak-check", f"/studies/{live_study.pk}/leaks/", "Leak check"),
        ("report", "/reports/tvshowguess/", None),
        ("run-form", "/runs/new/", None),
    ):
        page.goto(f"{live_server.url}{path}")
        if heading:
            expect(page.get_by_role("heading", name=heading).first).to_be_visible()
        both_widths(page, screenshot, f"researcher-{name}")


def test_favicon_and_the_raters_logo(live_server, page, live_study):
    response = page.request.get(f"{live_server.url}/favicon.ico")
    assert response.ok and "svg" in response.headers["content-type"]
    (participant,) = participation_services.participants_invite(study=live_study, labels=["anon"])
    page.goto(f"{live_server.url}/s/{participant.token}/")
    page.get_by_role("link", name="ToMLab").click()
    expect(page).to_have_url(f"{live_server.url}/s/{participant.token}/")
    expect(page.get_by_role("heading", name="Welcome to the study")).to_be_visible()
