"""CharToM-QA (HuggingFace release): one JSON object per line.

Fields: ``book_name, tom_dimension, context_0, context_1000, context_2000, question,
answer, bonus_points, misleading_choices`` (3 of them). The paper's published
examples add ``target_character`` (imported as a Character) and
``published_results`` (unknown here, kept in ``extra`` and warned, as is any other
field). An optional ``directness`` ("direct"/"indirect", the paper's manual label
for its human-study subset) fills ``QAItem.directness``.

The published files leave ``context_1000``/``context_2000`` empty. Given a folder of
books (``books``), the importer cuts them as the construction workflow does
(:func:`benchmarks.books.item_plot_windows`): from the folder's book whose Project
Gutenberg title and author match the item's ``book_name``, else from a book already
imported for construction. The report says how many items got windows and why the
others did not.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from ..books import (
    BookReadError,
    BookSource,
    bank_book_sources,
    book_folder_sources,
    book_source_pick,
    item_plot_windows,
    plot_tokenizer,
)
from ..models import Benchmark, Character, QAItem, ToMDimension, Work
from .base import (
    MAX_JSON_DEPTH,
    BenchmarkImporter,
    ImportDataError,
    ImportReport,
    ProgressCallback,
    field_size_check,
    input_size_check,
    json_value_check,
    report_unknown_fields,
    upsert,
)

# The exporter writes this name when given a directory; reading it back from the
# same directory keeps export -> import symmetric.
DEFAULT_FILE_NAME = "chartom_qa.jsonl"

CONTEXT_FIELDS = ("context_0", "context_1000", "context_2000")
KNOWN_FIELDS = (
    "book_name",
    "tom_dimension",
    "target_character",
    *CONTEXT_FIELDS,
    "question",
    "answer",
    "bonus_points",
    "misleading_choices",
    "directness",
)
MISLEADING_CHOICES = 3
NAME_MAX = Character._meta.get_field("name").max_length
KEY_MAX = Work._meta.get_field("key").max_length


def natural_key(book_name: str, target_character: str | None, question: str) -> str:
    """The QAItem key: stable while answers, contexts or choices are edited."""
    raw = "\x1f".join((book_name, target_character or "", question))
    return hashlib.sha1(raw.encode("utf-8")).hexdigest()


@dataclass
class ParsedItem:
    book_name: str
    target_character: str | None
    row: dict[str, Any]
    record: str = ""


@dataclass
class CharToMQAImportReport(ImportReport):
    """The usual counts and warnings, plus what became of the plot windows."""

    notes: list[str] = field(default_factory=list)

    def summary_lines(self) -> list[str]:
        return [*super().summary_lines(), *self.notes]

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "notes": list(self.notes)}


def record_parse(data: Any, *, path: Path | str, record: str, report: ImportReport) -> ParsedItem:
    """Validate one CharToM-QA record (a parsed JSON line, or a record being published).

    The one copy of the format's rules: the JSONL importer and
    :func:`benchmarks.services.qa_item_publish` both call it. Raises
    :class:`ImportDataError` naming ``path``, ``record`` and the field. The returned
    row has no ``position``: that depends on where the record lands.
    """

    def fail(message: str, field: str | None = None) -> NoReturn:
        raise ImportDataError(message, path=path, record=record, field=field)

    def text(name: str, *, nullable: bool = False, max_length: int | None = None) -> Any:
        value = data.get(name)
        if value is None and nullable:
            return None
        if name not in data:
            fail("missing", name)
        if not isinstance(value, str) or not value.strip():
            fail("expected a non-empty string", name)
        if max_length and len(value) > max_length:
            fail(f"longer than {max_length} characters", name)
        return value

    def strings(name: str) -> list[str]:
        value = data.get(name)
        if name not in data:
            fail("missing", name)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            fail("expected a list of strings", name)
        return value

    if not isinstance(data, dict):
        fail(f"expected a JSON object, got {type(data).__name__}")
    # Every field, known or not, before any is used: the error names this record.
    for name, value in data.items():
        field_size_check(value, path=path, record=record, field=name)
    book = text("book_name", max_length=KEY_MAX)
    dimension = text("tom_dimension").strip().lower()
    if dimension not in ToMDimension.values:
        fail(
            f"{data['tom_dimension']!r} is not one of {', '.join(ToMDimension.values)}",
            "tom_dimension",
        )
    # Present means named: a null target would not survive the export unchanged.
    target = text("target_character", max_length=NAME_MAX) if "target_character" in data else None
    contexts = {}
    for name in CONTEXT_FIELDS:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            fail("expected a string or null", name)
        contexts[name] = value
    choices = strings("misleading_choices")
    if len(choices) != MISLEADING_CHOICES:
        fail(f"expected {MISLEADING_CHOICES} choices, got {len(choices)}", "misleading_choices")
    directness = data.get("directness")
    if directness is not None:
        if not isinstance(directness, str) or (
            directness.strip().lower() not in QAItem.Directness.values
        ):
            fail(f"{directness!r} is not one of direct, indirect", "directness")
        directness = directness.strip().lower()
    question = text("question")
    return ParsedItem(
        book_name=book,
        target_character=target,
        row={
            "natural_key": natural_key(book, target, question),
            "dimension": dimension,
            **contexts,
            "question": question,
            "answer": text("answer"),
            "bonus_points": strings("bonus_points"),
            "misleading_choices": choices,
            "directness": directness,
            "extra": report_unknown_fields(report, data, KNOWN_FIELDS, path=path, record=record),
        },
    )


class CharToMQAImporter(BenchmarkImporter):
    """Import a CharToM-QA JSONL file; ``split`` is recorded on the books' works."""

    format_name = Benchmark.CHARTOM_QA
    help = "CharToM-QA JSONL (one question per line)"
    reads_books = True

    def __init__(
        self,
        *,
        split: str = "",
        progress: ProgressCallback | None = None,
        books: Path | None = None,
    ) -> None:
        super().__init__(split=split, progress=progress)
        self.report = CharToMQAImportReport()
        self.books = Path(books) if books is not None else None

    def run(self, path: Path) -> ImportReport:
        if self.books is not None:
            books_folder_check(self.books)
        if path.is_dir():
            path = path / DEFAULT_FILE_NAME
        items = self._parse(path)
        if self.books is not None:
            windows_fill(items, folder=self.books, path=path, report=self.report)
        self._write(items, source=path.name, path=path)
        return self.report

    def _parse(self, path: Path) -> list[ParsedItem]:
        input_size_check(path, limit="chartom-qa")
        try:
            text = path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise ImportDataError("file not found", path=path) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ImportDataError(f"cannot read file: {exc}", path=path) from None
        items: list[ParsedItem] = []
        first_line: dict[str, int] = {}
        positions: dict[str, int] = {}
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            item = self._parse_line(path, number, raw, positions)
            key = item.row["natural_key"]
            if key in first_line:
                raise ImportDataError(
                    f"same book, character and question as line {first_line[key]}",
                    path=path,
                    record=f"line {number}",
                    field="question",
                )
            first_line[key] = number
            items.append(item)
            self.progress(1)
        return items

    def _parse_line(
        self, path: Path, number: int, raw: str, positions: dict[str, int]
    ) -> ParsedItem:
        record = f"line {number}"
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ImportDataError(
                f"malformed JSON: {exc.msg} (column {exc.colno})", path=path, record=record
            ) from None
        except RecursionError:
            raise ImportDataError(
                f"nested deeper than {MAX_JSON_DEPTH} levels", path=path, record=record
            ) from None
        json_value_check(data, path=path, record=record)
        item = record_parse(data, path=path, record=record, report=self.report)
        item.record = record
        position = positions.get(item.book_name, 0)
        positions[item.book_name] = position + 1
        item.row["position"] = position
        return item

    def _write(self, items: list[ParsedItem], *, source: str, path: Path) -> None:
        books = list(dict.fromkeys(item.book_name for item in items))
        work_ids = upsert(
            Work,
            [
                {
                    "benchmark": Benchmark.CHARTOM_QA,
                    "key": book,
                    "title": book,
                    "kind": Work.Kind.BOOK,
                    "split": self.split,
                    "source": source,
                }
                for book in books
            ],
            key_fields=["benchmark", "key"],
            scope={"benchmark": Benchmark.CHARTOM_QA, "key__in": books},
            report=self.report,
            source=path,
        )
        book_work = {book: work_ids[(Benchmark.CHARTOM_QA, book)] for book in books}
        ids = list(book_work.values())
        # Characters in order of first appearance within each book.
        characters = dict.fromkeys(
            (book_work[item.book_name], item.target_character)
            for item in items
            if item.target_character
        )
        positions: dict[int, int] = {}
        character_rows = []
        for work_id, name in characters:
            character_rows.append(
                {
                    "work_id": work_id,
                    "name": name,
                    "position": positions.setdefault(work_id, 0),
                    "is_main": True,
                }
            )
            positions[work_id] += 1
        character_ids = upsert(
            Character,
            character_rows,
            key_fields=["work_id", "name"],
            scope={"work_id__in": ids},
            report=self.report,
            source=path,
        )
        upsert(
            QAItem,
            [
                {
                    "work_id": book_work[item.book_name],
                    "character_id": (
                        character_ids[(book_work[item.book_name], item.target_character)]
                        if item.target_character
                        else None
                    ),
                    **item.row,
                }
                for item in items
            ],
            key_fields=["natural_key"],
            scope={"work_id__in": ids},
            report=self.report,
            source=path,
        )


# -- plot windows from the books ----------------------------------------------------------


def books_folder_check(folder: Path) -> None:
    """Refuse a books folder that is not there, before anything is read or written."""
    try:
        is_dir = folder.is_dir()
        exists = is_dir or folder.exists()
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte
        raise ImportDataError(f"books folder cannot be read: {exc}", path=folder) from None
    if not exists:
        raise ImportDataError("books folder not found", path=folder)
    if not is_dir:
        raise ImportDataError("books: not a folder (give the one holding the books)", path=folder)


def _has_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def windows_fill(
    items: list[ParsedItem], *, folder: Path, path: Path, report: CharToMQAImportReport
) -> None:
    """Cut ``context_1000``/``context_2000`` for the items that lack them.

    Each item's book is looked for in ``folder`` (by title and author, see
    :func:`benchmarks.books.book_name_match`), else among the books already imported
    (:func:`benchmarks.books.bank_book_sources`). Windows an item has are kept. What
    happened is added to ``report``: a count per outcome in ``notes``, and which
    record was not located in ``warnings``.
    """
    needing = [
        item
        for item in items
        if not (_has_text(item.row["context_1000"]) and _has_text(item.row["context_2000"]))
    ]
    kept = len(items) - len(needing)
    reasons: Counter[str] = Counter()
    sources: dict[str, str] = {}
    filled = 0
    if needing:
        folder_books, folder_warnings = book_folder_sources(folder)
        report.warnings.extend(folder_warnings)
        bank_books: list[BookSource] | None = None
        try:
            tokenizer = plot_tokenizer()
        except ValueError as exc:  # settings.TOMLAB_PLOT_TOKENIZER names no tokenizer
            raise ImportDataError(f"cannot cut plot windows: {exc}", path=path) from None
        for name in dict.fromkeys(item.book_name for item in needing):
            group = [item for item in needing if item.book_name == name]
            picked = book_source_pick(name, folder_books)
            if not picked:
                if bank_books is None:
                    bank_books = bank_book_sources()
                picked = book_source_pick(name, bank_books)
            if not picked:
                missing = f"book {name!r} not found in {folder} nor among the imported books"
                reasons[missing] += len(group)
                continue
            if len(picked) > 1:
                origins = ", ".join(source.origin for source in picked)
                reasons[f"book {name!r} is ambiguous: {origins} all match"] += len(group)
                continue
            source = picked[0]
            try:
                text = source.read()
            except BookReadError as exc:
                reasons[f"book {name!r} unreadable: {exc}"] += len(group)
                continue
            for item in group:
                if not _has_text(item.row["context_0"]):
                    reasons["no context_0 to find in the book"] += 1
                    continue
                windows = item_plot_windows(text, item.row["context_0"], tokenizer=tokenizer)
                for warning in windows["warnings"]:
                    report.warn(f"{path}: record {item.record}: {warning} ({source.origin})")
                if windows["book_offset"] is None:
                    reasons[f"context_0 not found in {source.origin}"] += 1
                    continue
                for size in ("context_1000", "context_2000"):
                    if not _has_text(item.row[size]):
                        item.row[size] = windows[size]
                filled += 1
                sources[name] = source.origin
        tokens = tokenizer.name
    else:
        tokens = "none needed"
    report.notes.append(
        f"plot windows: {filled} of {len(items)} items got context_1000/context_2000 "
        f"(tokenizer: {tokens})"
    )
    for name, origin in sources.items():
        report.notes.append(f"  {name!r} cut from {origin}")
    if kept:
        report.notes.append(f"  {kept} already had both windows (kept)")
    for reason, count in reasons.items():
        report.notes.append(f"  {count} without windows: {reason}")
