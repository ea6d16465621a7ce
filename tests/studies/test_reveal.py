"""When a rater sees the gold: only their own progress and the study's reveal setting count.

Issue 10, item 3: with "at the end" a rater who had finished work 1 of two got 404 on
a scene's result while the study was live, the gold while it was paused (a paused
study offers no new work, so the rater looked "done"), and 404 again after a resume.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from studies import services
from studies.models import Assignment, Participant, Study
from studies.participation import services as participation_services
from studies.scene import services as scene_services
from tests.factories import CharacterFactory, SceneFactory, SpeakerInstanceFactory, WorkFactory
from tests.page_text import without_tokens

pytestmark = pytest.mark.django_db


def _work(key: str, gold: str, other: str):
    """A ToM-in-AMC movie with one clean masked test scene (nothing for the leak check)."""
    work = WorkFactory(key=key, title=key.title())
    characters = [
        CharacterFactory(work=work, name=n, position=i) for i, n in enumerate([gold, other])
    ]
    scene = SceneFactory(
        work=work,
        source_id=f"{key} 1",
        heading="INT. ROOM - DAY",
        lines=[
            {"type": "dialog", "title": "P0", "text": "It was never about the money."},
            {"type": "dialog", "title": "P1", "text": "Then what was it about?"},
        ],
    )
    for code, character in zip(("P0", "P1"), characters, strict=True):
        SpeakerInstanceFactory(
            scene=scene, code=code, gold_character=character, candidates=[gold, other]
        )
    return work


@pytest.fixture
def two_works_study(researcher) -> Study:
    study = services.study_create(
        name="two films",
        benchmark="tom-in-amc",
        works=[_work("first-film", "joey", "rachel"), _work("second-film", "monica", "ross")],
        overlap=1,
        reveal=Study.Reveal.AT_END,
        created_by=researcher,
    )
    return services.study_go_live(study=study)


def _finish_next_work(participant: Participant) -> Assignment:
    """Declare, read and answer the rater's next work through the services."""
    step = scene_services.participant_next_step(participant=participant)
    assert step.kind == "familiarity"
    session = scene_services.familiarity_declare(
        participant=participant, study_work=step.study_work, seen=False
    )
    scene_services.history_confirm(participant=participant, session=session)
    (assignment,) = session.assignments.all()
    for instance in assignment.study_item.scene.instances.all():
        scene_services.guess_record(
            participant=participant,
            assignment_id=assignment.pk,
            instance_id=instance.pk,
            choice=0,
        )
    scene_services.flag_record(
        participant=participant, assignment_id=assignment.pk, history_needed=False
    )
    return scene_services.scene_submit(participant=participant, assignment_id=assignment.pk)


def test_at_end_result_stays_hidden_while_paused_and_after_resume(client, two_works_study):
    (participant,) = participation_services.participants_invite(study=two_works_study, labels=["r"])
    participant = participation_services.participant_consent(participant=participant)
    first = _finish_next_work(participant)
    result = reverse(
        "rater:scene-result", kwargs={"token": participant.token, "assignment_id": first.pk}
    )
    start = reverse("rater:start", kwargs={"token": participant.token})

    assert client.get(result).status_code == 404  # live: work 2 is still to do
    services.study_pause(study=two_works_study)
    response = client.get(result)
    assert response.status_code == 404  # paused: the rater's progress is the same
    assert "joey" not in without_tokens(response.content).lower()
    services.study_go_live(study=two_works_study)
    assert client.get(result).status_code == 404

    # A closed study ends the rater's path, but not their work: still no gold.
    services.study_close(study=two_works_study)
    response = client.get(start)
    assert response.status_code == 200
    assert "Joey" not in without_tokens(response.content)
    assert b"shown once you have answered" in response.content
    assert client.get(result).status_code == 404


def test_at_end_result_shown_once_the_rater_has_answered_everything(client, two_works_study):
    (participant,) = participation_services.participants_invite(study=two_works_study, labels=["r"])
    participant = participation_services.participant_consent(participant=participant)
    first = _finish_next_work(participant)
    _finish_next_work(participant)
    result = reverse(
        "rater:scene-result", kwargs={"token": participant.token, "assignment_id": first.pk}
    )
    response = client.get(result)
    assert response.status_code == 200 and b"Joey" in response.content
    services.study_pause(study=two_works_study)
    assert client.get(result).status_code == 200  # the status does not take it back
