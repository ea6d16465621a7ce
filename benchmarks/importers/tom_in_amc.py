"""ToM-in-AMC (HuggingFace release): one JSON object of splits, movies and scenes.

Layout::

    {"train"|"dev"|"test": {movie_title: {
        "chars": {name: utterance_count},
        "training_scenes": [scene, ...], "testing_scenes": [scene, ...]}}}

    scene = {"scene": [{"type": "scene"|"dialog", "title": ..., "text": ...}],
             "chars": {name: count}, "char_map": {name: "P0", ...}}

One Work per movie (the split comes from the top-level key), one Character per
entry of the movie's ``chars`` (the paper's top-5 main characters, the candidates),
the scenes in order (training first) and one SpeakerInstance per masked speaker of
a testing scene. Fields the layout does not name are kept in ``extra`` and warned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from ..models import Benchmark, Character, Scene, SpeakerInstance, Split, Work
from .base import (
    BenchmarkImporter,
    ImportDataError,
    ImportReport,
    read_json,
    report_unknown_fields,
    upsert,
)

# The exporter writes this name when given a directory; reading it back from the
# same directory keeps export -> import symmetric.
DEFAULT_FILE_NAME = "tom_in_amc.json"

SPLITS = (Split.TRAIN, Split.DEV, Split.TEST)
SCENE_PARTS = (("training_scenes", Scene.Part.TRAINING), ("testing_scenes", Scene.Part.TESTING))
MOVIE_FIELDS = ("chars", "training_scenes", "testing_scenes")
SCENE_FIELDS = ("scene", "chars", "char_map")
LINE_FIELDS = ("type", "title", "text")
LINE_TYPES = ("scene", "dialog")
NAME_MAX = Character._meta.get_field("name").max_length
KEY_MAX = Work._meta.get_field("key").max_length
CODE_MAX = SpeakerInstance._meta.get_field("code").max_length


@dataclass
class ParsedScene:
    source_id: str
    part: str
    lines: list[dict[str, Any]]
    char_counts: dict[str, int]
    char_map: dict[str, str]
    extra: dict[str, Any]


@dataclass
class ParsedMovie:
    title: str
    split: str
    chars: dict[str, int]
    extra: dict[str, Any]
    scenes: list[ParsedScene] = field(default_factory=list)


class _Checker:
    """Validation helpers that raise errors located in one file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, message: str, record: str | None = None, field: str | None = None) -> NoReturn:
        raise ImportDataError(message, path=self.path, record=record, field=field)

    def obj(self, value: Any, record: str, field: str | None = None) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(f"expected a JSON object, got {type(value).__name__}", record, field)
        return value

    def counts(self, value: Any, record: str, field: str) -> dict[str, int]:
        """A {name: non-negative int} object, as ``chars`` is at movie and scene level."""
        self.obj(value, record, field)
        for name, count in value.items():
            if not name.strip() or len(name) > NAME_MAX:
                self.fail(f"character name {name!r} is empty or too long", record, field)
            # bool is an int in Python; JSON true is not a count.
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                self.fail(f"count for {name!r} must be a non-negative integer", record, field)
        return value


class TomInAmcImporter(BenchmarkImporter):
    """Import a ToM-in-AMC JSON file; ``split`` only selects which split to import."""

    format_name = Benchmark.TOM_IN_AMC
    help = "ToM-in-AMC JSON ({split: {movie: {chars, training_scenes, testing_scenes}}})"

    def run(self, path: Path) -> ImportReport:
        if path.is_dir():
            path = path / DEFAULT_FILE_NAME
        movies = self._parse(path)
        self._write(movies, source=path.name, path=path)
        return self.report

    # -- parsing -----------------------------------------------------------------

    def _parse(self, path: Path) -> list[ParsedMovie]:
        check = _Checker(path)
        data = check.obj(read_json(path, limit="tom-in-amc"), "top level")
        for split in data:
            if split not in SPLITS:
                check.fail(f"unknown split key; expected {', '.join(SPLITS)}", "top level", split)
        if self.split and self.split not in data:
            self.report.warn(f"{path}: no {self.split!r} split in this file; nothing imported")
        movies: list[ParsedMovie] = []
        seen: dict[str, str] = {}
        for split, split_movies in data.items():
            if self.split and split != self.split:
                continue
            check.obj(split_movies, split)
            for title, movie in split_movies.items():
                record = f"{split}/{title}"
                if title in seen:
                    check.fail(f"movie also in split {seen[title]!r}", record)
                if not title.strip() or len(title) > KEY_MAX:
                    check.fail(f"movie title is empty or longer than {KEY_MAX}", record)
                seen[title] = split
                movies.append(self._parse_movie(check, split, title, movie))
                self.progress(len(movies[-1].scenes))
        return movies

    def _parse_movie(self, check: _Checker, split: str, title: str, data: Any) -> ParsedMovie:
        record = f"{split}/{title}"
        check.obj(data, record)
        for name in MOVIE_FIELDS:
            if name not in data:
                check.fail("missing", record, name)
        movie = ParsedMovie(
            title=title,
            split=split,
            chars=check.counts(data["chars"], record, "chars"),
            extra=self._unknown(check, data, MOVIE_FIELDS, record),
        )
        for list_name, part in SCENE_PARTS:
            scenes = data[list_name]
            if not isinstance(scenes, list):
                check.fail("expected a list of scenes", record, list_name)
            for index, scene in enumerate(scenes):
                movie.scenes.append(
                    self._parse_scene(
                        check, f"{record}/{list_name}[{index}]", scene, movie.chars, part, index
                    )
                )
        return movie

    def _parse_scene(
        self,
        check: _Checker,
        record: str,
        data: Any,
        movie_chars: dict[str, int],
        part: str,
        index: int,
    ) -> ParsedScene:
        check.obj(data, record)
        for name in SCENE_FIELDS:
            if name not in data:
                check.fail("missing", record, name)
        lines = data["scene"]
        if not isinstance(lines, list):
            check.fail("expected a list of lines", record, "scene")
        unknown_line_fields: set[str] = set()
        for i, line in enumerate(lines):
            line_record = f"{record}/scene[{i}]"
            check.obj(line, line_record)
            for name in ("type", "text"):
                if name not in line:
                    check.fail("missing", line_record, name)
            if line["type"] not in LINE_TYPES:
                check.fail(
                    f"{line['type']!r} is not one of {', '.join(LINE_TYPES)}", line_record, "type"
                )
            for name in ("title", "text"):
                if name in line and not isinstance(line[name], str):
                    check.fail("expected a string", line_record, name)
            unknown_line_fields.update(set(line) - set(LINE_FIELDS))
        if unknown_line_fields:
            # Lines are stored as they are, so their unknown fields are kept already.
            self.report.warn(
                f"{check.path}: record {record}: kept unknown line field(s) "
                f"{sorted(unknown_line_fields)} in the scene's lines"
            )
        char_map = check.obj(data["char_map"], record, "char_map")
        codes: dict[str, str] = {}
        for name, code in char_map.items():
            if name not in movie_chars:
                check.fail(f"{name!r} is not one of the movie's chars", record, "char_map")
            if not isinstance(code, str) or not code.strip() or len(code) > CODE_MAX:
                check.fail(
                    f"code for {name!r} must be a short string like 'P0'", record, "char_map"
                )
            if code in codes:
                check.fail(
                    f"code {code!r} given to {codes[code]!r} and {name!r}", record, "char_map"
                )
            codes[code] = name
        return ParsedScene(
            source_id=f"{part}-{index:04d}",
            part=part,
            lines=lines,
            char_counts=check.counts(data["chars"], record, "chars"),
            char_map=char_map,
            extra=self._unknown(check, data, SCENE_FIELDS, record),
        )

    def _unknown(
        self, check: _Checker, data: dict[str, Any], known: tuple[str, ...], record: str
    ) -> dict[str, Any]:
        return report_unknown_fields(self.report, data, known, path=check.path, record=record)

    # -- writing -----------------------------------------------------------------

    def _write(self, movies: list[ParsedMovie], *, source: str, path: Path) -> None:
        report = self.report
        work_ids = upsert(
            Work,
            [
                {
                    "benchmark": Benchmark.TOM_IN_AMC,
                    "key": m.title,
                    "title": m.title,
                    "kind": Work.Kind.MOVIE,
                    "split": m.split,
                    "source": source,
                    "extra": m.extra,
                }
                for m in movies
            ],
            key_fields=["benchmark", "key"],
            scope={"benchmark": Benchmark.TOM_IN_AMC, "key__in": [m.title for m in movies]},
            report=report,
            source=path,
        )
        movie_work = {m.title: work_ids[(Benchmark.TOM_IN_AMC, m.title)] for m in movies}
        ids = list(movie_work.values())
        # Gender is left out of the rows so a re-import keeps what annotators set.
        character_ids = upsert(
            Character,
            [
                {
                    "work_id": movie_work[m.title],
                    "name": name,
                    "position": position,
                    "utterance_count": count,
                    "is_main": True,
                }
                for m in movies
                for position, (name, count) in enumerate(m.chars.items())
            ],
            key_fields=["work_id", "name"],
            scope={"work_id__in": ids},
            report=report,
            source=path,
        )
        scene_ids = upsert(
            Scene,
            [
                {
                    "work_id": movie_work[m.title],
                    "source_id": s.source_id,
                    "position": position,
                    "part": s.part,
                    "heading": _heading(s.lines),
                    "lines": s.lines,
                    "participants": list(s.char_counts),
                    "char_counts": s.char_counts,
                    "char_map": s.char_map,
                    "extra": s.extra,
                }
                for m in movies
                for position, s in enumerate(m.scenes)
            ],
            key_fields=["work_id", "source_id"],
            scope={"work_id__in": ids},
            report=report,
            source=path,
        )
        # Only testing scenes become items to guess. Training scenes are the first 3/5
        # of the movie, the history a rater reads and the few-shot support set a model
        # learns from; their char_map stays on the Scene for that, not as instances.
        upsert(
            SpeakerInstance,
            [
                {
                    "scene_id": scene_ids[(movie_work[m.title], s.source_id)],
                    "code": code,
                    "gold_character_id": character_ids[(movie_work[m.title], name)],
                    "candidates": list(m.chars),
                }
                for m in movies
                for s in m.scenes
                if s.part == Scene.Part.TESTING
                for name, code in s.char_map.items()
            ],
            key_fields=["scene_id", "code"],
            scope={"scene__work_id__in": ids},
            report=report,
            source=path,
        )


def _heading(lines: list[dict[str, Any]]) -> str:
    """The first scene heading, for display; "NULL" marks a line without one."""
    for line in lines:
        if line["type"] == "scene" and line.get("title") not in (None, "NULL"):
            return line["title"]
    return ""
