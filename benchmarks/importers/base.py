"""What every importer shares: the error type, the report, and a bulk upsert.

An importer parses and validates a whole source first, then writes it with
:func:`upsert` inside the one transaction :func:`benchmarks.services.benchmark_import`
opens, so a bad record anywhere leaves the database as it was.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


class ImportDataError(Exception):
    """Bad input, located: file, record (line, row or key) and field."""

    def __init__(
        self,
        message: str,
        *,
        path: Path | str,
        record: str | int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path)
        self.record = record
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = [self.path]
        if self.record is not None:
            where.append(f"record {self.record}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return f"{': '.join(where)}: {self.message}"


@dataclass
class ImportReport:
    """Counts per model and warnings (unknown fields, unmatched rows)."""

    created: Counter = field(default_factory=Counter)
    updated: Counter = field(default_factory=Counter)
    unchanged: Counter = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def summary_lines(self) -> list[str]:
        names = sorted(set(self.created) | set(self.updated) | set(self.unchanged))
        return [
            f"{name}: {self.created[name]} created, {self.unchanged[name]} unchanged, "
            f"{self.updated[name]} updated"
            for name in names
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "created": dict(self.created),
            "updated": dict(self.updated),
            "unchanged": dict(self.unchanged),
            "warnings": list(self.warnings),
        }


ProgressCallback = Callable[[int], None]


def input_size_check(path: Path | str, *, limit: str) -> int:
    """Refuse a file over ``settings.TOMLAB_IMPORT_MAX_BYTES[limit]`` before reading it.

    Called before any parsing, so a huge file costs one ``stat``, not minutes of
    parsing and gigabytes of memory. ``limit`` names the entry (a format, or a file
    kind within one: ``"dyntom-story"``). Returns the file's size in bytes.
    """
    path = Path(path)
    limits: dict[str, int] = settings.TOMLAB_IMPORT_MAX_BYTES
    if limit not in limits:
        # A programming error (a typo in an importer), not bad input.
        raise KeyError(f"no TOMLAB_IMPORT_MAX_BYTES entry {limit!r}; have {sorted(limits)}")
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ImportDataError("file not found", path=path) from None
    except OSError as exc:
        raise ImportDataError(f"cannot read file: {exc}", path=path) from None
    if size > limits[limit]:
        raise ImportDataError(
            f"file is {size:,} bytes, over the {limits[limit]:,}-byte limit for {limit} "
            f"files (settings.TOMLAB_IMPORT_MAX_BYTES[{limit!r}])",
            path=path,
        )
    return size


def _stored_size_over(value: Any, limit: int) -> int | None:
    """The stored size of ``value`` in bytes (UTF-8 text or JSON) if over ``limit``."""
    if isinstance(value, str):
        # len() is free and a UTF-8 character takes 1-4 bytes: encode only when needed.
        if len(value) * 4 <= limit:
            return None
        size = len(value) if len(value) > limit else len(value.encode("utf-8"))
    elif isinstance(value, (dict, list)):
        # json.dumps with its defaults runs the cached C encoder, and with ASCII escapes
        # ("\u00e9" for a 2-byte "é") its length bounds the UTF-8 size from above: the
        # exact size is worked out only for a value that may be over.
        if len(json.dumps(value)) <= limit:
            return None
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    else:
        return None
    return size if size > limit else None


def field_size_check(value: Any, *, path: Path | str, record: str | int | None, field: str) -> None:
    """Refuse one stored text or JSON value over ``settings.TOMLAB_IMPORT_MAX_FIELD_BYTES``.

    Every importer passes through here (from :func:`report_unknown_fields` for
    ``extra`` and from :func:`upsert` for every stored value), so no record can put
    an unbounded value in the database and, through it, in an API response. We
    refuse rather than drop: an import is atomic, and silently losing data that the
    exporter must write back would break the round trip.
    """
    limit: int = settings.TOMLAB_IMPORT_MAX_FIELD_BYTES
    size = _stored_size_over(value, limit)
    if size is not None:
        raise ImportDataError(
            f"value is {size:,} bytes, over the {limit:,}-byte limit per stored field "
            "(settings.TOMLAB_IMPORT_MAX_FIELD_BYTES)",
            path=path,
            record=record,
            field=field,
        )


def read_json(path: Path, *, limit: str | None = None) -> Any:
    """Load a JSON file, turning OS and syntax errors into located errors.

    With ``limit``, the file's size is checked first (:func:`input_size_check`).
    """
    if limit is not None:
        input_size_check(path, limit=limit)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ImportDataError("file not found", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportDataError(f"cannot read file: {exc}", path=path) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportDataError(
            f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            path=path,
            record=f"line {exc.lineno}",
        ) from None
    except RecursionError:
        raise ImportDataError(f"nested deeper than {MAX_JSON_DEPTH} levels", path=path) from None
    json_value_check(value, path=path)
    return value


# Deeper than any benchmark's own files (DynToM's are 6 levels, CharToM-QA's 3).
MAX_JSON_DEPTH = 64


# What a database integer column holds (Django's BigIntegerField).
INT64 = (-(2**63), 2**63 - 1)


def json_value_check(
    value: Any, *, path: Path | str, record: str | None = None, int64: bool = False
) -> None:
    """Refuse, naming where, what the database cannot store or the parsers should not
    walk: nesting deeper than ``MAX_JSON_DEPTH`` levels, a NUL character in a string and,
    with ``int64``, a whole number outside 64 bits."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ImportDataError(
                f"nested deeper than {MAX_JSON_DEPTH} levels", path=path, record=record
            )
        if isinstance(item, dict):
            for key, child in item.items():
                stack.append((child, f"{where}.{key}" if where else str(key), depth + 1))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))
        elif isinstance(item, str) and "\x00" in item:
            raise ImportDataError(
                "holds a NUL character", path=path, record=record, field=where or None
            )
        elif (
            int64
            and isinstance(item, int)
            and not isinstance(item, bool)
            and not INT64[0] <= item <= INT64[1]
        ):
            raise ImportDataError(
                f"{item} is out of range", path=path, record=record, field=where or None
            )


def report_unknown_fields(
    report: ImportReport,
    data: dict[str, Any],
    known: Iterable[str],
    *,
    path: Path | str,
    record: str | int,
) -> dict[str, Any]:
    """Return the fields of ``data`` not in ``known`` and warn about them once each."""
    known_set = set(known)
    extra = {k: v for k, v in data.items() if k not in known_set}
    for name, value in extra.items():
        field_size_check(value, path=path, record=record, field=name)
    if extra:
        report.warn(f"{path}: record {record}: kept unknown field(s) {sorted(extra)} in 'extra'")
    return extra


def _comparable(value: Any) -> Any:
    # jsonb reorders keys and may hand back ints where we hold bools etc.; compare
    # through a canonical JSON dump so "unchanged" means the same data, not the same
    # Python object shape.
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


def upsert(
    model: type[models.Model],
    rows: Sequence[dict[str, Any]],
    *,
    key_fields: Sequence[str],
    scope: dict[str, Any],
    report: ImportReport,
    batch_size: int = 1000,
    source: Path | str | None = None,
) -> dict[tuple, int]:
    """Insert new rows, update changed ones, leave equal ones alone; in bulk.

    ``rows`` use attribute names (``work_id``, not ``work``). ``scope`` filters the
    existing rows that may match (e.g. ``{"work_id__in": ids}``); it must cover every
    row's key. Returns natural key -> primary key for every row given. Three queries
    per call (plus batches), whatever the number of rows.

    Every value is checked with :func:`field_size_check` before anything is written;
    the error names ``source`` (the file, else the model) and the row's natural key.
    """
    if not rows:
        return {}
    label = model.__name__
    for row in rows:
        for name, value in row.items():
            if isinstance(value, (str, dict, list)):
                field_size_check(
                    value,
                    path=source or label,
                    record=f"{label} {tuple(row[k] for k in key_fields)}",
                    field=name,
                )
    value_fields = [f for f in rows[0] if f not in key_fields]
    existing = {
        tuple(r[k] for k in key_fields): r
        for r in model.objects.filter(**scope).values("pk", *key_fields, *value_fields)
    }
    to_create: list[models.Model] = []
    to_update: list[models.Model] = []
    seen: set[tuple] = set()
    now = timezone.now()
    for row in rows:
        key = tuple(row[k] for k in key_fields)
        if key in seen:
            raise ValueError(f"{label}: natural key {key} given twice")
        seen.add(key)
        current = existing.get(key)
        if current is None:
            to_create.append(model(**row))
        elif any(_comparable(current[f]) != _comparable(row[f]) for f in value_fields):
            obj = model(pk=current["pk"], **row)
            obj.updated_at = now
            to_update.append(obj)
        else:
            report.unchanged[label] += 1
    created = model.objects.bulk_create(to_create, batch_size=batch_size)
    if to_update:
        model.objects.bulk_update(to_update, [*value_fields, "updated_at"], batch_size=batch_size)
    report.created[label] += len(created)
    report.updated[label] += len(to_update)
    ids = {key: row["pk"] for key, row in existing.items()}
    for obj in created:
        ids[tuple(getattr(obj, k) for k in key_fields)] = obj.pk
    return ids


class BenchmarkImporter:
    """One source format. Subclasses set ``format_name`` and implement ``run``."""

    format_name: str = ""
    help: str = ""
    # True when the importer takes ``books=`` (a folder of novels to cut plot windows from).
    reads_books: bool = False

    def __init__(self, *, split: str = "", progress: ProgressCallback | None = None) -> None:
        self.split = split
        self.progress = progress or (lambda n: None)
        self.report = ImportReport()

    def run(self, path: Path) -> ImportReport:  # pragma: no cover - interface
        raise NotImplementedError
