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
from collections.abc import Sequence
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
from .base import BenchmarkImporter, ImportDataError, ImportReport, upsert

RAW_COLUMNS = ("No.", "Scene", "Answer")
EVIDENCE_BLOCKS = ("a", "b", "c")
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
# The cells before the evidence blocks, by the SpeakerAnnotation field they fill; each
# block after them is three evidence cells and a reasoning type.
TSV_LEAD_FIELDS = ("scene_source_id", "need_history", "facts_from_memory", "code", "guessed_name")
TSV_LEAD = len(TSV_LEAD_FIELDS)
TSV_BLOCK = 4

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
class ParsedAnnotation:
    row_number: int
    cells: list[str]

    @property
    def scene_source_id(self) -> str:
        return self.cells[0]

    @property
    def code(self) -> str:
        return self.cells[3]


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
        raw_text = _read_text(path)
        scenes = self._parse_raw(path, raw_text)
        tsv_path = path.with_suffix(".tsv")
        annotations: list[ParsedAnnotation] = []
        extra: dict[str, Any] = {"raw_final_newline": raw_text.endswith(("\n", "\r"))}
        if tsv_path.is_file():
            tsv_text = _read_text(tsv_path)
            annotations = self._parse_tsv(tsv_path, tsv_text, scenes, raw_name=path.name)
            extra["tsv_final_newline"] = tsv_text.endswith("\n")
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

    def _parse_tsv(
        self, path: Path, text: str, scenes: list[ParsedScene], *, raw_name: str
    ) -> list[ParsedAnnotation]:
        by_id = {s.source_id: s for s in scenes}
        reader = csv.reader(
            io.StringIO(text, newline="\n"), delimiter="\t", quoting=csv.QUOTE_NONE, strict=True
        )
        annotations: list[ParsedAnnotation] = []
        seen: dict[tuple[str, str], str] = {}
        unmatched: dict[str, list[str]] = {}
        try:
            header = next(reader, None)
            if header is None or tuple(header) != TSV_HEADER:
                _fail(path, f"header is {header}; expected {list(TSV_HEADER)}", "line 1", "header")
            for number, cells in enumerate(reader, start=1):
                record = f"row {number} (line {reader.line_num})"
                if len(cells) != len(TSV_HEADER):
                    _fail(
                        path,
                        f"has {len(cells)} columns; expected {len(TSV_HEADER)}",
                        record,
                        "columns",
                    )
                annotation = ParsedAnnotation(row_number=number, cells=cells)
                for column, value, limit in zip(TSV_HEADER, cells, ANNOTATION_MAX, strict=False):
                    if len(value) > limit:
                        _fail(path, f"longer than {limit} characters", record, column)
                key = (annotation.scene_source_id, annotation.code)
                if key in seen:
                    _fail(
                        path,
                        f"scene {key[0]!r} {key[1]} is annotated again; first in {seen[key]}",
                        record,
                        "Character Code",
                    )
                seen[key] = record
                scene = by_id.get(annotation.scene_source_id)
                if scene is None:
                    unmatched.setdefault(annotation.scene_source_id, []).append(record)
                elif annotation.code not in scene.answer:
                    _fail(
                        path,
                        f"{annotation.code!r} is not a mask code of scene "
                        f"{scene.source_id!r} ({sorted(scene.answer)} in {raw_name} "
                        f"{scene.record})",
                        record,
                        "Character Code",
                    )
                annotations.append(annotation)
        except csv.Error as exc:
            _fail(path, f"malformed TSV: {exc}", f"line {reader.line_num}")
        for source_id, records in unmatched.items():
            self.report.warn(
                f"{path}: {', '.join(records)}: scene {source_id!r} is not in {raw_name}; "
                "kept the annotation(s) without a speaker instance"
            )
        return annotations

    # -- writing -----------------------------------------------------------------

    def _write(
        self,
        path: Path,
        scenes: Sequence[ParsedScene],
        tsv_name: str,
        annotations: Sequence[ParsedAnnotation],
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
        )
        upsert(
            SpeakerAnnotation,
            [_annotation_row(a, work_id, tsv_name, scene_ids, instance_ids) for a in annotations],
            key_fields=["work_id", "source", "scene_source_id", "code"],
            scope={"work_id": work_id, "source": tsv_name},
            report=report,
        )


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
    annotation: ParsedAnnotation,
    work_id: int,
    source: str,
    scene_ids: dict[tuple, int],
    instance_ids: dict[tuple, int],
) -> dict[str, Any]:
    cells = annotation.cells
    scene_id = scene_ids.get((work_id, annotation.scene_source_id))
    blocks = [
        cells[start : start + TSV_BLOCK] for start in range(TSV_LEAD, len(TSV_HEADER), TSV_BLOCK)
    ]
    return {
        "work_id": work_id,
        "source": source,
        **dict(zip(TSV_LEAD_FIELDS, cells, strict=False)),
        "row_number": annotation.row_number,
        "instance_id": instance_ids.get((scene_id, annotation.code)) if scene_id else None,
        "evidence_groups": [{"evidence": b[:3], "reasoning": b[3]} for b in blocks],
        "raw": cells,
    }
