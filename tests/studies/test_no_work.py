"""A participant with nothing to answer gets no completion code (issue 26, item 5).

Before, a CharToM-QA participant who ticked every book (or none) and a DynToM
participant arriving when every stage was taken reached the completion code with no
answer in four requests, and a platform would have paid them. Now they get a page
that says why, with the way back to the platform but no code; the ledger says "no
work available"; the researcher sees how many on the study and responses pages.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from studies.choice import services as cs
from studies.models import Participant, Study, WorkSession
from studies.participation import recruitment
from studies.participation.forms import RunningForm
from studies.participation.services import participants_invite
from studies.services import study_launch
from tests.factories import DynToMQuestionFactory, DynToMStageFactory
from tests.studies.test_choice_services import _books

from .test_rater_views import current, instances, invite, keep_scenes, to_scenes, url

pytestmark = pytest.mark.django_db

CODE = "C0DE42"
COMPLETE = f"https://platform.example/submissions/complete?cc={CODE}"


def _platform(study: Study, **extra) -> Study:
    Study.objects.filter(pk=study.pk).update(completion_code=CODE, completion_url=COMPLETE, **extra)
    study.refresh_from_db()
    return study


def _assert_no_code(page: str) -> None:
    assert "There is nothing for you to answer" in page
    assert "no completion code" in page
    assert CODE not in page and "cc=" not in page
    assert 'data-testid="completion"' not in page


@pytest.fixture
def chartom():
    works = _books(3, 2)
    study = cs.choice_study_create(name="Books", benchmark="chartom-qa", works=works).study
    study_launch(study=study)
    return _platform(study), works


@pytest.mark.parametrize(
    ("read", "reason", "why"),
    [
        ("all", Participant.NoWork.READ_ALL, "You have read every book in this study."),
        ("none", Participant.NoWork.READ_NONE, "You have not read any of the books"),
    ],
)
def test_chartom_every_book_or_none_is_refused_without_a_code(
    client, researcher, chartom, read, reason, why
):
    study, works = chartom
    (p,) = participants_invite(study=study, labels=["Pat"])
    # Four requests, as the probe's: the link, consent, the books, the link again.
    client.get(url("start", p))
    client.post(url("consent", p))
    client.get(url("start", p))
    ticked = [w.pk for w in works] if read == "all" else []
    response = client.post(url("choice-books", p), {"read": ticked})
    assert response.status_code == 302
    page = client.get(url("start", p)).content.decode()
    _assert_no_code(page)
    assert why in page
    # The way back to the platform: its site, without the completion path and code.
    assert 'href="https://platform.example/"' in page
    p.refresh_from_db()
    assert p.no_work_at is not None and p.no_work_reason == reason
    assert not WorkSession.objects.filter(participant=p).exists()
    # The first declaration stands: a second one with a mix changes nothing.
    client.post(url("choice-books", p), {"read": [works[0].pk]})
    assert not WorkSession.objects.filter(participant=p).exists()
    _assert_no_code(client.get(url("start", p)).content.decode())

    # The researcher: the ledger's state, the count, and the design page.
    client.force_login(researcher)
    detail = client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert f"no work available ({p.get_no_work_reason_display()})" in detail
    assert '<strong data-testid="no-work-count">1</strong>' in detail
    responses = client.get(reverse("studies:responses", args=[study.pk])).content.decode()
    assert "1 participant had no work available" in responses
    design = client.get(reverse("studies:choice-design", args=[study.pk])).content.decode()
    assert 'data-testid="design-refused"' in design and "Pat (" in design
    assert "Waiting for" not in design


def test_chartom_a_mix_of_books_still_gets_questions_and_a_code(client, chartom):
    study, works = chartom
    people = participants_invite(study=study, labels=["A", "B"])
    for p, book in zip(people, works[:2], strict=True):
        client.post(url("consent", p))
        client.post(url("choice-books", p), {"read": [book.pk]})
    cs.design_apply(study=study)
    a = people[0]
    for assignment in a.assignments.order_by("position"):
        cs.choice_record(participant=a, assignment_id=assignment.pk, action="submit", shown=0)
        cs.choice_record(participant=a, assignment_id=assignment.pk, action="keep")
    page = client.get(url("start", a)).content.decode()
    assert f'Your completion code: <strong class="completion-code">{CODE}</strong>' in page
    a.refresh_from_db()
    assert a.no_work_at is None


def test_a_study_with_a_no_work_url_sends_people_there(client, chartom):
    study, _works = chartom
    Study.objects.filter(pk=study.pk).update(
        no_work_url="https://platform.example/submissions/complete?cc=NOWORK"
    )
    (p,) = participants_invite(study=study, labels=["Pat"])
    client.post(url("consent", p))
    client.post(url("choice-books", p), {"read": []})
    page = client.get(url("start", p)).content.decode()
    assert 'href="https://platform.example/submissions/complete?cc=NOWORK"' in page
    assert CODE not in page


def test_the_no_work_url_cannot_be_the_completion_url():
    form = RunningForm(
        {
            "completion_code": CODE,
            "completion_url": COMPLETE,
            "no_work_url": COMPLETE,
            "public_cap": "0",
            "session_cap": "0",
            "idle_timeout_minutes": "0",
            "attention_max_failures": "0",
        }
    )
    assert not form.is_valid()
    assert "must not be the completion URL" in str(form.errors["no_work_url"])


def test_dyntom_arriving_when_every_stage_is_taken(client, researcher):
    stage = DynToMStageFactory()
    question = DynToMQuestionFactory(stage=stage, gold_letter="a")
    study = cs.choice_study_create(
        name="Stages", benchmark="dyntom", works=[stage.work], stage_fraction=1, overlap=1
    ).study
    study_launch(study=study)
    _platform(study)
    first, late = participants_invite(study=study, labels=["First", "Late"])
    client.post(url("consent", first))
    client.post(url("choice-stage-take", first, study_work_id=study.study_works.get().pk))

    client.get(url("start", late))
    client.post(url("consent", late))
    page = client.get(url("start", late)).content.decode()
    _assert_no_code(page)
    assert "Everything in this study already has all the participants it needs." in page
    late.refresh_from_db()
    assert late.no_work_reason == Participant.NoWork.ALL_TAKEN

    # The one who took the stage answers and gets the code.
    assignment = first.assignments.get()
    client.post(
        url("choice-answer", first, assignment_id=assignment.pk),
        {"action": "submit", "option": "0", "question": str(question.pk)},
    )
    assert CODE in client.get(url("start", first)).content.decode()

    client.force_login(researcher)
    detail = client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert '<strong data-testid="no-work-count">1</strong>' in detail
    assert "no work available (every item already had all its participants)" in detail


def test_scene_study_with_every_scene_taken(client, researcher, live_study):
    keep_scenes(live_study, 1)  # one scene, two raters (one who has not seen it)
    _platform(live_study)
    for label in ("one", "two"):
        rater = invite(live_study, label)
        to_scenes(client, rater)
        assignment = current(rater)
        data = {f"choice-{i.pk}": "0" for i in instances(assignment)}
        client.post(url("scene-submit", rater, assignment_id=assignment.pk), data)
    late = invite(live_study, "late")
    client.post(url("consent", late))
    page = client.get(url("start", late)).content.decode()
    _assert_no_code(page)
    late.refresh_from_db()
    assert late.no_work_reason == Participant.NoWork.ALL_TAKEN
    client.force_login(researcher)
    detail = client.get(reverse("studies:detail", args=[live_study.pk])).content.decode()
    assert '<dd data-testid="no-work-count">1</dd>' in detail
    assert "no work available" in detail


def test_the_return_url_never_carries_the_completion_path():
    study = Study(completion_url=COMPLETE)
    assert recruitment.no_work_return_url(study) == "https://platform.example/"
    assert recruitment.no_work_return_url(Study()) == ""
    study.no_work_url = "https://platform.example/return"
    assert recruitment.no_work_return_url(study) == "https://platform.example/return"
