"""Write DynToM stages back as ``<out>/<trial>/story.json`` + ``question_new.json``.

The inverse of :mod:`benchmarks.importers.dyntom`: what the importer kept in
``extra`` (unknown keys, absent optional keys) is put back, so the files load equal
to the ones imported, and each dialogue goes back to the shape it was read in
(rounds, one object, or one string).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.db.models import Prefetch, QuerySet

from benchmarks.importers.dyntom import (
    QUESTIONS_FILE,
    SKETCH_FIELDS,
    STORY_FILE,
    dialogue_source,
)
from benchmarks.models import DynToMQuestion, DynToMScenario, DynToMStage


def export(works: QuerySet, out: Path) -> int:
    """Write one directory per stage of ``works`` under ``out``; return the number of stages."""
    stages = (
        DynToMStage.objects.filter(work__in=works)
        .select_related("work")
        .prefetch_related(
            Prefetch("scenarios", queryset=DynToMScenario.objects.order_by("number")),
            Prefetch("questions", queryset=DynToMQuestion.objects.order_by("position")),
        )
        .order_by("work__key")
    )
    count = 0
    for stage in stages:
        directory = out / stage.work.key
        directory.mkdir(parents=True, exist_ok=True)
        _write_json(directory / STORY_FILE, story_document(stage))
        _write_json(directory / QUESTIONS_FILE, questions_document(stage))
        count += 1
    return count


def story_document(stage: DynToMStage) -> dict[str, Any]:
    """``story.json`` for a stage whose ``scenarios`` are loaded in order."""
    absent = set(stage.extra.get("absent", []))
    document: dict[str, Any] = {}
    # Key order follows the real files; readers compare loaded JSON, not bytes.
    if "social setting" not in absent:
        document["social setting"] = stage.location
    if "social setting type" not in absent:
        document["social setting type"] = stage.location_category
    columns = {v: k for k, v in SKETCH_FIELDS.items()}
    document.update(
        {
            "main character": stage.main_character,
            "scenario numbers": stage.scenario_count,
            "characters information": stage.characters_information,
            "sketch": {
                columns["relationships"]: stage.relationships,
                columns["trajectory"]: stage.trajectory,
                columns["change_analysis"]: stage.change_analysis,
                **stage.extra.get("sketch_unknown", {}),
            },
            "story": {
                scenario.key: {
                    "background": scenario.background,
                    "dialogue": dialogue_source(
                        scenario.dialogue, scenario.dialogue_shape, scenario.extra
                    ),
                    **scenario.extra.get("unknown", {}),
                }
                for scenario in stage.scenarios.all()
            },
            **stage.extra.get("unknown", {}),
        }
    )
    return document


def questions_document(stage: DynToMStage) -> dict[str, Any]:
    """``question_new.json`` for a stage whose ``questions`` are loaded in order."""
    document = {}
    for question in stage.questions.all():
        item: dict[str, Any] = {
            "question": question.text,
            "true answer": question.gold_letter,
            "options": question.options,
            "question type": question.source_type,
        }
        if "option reasons" not in question.extra.get("absent", []):
            item["option reasons"] = question.option_reasons
        item.update(question.extra.get("unknown", {}))
        document[question.key] = item
    if stage.extra.get("questions_wrapped"):
        return {"questions": document}
    return document


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
