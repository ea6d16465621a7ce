"""Studies people can run for real (issue 16), in the browser on the real Friends scenes:
a recruited participant from the public link to the platform's completion URL, a
refusal of consent, a practice scene and an attention check with the researcher's
instruction, the break after a sitting's cap, an abandoned assignment going back to the
pool, and a work with no earlier scenes (no history step, panel or flag; a refused
submit redirects and marks the unanswered speaker). Screenshots at 1280 and 390 px land
in var/screenshots/.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from studies.models import Assignment, Participant, StudyItem
from studies.participation import recruitment
from studies.participation import services as participation_services
from studies.scene import services as scene_services
from studies.scene.views import display_name
from tests.browser.test_study_rater import (
    answer_with_keys,
    digit_for,
    keys_ready,
    log_in,
    speakers_of,
)
from tests.studies import conftest as study_fixtures
from tests.studies.quotas import quotas_set

pytestmark = pytest.mark.django_db(transaction=True)

friends = study_fixtures.friends
live_study = study_fixtures.live_study

PLATFORM = "https://platform.example/complete?cc=C0DE42"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


def keep(study, n: int) -> list[StudyItem]:
    """Hold back all but the first ``n`` scenes (so a rater finishes in a test)."""
    items = list(study.study_items.order_by("position")[:n])
    study.study_items.exclude(pk__in=[i.pk for i in items]).update(held_back=True)
    return items


def current(participant: Participant) -> Assignment:
    participant.refresh_from_db()
    step = scene_services.participant_next_step(participant=participant)
    assert step.kind == "scene", step.kind
    return step.assignment


def start(page, participant: Participant, live_server, *, seen: bool = False) -> None:
    page.goto(f"{live_server.url}/s/{participant.token}/")
    page.get_by_role("button", name="I agree, start").click()
    page.get_by_role("button", name="Yes, I have" if seen else "No, I have not").click()
    expect(page.get_by_test_id("progress")).to_be_visible()


def answer_scene(page, participant: Participant, *, wrong: tuple[str, ...] = ()) -> Assignment:
    assignment = current(participant)
    # This scene's page, with its keyboard script running: keys pressed before the
    # deferred script is attached would be lost.
    form = page.locator(f"form#guess-form[action$='/scenes/{assignment.pk}/submit/']")
    expect(form).to_have_count(1)
    answer_with_keys(page, speakers_of(assignment), wrong=wrong)
    page.keyboard.press("Enter")
    return assignment


def both_widths(page, screenshot, name: str) -> None:
    """A screenshot at 1280 px and one at 390 px (no sideways scrolling there)."""
    page.set_viewport_size(DESKTOP)
    screenshot(f"{name}-1280")
    page.set_viewport_size(PHONE)
    page.evaluate("window.scrollTo(0, 0)")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"{name} is {width} px wide at 390 px"
    screenshot(f"{name}-390")
    page.set_viewport_size(DESKTOP)


def test_recruited_participant_from_the_public_link_to_the_completion_url(
    live_server, page, screenshot, live_study
):
    keep(live_study, 1)
    live_study.completion_code = "C0DE42"
    live_study.completion_url = PLATFORM
    live_study.debrief = "We study how people tell who speaks."
    live_study.exit_questions = recruitment.exit_questions_parse(
        "Age band: 18-24 | 25-34 | 35+\nHow did you find the task?"
    )
    live_study.save()
    recruitment.public_link_set(study=live_study, cap=1)
    page.route(
        "https://platform.example/**",
        lambda route: route.fulfill(
            status=200, content_type="text/html", body="<title>Platform</title><h1>Completed</h1>"
        ),
    )

    page.goto(
        f"{live_server.url}/s/p/{live_study.public_token}/"
        "?PROLIFIC_PID=pp-123&STUDY_ID=st-9&SESSION_ID=se-77"
    )
    # The link itself joins nobody: its page has the Join button (a POST with CSRF).
    expect(page.get_by_role("heading", name=f"Join “{live_study.name}”")).to_be_visible()
    assert not Participant.objects.filter(study=live_study).exists()
    both_widths(page, screenshot, "recruit-0-join")
    page.get_by_role("button", name="Join the study").click()
    expect(page.get_by_role("heading", name="Welcome to the study")).to_be_visible()
    expect(page.get_by_test_id("estimate")).to_have_text(
        re.compile(r"About \d+ minutes?, for at most 1 scene\.")
    )
    both_widths(page, screenshot, "recruit-1-consent")
    participant = Participant.objects.get(study=live_study)
    assert participant.via_public_link
    assert participant.platform_ids == {
        "participant": "pp-123",
        "study": "st-9",
        "session": "se-77",
    }

    page.get_by_role("button", name="I agree, start").click()
    page.get_by_role("button", name="No, I have not").click()
    expect(page.get_by_test_id("progress")).to_have_text("Scene 1 / 1")
    both_widths(page, screenshot, "recruit-2-scene")
    answer_scene(page, participant)

    expect(page.get_by_role("heading", name="A few last questions")).to_be_visible()
    page.get_by_label("25-34").check()
    page.get_by_label("How did you find the task?").fill("Fun, but P2 was hard.")
    both_widths(page, screenshot, "recruit-3-exit")
    page.get_by_role("button", name="Send and finish").click()

    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()
    completion = page.get_by_test_id("completion")
    expect(completion).to_contain_text("Your completion code: C0DE42")
    expect(page.get_by_text("We study how people tell who speaks.")).to_be_visible()
    expect(page.get_by_role("link", name="Withdraw my data")).to_be_visible()
    both_widths(page, screenshot, "recruit-4-done")
    participant.refresh_from_db()
    assert participant.exit_answers == {"q1": "25-34", "q2": "Fun, but P2 was hard."}

    completion.get_by_role("link", name="Return to the study platform").click()
    page.wait_for_url(PLATFORM)
    expect(page.get_by_role("heading", name="Completed")).to_be_visible()

    # The same platform id again resumes the same participant; a new one finds it full.
    page.goto(f"{live_server.url}/s/p/{live_study.public_token}/?PROLIFIC_PID=pp-123")
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()
    page.goto(f"{live_server.url}/s/p/{live_study.public_token}/?PROLIFIC_PID=pp-456")
    expect(page.get_by_text("this study is full")).to_be_visible()
    assert Participant.objects.filter(study=live_study).count() == 1


def test_refusing_consent_ends_politely_and_records_it(live_server, page, screenshot, live_study):
    (participant,) = participation_services.participants_invite(
        study=live_study, labels=["no thanks"]
    )
    link = f"{live_server.url}/s/{participant.token}/"
    page.goto(link)
    page.get_by_role("button", name="I do not agree").click()
    expect(page.get_by_role("heading", name="Thank you")).to_be_visible()
    expect(page.get_by_text("You chose not to take part")).to_be_visible()
    screenshot("recruit-refused")
    participant.refresh_from_db()
    assert participant.refused_at is not None and participant.consented_at is None
    page.goto(link)  # coming back changes nothing
    expect(page.get_by_text("You chose not to take part")).to_be_visible()
    assert not page.get_by_role("button", name="I agree, start").count()
    assert not Assignment.objects.filter(participant=participant).exists()


def test_practice_scene_with_feedback_and_a_failed_attention_check(
    live_server, page, screenshot, live_study, researcher
):
    items = keep(live_study, 4)
    practice, check = items[0], items[3]
    recruitment.item_roles_set(study=live_study, practice=practice, attention=[check])

    # The researcher writes the checks' instruction on the study page (issue 49).
    log_in(page, live_server)
    page.goto(f"{live_server.url}/studies/{live_study.pk}/#roles")
    page.get_by_label("Attention-check instruction").fill(
        "Attention check: select '{name}' for this speaker."
    )
    page.get_by_role("button", name="Save practice and checks").click()
    expect(page.get_by_text("Practice scene and attention checks saved.")).to_be_visible()
    page.get_by_role("heading", name="Practice and attention checks").scroll_into_view_if_needed()
    both_widths(page, screenshot, "attention-instruction-form")
    page.set_viewport_size(DESKTOP)
    page.context.clear_cookies()

    (participant,) = participation_services.participants_invite(
        study=live_study, labels=["careless"]
    )
    start(page, participant, live_server)

    # The practice scene comes first, says so, and shows the right answers after.
    expect(page.get_by_test_id("progress")).to_have_text("Practice scene")
    expect(page.get_by_test_id("practice-note")).to_be_visible()
    screenshot("practice-1-scene")
    answer_scene(page, participant, wrong=("P0",))
    expect(page.get_by_text("✗ incorrect")).to_have_count(1)
    screenshot("practice-2-feedback")
    page.get_by_role("link", name="Next").click()

    # Three counted scenes, the attention check among them (not first), answered wrong.
    # Only the check says what to select: each masked speaker its own character.
    roles = []
    for number in (1, 2, 3):
        expect(page.get_by_test_id("progress")).to_have_text(f"Scene {number} / 3")
        assignment = current(participant)
        roles.append(assignment.study_item.role)
        said = page.get_by_test_id("attention-instruction")
        if assignment.study_item.role == StudyItem.Role.ATTENTION:
            speakers = speakers_of(assignment)
            expect(said).to_have_text(
                [
                    f"Attention check: select '{display_name(s.gold_character.name, {})}' "
                    "for this speaker."
                    for s in speakers
                ]
            )
            both_widths(page, screenshot, "attention-instruction-check")
            page.set_viewport_size(DESKTOP)
            wrong = ("P0",)
        else:
            expect(said).to_have_count(0)
            wrong = ()
        answer_scene(page, participant, wrong=wrong)
    assert roles[0] == "test" and roles.count("attention") == 1
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()

    # The researcher sees the failed check and the exclusion (rule: no failure allowed).
    page.context.clear_cookies()
    log_in(page, live_server)
    page.goto(f"{live_server.url}/studies/{live_study.pk}/#quality")
    row = page.get_by_test_id("rater-quality").locator("tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("careless")
    expect(row).to_contain_text("1 / 1")
    expect(row.get_by_text("excluded")).to_be_visible()
    ledger_row = page.get_by_test_id("ledger").get_by_role("row").filter(has_text="careless")
    expect(ledger_row.locator("[data-status]")).to_have_attribute(
        "title", "rule: instructed-response items: 1 of 1 failed (allowed 0)"
    )
    screenshot("practice-3-quality")
    # Practice and check answers are not scene answers of the study.
    (q,) = __import__("studies.quality", fromlist=["x"]).study_quality(live_study)
    assert q.scenes == 2 and q.attention_failed == 1 and q.excluded


def test_a_break_after_the_sitting_cap(live_server, page, screenshot, live_study):
    keep(live_study, 2)
    live_study.session_cap = 1
    live_study.save(update_fields=["session_cap"])
    (participant,) = participation_services.participants_invite(study=live_study, labels=["steady"])
    start(page, participant, live_server)
    expect(page.get_by_test_id("progress")).to_have_text("Scene 1 / 2")
    answer_scene(page, participant)
    expect(page.get_by_role("heading", name="Time for a break")).to_be_visible()
    both_widths(page, screenshot, "pacing-break")
    page.reload()  # the break holds until the rater goes on
    expect(page.get_by_role("heading", name="Time for a break")).to_be_visible()
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_test_id("progress")).to_have_text("Scene 2 / 2")
    answer_scene(page, participant)
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()


def test_an_abandoned_assignment_returns_to_the_pool(
    live_server, browser, page, screenshot, live_study
):
    keep(live_study, 2)
    quotas_set(live_study, overlap=1, min_unseen=0, idle_timeout_minutes=30)
    first, second = participation_services.participants_invite(
        study=live_study, labels=["gone", "next"]
    )

    # The first rater takes both scenes, answers one and leaves.
    start(page, first, live_server)
    answer_scene(page, first)
    expect(page.get_by_test_id("progress")).to_have_text("Scene 2 / 2")
    left = current(first)
    long_ago = timezone.now() - timedelta(minutes=45)
    Assignment.objects.filter(participant=first).update(
        assigned_at=long_ago, first_shown_at=long_ago, last_event_at=long_ago, submitted_at=long_ago
    )

    # The next rater gets the abandoned scene.
    other = browser.new_context(viewport=DESKTOP).new_page()
    start(other, second, live_server)
    expect(other.get_by_test_id("progress")).to_have_text("Scene 1 / 1")
    assert current(second).study_item_id == left.study_item_id
    other.context.close()

    # The first rater comes back and is told, politely.
    page.goto(f"{live_server.url}/s/{first.token}/")
    expect(page.get_by_role("heading", name="Welcome back")).to_be_visible()
    expect(page.get_by_text("the 1 scene you had not answered yet went to other")).to_be_visible()
    screenshot("pacing-released")
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()
    assert Assignment.objects.filter(participant=first).count() == 1  # the answered one


def test_no_history_and_a_refused_submit_marks_the_unanswered_speaker(
    live_server, page, screenshot, live_study
):
    live_study.one_to_one = True
    live_study.save(update_fields=["one_to_one"])
    # Friends 09x01 scene 2502 has four masked speakers; the largest has six.
    six = max(
        live_study.study_items.select_related("scene"), key=lambda i: i.scene.instances.count()
    )
    live_study.study_items.exclude(pk=six.pk).update(held_back=True)
    (participant,) = participation_services.participants_invite(study=live_study, labels=["phone"])
    start(page, participant, live_server)

    # Straight from "seen it?" to the scene: Friends has no earlier scenes.
    expect(page.get_by_test_id("progress")).to_have_text("Scene 1 / 1")
    expect(page.get_by_text("Earlier scenes (history)")).to_have_count(0)
    expect(page.get_by_label("I needed earlier scenes")).to_have_count(0)
    assignment = current(participant)
    instances = speakers_of(assignment)
    assert len(instances) == 6

    # One-to-one is shown as the rater chooses.
    keys_ready(page)
    page.keyboard.press(digit_for(instances[0]))
    page.get_by_role("radiogroup", name="Who is P1?").get_by_role(
        "radio", name=instances[0].gold_character.name.title(), exact=True
    ).check()
    expect(page.locator(f"#clash-{instances[1].pk}")).to_be_visible()
    expect(page.locator(f"#clash-{instances[0].pk}")).to_be_visible()
    page.get_by_role("radiogroup", name="Who is P1?").get_by_role(
        "radio", name=instances[1].gold_character.name.title(), exact=True
    ).check()
    expect(page.locator(f"#clash-{instances[1].pk}")).to_be_hidden()

    # Submit with P2..P5 unanswered: a GET page (not /submit/) marks them, focus on P2.
    page.get_by_role("button", name="Submit scene").click()
    page.wait_for_url(re.compile(r"/s/[\w-]+/\?problem=missing&missing=P2%2CP3%2CP4%2CP5"))
    expect(page.locator("#submit-error")).to_contain_text("choose a character for P2, P3, P4, P5")
    expect(page.get_by_text("Choose who P2 is.")).to_be_visible()
    focused = page.evaluate("document.activeElement.closest('[data-speaker]').id")
    assert focused == f"speaker-{instances[2].pk}"
    screenshot("scene-unanswered-1280")
    page.reload()  # nothing is posted again
    assignment.refresh_from_db()
    assert assignment.status == "assigned"

    # On a phone: clues folded, no key hints, the scene text first, no sideways scroll.
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/s/{participant.token}/")
    expect(page.locator("details.speaker-more[open]")).to_have_count(0)
    height = page.evaluate("document.documentElement.scrollHeight")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot("scene-6-speakers-390")
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/s/{participant.token}/")
    expect(page.locator("details.speaker-more[open]")).to_have_count(6)
    assert height < 5349, f"a 6-speaker scene is {height} px tall on a phone"

    # "h" does nothing without a flag; answering the rest submits, flag not recorded.
    answer_with_keys(page, instances[2:])
    page.keyboard.press("h")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()
    assignment.refresh_from_db()
    assert assignment.status == "submitted" and assignment.history_needed is None
