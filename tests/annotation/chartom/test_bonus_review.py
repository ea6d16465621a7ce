"""Stage 7, bonus point review: the service (operations, validation, replay, ownership,
timeouts) and the screen through the Django test client, with and without the editor."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from annotation.chartom.bonus_review import MAX_POINT_CHARS, bonus_review_submit, bonus_review_take
from annotation.chartom.workflow import WorkflowError, construction_advance, construction_lock
from annotation.models import Construction, FieldChange, Stage, TaskAssignment

pytestmark = pytest.mark.django_db

LLM_POINTS = [
    "Vautrin serves his neighbours first to win their goodwill.",
    "He wants Eugene on his side.",
    "His scheme depends on it.",
]


def advance(construction: Construction, stage: str) -> Construction:
    with transaction.atomic():
        return construction_advance(construction_lock(construction.pk), stage)


@pytest.fixture
def bonus_construction(make_construction):
    """A construction waiting for bonus point review, with the LLM's points."""

    def make(dimension: str = "intention", **fields: Any) -> Construction:
        construction = make_construction(
            stage="bonus",
            state="running",
            dimension=dimension,
            question="Why does Vautrin pour for his neighbours before himself?",
            description="Vautrin flatters Eugene so that Eugene takes his side and the "
            "scheme goes ahead.",
            bonus_points=list(LLM_POINTS),
            **fields,
        )
        return advance(construction, Stage.BONUS_REVIEW)

    return make


@pytest.fixture
def other_annotator(db):
    from accounts.services import user_create_with_role

    return user_create_with_role(username="ann2", password="pw-ann2-123!", role="annotator")


def snapshot(construction: Construction) -> tuple:
    construction.refresh_from_db()
    slot_state = list(TaskAssignment.objects.values_list("pk", "submitted_at", "answer"))
    return (
        construction.stage,
        construction.state,
        construction.bonus_points,
        FieldChange.objects.count(),
        slot_state,
    )


# --- the service ------------------------------------------------------------------------


def test_accepting_the_model_points_records_the_slot_and_queues_distractors(
    bonus_construction, annotator
) -> None:
    construction = bonus_construction()
    slot = bonus_review_take(annotator=annotator)
    assert slot is not None and slot.task.construction_id == construction.pk

    bonus_review_submit(
        assignment_id=slot.pk, annotator=annotator, points=list(LLM_POINTS), operations=[]
    )

    construction.refresh_from_db()
    slot.refresh_from_db()
    assert (construction.stage, construction.state) == ("distractors", "queued")
    assert construction.bonus_points == LLM_POINTS
    assert slot.submitted_at is not None and slot.task.closed
    assert slot.answer == {"action": "accepted", "points": LLM_POINTS, "operations": []}
    # The acceptance is in the history with its author, the value unchanged.
    accepted = FieldChange.objects.get(construction=construction, field="bonus_points")
    assert (accepted.action, accepted.changed_by) == ("accepted", annotator)
    assert accepted.old_value == accepted.new_value == LLM_POINTS
    stage_change = FieldChange.objects.filter(construction=construction, field="stage").last()
    assert (stage_change.new_value, stage_change.changed_by) == ("distractors", annotator)


def test_edited_points_record_the_author_the_old_list_and_the_operation_log(
    bonus_construction, annotator
) -> None:
    construction = bonus_construction()
    slot = bonus_review_take(annotator=annotator)
    final = [
        "He wants Eugene on his side, because his scheme depends on it.",
        "Vautrin serves his neighbours first",
        "to win their goodwill.",
    ]
    operations = [
        {"op": "merge", "index": 1},
        {"op": "edit", "index": 1, "before": "x", "after": "y"},
        {"op": "move", "from": 1, "to": 0},
        {"op": "split", "index": 1, "at": 35},
    ]

    bonus_review_submit(
        assignment_id=slot.pk,
        annotator=annotator,
        points=["  He wants Eugene on his side,\nbecause his scheme depends on it. ", *final[1:]],
        operations=operations,
    )

    construction.refresh_from_db()
    assert construction.bonus_points == final  # spacing normalized
    change = FieldChange.objects.get(construction=construction, field="bonus_points")
    assert (change.old_value, change.new_value) == (LLM_POINTS, final)
    assert (change.changed_by, change.action, change.model) == (annotator, "edited", "")
    slot.refresh_from_db()
    assert slot.answer["operations"] == operations and slot.answer["action"] == "edited"


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ([], "bonus_points: give at least one bonus point"),
        (["A point.", "   "], "bonus_points: point 2 is empty"),
        (["A point.", "a  POINT."], "bonus_points: point 2 repeats point 1"),
        (["x" * (MAX_POINT_CHARS + 1)], "bonus_points: point 1 is longer than"),
        ([f"point {i}" for i in range(13)], "bonus_points: at most 12 points"),
        (["fine", 3], "bonus_points: point 2 is not text"),
        ("one point", "bonus_points: expected a list"),
    ],
)
def test_refused_points_name_the_field_and_write_nothing(
    bonus_construction, annotator, points, message
) -> None:
    construction = bonus_construction()
    slot = bonus_review_take(annotator=annotator)
    before = snapshot(construction)

    with pytest.raises(WorkflowError, match=message):
        bonus_review_submit(
            assignment_id=slot.pk, annotator=annotator, points=points, operations=[]
        )

    assert snapshot(construction) == before


@pytest.mark.parametrize(
    ("operations", "message"),
    [
        ([{"op": "explode"}], "operations: entry 1 must be an object whose op is one of"),
        ([{"op": "merge"}, "merge"], "operations: entry 2"),
        ({"op": "merge"}, "operations: expected a list"),
    ],
)
def test_refused_operation_logs_name_the_entry(
    bonus_construction, annotator, operations, message
) -> None:
    construction = bonus_construction()
    slot = bonus_review_take(annotator=annotator)
    before = snapshot(construction)
    with pytest.raises(WorkflowError, match=message):
        bonus_review_submit(
            assignment_id=slot.pk, annotator=annotator, points=["ok"], operations=operations
        )
    assert snapshot(construction) == before


def test_a_replay_is_refused_and_changes_nothing(bonus_construction, annotator) -> None:
    construction = bonus_construction()
    slot = bonus_review_take(annotator=annotator)
    bonus_review_submit(assignment_id=slot.pk, annotator=annotator, points=["One."], operations=[])
    before = snapshot(construction)

    with pytest.raises(WorkflowError, match="already submitted"):
        bonus_review_submit(
            assignment_id=slot.pk, annotator=annotator, points=["Other."], operations=[]
        )

    assert snapshot(construction) == before
    assert construction.bonus_points == ["One."]


def test_another_annotators_slot_is_not_found(
    bonus_construction, annotator, other_annotator
) -> None:
    construction = bonus_construction()
    slot = bonus_review_take(annotator=annotator)
    before = snapshot(construction)
    with pytest.raises(WorkflowError, match="no such task in your queue"):
        bonus_review_submit(
            assignment_id=slot.pk, annotator=other_annotator, points=["Mine."], operations=[]
        )
    assert snapshot(construction) == before


def test_a_slot_of_another_kind_is_not_found(make_construction, annotator) -> None:
    construction = make_construction(
        stage="distractors", state="running", question="Q?", description="A.", distractors=[]
    )
    advance(construction, Stage.DISTRACTOR_REVIEW)
    from annotation.chartom.distractor_review import distractor_review_take

    slot = distractor_review_take(annotator=annotator)
    with pytest.raises(WorkflowError, match="no such task in your queue"):
        bonus_review_submit(assignment_id=slot.pk, annotator=annotator, points=["x"], operations=[])


def test_a_timed_out_slot_is_refused(bonus_construction, annotator, settings) -> None:
    construction = bonus_construction()
    slot = bonus_review_take(annotator=annotator)
    TaskAssignment.objects.filter(pk=slot.pk).update(
        taken_at=timezone.now() - timedelta(seconds=settings.TOMLAB_ANNOTATION_TASK_TIMEOUT_S + 5)
    )
    before = snapshot(construction)
    with pytest.raises(WorkflowError, match="open too long"):
        bonus_review_submit(assignment_id=slot.pk, annotator=annotator, points=["x"], operations=[])
    assert snapshot(construction) == before


def test_a_construction_moved_on_is_not_offered_and_not_submitted(
    bonus_construction, annotator, other_annotator
) -> None:
    construction = bonus_construction()
    slot = bonus_review_take(annotator=annotator)
    advance(Construction.objects.get(pk=construction.pk), Stage.DROPPED)
    with pytest.raises(WorkflowError, match="no longer waiting for bonus point review"):
        bonus_review_submit(assignment_id=slot.pk, annotator=annotator, points=["x"], operations=[])
    assert bonus_review_take(annotator=other_annotator) is None


def test_two_annotators_take_different_tasks(
    bonus_construction, annotator, other_annotator
) -> None:
    first = bonus_construction("intention")
    second = bonus_construction("belief")
    mine = bonus_review_take(annotator=annotator)
    theirs = bonus_review_take(annotator=other_annotator)
    assert {mine.task.construction_id, theirs.task.construction_id} == {first.pk, second.pk}
    assert bonus_review_take(annotator=annotator).pk == mine.pk  # resumes, takes no second


# --- the screen -------------------------------------------------------------------------


@pytest.fixture
def ann_client(client, annotator):
    client.force_login(annotator)
    return client


def take_through_view(client) -> int:
    response = client.post(reverse("annotation:chartom-bonus-take"))
    assert response.status_code == 302
    return int(response["Location"].rstrip("/").split("/")[-1])


def test_screen_shows_the_question_answer_plot_and_points(bonus_construction, ann_client) -> None:
    bonus_construction()
    slot_id = take_through_view(ann_client)
    page = ann_client.get(reverse("annotation:chartom-bonus", args=[slot_id]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "Why does Vautrin pour for his neighbours before himself?" in body
    assert "the scheme goes ahead" in body  # the reference answer
    assert "boarding house smelled of soup" in body  # the plot
    assert 'id="bonus-points-data"' in body and "He wants Eugene on his side." in body
    assert 'name="points_text"' in body  # the form works without JavaScript
    assert "Ctrl</kbd>+<kbd>Enter" in body  # shortcuts shown


def test_submit_from_the_editor_stores_list_and_log(bonus_construction, ann_client) -> None:
    construction = bonus_construction()
    slot_id = take_through_view(ann_client)
    operations = [{"op": "delete", "index": 2, "text": LLM_POINTS[2]}]
    response = ann_client.post(
        reverse("annotation:chartom-bonus-submit", args=[slot_id]),
        {
            "points_json": json.dumps(LLM_POINTS[:2]),
            "operations_json": json.dumps(operations),
            "points_text": "ignored when the editor sent its list",
        },
    )
    assert response.status_code == 302 and response["Location"] == reverse("annotation:chartom")
    construction.refresh_from_db()
    assert construction.bonus_points == LLM_POINTS[:2]
    assert TaskAssignment.objects.get(pk=slot_id).answer["operations"] == operations


def test_submit_without_javascript_reads_one_point_per_line(bonus_construction, ann_client) -> None:
    construction = bonus_construction()
    slot_id = take_through_view(ann_client)
    response = ann_client.post(
        reverse("annotation:chartom-bonus-submit", args=[slot_id]),
        {"points_text": "First point.\r\n\r\nSecond point.\r\n"},
    )
    assert response.status_code == 302
    construction.refresh_from_db()
    assert construction.bonus_points == ["First point.", "Second point."]


def test_refused_submit_is_422_with_the_message_and_the_input_kept(
    bonus_construction, ann_client
) -> None:
    construction = bonus_construction()
    slot_id = take_through_view(ann_client)
    response = ann_client.post(
        reverse("annotation:chartom-bonus-submit", args=[slot_id]),
        {
            "points_json": json.dumps(["Same point.", "same point."]),
            "operations_json": json.dumps([{"op": "add", "index": 1}]),
        },
    )
    assert response.status_code == 422
    body = response.content.decode()
    assert "bonus_points: point 2 repeats point 1" in body
    assert "same point." in body and "&quot;op&quot;: &quot;add&quot;" in body
    construction.refresh_from_db()
    assert construction.stage == "bonus_review" and construction.bonus_points == LLM_POINTS

    bad_json = ann_client.post(
        reverse("annotation:chartom-bonus-submit", args=[slot_id]), {"points_json": "[oops"}
    )
    assert (
        bad_json.status_code == 422 and "bonus_points: not valid JSON" in bad_json.content.decode()
    )


def test_replayed_post_says_so_and_changes_nothing(bonus_construction, ann_client) -> None:
    construction = bonus_construction()
    slot_id = take_through_view(ann_client)
    url = reverse("annotation:chartom-bonus-submit", args=[slot_id])
    assert ann_client.post(url, {"points_text": "Kept."}).status_code == 302
    before = snapshot(construction)

    replay = ann_client.post(url, {"points_text": "Changed."}, follow=True)

    assert "already submitted; nothing changed" in replay.content.decode()
    assert snapshot(construction) == before
    again = ann_client.get(reverse("annotation:chartom-bonus", args=[slot_id]), follow=True)
    assert "already submitted" in again.content.decode()


def test_another_annotators_slot_is_404_on_screen_and_submit(
    bonus_construction, ann_client, client, other_annotator
) -> None:
    bonus_construction()
    slot_id = take_through_view(ann_client)
    from django.test import Client

    other = Client()
    other.force_login(other_annotator)
    assert other.get(reverse("annotation:chartom-bonus", args=[slot_id])).status_code == 404
    response = other.post(
        reverse("annotation:chartom-bonus-submit", args=[slot_id]), {"points_text": "x"}
    )
    assert response.status_code == 404
    assert TaskAssignment.objects.get(pk=slot_id).submitted_at is None


def test_raters_get_403_and_strangers_the_login(bonus_construction, client, rater) -> None:
    bonus_construction()
    assert client.post(reverse("annotation:chartom-bonus-take")).status_code == 302  # login
    client.force_login(rater)
    assert client.post(reverse("annotation:chartom-bonus-take")).status_code == 403
    assert client.get(reverse("annotation:chartom-bonus", args=[1])).status_code == 403


def test_take_with_nothing_waiting_goes_back_to_the_board(ann_client) -> None:
    response = ann_client.post(reverse("annotation:chartom-bonus-take"), follow=True)
    assert response.redirect_chain[-1][0] == reverse("annotation:chartom")
    assert "Nothing is waiting for you" in response.content.decode()
