"""Stage 8, distractor review, and publication (Appendix J).

The annotator sees the question, the correct answer (the reviewed description), the
three misleading choices the LLM wrote and the "misleading directions" it was given,
and accepts or edits the choices. Submitting publishes the construction as a
CharToM-QA item in the item bank.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from benchmarks.models import QAItem

from .models import TaskAssignment, TaskKind
from .publish import construction_publish
from .review_slot import normalized, review_slot_lock, review_take, same_text
from .workflow import WorkflowError, assignment_submit, field_set

DISTRACTOR_COUNT = 3
MAX_CHOICE_CHARS = 1000


def distractor_review_take(*, annotator: AbstractBaseUser) -> TaskAssignment | None:
    """The annotator's open distractor review, or the next one waiting; None when none is."""
    return review_take(kind=TaskKind.DISTRACTOR_REVIEW, annotator=annotator)


def distractors_clean(distractors: list[Any], *, answer: str) -> list[str]:
    """Exactly three distinct non-empty choices, none the correct answer; else WorkflowError."""
    if not isinstance(distractors, list):
        raise WorkflowError("distractors: expected a list of choices")
    if len(distractors) != DISTRACTOR_COUNT:
        raise WorkflowError(
            f"distractors: exactly {DISTRACTOR_COUNT} choices are needed, got {len(distractors)}"
        )
    cleaned: list[str] = []
    for number, choice in enumerate(distractors, start=1):
        if not isinstance(choice, str):
            raise WorkflowError(f"distractors: choice {number} is not text")
        text = normalized(choice)
        if not text:
            raise WorkflowError(f"distractors: choice {number} is empty")
        if len(text) > MAX_CHOICE_CHARS:
            raise WorkflowError(
                f"distractors: choice {number} is longer than {MAX_CHOICE_CHARS} characters"
            )
        if same_text(text, answer):
            raise WorkflowError(f"distractors: choice {number} is the correct answer")
        for earlier, other in enumerate(cleaned, start=1):
            if same_text(text, other):
                raise WorkflowError(f"distractors: choice {number} repeats choice {earlier}")
        cleaned.append(text)
    return cleaned


def distractor_review_submit(
    *, assignment_id: int, annotator: AbstractBaseUser, distractors: list[Any]
) -> QAItem:
    """Store the reviewed distractors and publish the construction; returns the new item.

    One transaction: the annotator's live slot and the construction are locked, the
    choices recorded ("accepted" or "edited"), the slot submitted, and the item made by
    :func:`construction_publish`. If publishing refuses the record, nothing of this
    stays. A replay finds the slot submitted and is refused without changing anything.
    """
    with transaction.atomic():
        assignment, construction = review_slot_lock(
            assignment_id=assignment_id, annotator=annotator, kind=TaskKind.DISTRACTOR_REVIEW
        )
        cleaned = distractors_clean(distractors, answer=construction.description)
        original = [normalized(str(d)) for d in construction.distractors]
        action = "accepted" if cleaned == original else "edited"
        field_set(construction, "distractors", cleaned, user=annotator, action=action, confirm=True)
        construction.save(update_fields=["distractors", "updated_at"])
        assignment_submit(assignment, {"action": action, "distractors": cleaned})
        return construction_publish(construction, user=annotator)
