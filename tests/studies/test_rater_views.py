"""The rater's pages through the Django client: the whole path, resumption, bad input.

Runs on the real Friends scenes (``live_study``). Pages are exercised without htmx
(the full-form submit) and with it (one field saved per request).
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from benchmarks.models import Character, SpeakerInstance
from studies import services
from studies.models import (
    Assignment,
    Guess,
    HistoryView,
    Participant,
    Study,
    WorkSession,
)
from studies.participation import services as participation_services
from studies.scene import services as scene_services
from tests.page_text import without_csrf, without_tokens

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]

HTMX = {"HTTP_HX_REQUEST": "true"}


# -- helpers --------------------------------------------------------------------------


def invite(study: Study, label: str = "rater") -> Participant:
    (participant,) = participation_services.participants_invite(study=study, labels=[label])
    return participant


def url(name: str, participant: Participant, **kwargs) -> str:
    return reverse(f"rater:{name}", kwargs={"token": participant.token, **kwargs})


def keep_scenes(study: Study, n: int) -> None:
    """Hold back all but the first ``n`` scenes, so a rater can finish in a test."""
    keep = list(study.study_items.order_by("position").values_list("pk", flat=True)[:n])
    study.study_items.exclude(pk__in=keep).update(held_back=True)


def to_scenes(client, participant: Participant, seen: str = "no") -> WorkSession:
    """Consent, "seen it?" and the history, through the pages."""
    assert client.post(url("consent", participant)).status_code == 302
    study_work = participant.study.study_works.get()
    response = client.post(
        url("familiarity", participant, study_work_id=study_work.pk), {"seen": seen}
    )
    assert response.status_code == 302
    session = WorkSession.objects.get(participant=participant)
    response = client.post(url("history-confirm", participant, session_id=session.pk))
    assert response.status_code == 302
    return session


def current(participant: Participant) -> Assignment:
    participant.refresh_from_db()
    step = scene_services.participant_next_step(participant=participant)
    assert step.kind == "scene"
    return step.assignment


def instances(assignment: Assignment) -> list[SpeakerInstance]:
    return sorted(
        SpeakerInstance.objects.filter(scene_id=assignment.study_item.scene_id).select_related(
            "gold_character"
        ),
        key=lambda i: int(i.code[1:]),
    )


def full_form(assignment: Assignment, *, right: bool = True, flag: bool = False) -> dict:
    """What the page's form posts without JavaScript."""
    data: dict = {"history_needed-sent": "1"}
    for instance in instances(assignment):
        gold = instance.candidates.index(instance.gold_character.name)
        choice = gold if right else (gold + 1) % len(instance.candidates)
        data[f"choice-{instance.pk}"] = str(choice)
        data[f"tags-{instance.pk}-sent"] = "1"
        data[f"tags-{instance.pk}"] = ["intention", "belief"]
        data[f"evidence-{instance.pk}"] = "the way they talk"
    if flag:
        data["history_needed"] = "1"
    return data


# -- the path -------------------------------------------------------------------------


def test_unknown_token_is_a_plain_404(client, live_study):
    invite(live_study)
    response = client.get(reverse("rater:start", kwargs={"token": "x" * 43}))
    assert response.status_code == 404
    assert b"token" not in response.content.lower()
    response = client.post(reverse("rater:consent", kwargs={"token": "nope"}))
    assert response.status_code == 404


def test_every_step_through_the_same_url(client, live_study):
    participant = invite(live_study)
    start = url("start", participant)

    page = client.get(start)
    assert page.status_code == 200
    assert b"Guess who speaks." in page.content  # the study's instructions
    assert b"I agree, start" in page.content

    client.post(url("consent", participant))
    page = client.get(start)
    assert b"Have you seen this show before?" in page.content
    study_work = live_study.study_works.get()
    client.post(url("familiarity", participant, study_work_id=study_work.pk), {"seen": "yes"})
    session = WorkSession.objects.get(participant=participant)
    assert session.seen is True
    assert participant.familiarities.get().seen is True

    # Friends is a TV show with no training scenes: no history step, no history panel,
    # no "I needed earlier scenes" flag (issue 16).
    page = client.get(start)
    assert b"has no earlier scenes to read" not in page.content
    assert HistoryView.objects.filter(session=session).count() == 0
    assignment = current(participant)
    total = session.assignments.count()
    html = page.content.decode()
    assert f"Scene 1 / {total}" in html
    for instance in instances(assignment):
        assert f'Who is <span class="masked">{instance.code}</span>?' in html
    assert "I needed earlier scenes" not in html
    assert "Earlier scenes (history)" not in html
    assert "Submit scene" in html
    for tag in live_study.tags:
        assert f'value="{tag}"' in html
    assignment.refresh_from_db()
    assert assignment.first_shown_at is not None  # server-side timing started

    form = full_form(assignment)
    del form["history_needed-sent"]  # the page has no flag to send
    response = client.post(url("scene-submit", participant, assignment_id=assignment.pk), form)
    assert response.status_code == 302 and response.url == start
    assignment.refresh_from_db()
    assert assignment.status == "submitted" and assignment.history_needed is None
    guesses = Guess.objects.filter(assignment=assignment)
    assert guesses.count() == len(instances(assignment))
    assert all(g.correct for g in guesses)
    assert all(g.tags == ["intention", "belief"] for g in guesses)
    assert f"Scene 2 / {total}" in client.get(start).content.decode()


def test_reload_resumes_at_the_same_scene_with_saved_answers(client, live_study, friends):
    add_history(friends)  # the "I needed earlier scenes" flag is only asked with a history
    participant = invite(live_study)
    to_scenes(client, participant)
    client.get(url("start", participant))
    assignment = current(participant)
    first, *_ = instances(assignment)
    save = url("scene-save", participant, assignment_id=assignment.pk)

    response = client.post(save, {f"choice-{first.pk}": "2"}, **HTMX)
    assert response.status_code == 200 and "Saved" in response.content.decode()
    client.post(save, {f"tags-{first.pk}-sent": "1", f"tags-{first.pk}": ["emotion"]}, **HTMX)
    client.post(save, {f"evidence-{first.pk}": "  sobs on cue "}, **HTMX)
    client.post(save, {"history_needed-sent": "1", "history_needed": "1"}, **HTMX)

    html = client.get(url("start", participant)).content.decode()  # the "reload"
    assert "Scene 1 / " in html
    assert re.search(rf'name="choice-{first.pk}" value="2" checked', html)
    assert len(re.findall(rf'name="choice-{first.pk}" value="\d+" checked', html)) == 1
    assert re.search(rf'name="tags-{first.pk}" value="emotion" checked', html)
    assert not re.search(rf'name="tags-{first.pk}" value="belief" checked', html)
    assert "sobs on cue</textarea>" in html
    assert re.search(r'id="history-needed" name="history_needed" value="1" checked', html)

    # Unticking every tag clears them; unticking the flag stores "no".
    client.post(save, {f"tags-{first.pk}-sent": "1"}, **HTMX)
    client.post(save, {"history_needed-sent": "1"}, **HTMX)
    guess = Guess.objects.get(assignment=assignment, instance=first)
    assert guess.tags == [] and guess.answer == first.candidates[2]
    assert guess.evidence == "sobs on cue" and guess.correct is None
    assignment.refresh_from_db()
    assert assignment.history_needed is False


def test_an_answer_post_takes_a_bounded_number_of_queries(
    client, live_study, django_assert_max_num_queries
):
    participant = invite(live_study)
    to_scenes(client, participant)
    assignment = current(participant)
    first = instances(assignment)[0]
    save = url("scene-save", participant, assignment_id=assignment.pk)
    client.post(save, {f"choice-{first.pk}": "0"}, **HTMX)  # the guess row exists now
    with django_assert_max_num_queries(10):
        response = client.post(save, {f"choice-{first.pk}": "1"}, **HTMX)
    assert response.status_code == 200
    assert Guess.objects.get(assignment=assignment, instance=first).answer == first.candidates[1]


def test_double_submit_stores_one_answer(client, live_study):
    participant = invite(live_study)
    to_scenes(client, participant)
    assignment = current(participant)
    submit = url("scene-submit", participant, assignment_id=assignment.pk)
    client.post(submit, full_form(assignment))
    assignment.refresh_from_db()
    first_submit = assignment.submitted_at
    answers = list(Guess.objects.filter(assignment=assignment).values_list("answer", flat=True))

    # A replay with other answers (back button, double click) changes nothing.
    response = client.post(submit, full_form(assignment, right=False))
    assert response.status_code == 302
    assignment.refresh_from_db()
    assert assignment.submitted_at == first_submit
    assert (
        list(Guess.objects.filter(assignment=assignment).values_list("answer", flat=True))
        == answers
    )
    # Saving into a submitted scene is refused with a message.
    first = instances(assignment)[0]
    response = client.post(
        url("scene-save", participant, assignment_id=assignment.pk),
        {f"choice-{first.pk}": "0"},
        **HTMX,
    )
    assert response.status_code == 422
    assert "already submitted" in response.content.decode()


def test_submit_reports_what_is_missing_and_keeps_the_scene_open(client, live_study):
    participant = invite(live_study)
    to_scenes(client, participant)
    assignment = current(participant)
    first = instances(assignment)[0]
    response = client.post(
        url("scene-submit", participant, assignment_id=assignment.pk),
        {f"choice-{first.pk}": "0", "history_needed-sent": "1"},
    )
    # Post/redirect/get: a reload of the page cannot post the form again (issue 16).
    unanswered = [i.code for i in instances(assignment)[1:]]
    assert response.status_code == 302
    assert response.url.startswith(url("start", participant) + "?problem=missing&missing=")
    html = client.get(response.url).content.decode()
    assert "Not submitted" in html
    assert f"choose a character for {', '.join(unanswered)} first" in html
    assert re.search(rf'name="choice-{first.pk}" value="0" checked', html)  # kept
    for instance in instances(assignment):
        marked = f'id="missing-{instance.pk}"' in html
        assert marked == (instance.code in unanswered)
    # The address carries codes only: a message planted in it is never shown.
    planted = client.get(url("start", participant) + "?problem=pwned&missing=<b>x</b>")
    assert b"pwned" not in planted.content and b"<b>x" not in planted.content
    assignment.refresh_from_db()
    assert assignment.status == "assigned"
    assert not Guess.objects.filter(assignment=assignment, correct__isnull=False).exists()


# -- bad input ------------------------------------------------------------------------


def test_another_raters_assignment_is_not_found(client, live_study):
    alice, bob = invite(live_study, "alice"), invite(live_study, "bob")
    to_scenes(client, alice)
    to_scenes(client, bob)
    theirs = current(alice)
    instance = instances(theirs)[0]
    for name, data in (
        ("scene-save", {f"choice-{instance.pk}": "0"}),
        ("scene-submit", full_form(theirs)),
    ):
        response = client.post(url(name, bob, assignment_id=theirs.pk), data)
        assert response.status_code in (400, 404)
        assert b"no such scene in your assignments" in response.content
    assert client.get(url("scene-result", bob, assignment_id=theirs.pk)).status_code == 404
    assert not Guess.objects.exists()
    theirs.refresh_from_db()
    assert theirs.status == "assigned"
    # Another participant's work session (history) is not found either.
    other = WorkSession.objects.get(participant=alice)
    assert client.get(url("history", bob, session_id=other.pk)).status_code == 404
    assert client.post(url("history-confirm", bob, session_id=other.pk)).status_code == 404


def test_tampered_instances_and_choices_are_rejected(client, live_study):
    participant = invite(live_study)
    to_scenes(client, participant)
    assignment = current(participant)
    mine = instances(assignment)[0]
    elsewhere = SpeakerInstance.objects.exclude(scene_id=assignment.study_item.scene_id).first()
    save = url("scene-save", participant, assignment_id=assignment.pk)

    response = client.post(save, {f"choice-{elsewhere.pk}": "0"}, **HTMX)
    assert response.status_code == 422
    assert "that masked speaker is not in this scene" in response.content.decode()
    for bad in ("6", "-1", "rachel", ""):
        response = client.post(save, {f"choice-{mine.pk}": bad}, **HTMX)
        assert response.status_code == 422
        assert "choose one of the 6 candidates" in response.content.decode()
    response = client.post(save, {f"tags-{mine.pk}-sent": "1", f"tags-{mine.pk}": "x"}, **HTMX)
    assert "unknown tag(s): x" in response.content.decode()
    assert not Guess.objects.exists()

    # The whole form with one tampered field stores none of it.
    data = full_form(assignment)
    data[f"choice-{elsewhere.pk}"] = "1"
    response = client.post(url("scene-submit", participant, assignment_id=assignment.pk), data)
    assert response.status_code == 400
    assert "that masked speaker is not in this scene" in response.content.decode()
    assert not Guess.objects.exists()
    assignment.refresh_from_db()
    assert assignment.status == "assigned" and assignment.history_needed is None


def test_gold_is_never_in_a_page_before_submission(client, live_study):
    participant = invite(live_study)
    to_scenes(client, participant)
    assignment = current(participant)
    start = url("start", participant)
    save = url("scene-save", participant, assignment_id=assignment.pk)
    first = instances(assignment)[0]

    def pages() -> list[str]:
        # The save first, so both rounds render the scene with the same answer chosen.
        return [
            client.post(save, {f"choice-{first.pk}": "0"}, **HTMX).content.decode(),
            without_csrf(client.get(start).content.decode()),
            client.get(
                url("history", participant, session_id=assignment.session_id), **HTMX
            ).content.decode(),
        ]

    before = pages()
    assert "Saved" in before[0] and "Who is" in before[1]
    for html in before:
        assert "correct" not in html.lower().replace("i needed", "")  # no result markers
        assert "gold" not in without_tokens(html).lower()
    # Moving every gold answer to another candidate changes no byte of any page: the
    # pages cannot carry the gold, not even through the order of the candidates.
    for instance in instances(assignment):
        other = next(c for c in instance.candidates if c != instance.gold_character.name)
        instance.gold_character = Character.objects.get(work=instance.scene.work, name=other)
        instance.save(update_fields=["gold_character"])
    assert pages() == before
    # The result exists only after submission (and here not before the end: at_end).
    result = url("scene-result", participant, assignment_id=assignment.pk)
    assert client.get(result).status_code == 404
    client.post(
        url("scene-submit", participant, assignment_id=assignment.pk), full_form(assignment)
    )
    assert client.get(result).status_code == 404  # reveal "at_end", rater not done yet


def test_after_scene_reveal_shows_the_result_before_the_next_scene(client, live_study):
    live_study.reveal = Study.Reveal.AFTER_SCENE
    live_study.save(update_fields=["reveal"])
    participant = invite(live_study)
    to_scenes(client, participant)
    assignment = current(participant)
    result = url("scene-result", participant, assignment_id=assignment.pk)
    assert client.get(result).status_code == 404  # not before submission

    response = client.post(
        url("scene-submit", participant, assignment_id=assignment.pk),
        full_form(assignment, right=False),
    )
    assert response.status_code == 302 and response.url == result
    html = client.get(result).content.decode()
    for instance in instances(assignment):
        assert "✗ incorrect" in html
        assert instance.gold_character.name.title() in html
    assert html.count("✗ incorrect") == len(instances(assignment))
    assert "✓ correct" not in html


def test_final_report_counts_this_raters_answers_only(client, live_study):
    keep_scenes(live_study, 2)
    alice, bob = invite(live_study, "alice"), invite(live_study, "bob")
    for participant in (alice, bob):
        to_scenes(client, participant)
    first = current(alice)
    client.post(url("scene-submit", alice, assignment_id=first.pk), full_form(first))
    second = current(alice)
    # Second scene: only P0 wrong.
    data = full_form(second)
    p0 = instances(second)[0]
    data[f"choice-{p0.pk}"] = str((int(data[f"choice-{p0.pk}"]) + 1) % 6)
    client.post(url("scene-submit", alice, assignment_id=second.pk), data)
    bob_scene = current(bob)
    client.post(
        url("scene-submit", bob, assignment_id=bob_scene.pk), full_form(bob_scene, right=False)
    )

    html = client.get(url("start", alice)).content.decode()
    n = len(instances(first)) + len(instances(second))
    assert f"{n - 1} / {n} (" in html
    assert "Masked speakers correct:" in html and "Scenes fully correct:" in html
    assert "1 / 2 (50%)" in html
    assert html.count("✗ incorrect") == 1  # Bob's wrong answers are not in Alice's report
    assert "bob" not in without_tokens(html).lower()  # a token once held "bob"
    # Now "at_end" allows Alice's own results, never Bob's.
    assert client.get(url("scene-result", alice, assignment_id=first.pk)).status_code == 200
    assert client.get(url("scene-result", alice, assignment_id=bob_scene.pk)).status_code == 404


def test_history_panel_is_logged_and_served_as_a_partial(client, live_study):
    participant = invite(live_study)
    session = to_scenes(client, participant)
    assignment = current(participant)
    panel = url("history", participant, session_id=session.pk) + f"?assignment={assignment.pk}"
    response = client.get(panel, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert "has no earlier scenes to read" in html
    assert client.get(panel).content.decode().count("<html") == 1  # the no-JS page
    views = HistoryView.objects.filter(session=session, where="panel")
    assert views.count() == 2 and {v.assignment_id for v in views} == {assignment.pk}


def test_perturbed_names_are_shown_in_place_of_the_real_ones(client, live_study):
    live_study.perturb_names = True
    live_study.save(update_fields=["perturb_names"])
    study_work = live_study.study_works.get()
    study_work.name_map = {"rachel": "Karen", "joey": "Brian"}
    study_work.save(update_fields=["name_map"])
    participant = invite(live_study)
    to_scenes(client, participant)
    assignment = current(participant)
    first = instances(assignment)[0]
    html = client.get(url("start", participant)).content.decode()
    assert "<span>Karen</span>" in html and "<span>Brian</span>" in html
    assert "<span>Rachel</span>" not in html and "<span>Monica</span>" in html
    # The radio values are indexes: choosing "Karen" stores the real name.
    karen = first.candidates.index("rachel")
    client.post(
        url("scene-save", participant, assignment_id=assignment.pk),
        {f"choice-{first.pk}": str(karen)},
        **HTMX,
    )
    assert Guess.objects.get(instance=first).answer == "rachel"


# -- who may take part -----------------------------------------------------------------


def test_withdrawn_rater_and_paused_study_get_a_clear_page(client, live_study):
    participant = invite(live_study)
    to_scenes(client, participant)
    assignment = current(participant)
    first = instances(assignment)[0]

    services.study_pause(study=live_study)
    response = client.get(url("start", participant))
    assert b"This study is paused" in response.content
    response = client.post(
        url("scene-save", participant, assignment_id=assignment.pk),
        {f"choice-{first.pk}": "0"},
        **HTMX,
    )
    assert response.status_code == 422 and b"paused" in response.content
    response = client.post(
        url("scene-submit", participant, assignment_id=assignment.pk), full_form(assignment)
    )
    assert response.status_code == 400 and b"paused" in response.content
    assert not Guess.objects.exists()

    services.study_go_live(study=live_study)
    participation_services.participant_withdraw(participant=participant)
    response = client.get(url("start", participant))
    assert response.status_code == 403
    assert b"You have been withdrawn" in response.content
    response = client.post(
        url("scene-submit", participant, assignment_id=assignment.pk), full_form(assignment)
    )
    assert response.status_code == 400 and b"withdrawn" in response.content
    assert not Guess.objects.exists()


def test_a_logged_in_rater_joins_and_lands_on_their_own_link(client, live_study, rater):
    Study.objects.filter(pk=live_study.pk).update(open_join=True)
    join = reverse("rater:join", kwargs={"study_id": live_study.pk})
    assert "/accounts/login/" in client.get(join).url
    client.force_login(rater)
    assert client.get(join).status_code == 200  # the Join button; nobody joined yet
    assert not Participant.objects.filter(user=rater).exists()
    response = client.post(join)
    participant = Participant.objects.get(study=live_study, user=rater)
    assert response.status_code == 302 and response.url == url("start", participant)
    assert client.post(join).url == response.url  # the same participation again
    assert client.get(join).url == response.url
    assert Participant.objects.filter(user=rater).count() == 1
    draft = services.study_create(
        name="draft", benchmark="tvshowguess", works=[live_study.study_works.get().work]
    )
    assert client.get(reverse("rater:join", kwargs={"study_id": draft.pk})).status_code == 404
    assert client.post(reverse("rater:join", kwargs={"study_id": draft.pk})).status_code == 404


def test_familiarity_needs_a_yes_or_no_and_a_work_of_this_study(client, live_study, friends):
    participant = invite(live_study)
    client.post(url("consent", participant))
    study_work = live_study.study_works.get()
    response = client.post(url("familiarity", participant, study_work_id=study_work.pk), {})
    assert response.status_code == 400 and not WorkSession.objects.exists()
    other = services.study_create(name="other", benchmark="tvshowguess", works=[friends])
    foreign = other.study_works.get()
    response = client.post(
        url("familiarity", participant, study_work_id=foreign.pk), {"seen": "no"}
    )
    assert response.status_code == 404 and not WorkSession.objects.exists()


# -- the history reader -----------------------------------------------------------------


def add_history(work) -> None:
    """Two training scenes for the work (Friends has none), created out of order."""
    from benchmarks.models import Scene

    Scene.objects.create(
        work=work,
        source_id="history-2",
        position=1001,
        part=Scene.Part.TRAINING,
        heading="[Scene: Central Perk, later.]",
        lines=[
            {"type": "dialog", "title": "ross", "text": "Rachel, we need to talk."},
            {"type": "scene", "title": "NULL", "text": "(Rachel sighs.)"},
        ],
    )
    Scene.objects.create(
        work=work,
        source_id="history-1",
        position=1000,
        part=Scene.Part.TRAINING,
        heading="[Scene: Central Perk.]",
        lines=[{"type": "dialog", "title": "rachel", "text": "Hi Ross! Coffee?"}],
    )


def test_history_reader_shows_the_training_scenes_in_order(client, live_study, friends):
    add_history(friends)
    participant = invite(live_study)
    client.post(url("consent", participant))
    study_work = live_study.study_works.get()
    client.post(url("familiarity", participant, study_work_id=study_work.pk), {"seen": "no"})
    html = client.get(url("start", participant)).content.decode()
    assert "Read the earlier scenes first" in html and "I have read it" in html
    first, second = html.index("Hi Ross! Coffee?"), html.index("Rachel, we need to talk.")
    assert first < second
    assert '<span class="cue">Rachel:</span>' in html and '<span class="cue">Ross:</span>' in html
    session = WorkSession.objects.get(participant=participant)
    assert session.views.filter(where="reader").count() == 1
    # Not confirmed yet: the start URL keeps showing the reader, not a scene.
    assert "Who is" not in client.get(url("start", participant)).content.decode()
    client.post(url("history-confirm", participant, session_id=session.pk))
    assert "Who is" in client.get(url("start", participant)).content.decode()


def test_history_reader_uses_the_perturbed_names(client, live_study, friends):
    add_history(friends)
    live_study.perturb_names = True
    live_study.save(update_fields=["perturb_names"])
    study_work = live_study.study_works.get()
    study_work.name_map = {"rachel": "Karen", "ross": "Brian"}
    study_work.save(update_fields=["name_map"])
    participant = invite(live_study)
    client.post(url("consent", participant))
    client.post(url("familiarity", participant, study_work_id=study_work.pk), {"seen": "no"})
    html = client.get(url("start", participant)).content.decode()
    assert "Hi Brian! Coffee?" in html and "Karen, we need to talk." in html
    assert '<span class="cue">Karen:</span>' in html
    assert "Rachel" not in without_tokens(html) and "Ross" not in without_tokens(html)


def test_home_lists_live_studies_for_raters_to_join(client, rater, live_study):
    Study.objects.filter(pk=live_study.pk).update(open_join=True)  # see test_join.py
    client.force_login(rater)
    page = client.get("/").content.decode()
    assert f'href="/s/join/{live_study.pk}/"' in page
    assert "Take part: Friends guessing" in page
