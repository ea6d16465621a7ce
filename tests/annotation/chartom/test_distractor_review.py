"""Stage 8, distractor review and publication: the service and the screen."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.chartom.distractor_review import (
    distractor_review_submit,
    distractor_review_take,
)
from annotation.chartom.workflow import WorkflowError, construction_advance, construction_lock
from annotation.models import Construction, FieldChange, Stage, TaskAssignment
from benchmarks.models import QAItem
from tests.studies.test_concurrency import run_together

pytestmark = pytest.mark.django_db

ANSWER = "Vautrin flatters Eugene so that Eugene takes his side and the scheme goes ahead."
LLM_CHOICES = [
    "He wants everyone at the table to see how generous he is.",
    "He wants to show that he is in charge of the dinner.",
    "He wants to find out whether the wine is good before drinking it.",
]
MISLEADINGS = ["The answer treats the gesture as plain good manners."]


@pytest.fixture
def distractor_construction(make_construction):
    def make(dimension: str = "intention", **fields: Any) -> Construction:
        values = {
            "question": "Why does Vautrin pour for his neighbours before himself?",
            "description": ANSWER,
            "bonus_points": ["Vautrin wants to please them.", "He needs his plan to go ahead."],
            "distractors": list(LLM_CHOICES),
            "misleadings": list(MISLEADINGS),
            **fields,
        }
        construction = make_construction(
            stage="distractors", state="running", dimension=dimension, **values
        )
        with transaction.atomic():
            return construction_advance(construction_lock(construction.pk), Stage.DISTRACTOR_REVIEW)

    return make


@pytest.fixture
def other_annotator(db):
    from accounts.services import user_create_with_role

    return user_create_with_role(username="ann2", password="pw-ann2-123!", role="annotator")


def snapshot(construction: Construction) -> tuple:
    construction.refresh_from_db()
    return (
        construction.stage,
        construction.state,
        construction.distractors,
        construction.qa_item_id,
        FieldChange.objects.count(),
        QAItem.objects.count(),
        list(TaskAssignment.objects.values_list("pk", "submitted_at", "answer")),
    )


def test_accepted_choices_publish_the_item(distractor_construction, annotator) -> None:
    construction = distractor_construction()
    slot = distractor_review_take(annotator=annotator)

    item = distractor_review_submit(
        assignment_id=slot.pk, annotator=annotator, distractors=list(LLM_CHOICES)
    )

    construction.refresh_from_db()
    assert (construction.stage, construction.state) == ("published", "done")
    assert construction.qa_item_id == item.pk
    assert item.misleading_choices == LLM_CHOICES and item.answer == ANSWER
    slot.refresh_from_db()
    assert slot.answer == {"action": "accepted", "distractors": LLM_CHOICES}
    accepted = FieldChange.objects.get(construction=construction, field="distractors")
    assert (accepted.action, accepted.old_value, accepted.new_value) == (
        "accepted",
        LLM_CHOICES,
        LLM_CHOICES,
    )


def test_edited_choices_are_recorded_with_the_annotator(distractor_construction, annotator) -> None:
    construction = distractor_construction()
    slot = distractor_review_take(annotator=annotator)
    edited = [LLM_CHOICES[0], "He  is testing whether\nGoriot notices.", LLM_CHOICES[2]]

    item = distractor_review_submit(assignment_id=slot.pk, annotator=annotator, distractors=edited)

    expected = [LLM_CHOICES[0], "He is testing whether Goriot notices.", LLM_CHOICES[2]]
    assert item.misleading_choices == expected
    change = FieldChange.objects.get(construction=construction, field="distractors")
    assert (change.old_value, change.new_value) == (LLM_CHOICES, expected)
    assert (change.changed_by, change.action) == (annotator, "edited")


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        (LLM_CHOICES[:2], "distractors: exactly 3 choices are needed, got 2"),
        ([*LLM_CHOICES, "A fourth."], "distractors: exactly 3 choices are needed, got 4"),
        ([LLM_CHOICES[0], " ", LLM_CHOICES[2]], "distractors: choice 2 is empty"),
        ([LLM_CHOICES[0], LLM_CHOICES[0].upper(), "x"], "distractors: choice 2 repeats choice 1"),
        ([LLM_CHOICES[0], LLM_CHOICES[1], ANSWER.lower()], "distractors: choice 3 is the correct"),
        ([LLM_CHOICES[0], LLM_CHOICES[1], "y" * 1001], "distractors: choice 3 is longer than"),
        ([LLM_CHOICES[0], None, "z"], "distractors: choice 2 is not text"),
    ],
)
def test_refused_choices_name_the_field_and_write_nothing(
    distractor_construction, annotator, choices, message
) -> None:
    construction = distractor_construction()
    slot = distractor_review_take(annotator=annotator)
    before = snapshot(construction)
    with pytest.raises(WorkflowError, match=message):
        distractor_review_submit(assignment_id=slot.pk, annotator=annotator, distractors=choices)
    assert snapshot(construction) == before


def test_a_refused_publication_leaves_nothing_written(distractor_construction, annotator) -> None:
    construction = distractor_construction(question="")  # the item bank needs a question
    slot = distractor_review_take(annotator=annotator)
    before = snapshot(construction)
    with pytest.raises(WorkflowError, match="cannot be published: question"):
        distractor_review_submit(
            assignment_id=slot.pk, annotator=annotator, distractors=["a", "b", "c"]
        )
    assert snapshot(construction) == before


def test_a_replay_is_refused_and_publishes_nothing_more(distractor_construction, annotator) -> None:
    construction = distractor_construction()
    slot = distractor_review_take(annotator=annotator)
    distractor_review_submit(assignment_id=slot.pk, annotator=annotator, distractors=LLM_CHOICES)
    before = snapshot(construction)
    with pytest.raises(WorkflowError, match="already submitted"):
        distractor_review_submit(
            assignment_id=slot.pk, annotator=annotator, distractors=["p", "q", "r"]
        )
    assert snapshot(construction) == before and QAItem.objects.count() == 1


def test_foreign_and_timed_out_slots_are_refused(
    distractor_construction, annotator, other_annotator, settings
) -> None:
    construction = distractor_construction()
    slot = distractor_review_take(annotator=annotator)
    before = snapshot(construction)
    with pytest.raises(WorkflowError, match="no such task in your queue"):
        distractor_review_submit(
            assignment_id=slot.pk, annotator=other_annotator, distractors=LLM_CHOICES
        )
    TaskAssignment.objects.filter(pk=slot.pk).update(
        taken_at=timezone.now() - timedelta(seconds=settings.TOMLAB_ANNOTATION_TASK_TIMEOUT_S + 1)
    )
    before = snapshot(construction)
    with pytest.raises(WorkflowError, match="open too long"):
        distractor_review_submit(
            assignment_id=slot.pk, annotator=annotator, distractors=LLM_CHOICES
        )
    assert snapshot(construction) == before
    # The task went back to the queue: the other annotator gets it.
    assert distractor_review_take(annotator=other_annotator).task_id == slot.task_id


# --- the screen -------------------------------------------------------------------------


@pytest.fixture
def ann_client(client, annotator):
    client.force_login(annotator)
    return client


def take_through_view(client) -> int:
    response = client.post(reverse("annotation:chartom-distractor-take"))
    assert response.status_code == 302
    return int(response["Location"].rstrip("/").split("/")[-1])


def test_screen_shows_answer_choices_and_misleadings(distractor_construction, ann_client) -> None:
    distractor_construction()
    slot_id = take_through_view(ann_client)
    body = ann_client.get(reverse("annotation:chartom-distractor", args=[slot_id])).content.decode()
    assert ANSWER in body and MISLEADINGS[0] in body
    for i, choice in enumerate(LLM_CHOICES, start=1):
        assert f'name="choice_{i}"' in body and choice in body


def test_submit_publishes_and_shows_the_item_then_the_next_task(
    distractor_construction, ann_client
) -> None:
    first = distractor_construction("intention")
    distractor_construction("belief", question="What does Vautrin believe about the wine?")
    slot_id = take_through_view(ann_client)
    response = ann_client.post(
        reverse("annotation:chartom-distractor-submit", args=[slot_id]),
        {f"choice_{i}": c for i, c in enumerate(LLM_CHOICES, start=1)},
        follow=True,
    )
    assert response.redirect_chain[-1][0] == reverse(
        "annotation:chartom-distractor-done", args=[slot_id]
    )
    first.refresh_from_db()
    body = response.content.decode()
    assert f"Published as CharToM-QA item #{first.qa_item_id}" in body
    assert "Next task" in body

    following = ann_client.post(reverse("annotation:chartom-distractor-take"))
    assert following.status_code == 302 and str(slot_id) not in following["Location"]


def test_refused_submit_is_422_and_keeps_the_input(distractor_construction, ann_client) -> None:
    construction = distractor_construction()
    slot_id = take_through_view(ann_client)
    response = ann_client.post(
        reverse("annotation:chartom-distractor-submit", args=[slot_id]),
        {"choice_1": "Same.", "choice_2": "same.", "choice_3": "Other."},
    )
    assert response.status_code == 422
    body = response.content.decode()
    assert "distractors: choice 2 repeats choice 1" in body and "Other." in body
    construction.refresh_from_db()
    assert construction.stage == "distractor_review" and construction.qa_item_id is None


def test_replay_and_foreign_slots_through_the_views(
    distractor_construction, ann_client, other_annotator
) -> None:
    distractor_construction()
    slot_id = take_through_view(ann_client)
    url = reverse("annotation:chartom-distractor-submit", args=[slot_id])
    data = {f"choice_{i}": c for i, c in enumerate(LLM_CHOICES, start=1)}
    other = Client()
    other.force_login(other_annotator)
    assert other.post(url, data).status_code == 404
    assert (
        other.get(reverse("annotation:chartom-distractor-done", args=[slot_id])).status_code == 404
    )
    assert ann_client.post(url, data).status_code == 302
    replay = ann_client.post(url, data, follow=True)
    assert "already submitted; nothing changed" in replay.content.decode()
    assert QAItem.objects.count() == 1


def test_raters_get_403(client, rater) -> None:
    client.force_login(rater)
    assert client.post(reverse("annotation:chartom-distractor-take")).status_code == 403


ON_POSTGRES = connection.vendor == "postgresql"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not ON_POSTGRES, reason="row locks are only meaningful on PostgreSQL")
def test_two_tabs_submitting_at_once_publish_one_item_on_postgres(
    distractor_construction, annotator
) -> None:
    construction = distractor_construction()
    slot = distractor_review_take(annotator=annotator)

    def submit(choice: str):
        user = get_user_model().objects.get(pk=annotator.pk)
        return distractor_review_submit(
            assignment_id=slot.pk,
            annotator=user,
            distractors=[LLM_CHOICES[0], LLM_CHOICES[1], choice],
        ).pk

    results, errors = run_together([lambda c=c: submit(c) for c in ("Tab one.", "Tab two.")])

    assert len(errors) == 1 and "already submitted" in str(errors[0]), errors
    published = [r for r in results if r is not None]
    assert len(published) == 1 and QAItem.objects.count() == 1
    construction.refresh_from_db()
    assert construction.qa_item_id == published[0]
    assert FieldChange.objects.filter(construction=construction, field="distractors").count() == 1
