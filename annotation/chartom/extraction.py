"""Key-note extraction (paper section 4.2): the annotator marks what the note states.

Only qualified annotators take these tasks (:func:`.qualification.annotator_qualified`).
The answer is a set of fragments of the note text (see :mod:`.spans`), or the
statement that the note says nothing literal about the dimension, which drops the
construction.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from .models import Construction, Stage, TaskAssignment, TaskKind
from .qualification import annotator_qualified
from .review_slot import review_slot_lock, review_take
from .spans import key_note_text, spans_clean
from .workflow import WorkflowError, assignment_submit, construction_advance, field_set

NOT_QUALIFIED = "Pass the qualification trial before extracting key notes."

# Appendix B's four dimensions, in our own words, shown beside every note.
DIMENSION_DEFINITIONS: dict[str, str] = {
    "belief": (
        "What the character holds to be true: facts as they see them and their own "
        "perception of whether something exists or is so."
    ),
    "intention": (
        "The plan behind what the character does: what they mean to do next and the "
        "motive for what they are doing now."
    ),
    "emotion": (
        "A strong feeling that comes from the character's situation, mood or ties with "
        "others, pleasant or unpleasant, often shown in how they react."
    ),
    "desire": (
        "What the character wants or longs for, in body or mind; it pushes them to act, "
        "and getting it would please them."
    ),
}


def extraction_take(*, annotator: AbstractBaseUser) -> TaskAssignment | None:
    """The annotator's open extraction, or the next one; refused until they qualify."""
    if not annotator_qualified(annotator):
        raise WorkflowError(NOT_QUALIFIED)
    return review_take(kind=TaskKind.EXTRACT, annotator=annotator)


@transaction.atomic
def extraction_submit(
    *,
    assignment_id: int,
    annotator: AbstractBaseUser,
    spans: Any,
    no_key_note: bool = False,
) -> Construction:
    """Store the key note and send the construction on to paraphrasing (or drop it).

    One transaction: the annotator's slot and the construction are locked, the spans
    validated, ``key_spans`` and ``key_note`` set with the annotator as their author,
    the slot submitted and the construction advanced. Anything refused writes
    nothing; a second submit of the same slot is refused as already submitted.
    """
    assignment, construction = review_slot_lock(
        assignment_id=assignment_id, annotator=annotator, kind=TaskKind.EXTRACT
    )
    if not annotator_qualified(annotator):
        raise WorkflowError(NOT_QUALIFIED)
    text = construction.note.note_text
    if no_key_note:
        if spans:
            raise WorkflowError(
                "spans: either select fragments or mark that the note states nothing "
                "about this dimension, not both"
            )
        assignment_submit(assignment, {"spans": [], "key_note": "", "no_key_note": True})
        return construction_advance(construction, Stage.DROPPED, user=annotator)
    clean = spans_clean(text, spans)
    key_note = key_note_text(text, clean)
    field_set(construction, "key_spans", clean, user=annotator, action="extracted")
    field_set(construction, "key_note", key_note, user=annotator, action="extracted")
    assignment_submit(assignment, {"spans": clean, "key_note": key_note, "no_key_note": False})
    return construction_advance(construction, Stage.PARAPHRASE, user=annotator)
