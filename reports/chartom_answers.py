"""What the CharToM-QA tables read of a run, packed once: its answers with their scores.

Every CharToM-QA table reads the same few values of each first-sample answer: its
question, correctness, context length, both scoring modes' verdicts on its judge
replies, and its text-similarity scores. Reading 100,000 predictions with their
``details`` and scoring each response at every build took most of a report's first
build, so each run is read and scored once and kept as one
:class:`~reports.models.PackedRun` row (``reports.run_packs`` keeps it current): the
values as columns, JSON, compressed. The questions' dimension and directness are not
packed: the report reads them at each build (:func:`~reports.selectors.chartom_item_labels`),
so an edited question needs no repacking.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from modeling.models import Prediction, Run
from modeling.pipelines.chartom_qa import REFERENCE, STRICT, ResponseScore, response_score
from reports.selectors import chartom_pack_rows, run_prediction_counts

from .run_packs import run_packs

GENERATIVE = "generative"
MULTICHOICE = "multichoice"
TASKS = (GENERATIVE, MULTICHOICE)


@dataclass(frozen=True)
class RunAnswers:
    """One CharToM-QA run's predictions as its report reads them.

    ``predictions``, ``unparseable`` and ``samples`` count the predictions that name a
    question. ``task`` is the first ``details["task"]`` that names one, in prediction id
    order (the import convention), else ``None``. The lists hold the first sample's
    answers in prediction id order; ``contexts`` each answer's ``details["context"]``,
    ``None`` where ``context_given`` says the answer names none. ``strict`` and
    ``reference`` hold each answer's :class:`ResponseScore` in that mode as columns,
    one list per field; they are empty for a run that is not generative.
    """

    predictions: int = 0
    unparseable: int = 0
    samples: int = 0
    task: str | None = None
    ids: Sequence[int] = ()
    items: Sequence[int] = ()
    correct: Sequence[bool | None] = ()
    contexts: Sequence[Any] = ()
    context_given: Sequence[bool] = ()
    rouge_l: Sequence[float | None] = ()
    bertscore_f1: Sequence[float | None] = ()
    strict: dict[str, list[Any]] | None = None
    reference: dict[str, list[Any]] | None = None


def run_task(answers: RunAnswers, method: str) -> str:
    """Generative or multiple choice: by the predictions' ``task``, else by the method."""
    if answers.task in TASKS:
        return answers.task
    return GENERATIVE if method == GENERATIVE else MULTICHOICE


def _columns(scores: list[ResponseScore]) -> dict[str, list[Any]]:
    values = list(zip(*scores, strict=True)) or [()] * len(ResponseScore._fields)
    return {
        field: list(column) for field, column in zip(ResponseScore._fields, values, strict=True)
    }


def _pack(run_id: int) -> tuple[int, int, bytes]:
    """(count and highest id of all the run's predictions, the packed answers), read in
    one pass; each first-sample response of a generative run scored in both modes."""
    rows = list(chartom_pack_rows(run_id))
    n, last = len(rows), (rows[-1]["id"] if rows else 0)
    answered = [row for row in rows if row["qa_item_id"] is not None]
    details = [row["details"] if isinstance(row["details"], dict) else {} for row in answered]
    task = next((d["task"] for d in details if d.get("task") in TASKS), None)
    method = Run.objects.filter(pk=run_id).values_list("method", flat=True).first() or ""
    first = [(row, d) for row, d in zip(answered, details, strict=True) if row["sample_index"] == 0]
    generative = run_task(RunAnswers(task=task), method) == GENERATIVE
    packed = {
        "predictions": len(answered),
        "unparseable": sum(row["parse_status"] != Prediction.ParseStatus.OK for row in answered),
        "samples": len({row["sample_index"] for row in answered}),
        "task": task,
        "ids": [row["id"] for row, _ in first],
        "items": [row["qa_item_id"] for row, _ in first],
        "correct": [row["correct"] for row, _ in first],
        "contexts": [d.get("context") for _, d in first],
        "context_given": [int("context" in d) for _, d in first],
        "rouge_l": [d.get("rouge_l") for _, d in first],
        "bertscore_f1": [d.get("bertscore_f1") for _, d in first],
        "strict": _columns([response_score(d, STRICT) for _, d in first]) if generative else None,
        "reference": (
            _columns([response_score(d, REFERENCE) for _, d in first]) if generative else None
        ),
    }
    return n, last, zlib.compress(json.dumps(packed, separators=(",", ":")).encode(), 1)


def _unpack(data: bytes) -> RunAnswers:
    packed = json.loads(zlib.decompress(data))
    packed["context_given"] = [bool(given) for given in packed["context_given"]]
    return RunAnswers(**packed)


def run_answers(
    run_ids: Sequence[int], counts: dict[int, dict[str, int]] | None = None
) -> dict[int, RunAnswers]:
    """Each CharToM-QA run's packed answers, packing (and storing) any that are missing
    or stale. ``counts`` is ``selectors.run_prediction_counts`` of these runs when the
    caller has it."""
    if counts is None:
        counts = run_prediction_counts(run_ids=run_ids)
    return {
        run_id: RunAnswers() if data is None else _unpack(data)
        for run_id, data in run_packs(run_ids, counts, _pack).items()
    }
