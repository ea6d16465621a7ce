"""A researcher picks what the TVShowGuess report compares, and turns on "include
excluded", in a browser (issue 28): the common set is empty, each system's own accuracy
is not, and the URL keeps the choice."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.utils import timezone
from playwright.sync_api import expect

from modeling.models import Prediction, Run
from studies.models import Participant
from studies.services import study_close, study_create, study_go_live
from tests.browser.conftest import SCREENSHOTS
from tests.reports.test_human_tables import _instances, study  # noqa: F401
from tests.studies.conftest import friends  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_pick_studies_runs_and_include_excluded(
    live_server,
    page,
    screenshot,
    log_in_as,
    study,  # noqa: F811
    friends,  # noqa: F811
):
    cache.clear()
    study_close(
        study=study_go_live(
            study=study_create(name="Closed pilot", benchmark="tvshowguess", works=[friends])
        )
    )
    run = Run.objects.create(
        name="D only", benchmark="tvshowguess", method="vanilla", model="d", imported=True
    )
    for instance in _instances("D"):
        Prediction.objects.create(run=run, speaker_instance=instance, correct=True)
    Participant.objects.filter(pk=study.raters["r1"].pk).update(excluded_at=timezone.now())

    log_in_as(page)
    page.goto(f"{live_server.url}/reports/tvshowguess/")
    expect(page.get_by_role("checkbox", name=re.compile("Closed pilot"))).not_to_be_checked()
    expect(page.get_by_role("checkbox", name=re.compile("Friends guessing"))).to_be_checked()
    switch = page.get_by_role("switch", name="Include excluded participants (1)")
    expect(switch).not_to_be_checked()
    expect(page.locator("#table-accuracy-common")).to_contain_text("Common set: empty.")
    own = page.locator("#table-accuracy tbody")
    expect(own).to_contain_text("36.4")  # the humans without r1: 4 of 11
    expect(own).to_contain_text("100.0")  # the run on D
    screenshot("report-selection-default")
    # The long page shrinks to nothing at full height: the selector and both tables alone.
    for key in ("run-selector", "table-accuracy", "table-accuracy-common"):
        selector = f"section.{key}" if key == "run-selector" else f"#{key}"
        page.locator(selector).screenshot(path=str(SCREENSHOTS / f"report-selection-{key}.png"))

    switch.check()
    page.get_by_role("button", name="Show report").click()
    page.wait_for_url(re.compile(r"include_excluded=1$"))
    expect(page.get_by_role("switch")).to_be_checked()
    expect(page.locator("#table-accuracy tbody")).to_contain_text("61.1")  # 11 of 18
    screenshot("report-selection-included")
