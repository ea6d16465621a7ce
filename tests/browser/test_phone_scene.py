"""The scene page on a 390 px phone opens at the top, with the scene's heading and first
lines in view, not scrolled down to the first speaker (issue 28, part 7); on a desktop
the digit keys still answer the first speaker straight away."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from studies.models import Guess
from studies.participation import services as participation_services
from studies.scene import services as scene_services
from tests.studies import conftest as study_fixtures

pytestmark = pytest.mark.django_db(transaction=True)

SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"

friends = study_fixtures.friends
live_study = study_fixtures.live_study


def _rater_at_a_scene(study):
    """A rater past consent, "seen it?" and the history: the scene page is next."""
    (participant,) = participation_services.participants_invite(study=study, labels=["Phone"])
    participation_services.participant_consent(participant=participant)
    session = scene_services.familiarity_declare(
        participant=participant, study_work=study.study_works.get(), seen=False
    )
    scene_services.history_confirm(participant=participant, session=session)
    step = scene_services.participant_next_step(participant=participant)
    assert step.kind == "scene"
    return participant, step.assignment


def _ready(page) -> None:
    """Wait until study.js has run (it sets this after placing the focus)."""
    expect(page.locator("form#guess-form[data-keys=ready]")).to_have_count(1)


def test_a_phone_opens_the_scene_at_its_heading(live_server, browser, live_study):
    participant, _ = _rater_at_a_scene(live_study)
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True)
    phone = context.new_page()
    try:
        phone.goto(f"{live_server.url}/s/{participant.token}/")
        _ready(phone)
        assert phone.evaluate("window.scrollY") == 0
        expect(phone.get_by_role("heading", name="Who is speaking?")).to_be_in_viewport()
        expect(phone.locator("#scene-title")).to_be_in_viewport()
        # The focus is on the first speaker all the same, ready for a keyboard.
        assert phone.evaluate("document.activeElement.name").startswith("choice-")
        # The viewport, not the full page: what the rater sees first.
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        phone.screenshot(path=str(SCREENSHOTS / "phone-scene-390.png"))
    finally:
        context.close()


def test_a_desktop_still_answers_with_the_digit_keys(live_server, page, live_study):
    participant, assignment = _rater_at_a_scene(live_study)
    page.goto(f"{live_server.url}/s/{participant.token}/")
    _ready(page)
    page.keyboard.press("1")
    first = page.locator("[data-speaker]").first
    expect(first.locator("input[type=radio]:checked")).to_have_count(1)
    expect(first.locator(".save-status")).to_have_text("✓ Saved")
    assert Guess.objects.filter(assignment=assignment).count() == 1
