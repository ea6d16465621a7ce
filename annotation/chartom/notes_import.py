"""Stage 1: import reader notes (CSV or JSONL) into a note batch of constructions.

Each record names a book (already imported, see :mod:`annotation.chartom.books`), the
target character, the underlined text, its surrounding context and the note. An
optional note-author id is stored only as a keyed hash. Every note gets its plot
windows and one :class:`Construction` per ToM dimension, queued for the LLM filter.

Column names are read loosely (case, spaces, dashes and a few synonyms); unknown
columns are warned about. Any bad record stops the import with a
:class:`NotesImportError` naming the file, the record and the field, and nothing is
written.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from benchmarks.books import PlotTokenizer, plot_tokenizer, plot_windows
from benchmarks.importers.base import ImportDataError, field_size_check
from benchmarks.models import ToMDimension
from modeling.models import Backend

from .models import LLM_STAGES, BookText, Construction, NoteBatch, ReaderNote, Stage
from .workflow import WorkflowError, step_enqueue

logger = logging.getLogger(__name__)

NOTES_MAX_BYTES = 50 * 1024 * 1024  # override: TOMLAB_IMPORT_MAX_BYTES="chartom-notes=..."
AUTHOR_SALT = "tomlab.chartom.note-author"
# Our field -> the column names (normalised) that mean it.
COLUMNS: dict[str, tuple[str, ...]] = {
    "book": ("book", "book_name", "title", "book_title", "novel"),
    "target_character": ("target_character", "character", "target", "character_name"),
    "underlined_text": (
        "underlined_text",
        "underlined",
        "highlight",
        "highlighted_text",
        "highlighted",
        "fragment",
    ),
    "context": ("context", "surrounding_context", "surrounding_text", "context_0"),
    "note_text": ("note", "note_text", "user_note", "notes", "comment"),
    "author": ("author", "author_id", "note_author", "note_author_id", "user_id", "reader"),
}
REQUIRED = ("book", "target_character", "underlined_text", "context", "note_text")
SYNONYMS = {name: ours for ours, names in COLUMNS.items() for name in names}
NAME_MAX = ReaderNote._meta.get_field("target_character").max_length


class NotesImportError(ValueError):
    """Bad notes input: the message names the file, the record and the field."""

    def __init__(
        self, message: str, *, path: Path | str, record: str | None = None, field: str | None = None
    ) -> None:
        where = [str(path)]
        if record:
            where.append(f"record {record}")
        if field:
            where.append(f"field {field!r}")
        super().__init__(f"{': '.join(where)}: {message}")


@dataclass
class ParsedNote:
    record: str
    position: int
    values: dict[str, str]
    book_id: int = 0
    windows: dict[str, Any] = field(default_factory=dict)


def column_key(name: str) -> str:
    """``"Target Character"``, ``"target-character"`` -> ``"target_character"``."""
    return re.sub(r"[\s\-]+", "_", str(name).strip().lstrip("\ufeff").lower())


def author_hash(author_id: str) -> str:
    """A keyed hash of a note author's id (HMAC-SHA256, key derived from SECRET_KEY).

    The same id always gives the same hash, so notes by one reader can be told apart
    (e.g. a reader is not asked to check their own note) without storing who it is.
    """
    return salted_hmac(AUTHOR_SALT, author_id.strip(), algorithm="sha256").hexdigest()


def _max_bytes() -> int:
    limits: dict[str, int] = getattr(settings, "TOMLAB_IMPORT_MAX_BYTES", {})
    return int(limits.get("chartom-notes", NOTES_MAX_BYTES))


def _read(path: Path) -> str:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise NotesImportError("file not found", path=path) from None
    except OSError as exc:
        raise NotesImportError(f"cannot read file: {exc.strerror or exc}", path=path) from None
    if size > _max_bytes():
        raise NotesImportError(
            f"file is {size:,} bytes, over the {_max_bytes():,}-byte limit for note files "
            "(settings.TOMLAB_IMPORT_MAX_BYTES['chartom-notes'])",
            path=path,
        )
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotesImportError(f"not UTF-8 text (byte {exc.start})", path=path) from None


def _is_jsonl(path: Path, text: str) -> bool:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return True
    if suffix in (".csv", ".tsv", ".txt"):
        return False
    return text.lstrip().startswith("{")


def _jsonl_records(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        record = f"line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise NotesImportError(
                f"malformed JSON: {exc.msg} (column {exc.colno})", path=path, record=record
            ) from None
        if not isinstance(data, dict):
            raise NotesImportError(
                f"expected a JSON object, got {type(data).__name__}", path=path, record=record
            )
        yield record, data


def _delimiter(header: str) -> str:
    # The header has no quoted commas in practice; the most frequent candidate wins.
    counts = {d: header.count(d) for d in (",", "\t", ";")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def _csv_records(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    header_line = text.lstrip("\r\n").split("\n", 1)[0]
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(header_line))
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        raise NotesImportError(f"malformed CSV header: {exc}", path=path, record="header") from None
    row_number = 0
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise NotesImportError(
                f"malformed CSV: {exc}", path=path, record=f"line {start}"
            ) from None
        if not any(cell.strip() for cell in row):
            continue
        row_number += 1
        record = f"row {row_number} (line {start})"
        if len(row) > len(header):
            raise NotesImportError(
                f"{len(row)} cells for {len(header)} columns (a stray delimiter or quote?)",
                path=path,
                record=record,
            )
        yield record, dict(zip(header, row, strict=False))


class _Books:
    """Books by title, case-insensitive; a title may leave out the book's " by Author"."""

    def __init__(self) -> None:
        self.titles = dict(BookText.objects.values_list("title", "pk"))
        self.folded = {title.casefold(): pk for title, pk in self.titles.items()}

    def find(self, name: str) -> int | None:
        key = " ".join(name.split()).casefold()
        if key in self.folded:
            return self.folded[key]
        matches = [pk for title, pk in self.folded.items() if title.startswith(f"{key} by ")]
        return matches[0] if len(matches) == 1 else None

    def known(self) -> str:
        return ", ".join(repr(t) for t in sorted(self.titles)) or "none"


def _parse(path: Path, text: str, warnings: list[str]) -> list[ParsedNote]:
    records = _jsonl_records(path, text) if _is_jsonl(path, text) else _csv_records(path, text)
    books = _Books()
    notes: list[ParsedNote] = []
    warned: set[str] = set()
    for position, (record, data) in enumerate(records, start=1):
        values: dict[str, str] = {}
        source: dict[str, str] = {}
        for name, value in data.items():
            ours = SYNONYMS.get(column_key(name))
            if ours is None:
                if name not in warned:
                    warned.add(name)
                    warnings.append(
                        f"{path.name}: record {record}: unknown column {name!r} ignored"
                    )
                continue
            if ours in source:
                raise NotesImportError(
                    f"both {source[ours]!r} and {name!r} give the {ours}",
                    path=path,
                    record=record,
                    field=name,
                )
            source[ours] = name
            if value is None:
                continue
            if isinstance(value, (int, float)) and ours == "author":
                value = str(value)
            if not isinstance(value, str):
                raise NotesImportError(
                    f"expected text, got {type(value).__name__}",
                    path=path,
                    record=record,
                    field=name,
                )
            try:
                field_size_check(value, path=path, record=record, field=name)
            except ImportDataError as exc:
                raise NotesImportError(exc.message, path=path, record=record, field=name) from None
            values[ours] = value.strip()
        for ours in REQUIRED:
            if not values.get(ours):
                name = source.get(ours, ours)
                raise NotesImportError(
                    "missing" if ours not in source else "empty",
                    path=path,
                    record=record,
                    field=name,
                )
        if len(values["target_character"]) > NAME_MAX:
            raise NotesImportError(
                f"longer than {NAME_MAX} characters",
                path=path,
                record=record,
                field=source["target_character"],
            )
        book_id = books.find(values["book"])
        if book_id is None:
            raise NotesImportError(
                f"no imported book titled {values['book']!r} (import it with "
                f"chartom_import_books; known: {books.known()})",
                path=path,
                record=record,
                field=source["book"],
            )
        notes.append(ParsedNote(record=record, position=position, values=values, book_id=book_id))
    if not notes:
        raise NotesImportError("no notes in the file", path=path)
    return notes


def _windows(
    notes: list[ParsedNote], tokenizer: PlotTokenizer, path: Path, warnings: list[str]
) -> None:
    for book_id in sorted({note.book_id for note in notes}):
        # One book's text at a time: Monte Cristo alone is 2.7 MB.
        book = BookText.objects.only("title", "text").get(pk=book_id)
        for note in (n for n in notes if n.book_id == book_id):
            note.windows = plot_windows(
                book.text,
                note.values["underlined_text"],
                note.values["context"],
                tokenizer=tokenizer,
            )
            for warning in note.windows.pop("warnings"):
                warnings.append(
                    f"{path.name}: record {note.record}: {warning} ({book.title!r})"
                    + ("; no 1k/2k windows" if note.windows["book_offset"] is None else "")
                )


@transaction.atomic
def note_batch_import(
    *,
    path: Path,
    name: str = "",
    backend: Backend | None = None,
    model: str = "",
    params: dict[str, Any] | None = None,
    budget_tokens: int | None = None,
    created_by: AbstractBaseUser | None = None,
    enqueue: bool = True,
) -> NoteBatch:
    """Import a CSV or JSONL file of reader notes as a new note batch.

    Creates the :class:`NoteBatch` (with the LLM settings its steps run with and the
    window tokenizer's name), one :class:`ReaderNote` per record with its plot windows,
    and one :class:`Construction` per note and ToM dimension at the filter stage; with
    ``enqueue`` their LLM steps are queued once the transaction commits. Raises
    :class:`NotesImportError`; nothing is written then. Warnings (unknown columns,
    underlined text not found in the book) are logged and kept on the returned batch
    as ``import_warnings``.
    """
    path = Path(path)
    if enqueue and backend is None:
        raise NotesImportError(
            "an LLM backend is needed to queue the filter steps (or import without queueing)",
            path=path,
        )
    warnings: list[str] = []
    notes = _parse(path, _read(path), warnings)
    tokenizer = plot_tokenizer()
    _windows(notes, tokenizer, path, warnings)
    batch = NoteBatch.objects.create(
        name=(name or path.stem)[: NoteBatch._meta.get_field("name").max_length],
        source_name=path.name,
        backend=backend,
        model=model,
        params=params or {},
        budget_tokens=budget_tokens,
        window_tokenizer=tokenizer.name[:255],
        created_by=created_by,
    )
    reader_notes = ReaderNote.objects.bulk_create(
        ReaderNote(
            batch=batch,
            position=note.position,
            book_id=note.book_id,
            target_character=note.values["target_character"],
            underlined_text=note.values["underlined_text"],
            context=note.values["context"],
            note_text=note.values["note_text"],
            author_hash=author_hash(note.values["author"]) if note.values.get("author") else "",
            book_offset=note.windows["book_offset"],
            context_0=note.windows["context_0"],
            context_1000=note.windows["context_1000"],
            context_2000=note.windows["context_2000"],
        )
        for note in notes
    )
    constructions = Construction.objects.bulk_create(
        Construction(
            note=reader_note,
            dimension=dimension,
            stage=Stage.FILTER,
            state=Construction.State.QUEUED,
        )
        for reader_note in reader_notes
        for dimension in ToMDimension.values
    )
    if enqueue:
        for construction in constructions:
            step_enqueue(construction.pk)
    for warning in warnings:
        logger.warning("%s", warning)
    batch.import_warnings = warnings  # type: ignore[attr-defined]
    return batch


def note_batch_start(
    *,
    batch_id: int,
    backend: Backend,
    model: str = "",
    budget_tokens: int | None = None,
) -> int:
    """Give a batch imported without a backend (the demo, ``--no-enqueue``) its LLM.

    Queues every construction waiting at an LLM stage, and every one whose step
    failed meanwhile (a worker took it while the batch had no backend: its reason,
    "has no LLM backend", is stale now and is cleared); returns how many. A batch that
    already has a backend is refused: its failed steps are retried one by one instead,
    so the calls already paid for stay with the run that paid for them.
    """
    with transaction.atomic():
        batch = NoteBatch.objects.select_for_update().get(pk=batch_id)
        if batch.backend_id is not None:
            raise WorkflowError(
                f"note batch {batch.name!r} already runs on backend {batch.backend.name}; "
                "to send failed or stalled steps again, use Retry all on the batch's page"
            )
        model = model or backend.default_model or backend.model_path
        if not model:
            raise WorkflowError(f"backend {backend.name} has no default model; give a model")
        batch.backend, batch.model, batch.budget_tokens = backend, model, budget_tokens
        batch.save(update_fields=["backend", "model", "budget_tokens"])
        steps = Construction.objects.filter(
            note__batch=batch,
            stage__in=LLM_STAGES,
            state__in=[Construction.State.QUEUED, Construction.State.NEEDS_RETRY],
        )
        waiting = list(steps.select_for_update(of=("self",)).values_list("pk", flat=True))
        Construction.objects.filter(pk__in=waiting).update(
            state=Construction.State.QUEUED, error="", updated_at=timezone.now()
        )
        for construction_id in waiting:
            step_enqueue(construction_id)
    return len(waiting)
