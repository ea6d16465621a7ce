"""Predictions JSONL as an upload source (the /data/ import pages and POST /api/imports/).

``benchmarks.uploads`` holds the registry of what can be uploaded; the item bank may not
import this app, so ``ModelingConfig.ready()`` registers this source there. The import
itself is :func:`~modeling.runs.prediction_import.predictions_import`, as
``manage.py import_predictions`` runs it; the file's size is checked before it is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.importers.base import ProgressCallback, input_size_check
from benchmarks.uploads import UploadOutcome, UploadSource, layout_single

from ..models import Prediction
from .prediction_import import predictions_import

PREVIEW_PREDICTIONS = 3
RAW_PREVIEW_CHARS = 400


def predictions_upload_run(
    path: Path, options: dict[str, Any], progress: ProgressCallback
) -> UploadOutcome:
    input_size_check(path, limit="predictions")
    result = predictions_import(
        path=path,
        name=options.get("name", ""),
        benchmark=options.get("benchmark") or None,
        model=options.get("model") or None,
    )
    # predictions_import reports no progress as it goes: the whole file at the end.
    progress(sum(sum(s.predictions.values()) for s in result.runs))
    notes = [
        f"run {s.run.name!r} ({s.run.benchmark} {s.run.method}, {s.run.model}): "
        f"{'new' if s.created else 'existing'}"
        + (f"; correct {s.correct}/{s.scored}" if s.scored else "")
        + "".join(f", {n} {status}" for status, n in sorted(s.by_status.items()) if status != "ok")
        for s in result.runs
    ]
    if result.skipped:
        notes.append(f"skipped {result.skipped} prediction(s) of other benchmarks or models")
    return UploadOutcome(
        report=result.report, notes=notes, refs={"runs": [s.run.pk for s in result.runs]}
    )


def _item_label(prediction: Prediction) -> str:
    if prediction.speaker_instance_id:
        instance = prediction.speaker_instance
        return f"{instance.scene.work.title} · {instance.scene.source_id} · {instance.code}"
    if prediction.dyntom_question_id:
        question = prediction.dyntom_question
        return f"{question.stage.work.key} · {question.key}"
    if prediction.qa_item_id:
        item = prediction.qa_item
        return f"{item.work.title} · {item.question[:120]}"
    if prediction.mc_item_id:
        return f"{prediction.mc_item.work.key} · {prediction.mc_item.item_id}"
    return ""


def predictions_upload_preview(
    path: Path, options: dict[str, Any], outcome: UploadOutcome
) -> list[dict[str, Any]]:
    """The first predictions of the runs an upload imported: of a predictions file, and
    of a harness's results (``interop`` uses it for Inspect logs and lm-eval samples)."""
    predictions = (
        Prediction.objects.filter(run_id__in=outcome.refs.get("runs", []))
        .select_related(
            "run",
            "speaker_instance__scene__work",
            "dyntom_question__stage__work",
            "qa_item__work",
            "mc_item__work",
        )
        .order_by("run_id", "pk")[:PREVIEW_PREDICTIONS]
    )
    return [
        {
            "kind": "prediction",
            "title": p.run.name,
            "item": _item_label(p),
            "model": p.model or p.run.model,
            "raw_output": p.raw_output[:RAW_PREVIEW_CHARS],
            "parsed_answer": p.parsed_answer,
            "parse_status": p.parse_status,
            "correct": p.correct,
        }
        for p in predictions
    ]


PREDICTIONS_SOURCE = UploadSource(
    name="predictions",
    label="Predictions",
    help="Predictions made elsewhere, JSON Lines (docs/predictions-jsonl.md), imported as "
    "runs; correctness is computed against the item bank.",
    extensions=(".jsonl",),
    options=("name", "benchmark", "model"),
    required=("name",),
    layout=layout_single("predictions", (".jsonl",)),
    run=predictions_upload_run,
    preview=predictions_upload_preview,
)
