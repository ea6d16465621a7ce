"""What the bonus point and distractor reviews share: taking, reading and locking a slot.

A review screen works on one of the annotator's own slots. Reading it (the screen)
and locking it (the submit) both refuse a slot of another annotator or of another
kind with the same words, so an id never tells anyone that a slot exists.
"""

from __future__ import annotations

import re

from django.contrib.auth.models import AbstractBaseUser

from .models import Construction, Stage, TaskAssignment
from .workflow import WorkflowError, assignment_lock, construction_lock, task_take

NOT_FOUND = "no such task in your queue"
_SPACE = re.compile(r"\s+")


def normalized(text: str) -> str:
    """Whitespace runs made one space, ends trimmed: how a list entry is stored."""
    return _SPACE.sub(" ", text).strip()


def same_text(a: str, b: str) -> bool:
    """Equal up to case and spacing: what "duplicate" means for points and choices."""
    return normalized(a).casefold() == normalized(b).casefold()


def review_take(*, kind: str, annotator: AbstractBaseUser) -> TaskAssignment | None:
    """The annotator's open slot of ``kind``, or the next task whose construction waits for it.

    Only constructions still at the stage of that name are offered: a task whose
    construction was moved on by a researcher is never handed out.
    """
    return task_take(
        kind=kind,
        annotator=annotator,
        eligible=lambda tasks: tasks.filter(construction__stage=kind),
    )


def review_slot_get(
    *, assignment_id: int, annotator: AbstractBaseUser, kind: str
) -> TaskAssignment | None:
    """The annotator's own slot of ``kind`` with its construction, note and book; else None."""
    return (
        TaskAssignment.objects.filter(pk=assignment_id, annotator=annotator, task__kind=kind)
        .select_related(
            "task",
            "task__construction",
            "task__construction__note",
            "task__construction__note__book",
            "task__construction__qa_item",
        )
        .first()
    )


def review_slot_lock(
    *, assignment_id: int, annotator: AbstractBaseUser, kind: str
) -> tuple[TaskAssignment, Construction]:
    """Lock the annotator's live slot of ``kind`` and its construction, in that order.

    Every submit locks slot first, construction second, so two submits never wait on
    each other crosswise. The construction must still be at the stage the task is for.
    """
    assignment = assignment_lock(assignment_id=assignment_id, annotator=annotator)
    if assignment.task.kind != kind or assignment.task.construction_id is None:
        raise WorkflowError(NOT_FOUND)
    construction = construction_lock(assignment.task.construction_id)
    if construction.stage != kind:
        raise WorkflowError(
            f"this construction is at {Stage(construction.stage).label}, "
            f"no longer waiting for {Stage(kind).label}"
        )
    return assignment, construction
