"""A researcher sets up a Friends study in the browser: create, leak check, go live,
three invite links, and the live progress table that follows a rater's answers.

TVShowGuess shows its raters the transcript's background, so the leak check lists the
names in Friends headings and stage directions without holding those scenes back; the
researcher holds one back by hand here.
"""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from studies.models import Participant, Study, StudyItem
from studies.participation.services import participant_consent
from studies.scene.services import (
    familiarity_declare,
    flag_record,
    guess_record,
    history_confirm,
    participant_next_step,
    scene_submit,
)
from tests.browser.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def friends(shared_data):
    call_command(
        "import_benchmark", "tvshowguess", str(shared_data / "tvshowguess" / "friends.raw")
    )


def log_in(page, live_server) -> None:
    sign_in(page, live_server.url, "res", "pw-res-123!")


def answer_one_scene(participant: Participant) -> None:
    """What the rater pages do for one scene, through the same services."""
    participant = participant_consent(participant=participant)
    step = participant_next_step(participant=participant)
    session = familiarity_declare(participant=participant, study_work=step.study_work, seen=False)
    history_confirm(participant=participant, session=session)
    assignment = participant_next_step(participant=participant).assignment
    for instance in assignment.study_item.scene.instances.all():
        guess_record(
            participant=participant, assignment_id=assignment.pk, instance_id=instance.pk, choice=0
        )
    flag_record(participant=participant, assignment_id=assignment.pk, history_needed=True)
    scene_submit(participant=participant, assignment_id=assignment.pk)


def test_researcher_sets_up_a_friends_study(
    live_server, page, screenshot, researcher, friends, nav
):
    log_in(page, live_server)
    nav(page, "Studies", "All studies")
    expect(page.get_by_role("heading", name="Studies")).to_be_visible()
    page.get_by_role("link", name="New study").click()

    page.get_by_label("Study name").fill("Friends: who speaks?")
    page.get_by_label("Friends (TVShowGuess, 53 test scenes)").check()
    page.get_by_label("Raters per scene").fill("2")
    page.get_by_label("At least … who have not").fill("1")
    page.get_by_label(re.compile("Perturb names")).check()
    page.get_by_label("Instructions").fill("Read the earlier scenes, then guess who speaks.")
    screenshot("study-new")
    page.get_by_role("button", name="Create study").click()
    page.wait_for_url(re.compile(r"/studies/\d+/$"))
    study = Study.objects.get()
    expect(page.get_by_test_id("study-status")).to_have_text(re.compile("draft", re.I))
    expect(page.get_by_text("The leak check held back 0 of them")).to_be_visible()

    # The leak check: Friends headings and stage directions name the speakers; they are
    # listed and highlighted, but only an unmasked speaker would hold a scene back.
    page.get_by_role("link", name="Review leaking scenes and aliases").click()
    page.get_by_role("button", name="Run the leak check").click()
    expect(
        page.get_by_text(re.compile(r"Checked: .* of 53 scenes .*; 0 held back\."))
    ).to_be_visible()
    expect(page.get_by_test_id("leaks-held")).to_have_text("0")
    expect(page.get_by_test_id("leak-scene")).to_have_count(20)  # the first page of 52
    first = page.locator(
        "#scene-{}".format(StudyItem.objects.get(study=study, scene__source_id="09x01 2500").pk)
    )
    expect(first.locator("mark.m-heading").first).to_have_text("Rachel")
    screenshot("study-leaks")
    # Issue 16: 20 scenes with every flagged line in full made 10,444 px; now each scene
    # shows a few snippets and folds the rest.
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 7000, height
    fold = first.locator("details.leak-full")
    fold.locator("summary").click()
    expect(fold.locator("li").last).to_be_visible()
    fold.locator("summary").click()
    first.get_by_role("button", name="Hold back scene 09x01 2500").click()
    expect(page.get_by_test_id("leaks-held")).to_have_text("1")
    expect(first.get_by_role("button", name="Release scene 09x01 2500")).to_be_visible()
    page.get_by_role("link", name="Back to the study").click()

    page.get_by_role("button", name="Go live").click()
    expect(page.get_by_test_id("study-status")).to_have_text(re.compile("live", re.I))
    expect(page.get_by_text("The study is live.")).to_be_visible()
    names = page.locator("#names")
    expect(names.get_by_role("row")).to_have_count(7)  # six main characters, drawn at go-live
    assert set(study.study_works.get().name_map) == {
        "phoebe", "rachel", "chandler", "monica", "ross", "joey",
    }  # fmt: skip

    page.get_by_label("Number of links").fill("3")
    page.get_by_role("button", name="Create invite links").click()
    expect(page.get_by_text("3 invite links created.")).to_be_visible()
    links = page.get_by_test_id("invite-url")
    expect(links).to_have_count(3)
    tokens = list(Participant.objects.filter(study=study).values_list("token", flat=True))
    for i, token in enumerate(tokens):
        expect(links.nth(i)).to_have_text(f"{live_server.url}/s/{token}/")
    raters = page.get_by_test_id("rater-progress")
    for label in ("rater 1", "rater 2", "rater 3"):
        expect(raters.get_by_role("cell", name=label, exact=True)).to_be_visible()

    # A rater answers a scene; the polled progress table follows without a reload.
    page.evaluate("window.notReloaded = true")
    answer_one_scene(Participant.objects.get(study=study, label="rater 1"))
    row = raters.get_by_role("row").filter(has_text="rater 1")
    expect(row).to_contain_text("1 / 52", timeout=10_000)  # one of 53 scenes is held back
    expect(row).to_contain_text("in progress")  # the ledger status
    assert page.evaluate("window.notReloaded") is True
    screenshot("study-detail-live")

    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot("study-detail-phone")
    page.get_by_role("link", name="Review leaking scenes and aliases").click()
    expect(page.get_by_test_id("leaks-held")).to_have_text("1")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.evaluate("document.documentElement.scrollHeight") < 12000  # was 18,625
    screenshot("study-leaks-phone")

    page.set_viewport_size({"width": 1200, "height": 800})
    page.goto(f"{live_server.url}/studies/")
    expect(page.get_by_role("link", name="Friends: who speaks?")).to_be_visible()
    screenshot("study-list")
