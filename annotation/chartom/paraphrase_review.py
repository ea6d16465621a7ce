"""Paraphrase review (paper section 4.2): the annotator accepts or edits the description.

The LLM turned the key note into a complete ToM description; the annotator's final
text replaces it. The slot's answer keeps the word diff and the edit distance from
the model's text, and the construction's history keeps the old and new value.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from .models import Construction, Stage, TaskAssignment, TaskKind
from .review_slot import review_slot_lock, review_take
from .text_edits import edit_distance, nul_refused, unified_diff
from .workflow import WorkflowError, assignment_submit, construction_advance, field_set

MAX_DESCRIPTION = 5000


def paraphrase_review_take(*, annotator: AbstractBaseUser) -> TaskAssignment | None:
    return review_take(kind=TaskKind.PARAPHRASE_REVIEW, annotator=annotator)


def description_clean(text: str) -> str:
    """Line ends made ``\\n`` and the ends trimmed; empty, too long or with a NUL
    character (which PostgreSQL cannot store) is refused."""
    nul_refused(text, field="text")
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        raise WorkflowError("text: the description cannot be empty")
    if len(text) > MAX_DESCRIPTION:
        raise WorkflowError(f"text: the description is over {MAX_DESCRIPTION} characters")
    return text


@transaction.atomic
def paraphrase_review_submit(
    *, assignment_id: int, annotator: AbstractBaseUser, text: str
) -> Construction:
    """Accept (same text) or edit the description, then queue question generation."""
    assignment, construction = review_slot_lock(
        assignment_id=assignment_id, annotator=annotator, kind=TaskKind.PARAPHRASE_REVIEW
    )
    final = description_clean(text)
    original = construction.description
    action = "accepted" if final == original else "edited"
    field_set(construction, "description", final, user=annotator, action=action, confirm=True)
    assignment_submit(
        assignment,
        {
            "action": action,
            "original": original,
            "text": final,
            "diff": unified_diff(original, final),
            "edit_distance": edit_distance(original, final),
        },
    )
    return construction_advance(construction, Stage.QUESTIONS, user=annotator)
