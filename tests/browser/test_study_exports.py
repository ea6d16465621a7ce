"""The responses page's exports as a researcher sees them: the "include excluded"
switch, the count of who was left out, the flagged practice and attention rows, and the
file links following the switch (screenshots in var/screenshots/)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from studies.choice import services as cs
from studies.models import Assignment
from studies.participation.ledger import participant_exclusion_override
from tests.studies import conftest as study_fixtures
from tests.studies import test_exports
from tests.studies.test_choice_services import _join, chartom_study

pytestmark = pytest.mark.django_db(transaction=True)

friends = study_fixtures.friends
live_study = study_fixtures.live_study
answered = test_exports.answered


def test_switch_brings_the_excluded_back_and_the_links_follow(
    live_server, page, screenshot, log_in_as, researcher, answered
):
    study = answered[0]
    log_in_as(page)
    page.goto(live_server.url + reverse("studies:responses", args=[study.pk]))
    switch = page.get_by_label("Include excluded participants (1)")
    assert not switch.is_checked()
    assert (
        page.get_by_test_id("excluded-note")
        .inner_text()
        .startswith("1 excluded participant left out")
    )
    table = page.get_by_test_id("responses")
    assert "Ben" not in table.inner_text() and "practice" in table.inner_text()
    screenshot("study-responses-exports")

    switch.check()
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**include_excluded=1")
    expect(page.get_by_label("Include excluded participants (1)")).to_be_checked()
    expect(table).to_contain_text("Ben")
    expect(table.get_by_text("excluded", exact=True)).to_have_count(3)  # Ben's 3 scenes
    link = page.get_by_role("link", name="Exit answers CSV")
    assert link.get_attribute("href").endswith("/exit.csv?include_excluded=1")
    screenshot("study-responses-exports-included")


def test_choice_responses_page_has_the_same_switch(
    live_server, page, screenshot, log_in_as, researcher
):
    study, works = chartom_study(2, 2)
    ann = _join(study, {works[0].pk}, "Ann")
    ben = _join(study, {works[1].pk}, "Ben")
    cs.design_apply(study=study)
    for p in (ann, ben):
        for assignment in Assignment.objects.filter(participant=p):
            cs.choice_record(participant=p, assignment_id=assignment.pk, action="submit", shown=1)
    participant_exclusion_override(participant=ben, decision="exclude", reason="bot")
    log_in_as(page)
    page.goto(live_server.url + reverse("studies:responses", args=[study.pk]))
    table = page.get_by_test_id("choice-responses")
    expect(table).to_contain_text("Ann")
    expect(table).not_to_contain_text("Ben")
    screenshot("choice-responses-exports")
    page.get_by_label("Include excluded participants (1)").check()
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**include_excluded=1")
    expect(table).to_contain_text("Ben")
    link = page.get_by_role("link", name="Responses JSON")
    assert link.get_attribute("href").endswith("/responses.json?include_excluded=1")
