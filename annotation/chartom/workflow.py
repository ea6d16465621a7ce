"""The spine of CharToM-QA construction: stage order, provenance and the task queue.

Everything else in :mod:`annotation.chartom` calls these functions:

* :func:`field_set` changes a construction field and records a :class:`FieldChange`
  (who or which model + template version, when, the value before);
* :func:`construction_advance` moves a construction to a stage; an LLM stage queues
  the ``annotation.chartom_step`` Celery task (see ``annotation.chartom.llm_steps``),
  a human stage opens an :class:`AnnotationTask` in the batch's queue;
* :func:`task_take` hands an annotator the next task of a kind with room for them,
  through :func:`studies.assignment.items_assign_with_room` (the routine the scene
  study and DynToM validation use): row locks in primary-key order, live slots counted
  after the locks are held. A slot not submitted within
  ``TOMLAB_ANNOTATION_TASK_TIMEOUT_S`` is dead: it no longer counts, and the task goes
  back to the queue;
* :func:`assignment_lock` and :func:`assignment_submit` are how every screen's submit
  starts and ends: the annotator's own live slot, locked, submitted once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, F, Q, QuerySet
from django.utils import timezone

from common.queueing import job_tasks_register
from common.tasks import task_send_on_commit
from modeling.runs.leases import LEASE_RELEASED, LeaseHeld, holder_gone
from studies.assignment import items_assign_with_room

from .models import (
    HUMAN_STAGES,
    LLM_STAGES,
    AnnotationTask,
    Construction,
    FieldChange,
    Stage,
    TaskAssignment,
    TaskKind,
)

STEP_TASK_NAME = "annotation.chartom_step"
job_tasks_register(
    "annotation.construction", STEP_TASK_NAME, page="annotation:chartom-construction"
)

# The order a construction walks; the stage after DISTRACTOR_REVIEW publishes it.
STAGE_ORDER: tuple[str, ...] = (
    Stage.FILTER,
    Stage.EXTRACT,
    Stage.PARAPHRASE,
    Stage.PARAPHRASE_REVIEW,
    Stage.QUESTIONS,
    Stage.QUESTION_CHOICE,
    Stage.BONUS,
    Stage.BONUS_REVIEW,
    Stage.DISTRACTORS,
    Stage.DISTRACTOR_REVIEW,
    Stage.PUBLISHED,
)
# A human stage's queue has the stage's own name as its task kind.
STAGE_TASK_KIND: dict[str, str] = {stage.value: TaskKind(stage.value) for stage in HUMAN_STAGES}


class WorkflowError(ValueError):
    """A request the workflow refuses; the message is shown to the person as it is."""


def task_timeout() -> timedelta:
    return timedelta(seconds=int(getattr(settings, "TOMLAB_ANNOTATION_TASK_TIMEOUT_S", 1800)))


# --- provenance ------------------------------------------------------------------------


def field_set(
    construction: Construction,
    field: str,
    value: Any,
    *,
    user: AbstractBaseUser | None = None,
    model: str = "",
    template: str = "",
    call_id: int | None = None,
    action: str = "",
    confirm: bool = False,
) -> bool:
    """Set ``construction.<field>`` in memory and record the change; False if unchanged.

    The caller saves the construction (in the same transaction). A value given again
    unchanged records nothing, so replays and re-runs leave one history, unless
    ``confirm``: a reviewer accepting a model's value as it is is a decision the
    history shows with its author (old and new values equal).
    """
    old = getattr(construction, field)
    changed = old != value
    if not changed and not confirm:
        return False
    setattr(construction, field, value)
    FieldChange.objects.create(
        construction=construction,
        field=field,
        old_value=old,
        new_value=value,
        changed_by=user if user is not None and user.is_authenticated else None,
        model=model,
        template=template,
        call_id=call_id,
        action=action,
    )
    return changed


# --- the stage machine -----------------------------------------------------------------


def step_enqueue(construction_id: int) -> None:
    """Queue the LLM step of a construction once the current transaction commits."""

    task_send_on_commit(STEP_TASK_NAME, (construction_id,), queue="default")


def construction_advance(
    construction: Construction, to_stage: str, *, user: AbstractBaseUser | None = None
) -> Construction:
    """Move ``construction`` to ``to_stage`` and start that stage's work.

    LLM stages queue the step job (state ``queued``); human stages open a task with one
    slot in the note batch's queue (state ``waiting_human``); ``published`` and
    ``dropped`` end it (state ``done``). Saves the construction. Must run inside a
    transaction, with the construction row locked by the caller.
    """
    if to_stage not in Stage.values:
        raise WorkflowError(f"unknown stage {to_stage!r}")
    field_set(construction, "stage", to_stage, user=user, action="advanced")
    construction.error = ""
    for name, value in LEASE_RELEASED.items():  # the step that ran (if any) is over
        setattr(construction, name, value)
    if to_stage in LLM_STAGES:
        construction.state = Construction.State.QUEUED
        step_enqueue(construction.pk)
    elif to_stage in HUMAN_STAGES:
        construction.state = Construction.State.WAITING_HUMAN
        kind = STAGE_TASK_KIND[to_stage]
        # A construction sent back to a stage it passed gets a new task: the old one
        # is closed and keeps its answer as history.
        if not AnnotationTask.objects.filter(
            kind=kind, construction=construction, closed=False
        ).exists():
            AnnotationTask.objects.create(
                kind=kind,
                construction=construction,
                batch_id=construction.note.batch_id,
                k=1,
                position=construction.pk,
            )
    else:
        construction.state = Construction.State.DONE
    construction.save()
    return construction


def construction_lock(construction_id: int) -> Construction:
    """The construction row, locked until the transaction ends."""
    try:
        return (
            Construction.objects.select_for_update(of=("self",))
            .select_related("note", "note__book", "note__batch")
            .get(pk=construction_id)
        )
    except Construction.DoesNotExist:
        raise WorkflowError(f"no construction {construction_id}") from None


# A step can be sent again when it failed, or when it is queued and its message may be
# lost (a broker restarted without it): a step runs once however often it is sent,
# since the worker claims it with one conditional UPDATE (llm_steps.construction_claim).
# A "running" step can be sent again once its lease is stale: its holder died on this
# host, or its lease expired (modeling.runs.leases.holder_gone).
RETRY_STATES = (Construction.State.NEEDS_RETRY, Construction.State.QUEUED)


def construction_retry(*, construction_id: int, user: AbstractBaseUser | None = None) -> None:
    """Queue again an LLM step that failed, is still queued, or was left running by a dead
    worker; paid calls come from the cache."""
    with transaction.atomic():
        construction = construction_lock(construction_id)
        if construction.stage not in LLM_STAGES:
            raise WorkflowError(
                f"construction {construction_id} is {construction.get_state_display()}, "
                "not waiting for a retry"
            )
        if construction.state == Construction.State.RUNNING and not holder_gone(construction):
            held = LeaseHeld(construction, f"the LLM step of construction {construction_id}")
            raise WorkflowError(f"{held}; it can be retried once that process is gone")
        if construction.state not in (*RETRY_STATES, Construction.State.RUNNING):
            raise WorkflowError(
                f"construction {construction_id} is {construction.get_state_display()}, "
                "not waiting for a retry"
            )
        construction.state = Construction.State.QUEUED
        construction.error = ""
        for name, value in LEASE_RELEASED.items():
            setattr(construction, name, value)
        construction.save(update_fields=["state", "error", "updated_at", *LEASE_RELEASED])
        step_enqueue(construction.pk)


def batch_retry_all(
    *, batch_id: int, user: AbstractBaseUser | None = None, queued: bool = False
) -> int:
    """Queue again every step of a batch left in ``needs_retry`` (after a backend outage),
    and every step left running by a dead worker (its lease stale).

    With ``queued``, the steps still queued are sent again instead (their messages lost).
    """
    states = (
        [Construction.State.QUEUED]
        if queued
        else [Construction.State.NEEDS_RETRY, Construction.State.RUNNING]
    )
    waiting = [
        construction.pk
        for construction in Construction.objects.filter(
            note__batch_id=batch_id, stage__in=LLM_STAGES, state__in=states
        ).only("pk", "state", *LEASE_RELEASED)
        if construction.state != Construction.State.RUNNING or holder_gone(construction)
    ]
    sent = 0
    for construction_id in waiting:
        try:
            construction_retry(construction_id=construction_id, user=user)
        except WorkflowError:
            continue  # retried meanwhile by someone else, or done: nothing to do
        sent += 1
    return sent


# --- the task queue --------------------------------------------------------------------


def live_assignments() -> QuerySet[TaskAssignment]:
    """Slots that count against a task's ``k``: submitted, or taken within the timeout."""
    cutoff = timezone.now() - task_timeout()
    return TaskAssignment.objects.filter(Q(submitted_at__isnull=False) | Q(taken_at__gte=cutoff))


def open_tasks(kind: str, **filters: Any) -> QuerySet[AnnotationTask]:
    return AnnotationTask.objects.filter(kind=kind, closed=False, **filters)


def task_current(
    *, kind: str, annotator: AbstractBaseUser, **filters: Any
) -> TaskAssignment | None:
    """The annotator's own live, unsubmitted slot of this kind (a reload resumes it)."""
    cutoff = timezone.now() - task_timeout()
    return (
        TaskAssignment.objects.filter(
            annotator=annotator,
            submitted_at__isnull=True,
            taken_at__gte=cutoff,
            task__kind=kind,
            task__closed=False,
            **{f"task__{name}": value for name, value in filters.items()},
        )
        .select_related("task")
        .order_by("taken_at")
        .first()
    )


def task_take(
    *,
    kind: str,
    annotator: AbstractBaseUser,
    eligible: Callable[[QuerySet[AnnotationTask]], QuerySet[AnnotationTask]] | None = None,
    **filters: Any,
) -> TaskAssignment | None:
    """Give ``annotator`` the next task of ``kind`` that has room for them, or resume theirs.

    Tasks are taken in ``position`` order. ``filters`` narrow the queue (``batch=…``,
    ``sample=…``); ``eligible`` may narrow it further (e.g. notes the annotator wrote
    are not theirs to check). Two annotators asking at once never get the same slot:
    the candidate rows are locked and counted by ``items_assign_with_room``. ``None``
    when nothing has room.
    """
    current = task_current(kind=kind, annotator=annotator, **filters)
    if current is not None:
        return current
    cutoff = timezone.now() - task_timeout()
    for _ in range(20):  # each try that loses a race sees the filled task gone next time
        candidates = (
            open_tasks(kind, **filters)
            # One subquery: both conditions must hold on the same slot.
            .exclude(
                pk__in=TaskAssignment.objects.filter(
                    annotator=annotator, submitted_at__isnull=False
                ).values("task_id")
            )
            .annotate(
                n=Count(
                    "assignments",
                    filter=Q(assignments__submitted_at__isnull=False)
                    | Q(assignments__taken_at__gte=cutoff),
                )
            )
            .filter(n__lt=F("k"))
        )
        if eligible is not None:
            candidates = eligible(candidates)
        task_id = candidates.order_by("position", "pk").values_list("pk", flat=True).first()
        if task_id is None:
            return None
        with transaction.atomic():
            # A slot of this annotator that timed out is taken again, not duplicated.
            TaskAssignment.objects.filter(
                task_id=task_id, annotator=annotator, submitted_at__isnull=True
            ).delete()
            given = items_assign_with_room(
                items=AnnotationTask.objects.filter(pk=task_id, closed=False),
                assignments=live_assignments(),
                item_field="task",
                group_field="annotator",
                has_room=lambda task, counts: (
                    sum(counts.values()) < task.k and counts[annotator.pk] == 0
                ),
                build=lambda tasks: (
                    TaskAssignment(task=task, annotator=annotator, taken_at=timezone.now())
                    for task in tasks
                ),
            )
            if given:
                return TaskAssignment.objects.select_related("task").get(
                    task_id=task_id, annotator=annotator
                )
    return None


def assignment_lock(*, assignment_id: int, annotator: AbstractBaseUser) -> TaskAssignment:
    """The annotator's own unsubmitted slot, locked; anything else is refused by name.

    Another annotator's slot is simply "not found" (no hint it exists). A slot that
    timed out is refused: its task may be someone else's now.
    """
    try:
        assignment = (
            TaskAssignment.objects.select_for_update(of=("self",))
            .select_related("task")
            .get(pk=assignment_id, annotator=annotator)
        )
    except TaskAssignment.DoesNotExist:
        raise WorkflowError("no such task in your queue") from None
    if assignment.submitted_at is not None:
        raise WorkflowError("this task was already submitted")
    if assignment.taken_at < timezone.now() - task_timeout():
        raise WorkflowError("this task was open too long and went back to the queue; take it again")
    return assignment


def assignment_submit(assignment: TaskAssignment, answer: dict[str, Any]) -> TaskAssignment:
    """Mark a locked slot submitted with ``answer``; closes the task when all k are in."""
    now = timezone.now()
    assignment.answer = answer
    assignment.submitted_at = now
    assignment.seconds = (now - assignment.taken_at).total_seconds()
    assignment.save(update_fields=["answer", "submitted_at", "seconds"])
    task = assignment.task
    submitted = TaskAssignment.objects.filter(task=task, submitted_at__isnull=False).count()
    if submitted >= task.k:
        AnnotationTask.objects.filter(pk=task.pk).update(closed=True)
    return assignment


def tasks_withdraw(tasks: Iterable[AnnotationTask]) -> int:
    """Close tasks nobody should take any more (their construction moved on or dropped)."""
    ids = [task.pk for task in tasks]
    return AnnotationTask.objects.filter(pk__in=ids, closed=False).update(closed=True)
