"""The researcher's study pages through the Django client: set-up, live progress, leak
check, names, invites, responses and their CSV, and who may see any of it."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from django.urls import reverse

from benchmarks.models import Character
from studies.models import Assignment, Participant, Study, StudyItem
from studies.participation.services import (
    participant_consent,
    participant_withdraw,
    participants_invite,
)
from studies.scene.leaks import leaks_check
from studies.scene.services import (
    familiarity_declare,
    flag_record,
    guess_record,
    history_confirm,
    participant_next_step,
    scene_submit,
)
from studies.services import study_close, study_create, study_go_live
from tests.page_text import without_tokens
from tests.studies.leak_fixtures import BLOCKING, NightShift, night_shift_create

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]


def _rater(study, label, *, seen=False, answer=0, right=True):
    """A rater who joins, declares familiarity, reads the history and answers scenes."""
    (participant,) = participants_invite(study=study, labels=[label])
    participant = participant_consent(participant=participant)
    step = participant_next_step(participant=participant)
    if step.kind != "familiarity":  # every scene already has its raters
        return participant
    session = familiarity_declare(participant=participant, study_work=step.study_work, seen=seen)
    history_confirm(participant=participant, session=session)
    for _ in range(answer):
        assignment = participant_next_step(participant=participant).assignment
        for instance in assignment.study_item.scene.instances.select_related("gold_character"):
            gold = [c.casefold() for c in instance.candidates].index(
                instance.gold_character.name.casefold()
            )
            guess_record(
                participant=participant,
                assignment_id=assignment.pk,
                instance_id=instance.pk,
                choice=gold if right else (gold + 1) % len(instance.candidates),
                tags=["intention", "emotion"],
                evidence=f"{label} saw it",
            )
        flag_record(participant=participant, assignment_id=assignment.pk, history_needed=True)
        scene_submit(participant=participant, assignment_id=assignment.pk)
    return participant


@pytest.fixture
def res_client(client, researcher):
    client.force_login(researcher)
    return client


@pytest.fixture
def night_shift(db) -> NightShift:
    """A ToM-in-AMC movie whose scenes leak in the heading, a direction and a cue."""
    return night_shift_create()


def _held(study: Study) -> list[str]:
    return sorted(
        study.study_items.filter(held_back=True).values_list("scene__source_id", flat=True)
    )


def _with_findings(study: Study) -> int:
    return sum(bool(leaks) for leaks in study.study_items.values_list("leaks", flat=True))


@pytest.fixture
def draft(friends, researcher):
    return study_create(
        name="Friends draft", benchmark="tvshowguess", works=[friends], created_by=researcher
    )


# -- permissions ------------------------------------------------------------------------


def _urls(study: Study) -> list[tuple[str, str]]:
    sid = study.pk
    scene = study.study_items.first()
    work = study.study_works.first()
    get = [
        reverse("studies:list"),
        reverse("studies:new"),
        reverse("studies:detail", args=[sid]),
        reverse("studies:leaks", args=[sid]),
        reverse("studies:responses", args=[sid]),
        reverse("studies:responses-csv", args=[sid]),
    ]
    post = [
        reverse("studies:new"),
        reverse("studies:go-live", args=[sid]),
        reverse("studies:pause", args=[sid]),
        reverse("studies:resume", args=[sid]),
        reverse("studies:close", args=[sid]),
        reverse("studies:texts", args=[sid]),
        reverse("studies:invite", args=[sid]),
        reverse("studies:leaks-check", args=[sid]),
        reverse("studies:leaks-hold-all", args=[sid]),
        reverse("studies:scene-hold", args=[sid, scene.pk]),
        reverse("studies:aliases", args=[sid, work.pk]),
        reverse("studies:genders", args=[sid, work.pk]),
        reverse("studies:names", args=[sid]),
    ]
    return [("get", u) for u in get] + [("post", u) for u in post]


def test_anonymous_users_go_to_login_and_other_roles_get_403(client, draft, rater, annotator):
    participant = participants_invite(study=draft, labels=["x"])[0]
    urls = [
        *_urls(draft),
        ("post", reverse("studies:withdraw", args=[draft.pk, participant.pk])),
    ]
    for method, url in urls:
        response = getattr(client, method)(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url
    for user in (rater, annotator):
        client.force_login(user)
        for method, url in urls:
            assert getattr(client, method)(url).status_code == 403, (user, url)
    # Nothing changed behind the 403s.
    draft.refresh_from_db()
    assert draft.status == "draft" and draft.participants.count() == 1
    assert Participant.objects.get(pk=participant.pk).withdrawn_at is None


def test_state_changes_refuse_get(res_client, draft):
    assert res_client.get(reverse("studies:go-live", args=[draft.pk])).status_code == 405
    assert res_client.get(reverse("studies:invite", args=[draft.pk])).status_code == 405


# -- create -----------------------------------------------------------------------------


def _create_data(friends, **extra):
    data = {
        "name": "Friends study",
        "works": [friends.pk],
        "scenes": "all",
        "seed": 4,
        "overlap": 2,
        "min_seen": 0,
        "min_unseen": 1,
        "reveal": "at_end",
        "tags": "intention\nemotion\nbelief\nintention\n",
        "instructions": "Guess who speaks.",
        "consent": "I agree.",
    }
    return data | extra


def test_create_form_lists_works_and_creates_a_study_with_its_leak_check(
    res_client, friends, night_shift
):
    page = res_client.get(reverse("studies:new"))
    assert page.status_code == 200
    assert "Friends (TVShowGuess, 53 test scenes)" in page.content.decode()
    assert "Night Shift (ToM-in-AMC, 5 test scenes)" in page.content.decode()
    assert "stereotype/trope\nintention" in page.content.decode()  # Table 3 by default
    response = res_client.post(
        reverse("studies:new"), _create_data(friends, one_to_one="on", perturb_names="on")
    )
    study = Study.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("studies:detail", args=[study.pk])
    assert (study.benchmark, study.overlap, study.min_unseen, study.seed) == (
        "tvshowguess",
        2,
        1,
        4,
    )
    assert study.one_to_one and study.perturb_names and study.status == "draft"
    assert study.tags == ["intention", "emotion", "belief"]
    assert study.sampling == {"mode": "all"}
    assert study.study_items.count() == 53
    # The leak check ran at creation: Friends headings name their speakers, which
    # TVShowGuess shows its raters, so they are flagged and nothing is held back.
    assert _with_findings(study) == 52 and _held(study) == []

    # In a ToM-in-AMC study the same check holds back names outside dialogue.
    response = res_client.post(
        reverse("studies:new"),
        _create_data(friends, name="Night Shift study", works=[night_shift.work.pk]),
        follow=True,
    )
    amc = Study.objects.get(name="Night Shift study")
    assert amc.benchmark == "tom-in-amc" and amc.study_items.count() == 5
    assert _held(amc) == BLOCKING
    assert "The leak check held back 3 of them" in response.content.decode()


def test_create_a_stratified_sample_by_number_of_speakers(res_client, friends):
    response = res_client.post(
        reverse("studies:new"),
        _create_data(friends, scenes="speakers", per_stratum=2, min_unseen=0),
    )
    assert response.status_code == 302
    study = Study.objects.get()
    strata = study.sampling["strata"]
    # Friends: 31 scenes with 2 masked speakers, 10 with 3, 6 with 4, 3 with 5, 3 with 6.
    assert strata == {"2": [2, 31], "3": [2, 10], "4": [2, 6], "5": [2, 3], "6": [2, 3]}
    assert study.study_items.count() == 10
    again = res_client.post(
        reverse("studies:new"),
        _create_data(friends, scenes="speakers", per_stratum=2, min_unseen=0, name="again"),
    )
    assert again.status_code == 302
    twin = Study.objects.get(name="again")
    assert set(twin.study_items.values_list("scene", flat=True)) == set(
        study.study_items.values_list("scene", flat=True)
    )  # same seed, same sample


def test_create_form_errors(res_client, friends):
    response = res_client.post(
        reverse("studies:new"),
        _create_data(friends, scenes="genre", min_seen=2, min_unseen=1, tags="ok\n" + "x" * 61),
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "a sample needs a number of scenes per stratum" in html
    assert "the two minimums together exceed the raters per scene" in html
    assert "tags are at most 60 characters" in html
    assert not Study.objects.exists()


# -- detail, go-live, progress ----------------------------------------------------------


def test_go_live_builds_the_name_map_and_rechecks_leaks(res_client, friends, researcher):
    study = study_create(
        name="p", benchmark="tvshowguess", works=[friends], perturb_names=True, seed=2
    )
    assert study.study_works.get().name_map == {}
    response = res_client.post(reverse("studies:go-live", args=[study.pk]), follow=True)
    study.refresh_from_db()
    assert study.status == "live" and study.item_set_hash
    name_map = study.study_works.get().name_map
    assert set(name_map) == {"phoebe", "rachel", "chandler", "monica", "ross", "joey"}
    assert _with_findings(study) == 52  # the leak check ran...
    assert _held(study) == []  # ...and held back no background names
    html = response.content.decode()
    assert "The study is live." in html and "; 0 held back." in html
    assert name_map["rachel"] in html  # the names card shows the mapping
    ann = _rater(study, "Ann")
    assert ann.assignments.count() == 53  # every scene is assignable

    res_client.post(reverse("studies:pause", args=[study.pk]))
    study.refresh_from_db()
    assert study.status == "paused"
    res_client.post(reverse("studies:resume", args=[study.pk]))
    study.refresh_from_db()
    assert study.status == "live"
    res_client.post(reverse("studies:close", args=[study.pk]))
    study.refresh_from_db()
    assert study.status == "closed"
    response = res_client.post(reverse("studies:resume", args=[study.pk]), follow=True)
    assert "a closed study cannot become live" in response.content.decode()


def test_go_live_rechecks_and_holds_back_tom_in_amc_leaks(res_client, night_shift):
    study = study_create(name="n", benchmark="tom-in-amc", works=[night_shift.work])
    assert _with_findings(study) == 0 and _held(study) == []  # not checked yet
    response = res_client.post(reverse("studies:go-live", args=[study.pk]), follow=True)
    study.refresh_from_db()
    assert study.status == "live"
    assert _held(study) == BLOCKING
    html = response.content.decode()
    assert (
        "Leak check: 3 of 5 scenes give a candidate away (held back until released), "
        "0 name one where this benchmark&#x27;s task shows it anyway, 1 only in dialogue; "
        "3 held back: "
        "01 heading, 02 direction, 03 cue." in html
    )
    ann = _rater(study, "Ann")
    assigned = ann.assignments.values_list("study_item__scene__source_id", flat=True)
    assert sorted(assigned) == ["04 speech", "05 clean"]  # held-back scenes are never assigned


def test_go_live_refuses_when_every_scene_is_held_back(res_client, night_shift):
    study = study_create(name="n", benchmark="tom-in-amc", works=[night_shift.work])
    StudyItem.objects.filter(study=study, scene__source_id__in=["04 speech", "05 clean"]).update(
        held_back=True
    )
    # The two scenes the check would not hold were held back by hand: the check keeps
    # that decision and holds back the other three.
    response = res_client.post(reverse("studies:go-live", args=[study.pk]), follow=True)
    study.refresh_from_db()
    assert study.status == "draft"
    assert "every scene is held back" in response.content.decode()
    # The refusal rolls the whole go-live back, the check's findings included.
    assert _held(study) == ["04 speech", "05 clean"] and _with_findings(study) == 0


def _live(friends, researcher, **settings):
    settings.setdefault("overlap", 2)
    study = study_create(
        name="live", benchmark="tvshowguess", works=[friends], created_by=researcher, **settings
    )
    return study_go_live(study=study)


def test_detail_shows_progress_per_rater_and_per_scene(res_client, friends, researcher):
    study = _live(friends, researcher, min_unseen=1)
    _rater(study, "Ann", seen=True, answer=3)
    _rater(study, "Ben", seen=False, answer=1)
    cat = _rater(study, "Cat", seen=False, answer=0)
    participant_withdraw(participant=cat)
    participants_invite(study=study, labels=["Dan"])
    response = res_client.get(reverse("studies:detail", args=[study.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'hx-trigger="every 2s"' in html and 'id="progress"' in html
    ann = Participant.objects.get(label="Ann")
    assert ann.assignments.count() == 53
    rows = response.context["raters"]
    assert [(str(p), p.n_submitted, p.n_assigned) for p in rows] == [
        ("Ann", 3, 53),
        ("Ben", 1, 53),
        ("Cat", 0, 0),  # Ann and Ben filled every scene: Cat got none
        ("Dan", 0, 0),
    ]
    assert "3 / 53" in html and "1 / 53" in html and "withdrawn" in html
    first = next(s for s in response.context["scenes"] if s.scene.source_id == "09x01 2500")
    assert (first.n_assigned, first.n_submitted, first.n_seen, first.n_unseen) == (2, 2, 1, 1)
    summary = response.context["summary"]
    assert (summary.active, summary.withdrawn, summary.submitted, summary.needed) == (3, 1, 4, 106)
    assert summary.scenes_full == 1


def test_htmx_partial_polls_until_closed_then_286(res_client, friends, researcher):
    study = _live(friends, researcher)
    _rater(study, "Ann", answer=1)
    url = reverse("studies:detail", args=[study.pk])
    partial = res_client.get(url, headers={"HX-Request": "true"})
    assert partial.status_code == 200
    html = partial.content.decode()
    assert html.lstrip().startswith('<section id="progress"')
    assert "<html" not in html and "Invite links" not in html
    assert 'hx-trigger="every 2s"' in html and "Ann" in html
    study_close(study=study)
    final = res_client.get(url, headers={"HX-Request": "true"})
    assert final.status_code == 286
    assert "every 2s" not in final.content.decode() and "Ann" in final.content.decode()


def test_progress_queries_do_not_grow_with_raters(
    res_client, friends, researcher, django_assert_max_num_queries
):
    study = _live(friends, researcher, overlap=6)
    url = reverse("studies:detail", args=[study.pk])
    _rater(study, "r1", answer=1)
    res_client.get(url, headers={"HX-Request": "true"})  # warm the session/user caches
    with django_assert_max_num_queries(6) as few:
        res_client.get(url, headers={"HX-Request": "true"})
    for i in range(2, 6):
        _rater(study, f"r{i}", seen=bool(i % 2), answer=2)
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = res_client.get(url, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert all(f"<td>r{i}</td>" in html for i in range(1, 6))
    # The full page, fixed cost too (+2 since issue 16: the quality table and the
    # practice/attention-check choices, one query each).
    with django_assert_max_num_queries(16):
        assert res_client.get(url).status_code == 200


# -- texts, invites, withdraw -----------------------------------------------------------


def test_texts_editor_bumps_the_version(res_client, draft):
    url = reverse("studies:texts", args=[draft.pk])
    res_client.post(url, {"instructions": "Read carefully.", "consent": "Yes."})
    draft.refresh_from_db()
    assert (draft.instructions, draft.consent, draft.instructions_version) == (
        "Read carefully.",
        "Yes.",
        2,
    )
    page = res_client.post(url, {"instructions": "Read carefully.", "consent": "Yes."}, follow=True)
    draft.refresh_from_db()
    assert draft.instructions_version == 2  # unchanged text: same version
    assert "version 2" in page.content.decode()


def test_invite_links_by_count_and_by_label_then_withdraw(res_client, friends, researcher):
    study = _live(friends, researcher)
    url = reverse("studies:invite", args=[study.pk])
    res_client.post(url, {"count": 3})
    res_client.post(url, {"count": "", "labels": "alice\n\n bob \n"})
    labels = list(study.participants.values_list("label", flat=True))
    assert labels == ["rater 1", "rater 2", "rater 3", "alice", "bob"]
    tokens = list(study.participants.values_list("token", flat=True))
    assert len(set(tokens)) == 5 and all(len(t) >= 40 for t in tokens)
    page = res_client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    for token in tokens:
        assert f"http://testserver/s/{token}/" in page
    bad = res_client.post(url, {"count": "", "labels": ""}, follow=True)
    assert "give a number of links or their labels" in bad.content.decode()
    assert study.participants.count() == 5

    bob = _rater(study, "bob-rater", answer=1)
    res_client.post(reverse("studies:withdraw", args=[study.pk, bob.pk]))
    bob.refresh_from_db()
    assert bob.withdrawn_at is not None
    assert Assignment.objects.filter(participant=bob, status="submitted").count() == 1
    other = study_create(name="other", benchmark="tvshowguess", works=[friends])
    stranger = participants_invite(study=other, labels=["x"])[0]
    response = res_client.post(reverse("studies:withdraw", args=[study.pk, stranger.pk]))
    assert response.status_code == 404


# -- leak check page --------------------------------------------------------------------


def test_leak_page_highlights_friends_names_without_holding_scenes_back(res_client, draft):
    leaks_check(study=draft)
    url = reverse("studies:leaks", args=[draft.pk])
    html = res_client.get(url).content.decode()
    assert (
        '<mark class="m-heading">Rachel</mark>&#x27;s Room, <mark class="m-heading">Joey</mark>'
        in html
    )
    assert '(To <mark class="m-direction">Rachel</mark>) Hey you.' in html
    assert 'Hey <mark class="m-speech">Joey</mark>.' in html
    assert html.count('data-testid="leak-scene"') == 20  # a page of scenes
    page3 = res_client.get(url, {"page": 3}).content.decode()
    assert page3.count('data-testid="leak-scene"') == 12 and "09x05 2561" in page3
    # TVShowGuess shows the background: flagged for review, none held back.
    assert 'data-testid="leaks-held">0<' in html and 'data-testid="leaks-flagged">0<' in html
    assert "Release scene" not in html and "Hold back all flagged scenes" not in html

    # The researcher may still hold a scene back by hand; the check keeps that.
    scene = StudyItem.objects.get(study=draft, scene__source_id="09x01 2500")
    hold = reverse("studies:scene-hold", args=[draft.pk, scene.pk])
    assert "Hold back scene 09x01 2500" in html
    res_client.post(hold, {"held_back": "1"})
    res_client.post(reverse("studies:leaks-check", args=[draft.pk]))
    scene.refresh_from_db()
    assert scene.held_back
    # "Release all flagged" touches only scenes with a blocking finding.
    res_client.post(reverse("studies:leaks-hold-all", args=[draft.pk]), {"held_back": "0"})
    assert StudyItem.objects.get(pk=scene.pk).held_back
    html = res_client.get(url).content.decode()
    assert 'data-testid="leaks-held">1<' in html and "Release scene 09x01 2500" in html
    res_client.post(hold, {"held_back": "0"})
    assert _held(draft) == []


def test_leak_page_highlights_tom_in_amc_leaks_and_holds_or_releases_them(res_client, night_shift):
    study = study_create(name="n", benchmark="tom-in-amc", works=[night_shift.work])
    leaks_check(study=study)
    url = reverse("studies:leaks", args=[study.pk])
    html = res_client.get(url).content.decode()
    assert 'INT. <mark class="m-heading">LOLA</mark>&#x27;S CAR - NIGHT' in html
    assert '(to <mark class="m-direction">Marcus</mark>) Keep the engine running.' in html
    assert 'Hey <mark class="m-speech">Vincent</mark>, relax.' in html
    assert "unmasked speaker “MARCUS”" in html
    assert 'Order for you, <mark class="m-speech">Lola</mark>?' in html
    assert html.count('data-testid="leak-scene"') == 4  # the clean scene is not listed
    assert 'data-testid="leaks-held">3<' in html and 'data-testid="leaks-flagged">3<' in html

    scene = StudyItem.objects.get(study=study, scene__source_id="01 heading")
    hold = reverse("studies:scene-hold", args=[study.pk, scene.pk])
    res_client.post(hold, {"held_back": "0"})
    scene.refresh_from_db()
    assert not scene.held_back
    res_client.post(reverse("studies:leaks-check", args=[study.pk]))
    scene.refresh_from_db()
    assert not scene.held_back  # the release survives a re-run
    assert _held(study) == ["02 direction", "03 cue"]
    res_client.post(hold, {"held_back": "1"})
    assert StudyItem.objects.get(pk=scene.pk).held_back
    res_client.post(reverse("studies:leaks-hold-all", args=[study.pk]), {"held_back": "0"})
    assert _held(study) == []
    res_client.post(reverse("studies:leaks-hold-all", args=[study.pk]), {"held_back": "1"})
    assert _held(study) == BLOCKING  # not the scene whose name is only spoken


def test_alias_table_is_saved_and_the_check_rerun(res_client, draft, friends):
    leaks_check(study=draft)
    clean = StudyItem.objects.get(study=draft, scene__source_id="09x05 2557")
    assert not clean.held_back and clean.leaks == []
    # Its heading is "[Scene: The Bings'.]": Chandler Bing's flat, which only an
    # alias table that knows the family name can catch.
    assert clean.scene.heading == "[Scene: The Bings'.]"
    chandler = Character.objects.get(work=friends, name="chandler")
    sw = draft.study_works.get()
    response = res_client.post(
        reverse("studies:aliases", args=[draft.pk, sw.pk]),
        {f"w{sw.pk}-aliases_{chandler.pk}": "Chan\nBings\n\nchan"},
        follow=True,
    )
    chandler.refresh_from_db()
    assert chandler.aliases == ["Chan", "Bings"]
    clean.refresh_from_db()
    assert [(f["line"], f["match"], f["where"], f["blocking"]) for f in clean.leaks] == [
        (-1, "Bings", "heading", False)
    ]
    assert not clean.held_back  # a TVShowGuess heading is flagged, not held back
    assert "Leak check re-run: 0 flagged, 0 held back." in response.content.decode()
    last = res_client.get(reverse("studies:leaks", args=[draft.pk]), {"page": 3}).content.decode()
    assert '[Scene: The <mark class="m-heading">Bings</mark>&#x27;.]' in last


def test_an_alias_in_a_tom_in_amc_heading_holds_the_scene_back(res_client, night_shift):
    study = study_create(name="n", benchmark="tom-in-amc", works=[night_shift.work])
    leaks_check(study=study)
    clean = StudyItem.objects.get(study=study, scene__source_id="05 clean")
    assert not clean.held_back and clean.leaks == []
    vincent = night_shift.characters["vincent"]
    sw = study.study_works.get()
    response = res_client.post(
        reverse("studies:aliases", args=[study.pk, sw.pk]),
        {f"w{sw.pk}-aliases_{vincent.pk}": "Vinnie"},
        follow=True,
    )
    clean.refresh_from_db()
    assert clean.held_back
    assert [(f["line"], f["match"], f["where"], f["blocking"]) for f in clean.leaks] == [
        (-1, "VINNIE", "heading", True)
    ]
    assert "Leak check re-run: 4 flagged, 4 held back." in response.content.decode()


def test_gender_override_redraws_a_draft_name_map(res_client, friends):
    study = study_create(name="p", benchmark="tvshowguess", works=[friends], perturb_names=True)
    sw = study.study_works.get()
    joey = Character.objects.get(work=friends, name="joey")
    res_client.post(reverse("studies:names", args=[study.pk]))
    sw.refresh_from_db()
    assert sw.name_map["joey"] in {"David", "James", "John", "Michael", "Robert"}
    res_client.post(
        reverse("studies:genders", args=[study.pk, sw.pk]), {f"w{sw.pk}-gender_{joey.pk}": "female"}
    )
    joey.refresh_from_db()
    assert (joey.gender, joey.gender_source) == ("female", "manual")
    sw.refresh_from_db()
    assert sw.name_map["joey"] in {"Elizabeth", "Emily", "Jennifer", "Linda", "Mary"}
    html = res_client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert 'female <span class="muted">(manual)</span>' in html


# -- responses --------------------------------------------------------------------------


def test_responses_page_and_csv(res_client, friends, researcher, django_assert_max_num_queries):
    study = _live(friends, researcher, overlap=3)
    _rater(study, "Ann", seen=True, answer=2)
    ben = _rater(study, "Ben", answer=1, right=False)
    _rater(study, "Cat", answer=0)  # nothing submitted: not in the responses
    participant_withdraw(participant=ben)
    url = reverse("studies:responses", args=[study.pk])
    with django_assert_max_num_queries(10):
        page = res_client.get(url)
    html = page.content.decode()
    assert len(page.context["page"].object_list) == 3
    assert "Ann" in html and "Ben" in html and "Cat" not in without_tokens(html)
    assert "withdrawn" in html and "✗" in html and "✓" in html
    assert "Ann saw it" in html and "intention" in html
    assert study.item_set_hash[:8] in html

    response = res_client.get(reverse("studies:responses-csv", args=[study.pk]))
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    frame = pd.read_csv(io.StringIO(response.getvalue().decode()))  # streamed
    assignments = Assignment.objects.filter(participant__study=study, status="submitted")
    speakers = sum(a.study_item.scene.instances.count() for a in assignments)
    assert len(frame) == speakers
    assert set(frame["participant"]) == {"Ann", "Ben"}
    assert frame.loc[frame["participant"] == "Ann", "correct"].all()
    assert not frame.loc[frame["participant"] == "Ben", "correct"].any()
    assert frame.loc[frame["participant"] == "Ben", "withdrawn"].all()
    assert set(frame["tags"]) == {"intention;emotion"}
    assert set(frame["item_set_hash"]) == {study.item_set_hash}
    assert set(frame["names"]) == {"original"}
    assert (frame["total_ms"] >= frame["active_ms"]).all()
    assert frame.loc[frame["participant"] == "Ann", "seen"].all()


# -- list and admin ---------------------------------------------------------------------


def test_study_list(res_client, friends, researcher, django_assert_max_num_queries):
    live = _live(friends, researcher)
    participants_invite(study=live, labels=["a", "b"])
    study_create(name="Second", benchmark="tvshowguess", works=[friends])
    with django_assert_max_num_queries(5):
        response = res_client.get(reverse("studies:list"))
    html = response.content.decode()
    assert html.index("Second") < html.index("live</a>")  # newest first
    assert reverse("studies:detail", args=[live.pk]) in html
    assert '<td class="num">2</td>' in html  # two raters invited


def test_admin_shows_tokens_truncated(client, friends, researcher):
    admin_user = researcher
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    study = _live(friends, researcher)
    (p,) = participants_invite(study=study, labels=["Ann"])
    changelist = client.get(reverse("admin:studies_participant_changelist"))
    assert changelist.status_code == 200
    html = changelist.content.decode()
    assert p.token[:6] + "…" in html and p.token not in html
    change = client.get(reverse("admin:studies_participant_change", args=[p.pk])).content.decode()
    assert p.token not in change and p.token[:6] in change
    for model in ("study", "studywork", "studyitem", "familiarity", "worksession",
                  "historyview", "assignment", "guess", "choiceanswer"):  # fmt: skip
        assert client.get(reverse(f"admin:studies_{model}_changelist")).status_code == 200
    searched = client.get(reverse("admin:studies_participant_changelist"), {"q": "Ann"})
    assert "Ann" in searched.content.decode()
