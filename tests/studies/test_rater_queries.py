"""The rater's requests in a pinned number of queries (issue 17: a lean answer path).

Targets: a scene page in at most 4 queries, an autosave in 3, a whole-form submit in
6, and a "seen it?" declaration in a number that does not grow with the work's scenes.
Counted as the test database sees them: the SAVEPOINT and RELEASE of a transaction
count, standing for the BEGIN and COMMIT it has in production. Each request is made on
a scene whose cached entries (speakers, body, gold) are warm, as they are for every
rater of a scene but its first; a cold cache adds one query per entry. The load check
(tests/benchmarks/bench_study_load.py) measures the same counts under load.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from studies import errors
from studies.models import Assignment, Guess
from studies.scene import services as scene_services
from studies.scene.cache import scene_gold, scene_rendered
from tests.studies.test_rater_views import (
    HTMX,
    current,
    full_form,
    instances,
    invite,
    to_scenes,
    url,
)

SCENE_PAGE_MAX = 4
SAVE_MAX = 3
SUBMIT_MAX = 6
# The study, the slots check, session, familiarity, the slot claim, one INSERT of every
# assignment, seating them, the history check, practice items and their savepoints.
DECLARE_MAX = 20
# The open scene (none) and the participant with the study; the consent page's estimate
# is cached, "seen it?" reads the works not started and looks for one free slot.
CONSENT_PAGE_MAX = 2
FAMILIARITY_PAGE_MAX = 4
# The participant and study, the update, reading it back.
CONSENT_POST_MAX = 3


def _at_scene(client, study):
    participant = invite(study)
    to_scenes(client, participant)
    client.get(url("start", participant))  # the scene's clock starts; its body is cached
    assignment = current(participant)
    scene_gold(scene_id=assignment.study_item.scene_id, version=study.item_set_hash)
    return participant, assignment


@pytest.mark.django_db
def test_scene_page(client, live_study, django_assert_max_num_queries):
    participant, assignment = _at_scene(client, live_study)
    Guess.objects.create(assignment=assignment, instance=instances(assignment)[0], answer="x")
    with django_assert_max_num_queries(SCENE_PAGE_MAX):
        response = client.get(url("start", participant))
    assert response.status_code == 200
    assert f"/scenes/{assignment.pk}/submit/" in response.content.decode()


@pytest.mark.django_db
def test_a_scenes_first_showing_reads_no_guesses(client, live_study, django_assert_max_num_queries):
    """Nothing can be answered before the scene is first shown: one query fewer then."""
    participant, assignment = _at_scene(client, live_study)
    Assignment.objects.filter(pk=assignment.pk).update(first_shown_at=None, last_event_at=None)
    with django_assert_max_num_queries(SCENE_PAGE_MAX - 1):
        response = client.get(url("start", participant))
    assert f"/scenes/{assignment.pk}/submit/" in response.content.decode()
    assignment.refresh_from_db()
    assert assignment.first_shown_at is not None


@pytest.mark.django_db
def test_a_scene_is_read_once_for_all_its_raters(client, live_study):
    """A cold cache costs the scene's rows once; the next rater of the scene pays nothing."""
    counts = []
    for label in ("first rater", "second rater"):
        participant = invite(live_study, label)
        to_scenes(Client(), participant)
        with CaptureQueriesContext(connection) as queries:
            assert Client().get(url("start", participant)).status_code == 200
        counts.append(len(queries))
    assert counts[1] <= SCENE_PAGE_MAX < counts[0]


def test_the_default_cache_keeps_every_scene_of_a_large_study():
    """Four entries a scene (speakers, gold, body, blank form): a 583-scene study (the
    load check's Friends + 10 copies) is 2,332 entries. LocMem's own default of 300
    culled a third of them whenever it filled, so raters spread over the study read and
    rendered their scenes again (a scene page 4 queries instead of 2)."""
    scenes, version = 600, "cache-size-check"
    rendered: list[int] = []

    def entry(kind: str, scene_id: int) -> dict[str, str]:
        def render() -> dict[str, str]:
            rendered.append(scene_id)
            return {"html": f"{kind} {scene_id}"}

        return scene_rendered(
            kind=kind, scene_id=scene_id, version=version, variant=[], render=render
        )

    kinds = ("speakers", "gold", "body", "form")
    for scene_id in range(scenes):
        for kind in kinds:
            entry(kind, scene_id)
    assert len(rendered) == scenes * len(kinds)
    rendered.clear()
    for scene_id in range(scenes):  # every scene again, as the next raters see them
        for kind in kinds:
            assert entry(kind, scene_id) == {"html": f"{kind} {scene_id}"}
    assert rendered == []


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["choice", "tags", "evidence", "flag"])
def test_autosave(client, live_study, django_assert_max_num_queries, field):
    participant, assignment = _at_scene(client, live_study)
    instance = instances(assignment)[0]
    data = {
        "choice": {f"choice-{instance.pk}": "1"},
        "tags": {f"tags-{instance.pk}": ["belief"], f"tags-{instance.pk}-sent": "1"},
        "evidence": {f"evidence-{instance.pk}": "the way they talk"},
        "flag": {"history_needed": "1", "history_needed-sent": "1"},
    }[field]
    save = url("scene-save", participant, assignment_id=assignment.pk)
    with django_assert_max_num_queries(SAVE_MAX):
        response = client.post(save, data, **HTMX)
    assert response.status_code == 200
    assert b"Saved" in response.content


@pytest.mark.django_db
def test_whole_form_submit(client, live_study, django_assert_max_num_queries):
    participant, assignment = _at_scene(client, live_study)
    form = full_form(assignment)
    with django_assert_max_num_queries(SUBMIT_MAX):
        response = client.post(url("scene-submit", participant, assignment_id=assignment.pk), form)
    assert response.status_code == 302
    assert set(Guess.objects.filter(assignment=assignment).values_list("correct", flat=True)) == {
        True
    }


@pytest.mark.django_db
def test_submit_after_autosaves(client, live_study, django_assert_max_num_queries):
    """The form as the page posts it after every click was autosaved: still scored once."""
    participant, assignment = _at_scene(client, live_study)
    form = full_form(assignment)
    client.post(url("scene-save", participant, assignment_id=assignment.pk), form, **HTMX)
    with django_assert_max_num_queries(SUBMIT_MAX):
        response = client.post(url("scene-submit", participant, assignment_id=assignment.pk), form)
    assert response.status_code == 302
    assignment.refresh_from_db()
    assert assignment.status == Assignment.Status.SUBMITTED
    assert assignment.session.finished_at is None  # other scenes of the session are open


@pytest.mark.django_db(transaction=True)
def test_an_autosave_racing_a_submit_never_changes_a_scored_answer(live_study):
    """Autosaves take no lock: one that read the scene as open while a submit held it
    must not change an answer after it was scored (``ON CONFLICT … WHERE correct IS
    NULL``). Runs on SQLite and PostgreSQL alike."""
    participant, assignment = _at_scene(Client(), live_study)
    first = instances(assignment)[0]
    form = full_form(assignment)
    submitting, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def submit_tab() -> None:
        try:
            with transaction.atomic():
                scene_services.scene_submit(
                    participant=participant,
                    assignment_id=assignment.pk,
                    answers={first.pk: {"choice": int(form[f"choice-{first.pk}"])}}
                    | {
                        i.pk: {"choice": int(form[f"choice-{i.pk}"])}
                        for i in instances(assignment)[1:]
                    },
                    history_needed=False,
                )
                submitting.set()
                release.wait(timeout=30)
        except BaseException as exc:
            failures.append(exc)
            submitting.set()
        finally:
            connections.close_all()

    tab = threading.Thread(target=submit_tab)
    tab.start()
    assert submitting.wait(timeout=30)
    threading.Timer(0.5, release.set).start()
    wrong = (int(form[f"choice-{first.pk}"]) + 1) % len(first.candidates)
    with pytest.raises(errors.StudyError, match="already submitted"):
        scene_services.answers_record(
            participant=participant,
            assignment_id=assignment.pk,
            answers={first.pk: {"choice": wrong}},
        )
    tab.join(timeout=60)
    assert failures == []
    guess = Guess.objects.get(assignment=assignment, instance=first)
    assert guess.answer == first.gold_character.name
    assert guess.correct is True


@pytest.mark.django_db
def test_the_cached_blank_form_is_the_form_the_template_renders(client, live_study):
    """The speakers' fields served from the cache are byte for byte what the page's own
    partial renders for them (and a resumed scene, with answers, is rendered afresh)."""
    from django.template.loader import render_to_string

    from studies.scene.views import SPEAKERS_FORM, Speaker

    participant, assignment = _at_scene(client, live_study)
    save_url = url("scene-save", participant, assignment_id=assignment.pk)
    speakers = [
        Speaker(instance_id=i.pk, code=i.code, candidates=list(enumerate(i.candidates)))
        for i in instances(assignment)
    ]
    for speaker in speakers:
        speaker.candidates = [(n, name.title()) for n, name in speaker.candidates]
    expected = render_to_string(
        SPEAKERS_FORM, {"speakers": speakers, "study": live_study, "save_url": save_url}
    )
    page = client.get(url("start", participant)).content.decode()
    assert expected in page
    first = instances(assignment)[0]
    client.post(save_url, {f"choice-{first.pk}": "1"}, **HTMX)
    page = client.get(url("start", participant)).content.decode()
    assert f'name="choice-{first.pk}" value="1" checked' in page


@pytest.mark.django_db
def test_a_declaration_claims_every_scene_in_a_fixed_number_of_queries(
    live_study, django_assert_max_num_queries
):
    """The "seen it?" post assigns 53 scenes with one claim, one INSERT and one UPDATE,
    whoever declares and however many scenes the work has (after the work's first
    declaration, which makes its slots)."""
    from studies.participation.services import participant_consent, participants_invite

    work = live_study.study_works.get()
    first, second = (
        participant_consent(participant=p)
        for p in participants_invite(study=live_study, labels=["first", "second"])
    )
    scene_services.familiarity_declare(participant=first, study_work=work, seen=False)
    with django_assert_max_num_queries(DECLARE_MAX):
        scene_services.familiarity_declare(participant=second, study_work=work, seen=True)
    scenes = live_study.study_items.count()
    assert Assignment.objects.filter(participant=second).count() == scenes == 53


@pytest.mark.django_db
def test_the_onboarding_pages_take_a_few_queries_however_many_raters_came_first(client, friends):
    """The consent page, the "seen it?" page and their posts (issue 51: a launch's first
    pages): a pinned number of queries, the same with 1 rater before as with 12."""
    from studies.participation.services import participant_consent
    from studies.services import study_create, study_go_live

    live_study = study_go_live(  # room for every rater below on every scene
        study=study_create(name="onboarding", benchmark="tvshowguess", works=[friends], overlap=20)
    )

    def onboarding_queries(participant) -> list[int]:
        counts = []
        for method, path, data in (
            ("get", url("start", participant), None),  # consent
            ("post", url("consent", participant), {}),
            ("get", url("start", participant), None),  # "seen it?"
        ):
            with CaptureQueriesContext(connection) as queries:
                response = getattr(client, method)(path, data)
            assert response.status_code in (200, 302)
            counts.append(len(queries))
        assert "familiarity" in response.content.decode()
        return counts

    study_work = live_study.study_works.get()
    first = invite(live_study, "first")
    onboarding_queries(first)  # the cached estimate and history check are made here
    scene_services.familiarity_declare(
        participant=participant_consent(participant=first), study_work=study_work, seen=True
    )
    alone = onboarding_queries(invite(live_study, "second"))
    for n in range(10):
        rater = participant_consent(participant=invite(live_study, f"more {n}"))
        seen = n % 2 == 0
        scene_services.familiarity_declare(participant=rater, study_work=study_work, seen=seen)
    crowded = onboarding_queries(invite(live_study, "last"))
    assert crowded == alone
    consent_page, consent_post, familiarity_page = alone
    assert consent_page <= CONSENT_PAGE_MAX
    assert familiarity_page <= FAMILIARITY_PAGE_MAX
    assert consent_post <= CONSENT_POST_MAX
