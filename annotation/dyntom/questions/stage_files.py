"""Files of a folder of DynToM stages: find ``trialN/story.json``, write ``question_new.json``.

All stories are read and checked before anything is written, so a broken
``story.json`` anywhere writes nothing. Reading goes through the importer's
:func:`benchmarks.importers.base.read_json` (size limit ``dyntom-story``, located
JSON errors).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.importers.base import ImportDataError, read_json

from . import questions_from_trajectory, stage_rng
from .reproduction import StageReproduction, compare_questions
from .trajectory import Trajectory, read_trajectory

STORY_FILE = "story.json"
QUESTIONS_FILE = "question_new.json"


@dataclass(frozen=True)
class StageSource:
    """One stage found under the stages folder, its story already read."""

    key: str
    directory: Path
    trajectory: Trajectory


@dataclass(frozen=True)
class StageResult:
    """What :func:`write_stage_questions` did for one stage."""

    key: str
    scenario_count: int
    questions: int
    out_path: Path
    reproduction: StageReproduction | None


def find_stages(stages_dir: Path) -> list[StageSource]:
    """Every ``trialN/story.json`` under ``stages_dir`` (or ``stages_dir`` itself), read.

    Raises :class:`ImportDataError` naming the file, record and field of the first
    bad story, or the folder when it holds no stage.
    """
    if not stages_dir.is_dir():
        raise ImportDataError("not a directory", path=stages_dir)
    if (stages_dir / STORY_FILE).is_file():
        directories = [stages_dir]
    else:
        directories = sorted(
            (p for p in stages_dir.iterdir() if p.is_dir() and (p / STORY_FILE).is_file()),
            key=_natural_key,
        )
    if not directories:
        raise ImportDataError(f"no trial directories with a {STORY_FILE} here", path=stages_dir)
    stages = []
    for directory in directories:
        path = directory / STORY_FILE
        story = read_json(path, limit="dyntom-story")
        stages.append(StageSource(directory.name, directory, read_trajectory(story, path=path)))
    return stages


def write_stage_questions(
    stages: list[StageSource], out_dir: Path, *, seed: int
) -> Iterator[StageResult]:
    """Generate and write ``out_dir/<stage>/question_new.json`` for each stage.

    Yields one result per stage as it is written, with the comparison against the
    ``question_new.json`` beside the story when there is one.
    """
    for stage in stages:
        questions = questions_from_trajectory(stage.trajectory, stage_rng(seed, stage.key))
        reproduction = None
        original_path = stage.directory / QUESTIONS_FILE
        if original_path.is_file():
            original = read_json(original_path, limit="dyntom-questions")
            try:
                reproduction = compare_questions(
                    stage.key, stage.trajectory.scenario_count, questions, original
                )
            except ValueError as exc:
                raise ImportDataError(str(exc), path=original_path) from None
        out_path = out_dir / stage.key / QUESTIONS_FILE
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(dump_questions(questions), encoding="utf-8")
        yield StageResult(
            stage.key, stage.trajectory.scenario_count, len(questions), out_path, reproduction
        )


def dump_questions(questions: dict[str, Any]) -> str:
    """JSON text as the release writes it: ``json.dump(..., indent=4)``, ASCII, no final newline."""
    return json.dumps(questions, indent=4)


def _natural_key(path: Path) -> tuple:
    # trial50 before trial149, as the importer lists them.
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path.name))
