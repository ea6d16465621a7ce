"""A DynToM pick is kept as it is made and checked again after a reload, before "Submit
answer" (issue 28, part 7); bad picks are refused with the field named, and the answer
itself is still what "Submit answer" sends."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from studies.choice import services as cs
from studies.models import Assignment, ChoiceAnswer
from studies.participation.services import participant_withdraw, participants_invite
from studies.services import study_launch
from tests.factories import DynToMQuestionFactory, DynToMScenarioFactory, DynToMStageFactory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
CHECKED = re.compile(r'<input type="radio" name="option" value="(\d+)" checked')


@pytest.fixture
def stage_open(client):
    """A participant at the first of a two-question DynToM stage."""
    stage = DynToMStageFactory()
    DynToMScenarioFactory(stage=stage, number=1)
    questions = [DynToMQuestionFactory(stage=stage, gold_letter="b") for _ in range(2)]
    study = cs.choice_study_create(
        name="DynToM picks", benchmark="dyntom", works=[stage.work], stage_fraction=1
    ).study
    study_launch(study=study)
    (p,) = participants_invite(study=study, labels=["Dee"])
    client.post(reverse("rater:consent", args=[p.token]))
    client.post(reverse("rater:choice-stage-take", args=[p.token, study.study_works.get().pk]))
    return p, Assignment.objects.get(participant=p), questions


def _page(client, p) -> str:
    return client.get(reverse("rater:start", args=[p.token])).content.decode()


def _pick(client, p, assignment, **data):
    return client.post(reverse("rater:choice-pick", args=[p.token, assignment.pk]), data, **HTMX)


def test_a_pick_is_checked_again_after_a_reload_until_it_is_submitted(client, stage_open):
    p, assignment, questions = stage_open
    assert CHECKED.findall(_page(client, p)) == []
    response = _pick(client, p, assignment, option="1", question=str(questions[0].pk))
    assert response.status_code == 200 and "✓ Saved" in response.content.decode()
    assert CHECKED.findall(_page(client, p)) == ["1"]
    _pick(client, p, assignment, option="0", question=str(questions[0].pk))  # changed
    assert CHECKED.findall(_page(client, p)) == ["0"]
    assert not ChoiceAnswer.objects.exists()  # a pick is not the answer

    response = client.post(
        reverse("rater:choice-answer", args=[p.token, assignment.pk]),
        {"action": "submit", "option": "0", "question": str(questions[0].pk)},
    )
    assert response.status_code == 302
    assert ChoiceAnswer.objects.get().option == 0
    page = _page(client, p)
    assert "Question 2 / 2" in page and CHECKED.findall(page) == []


def test_bad_picks_are_refused_with_the_field_named_and_kept_nowhere(client, stage_open):
    p, assignment, questions = stage_open
    response = _pick(client, p, assignment, option="9", question=str(questions[0].pk))
    assert response.status_code == 422
    assert "option: choose one of the" in response.content.decode()
    response = _pick(client, p, assignment, option="x", question=str(questions[0].pk))
    assert response.status_code == 422 and "option" in response.content.decode()
    response = _pick(client, p, assignment, option="1", question="999999")
    assert response.status_code == 422
    assert "question: not a question of this story" in response.content.decode()
    assert CHECKED.findall(_page(client, p)) == []

    (other,) = participants_invite(study=p.study, labels=["Other"])
    response = _pick(client, other, assignment, option="1", question=str(questions[0].pk))
    assert response.status_code == 422 and "no such open story" in response.content.decode()
    participant_withdraw(participant=p)
    response = _pick(client, p, assignment, option="1", question=str(questions[0].pk))
    assert response.status_code == 422 and "withdrawn" in response.content.decode()
