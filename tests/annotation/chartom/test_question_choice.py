"""Question choice: one record of the pick, the passed-over candidates, edit and time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.urls import reverse

from annotation.chartom import workflow
from annotation.chartom.question_choice import question_choice_take, question_choose
from annotation.chartom.workflow import WorkflowError
from annotation.models import (
    FieldChange,
    QuestionCandidate,
    QuestionChoice,
    Stage,
    TaskAssignment,
)
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

QUESTIONS = [
    ("Why does Vautrin fill his neighbours' glasses before his own?", "appropriate", True),
    ("What does Vautrin want from Eugene at dinner?", "appropriate", True),
    ("What is served at the boarding house?", "inappropriate", False),
    ("Why does Vautrin watch the others drink?", "appropriate", True),
]


def waiting(make_construction, *, note=0):
    construction = make_construction(
        stage=Stage.QUESTIONS,
        state="running",
        note=note,
        key_note="he wants Eugene on his side",
        description="Vautrin intends to win Eugene over so that his scheme can go ahead.",
    )
    for position, (text, verdict, kept) in enumerate(QUESTIONS):
        QuestionCandidate.objects.create(
            construction=construction,
            position=position,
            text=text,
            verdict=verdict,
            verdict_reason="trivial detail" if not kept else "",
            kept=kept,
        )
    with transaction.atomic():
        locked = workflow.construction_lock(construction.pk)
        FieldChange.objects.create(
            construction=locked,
            field="candidates",
            new_value=[q[0] for q in QUESTIONS],
            model="test-model",
            template="chartom-question v2, chartom-verify v1",
            action="generated",
        )
        workflow.construction_advance(locked, Stage.QUESTION_CHOICE)
    construction.refresh_from_db()
    return construction


def candidate(construction, position):
    return QuestionCandidate.objects.get(construction=construction, position=position)


def test_the_choice_links_pick_rejected_edit_time_and_versions(make_construction, annotator):
    construction = waiting(make_construction)
    slot = question_choice_take(annotator=annotator)
    TaskAssignment.objects.filter(pk=slot.pk).update(taken_at=slot.taken_at - timedelta(seconds=42))
    picked = candidate(construction, 1)
    final = "What does Vautrin want from Eugene at this dinner?"
    choice = question_choose(
        assignment_id=slot.pk, annotator=annotator, candidate_id=picked.pk, text=f" {final}\n"
    )
    assert choice.chosen == picked and choice.final_text == final
    assert set(choice.rejected.values_list("position", flat=True)) == {0, 2, 3}
    assert choice.diff == "What does Vautrin want from Eugene at {+this +}dinner?"
    assert choice.edit_distance == len("this ")
    assert 42 <= choice.seconds < 60
    assert choice.annotator == annotator and choice.model == "test-model"
    assert choice.template_versions["generation"] == "chartom-question v2"
    assert choice.template_versions["verification"] == "chartom-verify v1"
    construction.refresh_from_db()
    assert construction.question == final and construction.stage == Stage.BONUS
    change = FieldChange.objects.get(construction=construction, field="question")
    assert (change.changed_by, change.action) == (annotator, "edited")


def test_picking_without_an_edit(make_construction, annotator):
    construction = waiting(make_construction)
    slot = question_choice_take(annotator=annotator)
    choice = question_choose(
        assignment_id=slot.pk, annotator=annotator, candidate_id=candidate(construction, 0).pk
    )
    assert choice.final_text == QUESTIONS[0][0]
    assert (choice.diff, choice.edit_distance) == ("", 0)


def test_refusals_write_nothing(make_construction, annotator):
    construction = waiting(make_construction, note=0)
    elsewhere = waiting(make_construction, note=1)
    slot = question_choice_take(annotator=annotator)
    if slot.task.construction_id != construction.pk:
        construction, elsewhere = elsewhere, construction
    for candidate_id, message in [
        (candidate(elsewhere, 0).pk, "candidate: pick one of the questions shown"),
        (candidate(construction, 2).pk, "candidate: pick one"),  # not kept
        (999_999, "candidate: pick one"),
    ]:
        with pytest.raises(WorkflowError, match=message):
            question_choose(assignment_id=slot.pk, annotator=annotator, candidate_id=candidate_id)
    with pytest.raises(WorkflowError, match="text: the question cannot be empty"):
        question_choose(
            assignment_id=slot.pk,
            annotator=annotator,
            candidate_id=candidate(construction, 0).pk,
            text="   ",
        )
    other = UserFactory(username="other", role="annotator")
    with pytest.raises(WorkflowError, match="no such task"):
        question_choose(
            assignment_id=slot.pk, annotator=other, candidate_id=candidate(construction, 0).pk
        )
    assert not QuestionChoice.objects.exists()
    question_choose(
        assignment_id=slot.pk, annotator=annotator, candidate_id=candidate(construction, 0).pk
    )
    with pytest.raises(WorkflowError, match="already submitted"):
        question_choose(
            assignment_id=slot.pk, annotator=annotator, candidate_id=candidate(construction, 3).pk
        )
    assert QuestionChoice.objects.get().chosen.position == 0


def test_screen_pick_and_edit_through_the_view(make_construction, client, annotator, rater):
    construction = waiting(make_construction)
    client.force_login(rater)
    assert (
        client.post(
            reverse("annotation:chartom-take", kwargs={"kind": "question_choice"})
        ).status_code
        == 403
    )
    client.force_login(annotator)
    response = client.post(reverse("annotation:chartom-take", kwargs={"kind": "question_choice"}))
    slot = TaskAssignment.objects.get(annotator=annotator)
    screen = reverse("annotation:chartom-question", kwargs={"assignment_id": slot.pk})
    assert response.url == screen
    html = client.get(screen).content.decode()
    assert html.count('name="candidate"') == 3  # the kept ones
    assert "What is served at the boarding house?" in html and "trivial detail" in html
    assert "Vautrin intends to win Eugene over" in html
    submit = reverse("annotation:chartom-question-submit", kwargs={"assignment_id": slot.pk})
    bad = client.post(submit, {"text": "no pick"})
    assert bad.status_code == 422 and b"candidate: pick one" in bad.content
    picked = candidate(construction, 3)
    done = client.post(
        submit, {"candidate": picked.pk, "text": "Why does Vautrin watch Eugene drink?"}
    )
    assert done.status_code == 302
    choice = QuestionChoice.objects.get()
    assert choice.chosen == picked and choice.final_text == "Why does Vautrin watch Eugene drink?"
    assert choice.edit_distance > 0 and "[-the others-]{+Eugene+}" in choice.diff
    replay = client.post(submit, {"candidate": picked.pk, "text": "Again?"})
    assert replay.status_code == 409 and b"already submitted" in replay.content
    client.force_login(UserFactory(username="nosy", role="annotator"))
    assert client.get(screen).status_code == 404
