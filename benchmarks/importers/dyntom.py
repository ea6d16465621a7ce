"""DynToM social stages: ``trialN/story.json`` + ``trialN/question_new.json``.

PATH is one trial directory or a directory of them. Each stage becomes a Work
(kind social_stage, key = the trial directory name), a DynToMStage, its scenarios,
its questions and a Character per profile. Whatever the files hold that no column
models goes into ``extra`` so :mod:`benchmarks.exporters.dyntom` writes the files
back equal to the originals:

- ``extra["unknown"]``: unknown keys of the record (top level, scenario, question);
- ``extra["sketch_unknown"]``: unknown keys of the stage's ``sketch``;
- ``extra["absent"]``: optional source keys the record did not have (``social
  setting`` is missing from some trials, and an empty column cannot tell).

The release writes a story in several shapes (90 of its 1,161 stages differ from
the common one), all accepted here:

- scenario keys ``scenario 1``, ``1``, ``scenario_1``, ``scenario1``, ``Scenario 1``
  (any case, any separator); the key is kept as written;
- a dialogue as a list of rounds (objects of one or more speakers), as one object
  speaker -> line, or as one string of ``Name: 'line'`` lines. It is stored as
  ordered turns ``[{"speaker", "text"}]`` with its shape in
  ``DynToMScenario.dialogue_shape``; ``extra["round_sizes"]`` keeps the rounds'
  sizes, and ``extra["dialogue_text"]`` a string the turns do not re-render exactly;
- a question file wrapped as ``{"questions": {...}}``, which the authors' own reader
  accepts (``extra["questions_wrapped"]`` on the stage).

Stages are read, validated and written in batches of :data:`STAGES_PER_BATCH` with a
constant number of queries per batch (the next batch is read while one is written);
the caller's transaction makes the whole import atomic.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, models
from django.db.models import Count
from django.utils import timezone

from benchmarks.models import (
    Benchmark,
    Character,
    DynToMQuestion,
    DynToMScenario,
    DynToMStage,
    Work,
)

from .base import (
    BenchmarkImporter,
    ImportDataError,
    ImportReport,
    field_size_check,
    read_json,
    report_unknown_fields,
    upsert,
)

STORY_FILE = "story.json"
QUESTIONS_FILE = "question_new.json"
# Bounds memory (a stage is ~320 kB of JSON) while keeping queries per stage near zero.
STAGES_PER_BATCH = 100

STORY_REQUIRED = ("main character", "scenario numbers", "characters information", "sketch", "story")
STORY_OPTIONAL = ("social setting", "social setting type")
SKETCH_FIELDS = {
    "relationships among characters": "relationships",
    "mental states analysis in every scenario": "trajectory",
    "analysis of mental states across scenarios": "change_analysis",
}
SCENARIO_FIELDS = ("background", "dialogue")
QUESTION_REQUIRED = ("question", "true answer", "options", "question type")
QUESTION_OPTIONAL = ("option reasons",)

MENTAL_STATES = frozenset({"belief", "emotion", "intention", "action"})
QType = DynToMQuestion.QuestionType
# The key prefix, not the coarser source "question type", decides the paper's type.
QUESTION_TYPES = {
    "type_a_what": QType.UNDERSTANDING,
    "type_d_whether": QType.TRANSFORMATION_1,
    "type_d_why": QType.TRANSFORMATION_2,
    "type_c_how": QType.TRANSFORMATION_2,
    "type_d_how": QType.TRANSFORMATION_3,
}

# "scenario 1", "Scenario 1", "scenario_1", "scenario1", "SCENARIO-1", "1": the release
# uses the first five; the rest cost nothing to accept.
_SCENARIO_KEY_RE = re.compile(r"^\s*(?:scenario)?[\s_.:#-]*(\d+)\s*$", re.IGNORECASE)
# One line of a dialogue string: "Name: 'line'" (the quotes are optional).
_TEXT_TURN_RE = re.compile(r"^([^:]{1,200}?)\s*:\s?(.*)$")
TEXT_QUOTE = "'"
_QUESTION_KEY_RE = re.compile(r"^(type_[a-z]+_[a-z]+)_\d+$")
_INFLUENCE_RE = re.compile(r"\bthe (\S+) of .+? influence the (\S+) of ", re.IGNORECASE)
_STATE_RE = re.compile(r"\bthe ([a-z&]+) of ", re.IGNORECASE)
_SPAN_FROM_TO_RE = re.compile(r"\bfrom scenario (\d+) to scenario (\d+)", re.IGNORECASE)
_SPAN_ACROSS_RE = re.compile(r"\bacross the (\d+) scenarios\b", re.IGNORECASE)
_SPAN_IN_RE = re.compile(r"\bin scenario (\d+)\b", re.IGNORECASE)
_MAIN_PART_RE = re.compile(
    r"\*\*Main Characters?\*\*\s*:\s*(.*?)\s*(?=\*\*Supporting Characters?\*\*|\Z)", re.DOTALL
)
_SUPPORTING_PART_RE = re.compile(r"\*\*Supporting Characters?\*\*\s*:?(.*)\Z", re.DOTALL)
_SUPPORTING_ITEM_RE = re.compile(
    r"-?\s*\*\*(\d+)\*\*\s*:\s*(.*?)\s*(?=-?\s*\*\*\d+\*\*\s*:|\Z)", re.DOTALL
)
_GENDERS = {
    "woman": Character.Gender.FEMALE,
    "female": Character.Gender.FEMALE,
    "man": Character.Gender.MALE,
    "male": Character.Gender.MALE,
}


@dataclass
class _Stage:
    """One trial directory, parsed and validated, ready to write."""

    key: str
    directory: Path
    work: dict[str, Any]
    stage: dict[str, Any]
    characters: list[dict[str, Any]]
    scenarios: list[dict[str, Any]]
    questions: list[dict[str, Any]]


def parse_profiles(info: str) -> list[dict[str, Any]]:
    """Split ``characters information`` into profiles, best effort.

    Returns ``[{"role": "main"|"supporting", "index": n, "name", "description"}]``;
    the main character has index 0. The name is the text before the first comma.
    """
    profiles = []
    main = _MAIN_PART_RE.search(info)
    if main:
        profiles.append(_profile("main", 0, main.group(1)))
    supporting = _SUPPORTING_PART_RE.search(info)
    if supporting:
        for item in _SUPPORTING_ITEM_RE.finditer(supporting.group(1)):
            profiles.append(_profile("supporting", int(item.group(1)), item.group(2)))
    return [p for p in profiles if p["name"]]


def _profile(role: str, index: int, text: str) -> dict[str, Any]:
    # The generator joins sentences with an extra dot ("personality..**Supporting").
    description = text.strip()
    if description.endswith(".."):
        description = description.rstrip(".") + "."
    return {
        "role": role,
        "index": index,
        "name": description.split(",", 1)[0].strip(),
        "description": description,
    }


def parse_question_text(text: str) -> tuple[str, int | None, int | None]:
    """Return (mental_state, scenario_from, scenario_to) read from a question's text.

    ``mental_state`` is ``"belief"`` etc., or ``"belief&emotion->intention"`` for an
    influence question; ``""`` when the text names none. "in scenario N" spans N..N,
    "from scenario N to scenario M" N..M and "across the K scenarios" 1..K.
    """
    influence = _INFLUENCE_RE.search(text)
    if influence:
        mental_state = f"{influence.group(1).lower()}->{influence.group(2).lower()}"
    else:
        state = _STATE_RE.search(text)
        mental_state = state.group(1).lower() if state else ""
    if span := _SPAN_FROM_TO_RE.search(text):
        first, last = int(span.group(1)), int(span.group(2))
    elif span := _SPAN_ACROSS_RE.search(text):
        first, last = 1, int(span.group(1))
    elif span := _SPAN_IN_RE.search(text):
        first = last = int(span.group(1))
    else:
        first = last = None
    return mental_state, first, last


def scenario_number(key: str) -> int | None:
    """The scenario number a story key names (``"Scenario 3"`` -> 3), or None."""
    match = _SCENARIO_KEY_RE.match(key)
    return int(match.group(1)) if match else None


def parse_dialogue(value: Any) -> tuple[list[dict[str, str]], str, dict[str, Any]]:
    """Read a scenario's dialogue in any shape the release uses.

    Returns ``(turns, shape, extra)``: ``turns`` is ``[{"speaker", "text"}]`` in
    order, ``shape`` a :class:`DynToMScenario.DialogueShape` value and ``extra`` what
    :func:`dialogue_source` needs to write the source value back equal. Raises
    ``ValueError`` naming the round, speaker or line that cannot be read.
    """
    shape = DynToMScenario.DialogueShape
    if isinstance(value, list):
        turns, sizes = [], []
        for number, round_ in enumerate(value, start=1):
            if not isinstance(round_, dict):
                raise ValueError(
                    f"round {number}: expected an object speaker -> line, "
                    f"got {type(round_).__name__}"
                )
            turns.extend(_object_turns(round_, where=f"round {number}: "))
            sizes.append(len(round_))
        return turns, shape.ROUNDS, {"round_sizes": sizes}
    if isinstance(value, dict):
        return _object_turns(value, where=""), shape.OBJECT, {}
    if isinstance(value, str):
        turns = _text_turns(value)
        # Kept verbatim only when our rendering would not give the same string back
        # (other quotes, blank lines, CRLF ...), so the common case stores no copy.
        extra = {} if render_dialogue_text(turns) == value else {"dialogue_text": value}
        return turns, shape.TEXT, extra
    raise ValueError(
        "expected a list of rounds, an object speaker -> line or a string of "
        f"\"Name: 'line'\" lines, got {type(value).__name__}"
    )


def _object_turns(data: dict[str, Any], *, where: str) -> list[dict[str, str]]:
    turns = []
    for speaker, text in data.items():
        if not isinstance(text, str):
            raise ValueError(
                f"{where}speaker {speaker!r}: expected a string, got {type(text).__name__}"
            )
        turns.append({"speaker": speaker, "text": text})
    return turns


def _text_turns(text: str) -> list[dict[str, str]]:
    turns: list[dict[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = _TEXT_TURN_RE.match(line.strip())
        if match is None:
            if not turns:
                raise ValueError(f"line {number}: expected \"Name: 'line'\", got {line[:60]!r}")
            # A line without "Name:" continues the turn before it.
            turns[-1]["text"] += "\n" + line.strip()
            continue
        speaker, said = match.group(1).strip(), match.group(2).strip()
        if len(said) >= 2 and said[0] == said[-1] and said[0] in "'\"":
            said = said[1:-1]
        turns.append({"speaker": speaker, "text": said})
    return turns


def render_dialogue_text(turns: list[dict[str, str]]) -> str:
    """Turns as the release's dialogue strings write them: ``Name: 'line'`` per line."""
    return "\n".join(f"{t['speaker']}: {TEXT_QUOTE}{t['text']}{TEXT_QUOTE}" for t in turns)


def dialogue_source(turns: list[dict[str, str]], shape: str, extra: dict[str, Any]) -> Any:
    """The inverse of :func:`parse_dialogue`: the dialogue as the source file wrote it."""
    if shape == DynToMScenario.DialogueShape.TEXT:
        return extra.get("dialogue_text", render_dialogue_text(turns))
    if shape == DynToMScenario.DialogueShape.OBJECT:
        return {t["speaker"]: t["text"] for t in turns}
    # Rounds: regroup the turns by the sizes read; turns added later (an edit in the
    # admin) each become a round of their own.
    rounds, start = [], 0
    for size in extra.get("round_sizes", []):
        rounds.append({t["speaker"]: t["text"] for t in turns[start : start + size]})
        start += size
    rounds.extend({t["speaker"]: t["text"]} for t in turns[start:])
    return rounds


def _is_known_state(mental_state: str) -> bool:
    parts = re.split(r"->|&", mental_state)
    return bool(mental_state) and all(part in MENTAL_STATES for part in parts)


# Every DynToMQuestion column the importer writes besides its natural key.
QUESTION_COLUMNS = (
    "position",
    "source_type",
    "question_type",
    "mental_state",
    "scenario_from",
    "scenario_to",
    "text",
    "options",
    "gold_letter",
    "option_reasons",
    "extra",
)


def _insert_questions(rows: list[tuple[int, dict[str, Any]]], *, now: datetime) -> None:
    """INSERT ``(stage_id, row)`` pairs: COPY on PostgreSQL, ``executemany`` elsewhere.

    Measured on 28,655 questions (2 cores, PostgreSQL 15 on the same machine): COPY
    4.4 s, ``executemany`` 12.5 s, multi-row INSERT 13.0 s, ``bulk_create`` 14.9 s.
    On SQLite, in process, ``executemany`` costs little more than building its rows.
    Rows are built as they are sent, so the server parses one chunk while we dump the
    next one's JSON.
    """
    if not rows:
        return
    meta = DynToMQuestion._meta
    names = ["stage_id", "key", *QUESTION_COLUMNS, "created_at", "updated_at"]
    fields = [meta.get_field(name) for name in names]
    json_names = {f.name for f in fields if isinstance(f, models.JSONField)}
    stamp = connection.ops.adapt_datetimefield_value(now)

    def values() -> Iterator[list[Any]]:
        for stage_id, row in rows:
            out: list[Any] = [stage_id, row["key"]]
            for name in QUESTION_COLUMNS:
                value = row[name]
                # json.dumps as Django's JSONField does; an empty extra is the common case.
                if name in json_names:
                    value = "{}" if value == {} else json.dumps(value)
                out.append(value)
            out += [stamp, stamp]
            yield out

    table = connection.ops.quote_name(meta.db_table)
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # psycopg 3's COPY adapts each value as for a query; JSON text becomes jsonb.
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row_values in values():
                    copy.write_row(row_values)
            return
        sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
        pending = values()
        while chunk := list(islice(pending, 1000)):
            cursor.executemany(sql, chunk)


def _check_sizes(path: Path, values: Iterable[tuple[str, str, Any]]) -> None:
    """:func:`field_size_check` on ``(record, field, value)`` read from ``path``, when needed.

    A value read verbatim from a file of S bytes is stored in at most 6*S bytes (a
    byte re-escaped as ``\\u00XX`` at worst), so for files under a sixth of the limit,
    every file of the release, no value is measured: measuring means a JSON dump of
    each, a third of an import's time. The check runs here, where the error can name
    the file, the record and the source field.
    """
    if path.stat().st_size * 6 <= settings.TOMLAB_IMPORT_MAX_FIELD_BYTES:
        return
    for record, field, value in values:
        field_size_check(value, path=path, record=record, field=field)


def _natural_key(path: Path) -> tuple:
    # trial50 before trial149, as a person would list them.
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path.name))


class DynToMImporter(BenchmarkImporter):
    """Import DynToM trial directories (atomic when run through ``benchmark_import``)."""

    format_name = Benchmark.DYNTOM
    help = "a trialN directory, or a directory of them, each with story.json + question_new.json"

    def run(self, path: Path) -> ImportReport:
        trial_dirs = self._trial_dirs(path)
        batches = [
            trial_dirs[start : start + STAGES_PER_BATCH]
            for start in range(0, len(trial_dirs), STAGES_PER_BATCH)
        ]
        # Batch n+1 is read (files and checks, no database) while batch n is written,
        # which mostly waits on the database with the GIL released: on PostgreSQL the
        # reading then costs next to no wall time.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dyntom-read") as reader:
            pending = reader.submit(self._parse_batch, batches[0])
            for index in range(len(batches)):
                batch = pending.result()
                if index + 1 < len(batches):
                    pending = reader.submit(self._parse_batch, batches[index + 1])
                for _ in batch:
                    self.progress(1)
                self._write(batch)
        return self.report

    def _parse_batch(self, directories: list[Path]) -> list[_Stage]:
        return [self._parse_trial(directory) for directory in directories]

    # Reading and validating ------------------------------------------------------

    def _trial_dirs(self, path: Path) -> list[Path]:
        if not path.is_dir():
            raise ImportDataError(
                "not a directory (expected a trial directory or a folder of them)", path=path
            )
        if (path / STORY_FILE).exists() or (path / QUESTIONS_FILE).exists():
            return [path]
        dirs = sorted(
            (p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")),
            key=_natural_key,
        )
        if not dirs:
            raise ImportDataError(
                f"no trial directories here and no {STORY_FILE} / {QUESTIONS_FILE}", path=path
            )
        return dirs

    def _parse_trial(self, directory: Path) -> _Stage:
        for name in (STORY_FILE, QUESTIONS_FILE):
            if not (directory / name).is_file():
                raise ImportDataError(
                    f"trial directory {directory} has no {name}", path=directory / name
                )
        story_path = directory / STORY_FILE
        # Size limits (settings.TOMLAB_IMPORT_MAX_BYTES) are checked before parsing.
        story = read_json(story_path, limit="dyntom-story")
        if not isinstance(story, dict):
            raise ImportDataError("expected a JSON object", path=story_path)
        key = directory.name
        for name in STORY_REQUIRED:
            if name not in story:
                raise ImportDataError("required field missing", path=story_path, field=name)

        main_character = self._string(story, "main character", story_path, "story")
        info = self._string(story, "characters information", story_path, "story")
        count = story["scenario numbers"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ImportDataError(
                f"expected a positive integer, got {count!r}",
                path=story_path,
                field="scenario numbers",
            )
        extra: dict[str, Any] = {}
        unknown = report_unknown_fields(
            self.report,
            story,
            (*STORY_REQUIRED, *STORY_OPTIONAL),
            path=story_path,
            record="story",
        )
        if unknown:
            extra["unknown"] = unknown
        absent = [name for name in STORY_OPTIONAL if name not in story]
        if absent:
            extra["absent"] = absent
        location = self._string(story, "social setting", story_path, "story", default="")
        category = self._string(story, "social setting type", story_path, "story", default="")

        sketch_columns, sketch_unknown = self._parse_sketch(story["sketch"], story_path)
        if sketch_unknown:
            extra["sketch_unknown"] = sketch_unknown
        scenarios = self._parse_scenarios(story["story"], count, story_path)
        # Compared by number: a story keyed "1" still has its trajectory keyed "scenario 1".
        trajectory_numbers = {scenario_number(k) for k in sketch_columns["trajectory"]}
        if trajectory_numbers != {s["number"] for s in scenarios}:
            self.report.warn(
                f"{story_path}: field 'mental states analysis in every scenario': its scenario "
                "numbers differ from those of 'story'"
            )

        profiles = parse_profiles(info)
        if not any(p["role"] == "main" for p in profiles):
            self.report.warn(
                f"{story_path}: field 'characters information': no **Main Character** part found"
            )
        _check_sizes(
            story_path,
            [
                ("story", "characters information", info),
                ("story", "social setting", location),
                *(("sketch", name, sketch_columns[col]) for name, col in SKETCH_FIELDS.items()),
                *((row["key"], "background", row["background"]) for row in scenarios),
            ],
        )
        # Turns are not verbatim source values ("A:" becomes {"speaker": "A", "text": ""}),
        # so the bound of _check_sizes does not hold for them: always measured.
        for row in scenarios:
            field_size_check(row["dialogue"], path=story_path, record=row["key"], field="dialogue")
        questions, wrapped = self._parse_questions(
            directory / QUESTIONS_FILE, main_character, count
        )
        if wrapped:
            extra["questions_wrapped"] = True
        return _Stage(
            key=key,
            directory=directory,
            work={
                "benchmark": Benchmark.DYNTOM,
                "key": key,
                "title": f"{key}: {main_character}",
                "kind": Work.Kind.SOCIAL_STAGE,
                "split": self.split,
                "source": str(directory),
            },
            stage={
                "main_character": main_character,
                "scenario_count": count,
                "location": location,
                "location_category": category,
                "characters_information": info,
                "profiles": profiles,
                **sketch_columns,
                "extra": extra,
            },
            characters=self._characters(main_character, profiles, story_path),
            scenarios=scenarios,
            questions=questions,
        )

    def _parse_sketch(self, sketch: Any, path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        if not isinstance(sketch, dict):
            raise ImportDataError("expected a JSON object", path=path, field="sketch")
        columns = {}
        for name, column in SKETCH_FIELDS.items():
            value = sketch.get(name)
            if not isinstance(value, dict):
                raise ImportDataError(
                    "required object missing or not an object",
                    path=path,
                    record="sketch",
                    field=name,
                )
            columns[column] = value
        unknown = report_unknown_fields(
            self.report, sketch, SKETCH_FIELDS, path=path, record="sketch"
        )
        return columns, unknown

    def _parse_scenarios(self, story: Any, count: int, path: Path) -> list[dict[str, Any]]:
        if not isinstance(story, dict):
            raise ImportDataError("expected a JSON object", path=path, field="story")
        rows = []
        for key, scenario in story.items():
            number = scenario_number(key)
            if number is None:
                raise ImportDataError(
                    'scenario keys must read "scenario N" (any case or separator) or "N"',
                    path=path,
                    record=key,
                    field="story",
                )
            if not isinstance(scenario, dict):
                raise ImportDataError(
                    "expected a JSON object", path=path, record=key, field="story"
                )
            background = self._string(scenario, "background", path, key)
            if "dialogue" not in scenario:
                raise ImportDataError(
                    "required field missing", path=path, record=key, field="dialogue"
                )
            try:
                dialogue, shape, dialogue_extra = parse_dialogue(scenario["dialogue"])
            except ValueError as exc:
                raise ImportDataError(str(exc), path=path, record=key, field="dialogue") from None
            unknown = report_unknown_fields(
                self.report, scenario, SCENARIO_FIELDS, path=path, record=key
            )
            if unknown:
                dialogue_extra["unknown"] = unknown
            rows.append(
                {
                    "number": number,
                    "key": key,
                    "background": background,
                    "dialogue": dialogue,
                    "dialogue_shape": shape,
                    "extra": dialogue_extra,
                }
            )
        numbers = sorted(row["number"] for row in rows)
        if len(set(numbers)) != len(numbers):
            twice = sorted({n for n in numbers if numbers.count(n) > 1})
            raise ImportDataError(
                f"scenario(s) {twice} given under two keys", path=path, field="story"
            )
        if numbers != list(range(1, count + 1)):
            raise ImportDataError(
                f"is {count} but 'story' has scenario(s) {numbers}",
                path=path,
                field="scenario numbers",
            )
        return sorted(rows, key=lambda row: row["number"])

    def _parse_questions(
        self, path: Path, main_character: str, scenario_count: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """The question rows, and whether the file wrapped them in ``{"questions": …}``."""
        data = read_json(path, limit="dyntom-questions")
        if not isinstance(data, dict):
            raise ImportDataError("expected a JSON object of questions by key", path=path)
        # The authors' reader (llm_api/prompt.py) also takes {"questions": {...}}.
        wrapped = list(data) == ["questions"] and isinstance(data["questions"], dict)
        if wrapped:
            data = data["questions"]
        rows = []
        for position, (key, question) in enumerate(data.items()):
            if not isinstance(question, dict):
                raise ImportDataError("expected a JSON object", path=path, record=key)
            for name in QUESTION_REQUIRED:
                if name not in question:
                    raise ImportDataError(
                        "required field missing", path=path, record=key, field=name
                    )
            match = _QUESTION_KEY_RE.match(key)
            if not match or match.group(1) not in QUESTION_TYPES:
                raise ImportDataError(
                    f"unknown question kind; keys start with one of {sorted(QUESTION_TYPES)}",
                    path=path,
                    record=key,
                    field="question type",
                )
            text = self._string(question, "question", path, key)
            source_type = self._string(question, "question type", path, key)
            if not match.group(1).startswith(source_type):
                self.report.warn(
                    f"{path}: record {key}: field 'question type': {source_type!r} does not "
                    "match the key"
                )
            options = question["options"]
            if (
                not isinstance(options, list)
                or not options
                or not all(isinstance(o, str) and o for o in options)
            ):
                raise ImportDataError(
                    "expected a non-empty list of non-empty strings",
                    path=path,
                    record=key,
                    field="options",
                )
            letters = string.ascii_lowercase[: len(options)]
            if len(options) > len(letters):
                raise ImportDataError(
                    f"{len(options)} options; at most 26 can be lettered",
                    path=path,
                    record=key,
                    field="options",
                )
            gold = question["true answer"]
            if not isinstance(gold, str) or len(gold) != 1 or gold not in letters:
                raise ImportDataError(
                    f"{gold!r} is not one of the option letters a-{letters[-1]}",
                    path=path,
                    record=key,
                    field="true answer",
                )
            extra: dict[str, Any] = {}
            if "option reasons" in question:
                reasons = question["option reasons"]
                if not isinstance(reasons, list):
                    raise ImportDataError(
                        "expected a list", path=path, record=key, field="option reasons"
                    )
            else:
                reasons = []
                extra["absent"] = ["option reasons"]
            unknown = report_unknown_fields(
                self.report,
                question,
                (*QUESTION_REQUIRED, *QUESTION_OPTIONAL),
                path=path,
                record=key,
            )
            if unknown:
                extra["unknown"] = unknown

            mental_state, first, last = parse_question_text(text)
            if not _is_known_state(mental_state):
                self.report.warn(
                    f"{path}: record {key}: field 'question': no known mental state in the text"
                )
                mental_state = ""
            if first is None:
                self.report.warn(
                    f"{path}: record {key}: field 'question': no scenario span in the text"
                )
            elif not 1 <= first <= last <= scenario_count:
                raise ImportDataError(
                    f"spans scenarios {first}-{last} but the stage has {scenario_count}",
                    path=path,
                    record=key,
                    field="question",
                )
            rows.append(
                {
                    "key": key,
                    "position": position,
                    "source_type": source_type,
                    "question_type": QUESTION_TYPES[match.group(1)],
                    "mental_state": mental_state,
                    "scenario_from": first,
                    "scenario_to": last,
                    "text": text,
                    "options": options,
                    "gold_letter": gold,
                    "option_reasons": reasons,
                    "extra": extra,
                }
            )
        if not rows:
            self.report.warn(f"{path}: no questions")
        _check_sizes(
            path,
            (
                (row["key"], source_name, row[name])
                for row in rows
                for name, source_name in (
                    ("text", "question"),
                    ("options", "options"),
                    ("option_reasons", "option reasons"),
                )
            ),
        )
        return rows, wrapped

    def _characters(
        self, main_character: str, profiles: list[dict[str, Any]], path: Path
    ) -> list[dict[str, Any]]:
        # The "main character" field names the main one even when the profile text
        # cannot be parsed; the profile, when found, adds its description and gender.
        main_profile = next((p for p in profiles if p["role"] == "main"), None)
        if main_profile and main_profile["name"] != main_character:
            self.report.warn(
                f"{path}: field 'characters information': main profile names "
                f"{main_profile['name']!r}, 'main character' is {main_character!r}"
            )
        people = [(main_character, 0, True, main_profile)]
        people += [(p["name"], p["index"], False, p) for p in profiles if p["role"] != "main"]
        rows, seen = [], set()
        for name, position, is_main, profile in people:
            if name in seen:
                self.report.warn(
                    f"{path}: field 'characters information': {name!r} listed twice; kept once"
                )
                continue
            seen.add(name)
            description = profile["description"] if profile else ""
            gender_word = description.split(",")[1].strip().lower() if "," in description else ""
            gender = _GENDERS.get(gender_word, Character.Gender.UNKNOWN)
            rows.append(
                {
                    "name": name,
                    "position": position,
                    "is_main": is_main,
                    "gender": gender,
                    "gender_source": (
                        Character.GenderSource.SOURCE
                        if gender != Character.Gender.UNKNOWN
                        else Character.GenderSource.NONE
                    ),
                    "extra": {"description": description} if description else {},
                }
            )
        return rows

    @staticmethod
    def _string(
        data: dict[str, Any], name: str, path: Path, record: str, default: str | None = None
    ) -> str:
        if name not in data and default is not None:
            return default
        value = data.get(name)
        if not isinstance(value, str):
            raise ImportDataError(
                f"expected a string, got {type(value).__name__}",
                path=path,
                record=record,
                field=name,
            )
        return value

    # Writing -----------------------------------------------------------------------

    def _write(self, batch: list[_Stage]) -> None:
        """Upsert one batch: the same handful of queries whatever its size."""
        keys = [s.key for s in batch]
        # Where a work was first imported from stays its source: re-importing an
        # export (or a moved copy) of the same data must count as unchanged.
        sources = dict(
            Work.objects.filter(benchmark=Benchmark.DYNTOM, key__in=keys).values_list(
                "key", "source"
            )
        )
        work_ids = upsert(
            Work,
            [{**s.work, "source": sources.get(s.key, s.work["source"])} for s in batch],
            key_fields=("benchmark", "key"),
            scope={"benchmark": Benchmark.DYNTOM, "key__in": keys},
            report=self.report,
        )
        work_id = {s.key: work_ids[(Benchmark.DYNTOM, s.key)] for s in batch}
        stage_ids = upsert(
            DynToMStage,
            [{"work_id": work_id[s.key], **s.stage} for s in batch],
            key_fields=("work_id",),
            scope={"work_id__in": list(work_id.values())},
            report=self.report,
        )
        stage_id = {s.key: stage_ids[(work_id[s.key],)] for s in batch}
        upsert(
            Character,
            [{"work_id": work_id[s.key], **row} for s in batch for row in s.characters],
            key_fields=("work_id", "name"),
            scope={"work_id__in": list(work_id.values())},
            report=self.report,
        )
        upsert(
            DynToMScenario,
            [{"stage_id": stage_id[s.key], **row} for s in batch for row in s.scenarios],
            key_fields=("stage_id", "number"),
            scope={"stage_id__in": list(stage_id.values())},
            report=self.report,
        )
        self._write_questions(batch, stage_id)
        self._warn_stale(batch, work_id, stage_id)

    def _write_questions(self, batch: list[_Stage], stage_id: dict[str, int]) -> None:
        """:func:`upsert` for questions, minus the ORM's cost per row.

        Questions are 89% of a stage's rows and most of its bytes (the release's
        question files hold ~290 MB of JSON). ``upsert`` builds a model instance per
        new row and dumps every JSON value three times (size check, comparison,
        insert); here a new row is dumped once and inserted with ``executemany``, an
        existing one is compared as loaded Python values, and sizes were bounded per
        file in :meth:`_parse_questions`. Changed rows (rare) go through
        ``bulk_update``. Same counts in the report as ``upsert``.
        """
        label = DynToMQuestion.__name__
        existing = {
            (row[0], row[1]): row
            for row in DynToMQuestion.objects.filter(stage_id__in=list(stage_id.values()))
            .order_by()
            .values_list("stage_id", "key", "pk", *QUESTION_COLUMNS)
        }
        new: list[tuple[int, dict[str, Any]]] = []
        changed: list[DynToMQuestion] = []
        now = timezone.now()
        for stage in batch:
            sid = stage_id[stage.key]
            for row in stage.questions:
                current = existing.get((sid, row["key"]))
                if current is None:
                    new.append((sid, row))
                elif current[3:] != tuple(row[name] for name in QUESTION_COLUMNS):
                    obj = DynToMQuestion(pk=current[2], stage_id=sid, **row)
                    obj.updated_at = now
                    changed.append(obj)
                else:
                    self.report.unchanged[label] += 1
        _insert_questions(new, now=now)
        if changed:
            DynToMQuestion.objects.bulk_update(
                changed, [*QUESTION_COLUMNS, "updated_at"], batch_size=1000
            )
        self.report.created[label] += len(new)
        self.report.updated[label] += len(changed)

    def _warn_stale(
        self, batch: list[_Stage], work_id: dict[str, int], stage_id: dict[str, int]
    ) -> None:
        # Rows a re-import no longer lists are kept (responses may point at them), but
        # said, since the export would then differ from the source.
        checks = [
            (Character, "work_id", work_id, "characters", "character(s)"),
            (DynToMScenario, "stage_id", stage_id, "scenarios", "scenario(s)"),
            (DynToMQuestion, "stage_id", stage_id, "questions", "question(s)"),
        ]
        for model, fk, ids, attr, noun in checks:
            in_db = dict(
                model.objects.filter(**{f"{fk}__in": list(ids.values())})
                .order_by()
                .values(fk)
                .annotate(n=Count("pk"))
                .values_list(fk, "n")
            )
            for stage in batch:
                stale = in_db.get(ids[stage.key], 0) - len(getattr(stage, attr))
                if stale > 0:
                    self.report.warn(
                        f"{stage.directory}: {stale} {noun} in the database are no longer in "
                        "the source; kept"
                    )
