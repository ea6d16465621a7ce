"""The construction spine: provenance, stage order and the shared task queue.

The queue hands tasks out through ``studies.assignment.items_assign_with_room`` (row
locks, live slots counted after the locks); these tests pin what annotators see: one
slot per person, never more than k, a reload resumes, a stale slot goes back to the
queue and its late submit is refused.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from annotation.chartom import workflow
from annotation.models import AnnotationTask, FieldChange, Stage, TaskAssignment, TaskKind
from tests.factories import UserFactory
from tests.studies.test_concurrency import run_together

ON_POSTGRES = connection.vendor == "postgresql"


def _advance(construction, stage, user=None):
    with transaction.atomic():
        locked = workflow.construction_lock(construction.pk)
        return workflow.construction_advance(locked, stage, user=user)


@pytest.mark.django_db
def test_field_set_records_who_changed_what_and_the_value_before(make_construction, annotator):
    construction = make_construction(stage=Stage.PARAPHRASE_REVIEW, description="old text")
    assert workflow.field_set(construction, "description", "new text", user=annotator)
    construction.save()
    assert not workflow.field_set(construction, "description", "new text", user=annotator)
    change = FieldChange.objects.get(construction=construction, field="description")
    assert (change.old_value, change.new_value) == ("old text", "new text")
    assert change.changed_by == annotator and change.model == ""


@pytest.mark.django_db
def test_stages_alternate_between_llm_jobs_and_human_tasks(make_construction):
    construction = make_construction(stage=Stage.FILTER, state="running")
    _advance(construction, Stage.EXTRACT)
    construction.refresh_from_db()
    assert construction.state == "waiting_human"
    task = AnnotationTask.objects.get(construction=construction)
    assert (task.kind, task.k, task.batch_id) == (
        TaskKind.EXTRACT,
        1,
        construction.note.batch_id,
    )
    _advance(construction, Stage.PARAPHRASE)
    construction.refresh_from_db()
    assert construction.state == "queued"
    assert workflow.STAGE_ORDER[-2:] == (Stage.DISTRACTOR_REVIEW, Stage.PUBLISHED)
    stages = list(
        FieldChange.objects.filter(construction=construction, field="stage").values_list(
            "new_value", flat=True
        )
    )
    assert stages == [Stage.EXTRACT, Stage.PARAPHRASE]


@pytest.mark.django_db
def test_one_task_one_annotator_a_reload_resumes_and_a_stale_slot_returns(make_construction):
    first, second = UserFactory(role="annotator"), UserFactory(role="annotator")
    construction = make_construction(stage=Stage.FILTER)
    _advance(construction, Stage.EXTRACT)

    mine = workflow.task_take(kind=TaskKind.EXTRACT, annotator=first)
    assert mine is not None
    assert workflow.task_take(kind=TaskKind.EXTRACT, annotator=first).pk == mine.pk
    assert workflow.task_take(kind=TaskKind.EXTRACT, annotator=second) is None

    # Left open past the timeout: the task is the next annotator's, and the first
    # annotator's late submit is refused.
    TaskAssignment.objects.filter(pk=mine.pk).update(
        taken_at=timezone.now() - workflow.task_timeout() - timedelta(seconds=1)
    )
    theirs = workflow.task_take(kind=TaskKind.EXTRACT, annotator=second)
    assert theirs is not None and theirs.task_id == mine.task_id
    with transaction.atomic(), pytest.raises(workflow.WorkflowError, match="too long"):
        workflow.assignment_lock(assignment_id=mine.pk, annotator=first)
    # Another annotator's slot is simply not found.
    with transaction.atomic(), pytest.raises(workflow.WorkflowError, match="no such task"):
        workflow.assignment_lock(assignment_id=theirs.pk, annotator=first)

    with transaction.atomic():
        locked = workflow.assignment_lock(assignment_id=theirs.pk, annotator=second)
        workflow.assignment_submit(locked, {"spans": [[0, 4]]})
    assert AnnotationTask.objects.get(pk=theirs.task_id).closed
    with transaction.atomic(), pytest.raises(workflow.WorkflowError, match="already submitted"):
        workflow.assignment_lock(assignment_id=theirs.pk, annotator=second)
    # The first annotator, coming back, finds nothing left.
    assert workflow.task_take(kind=TaskKind.EXTRACT, annotator=first) is None


@pytest.mark.django_db
def test_a_task_with_room_for_two_goes_to_two_different_annotators(make_construction):
    construction = make_construction()
    task = AnnotationTask.objects.create(
        kind=TaskKind.NOTE_CHECK, note=construction.note, batch=construction.note.batch, k=2
    )
    users = [UserFactory(role="annotator") for _ in range(3)]
    taken = [workflow.task_take(kind=TaskKind.NOTE_CHECK, annotator=u) for u in users]
    assert [a.task_id if a else None for a in taken] == [task.pk, task.pk, None]


def _take(user_id: int) -> int | None:
    user = get_user_model().objects.get(pk=user_id)
    assignment = workflow.task_take(kind=TaskKind.EXTRACT, annotator=user)
    return assignment.task_id if assignment else None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not ON_POSTGRES, reason="row locks are only meaningful on PostgreSQL")
def test_twelve_annotators_in_two_tabs_race_for_five_tasks_on_postgres(make_construction):
    for dimension in ("belief", "intention", "emotion", "desire"):
        _advance(make_construction(dimension=dimension), Stage.EXTRACT)
    _advance(make_construction(dimension="belief", note=1), Stage.EXTRACT)
    users = [UserFactory(username=f"race{i}", role="annotator") for i in range(12)]
    results, errors = run_together([lambda u=u: _take(u.pk) for u in users for _ in range(2)])
    assert not errors, errors
    per_task = Counter(
        TaskAssignment.objects.filter(task__kind=TaskKind.EXTRACT).values_list("task_id", flat=True)
    )
    assert len(per_task) == 5 and set(per_task.values()) == {1}
    # Two tabs racing may hold two different tasks; never the same one twice.
    pairs = Counter(
        TaskAssignment.objects.filter(task__kind=TaskKind.EXTRACT).values_list(
            "task_id", "annotator_id"
        )
    )
    assert set(pairs.values()) == {1}
    assert {r for r in results if r is not None} == set(per_task)
