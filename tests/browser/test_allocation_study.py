"""A ``balanced by category`` study in Debian's chromium (issue 50): the researcher
makes it from the navigation with the allocation settings, six participants answer it
on the pages until its budget is spent, and the study page and the benchmark's report
say which design ran. Photographed at 1280 and 390 px.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from studies.choice import allocation
from studies.choice import services as cs
from studies.models import Assignment, Study
from studies.participation.services import participant_consent, participants_invite
from studies.services import study_launch
from tests.generic_items import make_generic_benchmark

pytestmark = pytest.mark.django_db(transaction=True)
DESIGN = "balanced by ability, phase one 2 answers per item, 24 answers"


def test_a_balanced_study_run_to_the_end_states_its_design(
    live_server, browser, page, screenshot, screenshot_of, log_in_as, nav, researcher
):
    mini = make_generic_benchmark()
    log_in_as(page)
    nav(page, "Studies", "New multiple-choice study")
    page.get_by_label("Benchmark", exact=True).select_option("generic")
    settings = page.get_by_test_id("allocation-settings")
    expect(settings).to_be_visible()
    page.get_by_label("Study name").fill("Balanced Mini ToM")
    page.get_by_label(mini.title, exact=False).first.check()
    page.get_by_label("Sample by (mapped items)").select_option("ability")
    page.get_by_label("Items per value", exact=True).fill("2")  # 8 items
    page.get_by_label("Items per participant", exact=True).fill("4")
    page.get_by_label("Participants per stage (DynToM) or per item (mapped items)").fill("3")
    design = page.get_by_label("Allocation of answers (mapped items)")
    assert design.locator("option").all_inner_texts()[1].startswith("balanced by category")
    design.select_option("balanced")
    page.get_by_label("Phase one: answers per item").fill("2")
    screenshot("allocation-form")
    page.get_by_role("button", name="Create study").click()
    expect(page.get_by_test_id("generic-allocation")).to_have_text(DESIGN)
    study = Study.objects.get(name="Balanced Mini ToM")
    study_launch(study=study)
    page.reload()
    expect(page.get_by_test_id("design-text")).to_have_text(f"Design: {DESIGN}.")

    people = participants_invite(study=study, labels=[f"p{i}" for i in range(6)])
    for p in people:
        participant_consent(participant=p)
    # Six participants of four items each spend the budget of 8 items x 3 answers.
    for n, participant in enumerate(people):
        page.goto(f"{live_server.url}/s/{participant.token}/")
        page.get_by_role("button", name="Start").click()
        for _ in range(4):
            expect(page.locator("form#choice-form[data-keys=ready]")).to_have_count(1)
            page.keyboard.press("b" if n % 2 else "a")
            page.keyboard.press("Enter")
            expect(page.locator("h1")).to_be_visible()
        expect(page.get_by_test_id("score")).to_be_visible()
        assert not participant.assignments.filter(status=Assignment.Status.ASSIGNED).exists()
    assert sum(r["answers"] for r in allocation.stratum_rows(study)) == 24
    (late,) = participants_invite(study=study, labels=["late"])
    assert not cs.generic_has_room(late)

    page.goto(f"{live_server.url}/studies/{study.pk}/")
    table = page.get_by_test_id("strata-table")
    for ability in ("Discrepant desires", "False belief", "Hidden emotions"):
        expect(table.get_by_role("row").filter(has_text=ability)).to_be_visible()
    screenshot("allocation-study-page")
    phone = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    try:
        phone.context.add_cookies(page.context.cookies())
        phone.goto(f"{live_server.url}/studies/{study.pk}/#allocation")
        expect(phone.get_by_test_id("strata-table")).to_be_visible()
        screenshot_of(phone, "allocation-study-page-phone")
    finally:
        phone.context.close()

    nav(page, "Reports", "Reports")
    page.get_by_test_id("generic-benchmark").get_by_role(
        "link", name=re.compile("Mini ToM")
    ).click()
    expect(page.get_by_text(f"#{study.pk}: {DESIGN}")).to_be_visible()
    expect(page.locator(f"#table-design-{study.pk}")).to_contain_text(
        "Overall (strata weighted by items)"
    )
    screenshot("allocation-report")
