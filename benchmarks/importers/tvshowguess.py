"""TVShowGuess (Sang et al., 2022): ``<show>.raw`` scenes and ``<show>.tsv`` annotations.

``<show>.raw`` is a CSV file with the columns ``No.,Scene,Answer``. A Scene cell is::

    <episode> <scene-id>\\r[candidate list]\\r [Scene: heading]\\r P0 : text\\r background : ...

where the parts are separated by ``\\r`` (shown as nothing by most viewers, which is
why the format is often described as flat text), the candidate list is a Python list
literal, and a line's speaker is a mask code (``P0``…), ``background`` (stage
directions) or an unmasked name (``mike``). Answer is a Python dict literal
``{'P0': 'rachel', …}``. ``<show>.tsv`` beside it holds the authors' human annotation,
one row per masked speaker.

One Work per file stem, one Character per candidate name, one Scene per row (the
lines in the ToM-in-AMC layout, the cell itself in ``source_text`` so an export gives
the file back byte for byte) and one SpeakerInstance per Answer entry. The whole file
is validated before anything is written; errors name the file, the row and the column.
"""

from __future__ import annotations

import ast
import csv
import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from ..models import (
    Benchmark,
    Character,
    Scene,
    SpeakerAnnotation,
    SpeakerInstance,
    Work,
)
from .base import BenchmarkImporter, ImportDataError, ImportReport, input_size_check, upsert

RAW_COLUMNS = ("No.", "Scene", "Answer")
EVIDENCE_BLOCKS = ("a", "b", "c")
# friends.tsv's header: the nine columns the authors read, then two more evidence blocks.
TSV_HEADER = (
    "Episode",
    "need history",
    "Facts abstracted from memory",
    "Character Code",
    "Guessed Character Name",
    *(
        column
        for block in EVIDENCE_BLOCKS
        for column in (*(f"Evidence-{block}{i}" for i in (1, 2, 3)), "Reasoning Type")
    ),
)
# The authors' annotation_analysis.py reads a sheet by position, never by header:
# 0 episode and scene, 1 need history, 2 facts from memory, 3 character code,
# 4 guessed name, 5-7 evidence a1-a3, 8 reasoning type; later columns are ignored by
# the analysis (friends.tsv has two more evidence blocks there, kept as later groups).
# The header words each position may carry, lower-cased: friends.tsv's, and the
# tbbt.tsv variant "need history event".
SHEET_HEADER_WORDS: tuple[frozenset[str], ...] = (
    frozenset({"episode"}),
    frozenset({"need history", "need history event"}),
    frozenset({"facts abstracted from memory"}),
    frozenset({"character code"}),
    frozenset({"guessed character name"}),
    *(frozenset({c.lower()}) for c in TSV_HEADER[5:]),
)
SHEET_COLUMNS = 9  # the columns the analysis reads; a row needs all of them
# The cells before the evidence blocks, by the SpeakerAnnotation field they fill; each
# block after them is three evidence cells and a reasoning type.
TSV_LEAD_FIELDS = ("scene_source_id", "need_history", "facts_from_memory", "code", "guessed_name")
TSV_LEAD = len(TSV_LEAD_FIELDS)
TSV_BLOCK = 4
# The need-history values the authors' script accepts; "Unsolvable" rows are left out
# of the dependence shares only.
NEED_HISTORY_VALUES = {"yes": True, "no": False, "unsolvable": None}
# "penny (abductive)": a guessed name followed by parenthesised qualifiers.
_QUALIFIED_NAME_RE = re.compile(r"(?P<name>[^()]*?)\s*(?P<qualifiers>(?:\([^()]*\)\s*)+)")
_QUALIFIER_RE = re.compile(r"\(([^()]*)\)")

# The two shows the TVShowGuess release annotated; other stems are title-cased.
KNOWN_TITLES = {"friends": "Friends", "tbbt": "The Big Bang Theory"}
# The release's LICENSE (MIT) asks that its notice go with every copy of the data.
LICENCE_NOTE = (
    "MIT License. Copyright (c) 2022 YisiSang (TVShowGuess, "
    "https://github.com/YisiSang/TVSHOWGUESS). The copyright notice and the MIT "
    "permission notice must be included in all copies or substantial portions."
)
BACKGROUND = "background"
NULL_TITLE = "NULL"

_HEAD_RE = re.compile(
    r"\s*(?P<episode>\S+)[ \t]+(?P<scene>[^\s\[]+)\s*(?P<candidates>\[.*?\])", re.DOTALL
)
_LINE_BREAK_RE = re.compile(r"\r\n|\r|\n")
# "P0 : text"; a speaker may be followed by an empty text ("background : ").
_UTTERANCE_RE = re.compile(r"\s*(?P<label>\S.*?)\s:(?:\s(?P<text>.*))?", re.DOTALL)
# Speakers may carry a stage direction, as in the release's tbbt.raw: "P2 (singing)".
_SPEAKER_RE = re.compile(r"(?P<name>.+?)(?:\s*\([^()]*\))?")
_CODE_RE = re.compile(r"P\d+")

NAME_MAX = Character._meta.get_field("name").max_length
SOURCE_ID_MAX = Scene._meta.get_field("source_id").max_length
CODE_MAX = SpeakerInstance._meta.get_field("code").max_length
ANNOTATION_MAX = [SpeakerAnnotation._meta.get_field(f).max_length for f in TSV_LEAD_FIELDS]


@dataclass
class ParsedScene:
    no: str
    record: str
    source_id: str
    episode: str
    candidates: list[str]
    # code -> gold name, in the file's order (the export writes it back in that order)
    answer: dict[str, str]
    heading: str
    lines: list[dict[str, str]]
    source_text: str

    def speaker(self, label: str) -> str:
        """The name a line's speaker stands for: the gold name of a mask code."""
        name = _SPEAKER_RE.fullmatch(label)["name"]
        return self.answer.get(name, name)


@dataclass
class SheetRow:
    """One annotated masked speaker, read by column position as the authors read it."""

    row_number: int
    record: str
    cells: list[str]
    scene_source_id: str
    need_history: str
    facts_from_memory: str
    code: str
    guessed_name: str
    guess_qualifiers: list[str]
    evidence_groups: list[dict[str, Any]]


@dataclass
class AnnotationSheet:
    header: list[str]
    rows: list[SheetRow]
    final_newline: bool


def split_guessed_name(cell: str) -> tuple[str, list[str]]:
    """``"penny (abductive)"`` -> ``("penny", ["abductive"])``; a plain name has none."""
    text = cell.strip()
    match = _QUALIFIED_NAME_RE.fullmatch(text)
    if match is None or not match["name"]:
        return text, []
    qualifiers = [q.strip() for q in _QUALIFIER_RE.findall(match["qualifiers"]) if q.strip()]
    return match["name"], qualifiers


def read_annotation_sheet(path: Path, *, warn: Callable[[str], None]) -> AnnotationSheet:
    """Read a TVShowGuess annotation sheet (``friends.tsv``, ``tbbt.tsv``) by position.

    The one reader of these sheets: the importer stores what it returns, and the
    studies' ``--from-annotations`` and the reports read those stored fields. A header
    word we do not know is a warning, not an error (the authors never read the
    header); a row with fewer than the nine columns the analysis reads is an error.
    """
    input_size_check(path, limit="tvshowguess-sheet")
    text = _read_text(path)
    reader = csv.reader(
        io.StringIO(text, newline="\n"), delimiter="\t", quoting=csv.QUOTE_NONE, strict=True
    )
    rows: list[SheetRow] = []
    try:
        header = next(reader, None)
        if not header or not any(c.strip() for c in header):
            _fail(path, "empty file; expected a header row", "line 1", "header")
        if len(header) < SHEET_COLUMNS:
            _fail(
                path,
                f"header has {len(header)} columns; an annotation sheet has at least "
                f"{SHEET_COLUMNS} (episode, need history, facts from memory, code, guessed "
                "name, evidence 1-3, reasoning type)",
                "line 1",
                "header",
            )
        for position, name in enumerate(header):
            words = SHEET_HEADER_WORDS[position] if position < len(SHEET_HEADER_WORDS) else None
            if words is not None and name.strip().lower() in words:
                continue
            if position < SHEET_COLUMNS:
                reading = f"read by position as {' / '.join(sorted(words or ()))}"
            else:
                reading = "kept, but not read by the analysis (as the authors' script)"
            warn(f"{path}: line 1: column {position + 1} is headed {name!r}; {reading}")
        for number, cells in enumerate(reader, start=1):
            record = f"row {number} (line {reader.line_num})"
            if not cells:
                warn(f"{path}: {record}: blank line skipped")
                continue
            if len(cells) < SHEET_COLUMNS:
                _fail(
                    path,
                    f"has {len(cells)} columns; expected at least {SHEET_COLUMNS}",
                    record,
                    "columns",
                )
            if len(cells) != len(header):
                warn(
                    f"{path}: {record}: has {len(cells)} columns, the header {len(header)}; "
                    "read by position"
                )
            rows.append(_sheet_row(path, number, record, header, cells, warn))
    except csv.Error as exc:
        _fail(path, f"malformed TSV: {exc}", f"line {reader.line_num}")
    return AnnotationSheet(header=header, rows=rows, final_newline=text.endswith("\n"))


def _sheet_row(
    path: Path,
    number: int,
    record: str,
    header: list[str],
    cells: list[str],
    warn: Callable[[str], None],
) -> SheetRow:
    guessed_name, qualifiers = split_guessed_name(cells[4])
    lead = [cells[0].strip(), cells[1], cells[2], cells[3].strip(), guessed_name]
    for position, (value, limit) in enumerate(zip(lead, ANNOTATION_MAX, strict=True)):
        if len(value) > limit:
            _fail(path, f"longer than {limit} characters", record, header[position])
    need = cells[1].strip().lower()
    if need not in NEED_HISTORY_VALUES:
        warn(f"{path}: {record}: need history is {cells[1]!r}; expected yes, no or Unsolvable")
    elif need != "unsolvable" and cells[2].strip().lower() not in ("yes", "no"):
        warn(f"{path}: {record}: facts from memory is {cells[2]!r}; expected yes or no")
    # Group 1 is columns 5-8, the one the analysis reads. Later blocks headed as
    # friends.tsv heads its evidence b and c are kept as further groups (the imported
    # rater's notes show them); any other later column stays in the raw row only.
    groups = [
        {"evidence": cells[start : start + 3], "reasoning": cells[start + 3]}
        for start in range(TSV_LEAD, len(cells) - TSV_BLOCK + 1, TSV_BLOCK)
        if start == TSV_LEAD or _headed_as_evidence(header, start)
    ]
    return SheetRow(
        row_number=number,
        record=record,
        cells=cells,
        scene_source_id=lead[0],
        need_history=cells[1],
        facts_from_memory=cells[2],
        code=lead[3],
        guessed_name=guessed_name,
        guess_qualifiers=qualifiers,
        evidence_groups=groups,
    )


def _headed_as_evidence(header: list[str], start: int) -> bool:
    block = range(start, start + TSV_BLOCK)
    return all(
        p < len(header)
        and p < len(SHEET_HEADER_WORDS)
        and header[p].strip().lower() in SHEET_HEADER_WORDS[p]
        for p in block
    )


def _fail(
    path: Path, message: str, record: str | None = None, field: str | None = None
) -> NoReturn:
    raise ImportDataError(message, path=path, record=record, field=field)


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        _fail(path, "file not found")
    except OSError as exc:
        _fail(path, f"cannot read file: {exc.strerror or exc}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        _fail(path, f"not UTF-8 text (byte {exc.start}: {exc.reason})")


def _literal(path: Path, text: str, kind: type, record: str, field: str) -> Any:
    """A Python literal of type ``kind``; never ``eval``."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        _fail(
            path,
            f"cannot parse {text[:60]!r} as a Python {kind.__name__} literal: {exc}",
            record,
            field,
        )
    if not isinstance(value, kind):
        _fail(
            path,
            f"expected a Python {kind.__name__} literal, got {type(value).__name__}",
            record,
            field,
        )
    return value


class TVShowGuessImporter(BenchmarkImporter):
    """Import ``<show>.raw`` and, when it is there, ``<show>.tsv`` beside it."""

    format_name = Benchmark.TVSHOWGUESS
    help = "TVShowGuess <show>.raw (CSV No.,Scene,Answer) + <show>.tsv human annotation"

    def run(self, path: Path) -> ImportReport:
        if path.suffix != ".raw":
            _fail(path, "expected a TVShowGuess .raw file (the .tsv beside it is read too)")
        tsv_path = path.with_suffix(".tsv")
        # Both sizes are checked before either file is parsed.
        input_size_check(path, limit="tvshowguess-raw")
        if tsv_path.is_file():
            input_size_check(tsv_path, limit="tvshowguess-sheet")
        raw_text = _read_text(path)
        scenes = self._parse_raw(path, raw_text)
        annotations: list[SheetRow] = []
        extra: dict[str, Any] = {"raw_final_newline": raw_text.endswith(("\n", "\r"))}
        if tsv_path.is_file():
            sheet = read_annotation_sheet(tsv_path, warn=self.report.warn)
            annotations = self._match_sheet(tsv_path, sheet, scenes, raw_name=path.name)
            extra["tsv_final_newline"] = sheet.final_newline
            if sheet.header != list(TSV_HEADER):
                # Only a header other than friends.tsv's is stored, for the export.
                extra["tsv_header"] = sheet.header
        self._write(path, scenes, tsv_path.name, annotations, extra)
        return self.report

    # -- parsing the scenes --------------------------------------------------------

    def _parse_raw(self, path: Path, text: str) -> list[ParsedScene]:
        # Split physical lines on "\n" only so line numbers match an editor's; the
        # "\r" between a scene's parts stay inside the quoted cell.
        reader = csv.reader(io.StringIO(text, newline="\n"), strict=True)
        try:
            header = next(reader, None)
            if header is None:
                _fail(path, "empty file", "line 1", "header")
            missing = [c for c in RAW_COLUMNS if c not in header]
            unexpected = [c for c in header if c not in RAW_COLUMNS]
            if missing or unexpected or len(header) != len(RAW_COLUMNS):
                _fail(
                    path,
                    f"header is {header}; expected {list(RAW_COLUMNS)} "
                    f"(missing {missing}, unexpected {unexpected})",
                    "line 1",
                    "header",
                )
            index = {c: header.index(c) for c in RAW_COLUMNS}
            scenes: list[ParsedScene] = []
            seen: dict[str, str] = {}
            line = reader.line_num + 1
            for row in reader:
                if row:
                    scene = self._parse_row(path, row, index, len(scenes) + 1, line)
                    if scene.source_id in seen:
                        first = seen[scene.source_id]
                        _fail(
                            path,
                            f"scene id {scene.source_id!r} is also the id of {first}",
                            scene.record,
                            "Scene",
                        )
                    seen[scene.source_id] = scene.record
                    scenes.append(scene)
                    self.progress(1)
                line = reader.line_num + 1
        except csv.Error as exc:
            _fail(path, f"malformed CSV: {exc}", f"line {reader.line_num}")
        return scenes

    def _parse_row(
        self, path: Path, row: list[str], index: dict[str, int], number: int, line: int
    ) -> ParsedScene:
        no = row[index["No."]].strip() if len(row) > index["No."] else ""
        record = f"No. {no} (line {line})" if no else f"data row {number} (line {line})"
        if len(row) != len(RAW_COLUMNS):
            _fail(path, f"has {len(row)} cells; expected {len(RAW_COLUMNS)}", record, "columns")
        source_text = row[index["Scene"]]
        head = _HEAD_RE.match(source_text)
        if head is None:
            _fail(
                path, "does not start with '<episode> <scene-id>[candidate list]'", record, "Scene"
            )
        source_id = f"{head['episode']} {head['scene']}"
        if len(source_id) > SOURCE_ID_MAX:
            _fail(path, f"scene id is longer than {SOURCE_ID_MAX} characters", record, "Scene")
        candidates = _literal(path, head["candidates"], list, record, "Scene")
        for name in candidates:
            if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
                _fail(
                    path,
                    f"candidate {name!r} is not a name of 1-{NAME_MAX} characters",
                    record,
                    "Scene",
                )
        if len(set(candidates)) != len(candidates):
            _fail(path, f"candidate list {candidates} repeats a name", record, "Scene")
        answer = _literal(path, row[index["Answer"]], dict, record, "Answer")
        golds: dict[str, str] = {}
        for code, name in answer.items():
            if not isinstance(code, str) or not _CODE_RE.fullmatch(code) or len(code) > CODE_MAX:
                _fail(path, f"key {code!r} is not a mask code like 'P0'", record, "Answer")
            if name not in candidates:
                _fail(
                    path,
                    f"{code} is {name!r}, who is not in the candidate list {candidates}",
                    record,
                    "Answer",
                )
            if name in golds:
                _fail(
                    path,
                    f"{name!r} is the answer for both {golds[name]} and {code}",
                    record,
                    "Answer",
                )
            golds[name] = code
        heading, lines = self._parse_lines(path, source_text[head.end() :], record)
        # Both directions are errors: a code with no speaking line cannot be guessed,
        # and a speaking code missing from Answer cannot be scored. Either way the
        # Answer and the scene text disagree, which usually means shifted rows.
        spoken_codes = {name for name in _participants(lines) if _CODE_RE.fullmatch(name)}
        silent = [code for code in answer if code not in spoken_codes]
        if silent:
            _fail(path, f"mask code(s) {silent} never speak in the scene text", record, "Answer")
        unanswered = sorted(spoken_codes - set(answer))
        if unanswered:
            _fail(
                path,
                f"mask code(s) {unanswered} speak in the scene but have no answer",
                record,
                "Answer",
            )
        return ParsedScene(
            no=row[index["No."]],
            record=record,
            source_id=source_id,
            episode=head["episode"],
            candidates=candidates,
            answer=answer,
            heading=heading,
            lines=lines,
            source_text=source_text,
        )

    def _parse_lines(self, path: Path, text: str, record: str) -> tuple[str, list[dict[str, str]]]:
        """Split the text after the candidate list into a heading and ToM-in-AMC lines."""
        if text.strip() and not _LINE_BREAK_RE.search(text):
            # Without the "\r" separators a line that ends in lower case cannot be told
            # from the unmasked speaker name that starts the next one ("... you know
            # mike : ..."), so we refuse rather than guess.
            _fail(
                path,
                "the scene text has no line breaks; expected its parts separated by "
                "'\\r' as in the TVShowGuess release",
                record,
                "Scene",
            )
        heading = ""
        lines: list[dict[str, str]] = []
        # Numbered as the cell's parts: 1 is the scene id, 2 the candidate list.
        for number, part in enumerate(_LINE_BREAK_RE.split(text), start=2):
            stripped = part.strip()
            if not stripped:
                continue
            if not lines and not heading and stripped.startswith("[") and stripped.endswith("]"):
                heading = stripped
                continue
            match = _UTTERANCE_RE.fullmatch(part)
            if match is None:
                _fail(
                    path,
                    f"part {number} of the cell, {stripped[:60]!r}, is not 'speaker : text'",
                    record,
                    "Scene",
                )
            label = match["label"]
            body = (match["text"] or "").strip()
            if label == BACKGROUND:
                lines.append({"type": "scene", "title": NULL_TITLE, "text": body})
            else:
                lines.append({"type": "dialog", "title": label, "text": body})
        return heading, lines

    # -- parsing the annotations ---------------------------------------------------

    def _match_sheet(
        self, path: Path, sheet: AnnotationSheet, scenes: list[ParsedScene], *, raw_name: str
    ) -> list[SheetRow]:
        """Check the sheet's rows against the scenes: one row per speaker, known codes."""
        by_id = {s.source_id: s for s in scenes}
        seen: dict[tuple[str, str], str] = {}
        unmatched: dict[str, list[str]] = {}
        code_column = sheet.header[3]
        for row in sheet.rows:
            key = (row.scene_source_id, row.code)
            if key in seen:
                _fail(
                    path,
                    f"scene {key[0]!r} {key[1]} is annotated again; first in {seen[key]}",
                    row.record,
                    code_column,
                )
            seen[key] = row.record
            scene = by_id.get(row.scene_source_id)
            if scene is None:
                unmatched.setdefault(row.scene_source_id, []).append(row.record)
            elif row.code not in scene.answer:
                _fail(
                    path,
                    f"{row.code!r} is not a mask code of scene "
                    f"{scene.source_id!r} ({sorted(scene.answer)} in {raw_name} "
                    f"{scene.record})",
                    row.record,
                    code_column,
                )
        for source_id, records in unmatched.items():
            self.report.warn(
                f"{path}: {', '.join(records)}: scene {source_id!r} is not in {raw_name}; "
                "kept the annotation(s) without a speaker instance"
            )
        return sheet.rows

    # -- writing -----------------------------------------------------------------

    def _write(
        self,
        path: Path,
        scenes: Sequence[ParsedScene],
        tsv_name: str,
        annotations: Sequence[SheetRow],
        extra: dict[str, Any],
    ) -> None:
        report = self.report
        key = path.stem
        work_key = (Benchmark.TVSHOWGUESS, key)
        work_id = upsert(
            Work,
            [
                {
                    "benchmark": Benchmark.TVSHOWGUESS,
                    "key": key,
                    "title": KNOWN_TITLES.get(key, key.replace("_", " ").title()),
                    "kind": Work.Kind.TV_SHOW,
                    "split": self.split,
                    "source": path.name,
                    "licence_note": LICENCE_NOTE,
                    "extra": extra,
                }
            ],
            key_fields=["benchmark", "key"],
            scope={"benchmark": Benchmark.TVSHOWGUESS, "key": key},
            report=report,
            source=path,
        )[work_key]
        names = list(dict.fromkeys(name for s in scenes for name in s.candidates))
        # Gender is left out of the rows so a re-import keeps what annotators set.
        character_ids = upsert(
            Character,
            [
                {"work_id": work_id, "name": name, "position": position, "is_main": True}
                for position, name in enumerate(names)
            ],
            key_fields=["work_id", "name"],
            scope={"work_id": work_id},
            report=report,
            source=path,
        )
        scene_ids = upsert(
            Scene,
            [
                {
                    "work_id": work_id,
                    "source_id": s.source_id,
                    "position": position,
                    "part": Scene.Part.TESTING,
                    "episode": s.episode,
                    "heading": s.heading,
                    "lines": s.lines,
                    "participants": _participants(s.lines),
                    "char_counts": _char_counts(s),
                    "char_map": {name: code for code, name in s.answer.items()},
                    "source_text": s.source_text,
                    # jsonb does not keep key order, so Answer's order is kept as a list.
                    "extra": {"no": s.no, "answer_order": list(s.answer)},
                }
                for position, s in enumerate(scenes)
            ],
            key_fields=["work_id", "source_id"],
            scope={"work_id": work_id},
            report=report,
            source=path,
        )
        instance_ids = upsert(
            SpeakerInstance,
            [
                {
                    "scene_id": scene_ids[(work_id, s.source_id)],
                    "code": code,
                    "gold_character_id": character_ids[(work_id, name)],
                    "candidates": s.candidates,
                }
                for s in scenes
                for code, name in s.answer.items()
            ],
            key_fields=["scene_id", "code"],
            scope={"scene__work_id": work_id},
            report=report,
            source=path,
        )
        upsert(
            SpeakerAnnotation,
            [_annotation_row(a, work_id, tsv_name, scene_ids, instance_ids) for a in annotations],
            key_fields=["work_id", "source", "scene_source_id", "code"],
            scope={"work_id": work_id, "source": tsv_name},
            report=report,
            source=path,
        )


def read_raw_scenes(path: Path) -> list[ParsedScene]:
    """The scenes of a ``<show>.raw`` file as the importer reads them, writing nothing
    (the allocation bench, ``scripts/bench_allocation.py``, simulates studies on them)."""
    input_size_check(path, limit="tvshowguess-raw")
    return TVShowGuessImporter()._parse_raw(path, _read_text(path))


def _participants(lines: list[dict[str, str]]) -> list[str]:
    """Distinct speakers in order of first line, without stage directions; codes stay codes."""
    return list(
        dict.fromkeys(
            _SPEAKER_RE.fullmatch(ln["title"])["name"] for ln in lines if ln["type"] == "dialog"
        )
    )


def _char_counts(scene: ParsedScene) -> dict[str, int]:
    """Lines per speaker, masked speakers under their gold name (as ToM-in-AMC's ``chars``)."""
    counts: dict[str, int] = {}
    for ln in scene.lines:
        if ln["type"] == "dialog":
            name = scene.speaker(ln["title"])
            counts[name] = counts.get(name, 0) + 1
    return counts


def _annotation_row(
    row: SheetRow,
    work_id: int,
    source: str,
    scene_ids: dict[tuple, int],
    instance_ids: dict[tuple, int],
) -> dict[str, Any]:
    scene_id = scene_ids.get((work_id, row.scene_source_id))
    return {
        "work_id": work_id,
        "source": source,
        "scene_source_id": row.scene_source_id,
        "need_history": row.need_history,
        "facts_from_memory": row.facts_from_memory,
        "code": row.code,
        "guessed_name": row.guessed_name,
        "guess_qualifiers": row.guess_qualifiers,
        "row_number": row.row_number,
        "instance_id": instance_ids.get((scene_id, row.code)) if scene_id else None,
        "evidence_groups": row.evidence_groups,
        "raw": row.cells,
    }
