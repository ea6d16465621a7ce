"""CharToM-QA (HuggingFace release): one JSON object per line.

Fields: ``book_name, tom_dimension, context_0, context_1000, context_2000, question,
answer, bonus_points, misleading_choices`` (3 of them). The paper's published
examples add ``target_character`` (imported as a Character) and
``published_results`` (unknown here, kept in ``extra`` and warned, as is any other
field). An optional ``directness`` ("direct"/"indirect", the paper's manual label
for its human-study subset) fills ``QAItem.directness``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from ..models import Benchmark, Character, QAItem, ToMDimension, Work
from .base import (
    BenchmarkImporter,
    ImportDataError,
    ImportReport,
    field_size_check,
    input_size_check,
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

    def run(self, path: Path) -> ImportReport:
        if path.is_dir():
            path = path / DEFAULT_FILE_NAME
        items = self._parse(path)
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
        item = record_parse(data, path=path, record=record, report=self.report)
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
