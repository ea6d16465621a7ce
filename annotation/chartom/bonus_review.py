"""Stage 7, bonus point review: the annotator edits the LLM's bonus points (Appendix I).

The screen keeps the list in the browser and lets the annotator edit, delete, split,
merge, reorder and add points; the server receives the final list and the log of
operations that led to it. The list is what the item keeps; the log is kept with the
slot's answer, to study how the model's points were reworked.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from .models import Stage, TaskAssignment, TaskKind
from .review_slot import normalized, review_slot_lock, review_take, same_text
from .workflow import WorkflowError, assignment_submit, construction_advance, field_set

MAX_POINTS = 12
MAX_POINT_CHARS = 1000
MAX_OPERATIONS = 2000
MAX_OPERATIONS_BYTES = 200_000
OPERATIONS = frozenset({"edit", "delete", "split", "merge", "move", "add"})


def bonus_review_take(*, annotator: AbstractBaseUser) -> TaskAssignment | None:
    """The annotator's open bonus review, or the next one waiting; None when none is."""
    return review_take(kind=TaskKind.BONUS_REVIEW, annotator=annotator)


def bonus_points_clean(points: list[Any]) -> list[str]:
    """The points as stored (spacing normalized), or WorkflowError naming the point."""
    if not isinstance(points, list):
        raise WorkflowError("bonus_points: expected a list of points")
    if not points:
        raise WorkflowError("bonus_points: give at least one bonus point")
    if len(points) > MAX_POINTS:
        raise WorkflowError(f"bonus_points: at most {MAX_POINTS} points, got {len(points)}")
    cleaned: list[str] = []
    for number, point in enumerate(points, start=1):
        if not isinstance(point, str):
            raise WorkflowError(f"bonus_points: point {number} is not text")
        text = normalized(point)
        if not text:
            raise WorkflowError(f"bonus_points: point {number} is empty")
        if len(text) > MAX_POINT_CHARS:
            raise WorkflowError(
                f"bonus_points: point {number} is longer than {MAX_POINT_CHARS} characters"
            )
        for earlier, other in enumerate(cleaned, start=1):
            if same_text(text, other):
                raise WorkflowError(f"bonus_points: point {number} repeats point {earlier}")
        cleaned.append(text)
    return cleaned


def operations_clean(operations: list[Any]) -> list[dict[str, Any]]:
    """The operation log as received, checked for shape and size only.

    The log is a record of how the list was edited, not an instruction: the final list
    is what counts, so an entry is not replayed, only required to name a known
    operation.
    """
    if not isinstance(operations, list):
        raise WorkflowError("operations: expected a list")
    if len(operations) > MAX_OPERATIONS:
        raise WorkflowError(f"operations: at most {MAX_OPERATIONS} entries")
    for number, entry in enumerate(operations, start=1):
        if not isinstance(entry, dict) or entry.get("op") not in OPERATIONS:
            raise WorkflowError(
                f"operations: entry {number} must be an object whose op is one of "
                + ", ".join(sorted(OPERATIONS))
            )
    if len(json.dumps(operations)) > MAX_OPERATIONS_BYTES:
        raise WorkflowError("operations: the log is too long")
    return operations


def bonus_review_submit(
    *,
    assignment_id: int,
    annotator: AbstractBaseUser,
    points: list[Any],
    operations: list[Any],
) -> TaskAssignment:
    """Store the reviewed bonus points and send the construction on to distractors.

    All or nothing in one transaction: the annotator's live slot and the construction
    are locked, the points recorded with the annotator as author ("accepted" when the
    model's list is kept as it was, "edited" otherwise), the slot submitted with the
    operation log, and the distractor step queued. A replay finds the slot submitted
    and is refused without changing anything.
    """
    cleaned = bonus_points_clean(points)
    log = operations_clean(operations)
    with transaction.atomic():
        assignment, construction = review_slot_lock(
            assignment_id=assignment_id, annotator=annotator, kind=TaskKind.BONUS_REVIEW
        )
        # Spacing the model left is not an edit of the annotator's.
        original = [normalized(str(p)) for p in construction.bonus_points]
        action = "accepted" if cleaned == original else "edited"
        field_set(
            construction, "bonus_points", cleaned, user=annotator, action=action, confirm=True
        )
        construction.save(update_fields=["bonus_points", "updated_at"])
        assignment_submit(
            assignment,
            {
                "action": action,
                "points": cleaned,
                "operations": log,
            },
        )
        construction_advance(construction, Stage.DISTRACTORS, user=annotator)
    return assignment
