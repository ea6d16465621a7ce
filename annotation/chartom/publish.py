"""Stage 9: a reviewed construction enters the item bank as a CharToM-QA item.

The record is built in the CharToM-QA JSONL format and handed to
:func:`benchmarks.services.qa_item_publish`, which checks it with the importer's own
rules; so a published item exports with ``export_benchmark chartom-qa`` and reads back
with ``import_benchmark chartom-qa`` unchanged.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from benchmarks.importers import ImportDataError
from benchmarks.models import QAItem
from benchmarks.services import qa_item_publish

from .llm_steps import batch_run_settle
from .models import Construction, Stage
from .workflow import WorkflowError, construction_advance, field_set


def construction_record(construction: Construction) -> dict[str, Any]:
    """The construction as one CharToM-QA JSONL record (the release's field order)."""
    note = construction.note
    return {
        "book_name": note.book.title,
        "tom_dimension": construction.dimension,
        "target_character": note.target_character,
        "context_0": note.context_0 or None,
        "context_1000": note.context_1000,
        "context_2000": note.context_2000,
        "question": construction.question,
        "answer": construction.description,
        "bonus_points": list(construction.bonus_points),
        "misleading_choices": list(construction.distractors),
    }


def construction_publish(construction: Construction, *, user: AbstractBaseUser | None) -> QAItem:
    """Publish ``construction`` as a CharToM-QA item and move it to ``published``.

    Called inside a transaction with the construction row locked (the distractor
    review's submit). A construction already published returns its item: a replayed
    submit never makes a second one. Bad content (no question, not exactly three
    distractors, ...) raises :class:`WorkflowError` naming the field; nothing is written.
    """
    if construction.stage in (Stage.DROPPED, Stage.PUBLISHED):
        if construction.qa_item_id is not None:
            return construction.qa_item
        raise WorkflowError(f"construction {construction.pk} is {construction.stage}")
    # Published before and sent back for new distractors: the same item is revised.
    revise = construction.qa_item_id is not None
    try:
        item = qa_item_publish(construction_record(construction), revise=revise)
    except ImportDataError as exc:
        field = {"answer": "description", "misleading_choices": "distractors"}.get(
            exc.field or "", exc.field
        )
        raise WorkflowError(
            f"construction {construction.pk} cannot be published: "
            f"{field or 'record'}: {exc.message}"
        ) from None
    # Provenance holds JSON values: the item's id, not the row.
    field_set(
        construction,
        "qa_item_id",
        item.pk,
        user=user,
        action="revised" if revise else "published",
    )
    construction_advance(construction, Stage.PUBLISHED, user=user)
    # The batch's LLM run ends with its last construction.
    batch_run_settle(batch_id=construction.note.batch_id)
    return item
