"""A DynToM pick survives a reload before "Submit answer" (issue 28, part 7): picked with
the mouse or a digit key, saved at once, checked again after the reload; then submitted.

Real data: a DynToM stage of the release (its 20 understanding questions).
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from benchmarks.models import DynToMStage
from studies.choice import services as cs
from studies.models import ChoiceAnswer
from studies.participation.services import participant_consent, participants_invite
from studies.services import study_launch

pytestmark = pytest.mark.django_db(transaction=True)


def _ready(page) -> None:
    """Wait until choice.js listens: a digit pressed before it runs is lost."""
    expect(page.locator("form#choice-form[data-keys=ready]")).to_have_count(1)


def test_a_dyntom_pick_is_still_chosen_after_a_reload(live_server, page, screenshot, shared_data):
    call_command("import_benchmark", "dyntom", str(shared_data / "dyntom" / "trial149"))
    stage = DynToMStage.objects.get()
    study = cs.choice_study_create(
        name="DynToM picks",
        benchmark="dyntom",
        works=[stage.work],
        stage_fraction=1,
        question_types=["understanding"],
    ).study
    study_launch(study=study)
    (participant,) = participants_invite(study=study, labels=["Reloader"])
    participant_consent(participant=participant)
    first, second = cs.dyntom_questions(study.study_items.get())[:2]

    page.goto(f"{live_server.url}/s/{participant.token}/")
    page.get_by_role("button", name="Start this story").click()
    radios = page.get_by_role("radiogroup", name=first.text).get_by_role("radio")
    _ready(page)
    radios.nth(1).check()  # the mouse
    expect(page.locator("#pick-status")).to_have_text("✓ Saved")
    page.reload()
    expect(radios.nth(1)).to_be_checked()
    _ready(page)
    page.keyboard.press("3")  # a digit key
    expect(page.locator("#pick-status")).to_have_text("✓ Saved")
    page.reload()
    expect(radios.nth(2)).to_be_checked()
    expect(radios.nth(1)).not_to_be_checked()
    expect(page.get_by_test_id("progress")).to_have_text("Question 1 / 20")
    screenshot("dyntom-pick-after-reload")
    assert not ChoiceAnswer.objects.exists()  # picked, not yet answered

    page.get_by_role("button", name="Submit answer").click()
    expect(page.get_by_test_id("progress")).to_have_text("Question 2 / 20")
    next_radios = page.get_by_role("radiogroup", name=second.text).get_by_role("radio")
    expect(next_radios.first).to_be_visible()
    expect(page.locator("input[name=option]:checked")).to_have_count(0)
    answer = ChoiceAnswer.objects.get()
    assert (answer.question_id, answer.option) == (first.pk, 2)
