"""What a rater with a practice scene sees (issue 28, part 7): the practice result, the
break and the final page count and number the test scenes only."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from benchmarks.models import SpeakerInstance
from studies.participation import recruitment
from studies.participation import services as participation_services
from studies.scene import services as scene_services
from tests.studies import conftest as study_fixtures
from tests.studies.quotas import quotas_set

pytestmark = pytest.mark.django_db(transaction=True)

friends = study_fixtures.friends
live_study = study_fixtures.live_study


def _submit_open_scene(participant, *, right: bool = True) -> None:
    step = scene_services.participant_next_step(participant=participant)
    assignment = step.assignment
    answers = {}
    for instance in SpeakerInstance.objects.filter(scene_id=assignment.study_item.scene_id):
        gold = instance.candidates.index(instance.gold_character.name)
        answers[instance.pk] = {"choice": gold if right else (gold + 1) % len(instance.candidates)}
    scene_services.scene_submit(
        participant=participant, assignment_id=assignment.pk, answers=answers
    )


def test_practice_result_break_and_final_page(live_server, page, screenshot, live_study):
    quotas_set(live_study, overlap=1, min_unseen=0, session_cap=2)
    items = list(live_study.study_items.order_by("position"))
    live_study.study_items.exclude(pk__in=[i.pk for i in items[:4]]).update(held_back=True)
    recruitment.item_roles_set(study=live_study, practice=items[0], attention=[])
    (participant,) = participation_services.participants_invite(study=live_study, labels=["P"])
    participation_services.participant_consent(participant=participant)
    session = scene_services.familiarity_declare(
        participant=participant, study_work=live_study.study_works.get(), seen=False
    )
    scene_services.history_confirm(participant=participant, session=session)
    start = f"{live_server.url}/s/{participant.token}/"

    page.goto(start)
    expect(page.get_by_test_id("progress")).to_have_text("Practice scene")
    practice = scene_services.participant_next_step(participant=participant).assignment
    _submit_open_scene(participant, right=False)
    page.goto(f"{start}scenes/{practice.pk}/result/")
    expect(page.get_by_test_id("progress")).to_have_text("Friends · Practice scene")
    screenshot("practice-result")

    _submit_open_scene(participant)
    page.goto(start)
    expect(page.get_by_test_id("progress")).to_have_text("Scene 2 / 3")  # no break yet
    _submit_open_scene(participant)
    page.goto(start)
    expect(page.get_by_test_id("break-count")).to_contain_text(
        "answered 2 scenes in a row (2 in all so far)"
    )
    screenshot("practice-break")
    page.get_by_role("button", name="Continue").click()
    _submit_open_scene(participant)
    page.goto(start)
    expect(page.get_by_test_id("score-scenes")).to_contain_text("3 / 3 (100%)")
    headings = page.locator(".result-scene h3")
    expect(headings.first).to_contain_text("Friends · Practice not counted")
    expect(headings.nth(1)).to_contain_text("Friends · Scene 1")
    expect(headings).to_have_count(4)
    screenshot("practice-final-page")
