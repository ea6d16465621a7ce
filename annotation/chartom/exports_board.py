"""Exports of a note batch for researchers: constructions with provenance, JSON and CSV.

The JSON holds each construction with its whole history. The CSVs are flat: one row per
construction (list values as JSON text), and one row per field change. Every CSV cell
goes through :mod:`common.csv_safe`, since notes are text written by the public.
"""

from __future__ import annotations

import io
import json
from typing import Any

from django.db.models import Prefetch

from common.csv_safe import csv_writer

from .board import change_author
from .models import Construction, FieldChange, NoteBatch

CONSTRUCTION_COLUMNS = (
    "construction_id",
    "note_position",
    "book",
    "target_character",
    "dimension",
    "stage",
    "state",
    "error",
    "filter_verdict",
    "filter_reason",
    "key_spans",
    "key_note",
    "description",
    "question",
    "bonus_points",
    "misleadings",
    "distractors",
    "qa_item_id",
    "changes",
)
PROVENANCE_COLUMNS = (
    "construction_id",
    "note_position",
    "dimension",
    "field",
    "old_value",
    "new_value",
    "author",
    "changed_by",
    "model",
    "template",
    "call_id",
    "action",
    "changed_at",
)
LIST_FIELDS = {"key_spans", "bonus_points", "misleadings", "distractors"}


def _constructions(batch: NoteBatch) -> list[Construction]:
    changes = FieldChange.objects.select_related("changed_by").order_by("changed_at", "pk")
    return list(
        Construction.objects.filter(note__batch=batch)
        .select_related("note", "note__book")
        .prefetch_related(Prefetch("changes", queryset=changes))
        .order_by("note__position", "dimension")
    )


def _change_record(change: FieldChange) -> dict[str, Any]:
    return {
        "field": change.field,
        "old_value": change.old_value,
        "new_value": change.new_value,
        "author": change_author(change),
        "changed_by": change.changed_by.get_username() if change.changed_by else None,
        "model": change.model,
        "template": change.template,
        "call_id": change.call_id,
        "action": change.action,
        "changed_at": change.changed_at.isoformat(),
    }


def _construction_record(construction: Construction) -> dict[str, Any]:
    note = construction.note
    return {
        "construction_id": construction.pk,
        "note_position": note.position,
        "book": note.book.title,
        "target_character": note.target_character,
        "dimension": construction.dimension,
        "stage": construction.stage,
        "state": construction.state,
        "error": construction.error,
        "filter_verdict": construction.filter_verdict,
        "filter_reason": construction.filter_reason,
        "key_spans": construction.key_spans,
        "key_note": construction.key_note,
        "description": construction.description,
        "question": construction.question,
        "bonus_points": construction.bonus_points,
        "misleadings": construction.misleadings,
        "distractors": construction.distractors,
        "qa_item_id": construction.qa_item_id,
    }


def batch_export_json(batch: NoteBatch) -> dict[str, Any]:
    """The batch, its settings and every construction with its provenance, oldest first."""
    return {
        "batch": {
            "id": batch.pk,
            "name": batch.name,
            "source_name": batch.source_name,
            "backend": batch.backend.name if batch.backend_id else None,
            "model": batch.model,
            "params": batch.params,
            "budget_tokens": batch.budget_tokens,
            "run_id": batch.run_id,
            "window_tokenizer": batch.window_tokenizer,
            "created_at": batch.created_at.isoformat(),
        },
        "constructions": [
            {
                **_construction_record(c),
                "provenance": [_change_record(change) for change in c.changes.all()],
            }
            for c in _constructions(batch)
        ],
    }


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (list, dict, bool)):
        return json.dumps(value, ensure_ascii=False)
    return value


def constructions_csv(batch: NoteBatch) -> str:
    """One row per construction; list fields as JSON text; ``changes`` counts its history."""
    out = io.StringIO()
    writer = csv_writer(out, lineterminator="\n")
    writer.writerow(CONSTRUCTION_COLUMNS)
    for construction in _constructions(batch):
        record = _construction_record(construction)
        record["changes"] = len(construction.changes.all())
        writer.writerow(_cell(record[column]) for column in CONSTRUCTION_COLUMNS)
    return out.getvalue()


def provenance_csv(batch: NoteBatch) -> str:
    """One row per field change; old and new values as JSON text."""
    out = io.StringIO()
    writer = csv_writer(out, lineterminator="\n")
    writer.writerow(PROVENANCE_COLUMNS)
    for construction in _constructions(batch):
        for change in construction.changes.all():
            record = _change_record(change)
            record["construction_id"] = construction.pk
            record["note_position"] = construction.note.position
            record["dimension"] = construction.dimension
            record["old_value"] = json.dumps(change.old_value, ensure_ascii=False)
            record["new_value"] = json.dumps(change.new_value, ensure_ascii=False)
            writer.writerow(_cell(record[column]) for column in PROVENANCE_COLUMNS)
    return out.getvalue()
