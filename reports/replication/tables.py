"""The CSV tables of a replication package: columns, Frictionless types, writing, reading.

One definition serves the writer, the Table Schemas in ``datapackage.json`` and the
reader, so the three cannot drift apart. Cells: "" is null; booleans ``True``/``False``;
times ISO 8601 with their offset; lists and objects JSON (Frictionless reads ``array``
and ``object`` fields that way); money as decimal text (a ``string``: a float would
round it).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any

from common.csv_safe import read_with_field_limit

# table -> [(column, Frictionless type)]; the first column is the row's package id
# where other tables refer to it.
TABLES: dict[str, list[tuple[str, str]]] = {
    "items": [
        ("item", "string"),
        ("kind", "string"),
        ("benchmark", "string"),
        ("work", "string"),
        ("key", "string"),
        ("code", "string"),
        ("field", "string"),
        ("sha256", "string"),
    ],
    "study_works": [
        ("benchmark", "string"),
        ("work", "string"),
        ("position", "integer"),
        ("name_map", "object"),
    ],
    "text_versions": [
        ("kind", "string"),
        ("version", "integer"),
        ("content", "string"),
        ("created_at", "datetime"),
    ],
    "study_items": [
        ("study_item", "string"),
        ("benchmark", "string"),
        ("work", "string"),
        ("item", "string"),
        ("kind", "string"),
        ("position", "integer"),
        ("role", "string"),
        ("held_back", "boolean"),
        ("question_items", "array"),
        ("leaks", "array"),
        # A check the researcher wrote (kind "instructed", no item): its question,
        # options and the option to pick; blank on every other row.
        ("instructed", "object"),
    ],
    "participants": [
        ("participant", "string"),
        ("status", "string"),
        ("created_at", "datetime"),
        ("consented_at", "datetime"),
        ("consented_version", "integer"),
        ("refused_at", "datetime"),
        ("withdrawn_at", "datetime"),
        ("finished_at", "datetime"),
        ("data_withdrawn_at", "datetime"),
        ("no_work_at", "datetime"),
        ("no_work_reason", "string"),
        ("exit_version", "integer"),
        ("exit_done_at", "datetime"),
        ("exit_answers", "object"),
        ("excluded_at", "datetime"),
        ("exclusion_source", "string"),
        ("exclusion_reason", "string"),
        ("exclusion_override", "string"),
        ("exclusion_override_reason", "string"),
        ("via_public_link", "boolean"),
        ("sitting_start", "integer"),
        ("released_count", "integer"),
        ("platform_participant", "string"),
        ("platform_study", "string"),
        ("platform_session", "string"),
    ],
    "familiarities": [
        ("participant", "string"),
        ("benchmark", "string"),
        ("work", "string"),
        ("seen", "boolean"),
        ("declared_at", "datetime"),
    ],
    "sessions": [
        ("session", "string"),
        ("participant", "string"),
        ("benchmark", "string"),
        ("work", "string"),
        ("seen", "boolean"),
        ("seed", "integer"),
        ("history_confirmed_at", "datetime"),
        ("history_views", "integer"),
        ("started_at", "datetime"),
        ("finished_at", "datetime"),
    ],
    "assignments": [
        ("assignment", "string"),
        ("participant", "string"),
        ("session", "string"),
        ("study_item", "string"),
        ("position", "integer"),
        ("seen", "boolean"),
        ("option_seed", "integer"),
        ("status", "string"),
        ("history_needed", "boolean"),
        ("confidence", "integer"),
        ("first_shown_at", "datetime"),
        ("last_event_at", "datetime"),
        ("active_ms", "integer"),
        ("total_ms", "integer"),
        ("submitted_at", "datetime"),
        ("version", "object"),
        ("assigned_at", "datetime"),
    ],
    "guesses": [
        ("assignment", "string"),
        ("item", "string"),
        ("answer", "string"),
        ("cant_tell", "boolean"),
        ("correct", "boolean"),
        ("tags", "array"),
        ("evidence", "string"),
        ("updated_at", "datetime"),
    ],
    "choices": [
        ("assignment", "string"),
        ("item", "string"),
        ("round", "integer"),
        ("option", "integer"),
        ("shown", "integer"),
        ("kept", "boolean"),
        ("shown_at", "datetime"),
        ("answered_at", "datetime"),
        ("ms", "integer"),
        ("correct", "boolean"),
    ],
    "templates": [
        ("template", "string"),
        ("name", "string"),
        ("version", "integer"),
        ("benchmark", "string"),
        ("method", "string"),
        ("system", "string"),
        ("user", "string"),
        ("fields", "array"),
        ("output_format", "string"),
        ("notes", "string"),
    ],
    "runs": [
        ("run", "string"),
        ("name", "string"),
        ("kind", "string"),
        ("benchmark", "string"),
        ("method", "string"),
        ("backend_kind", "string"),
        ("model", "string"),
        ("template", "string"),
        ("params", "object"),
        ("selection", "object"),
        ("imported", "boolean"),
        ("status", "string"),
        ("total_calls", "integer"),
        ("done_calls", "integer"),
        ("error_calls", "integer"),
        ("prompt_tokens", "integer"),
        ("completion_tokens", "integer"),
        ("cost", "string"),
        ("budget_tokens", "integer"),
        ("budget_cost", "string"),
        ("error", "string"),
        ("metrics", "array"),
        ("created_at", "datetime"),
        ("started_at", "datetime"),
        ("finished_at", "datetime"),
    ],
    "calls": [
        ("call", "string"),
        ("run", "string"),
        ("unit_key", "string"),
        ("sample_index", "integer"),
        ("status", "string"),
        ("cache_key", "string"),
        ("from_cache", "boolean"),
        ("raw_output", "string"),
        ("finish_reason", "string"),
        ("prompt_tokens", "integer"),
        ("completion_tokens", "integer"),
        ("cost", "string"),
        ("latency_ms", "integer"),
        ("error", "string"),
        ("finished_at", "datetime"),
    ],
    "predictions": [
        ("run", "string"),
        ("call", "string"),
        ("sample_index", "integer"),
        ("item", "string"),
        ("raw_output", "string"),
        ("parsed_answer", "string"),
        ("parse_status", "string"),
        ("correct", "boolean"),
        ("details", "object"),
        ("template_version", "string"),
        ("model", "string"),
        ("params", "object"),
        ("prompt_tokens", "integer"),
        ("completion_tokens", "integer"),
        ("latency_ms", "integer"),
        ("created_at", "datetime"),
    ],
}


def cell(value: Any) -> str:
    """A value as CSV text (see the module docstring)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def csv_bytes(columns: list[str], rows: Iterable[dict[str, Any]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([cell(row.get(c)) for c in columns])
    return buffer.getvalue().encode("utf-8")


def table_bytes(name: str, rows: Iterable[dict[str, Any]]) -> bytes:
    return csv_bytes([c for c, _ in TABLES[name]], rows)


def schema(columns: list[tuple[str, str]]) -> dict[str, Any]:
    """The Table Schema of a table (every column nullable: "" is null)."""
    return {"fields": [{"name": c, "type": t} for c, t in columns], "missingValues": [""]}


class TableError(ValueError):
    """A table's cell cannot be read as its type (names table, row and column)."""


def _parse(kind: str, text: str) -> Any:
    if text == "":
        return None
    if kind == "integer":
        return int(text)
    if kind == "boolean":
        if text not in ("True", "False"):
            raise ValueError(f"expected True or False, got {text!r}")
        return text == "True"
    if kind == "datetime":
        return datetime.fromisoformat(text)
    if kind in ("object", "array"):
        value = json.loads(text)
        expected = dict if kind == "object" else list
        if not isinstance(value, expected):
            raise ValueError(f"expected a JSON {kind}")
        return value
    return text


# A model's raw reply or a stage's dialogue can pass the csv module's default cell limit
# (131,072 characters); the package's own size limit bounds the whole file instead.
CELL_LIMIT = 64 * 1024 * 1024


# Columns added after packages were first written: an older package's table lacks them,
# and reads them as blank.
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {"study_items": ("instructed",)}


def table_read(name: str, data: bytes) -> list[dict[str, Any]]:
    """The rows of a package table, typed; "" string cells stay "" (never None)."""
    return read_with_field_limit(CELL_LIMIT, lambda: list(_table_rows(name, data)))


def _table_rows(name: str, data: bytes) -> Iterator[dict[str, Any]]:
    columns = dict(TABLES[name])
    reader = csv.DictReader(io.StringIO(data.decode("utf-8")))
    later = ADDED_COLUMNS.get(name, ())
    missing = [c for c in columns if c not in (reader.fieldnames or []) and c not in later]
    if missing:
        raise TableError(f"{name}.csv lacks the column(s) {', '.join(missing)}")
    for number, raw in enumerate(reader, start=2):
        row: dict[str, Any] = {}
        for column, kind in columns.items():
            text = raw.get(column) or ""  # a column added later: blank in older packages
            try:
                row[column] = text if kind == "string" else _parse(kind, text)
            except (ValueError, json.JSONDecodeError, csv.Error) as exc:
                raise TableError(f"{name}.csv line {number}, column {column!r}: {exc}") from None
        yield row


def decimal_or_zero(text: str) -> Decimal:
    return Decimal(text) if text else Decimal(0)
