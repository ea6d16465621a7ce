"""A researcher corrects a draft in the browser: the time estimate's basis on the study
page, the edit form, a duplicate and the deletion of a draft (issue #28, parts 4 and 6).
"""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from benchmarks.models import Work
from studies.choice import services as cs
from studies.models import Study
from studies.participation.recruitment import study_estimate
from studies.services import study_create
from tests.factories import DynToMQuestionFactory, DynToMScenarioFactory, DynToMStageFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def dead_poets_draft(shared_data, researcher) -> Study:
    path = shared_data / "screenplays" / "dead_poets_society.txt"
    call_command("import_benchmark", "screenplay", str(path), verbosity=0)
    work = Work.objects.get(benchmark="tom-in-amc")
    return study_create(
        name="Dead Poets guessing",
        benchmark="tom-in-amc",
        works=[work],
        created_by=researcher,
        sampling={"mode": "all"},
    )


def test_estimate_basis_edit_duplicate_and_delete(
    live_server, page, screenshot, log_in_as, dead_poets_draft
):
    study = dead_poets_draft
    estimate = study_estimate(study=study)
    log_in_as(page)
    page.goto(f"{live_server.url}/studies/{study.pk}/")

    basis = page.get_by_test_id("estimate-basis")
    expect(basis).to_contain_text(f"about {estimate.minutes} minutes")
    expect(basis).to_contain_text(
        f"{estimate.words:,} words to read at 238 wpm + {estimate.items} × 45 s"  # noqa: RUF001
    )
    basis.scroll_into_view_if_needed()
    screenshot("draft-1-study-estimate")
    # The consent page tells participants the minutes (the preview stores nothing).
    page.get_by_role("link", name="Preview as participant").click()
    expect(page.get_by_test_id("estimate")).to_have_text(
        f"About {estimate.minutes} minutes, for at most {estimate.items} scenes."
    )
    screenshot("draft-1b-consent-estimate")
    page.goto(f"{live_server.url}/studies/{study.pk}/")

    page.get_by_role("link", name="Edit settings").click()
    expect(page.get_by_role("heading", name="Edit draft study")).to_be_visible()
    expect(page.get_by_label("Study name")).to_have_value("Dead Poets guessing")
    screenshot("draft-2-edit-form")
    page.get_by_label("Study name").fill("Dead Poets, 3 raters")
    page.get_by_label("Raters per scene").fill("3")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("Settings saved; the scenes are unchanged.")).to_be_visible()
    study.refresh_from_db()
    assert (study.name, study.overlap) == ("Dead Poets, 3 raters", 3)

    page.get_by_role("button", name="Duplicate").click()
    expect(
        page.get_by_role("heading", name=re.compile(r"Dead Poets, 3 raters \(copy\)"))
    ).to_be_visible()
    copy = Study.objects.get(name="Dead Poets, 3 raters (copy)")
    assert copy.overlap == 3 and copy.study_items.count() == study.study_items.count()

    page.get_by_role("link", name="Delete draft…").click()
    expect(
        page.get_by_role("heading", name="Delete “Dead Poets, 3 raters (copy)”?")
    ).to_be_visible()
    screenshot("draft-3-delete-confirm")
    page.get_by_role("button", name="Delete the draft").click()
    expect(page.get_by_text("Study “Dead Poets, 3 raters (copy)” deleted.")).to_be_visible()
    assert not Study.objects.filter(pk=copy.pk).exists()


def test_multiple_choice_edit_form(live_server, page, screenshot, log_in_as, researcher):
    stages = [DynToMStageFactory(work__key=f"trial{i}") for i in range(3)]
    for stage in stages:
        DynToMScenarioFactory(stage=stage, number=1)
        DynToMQuestionFactory(stage=stage, gold_letter="b")
    study = cs.choice_study_create(
        name="DynToM baseline", benchmark="dyntom", works=[s.work for s in stages], seed=2
    ).study
    log_in_as(page)
    page.goto(f"{live_server.url}/studies/{study.pk}/")
    expect(page.get_by_test_id("estimate-basis")).to_contain_text(", for one stage")
    expect(page.get_by_text("Scenes per sitting")).to_have_count(0)
    screenshot("draft-4-choice-study")

    page.get_by_role("link", name="Edit settings").click()
    expect(page.get_by_role("heading", name="Edit draft multiple-choice study")).to_be_visible()
    expect(page.get_by_label("Show the gold")).to_contain_text("after each question")
    expect(page.get_by_text("after each scene")).to_have_count(0)
    # Only the chosen benchmark's settings show.
    expect(page.get_by_label("Questions to sample (CharToM-QA)")).to_be_hidden()
    expect(page.get_by_label("Share of stages, % (DynToM)")).to_have_value("30")
    expect(page.get_by_text("Question types (DynToM)")).to_be_visible()
    screenshot("draft-5-choice-edit-form")
    page.get_by_label("Benchmark").select_option("chartom-qa")
    expect(page.get_by_label("Questions to sample (CharToM-QA)")).to_be_visible()
    expect(page.get_by_text("Question types (DynToM)")).to_be_hidden()
    expect(page.get_by_label("Participants per stage (DynToM)")).to_be_hidden()
