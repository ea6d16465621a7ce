"""Experts score generative model answers (CharToM-QA Appendix E, Table 7).

A researcher samples generative CharToM-QA answers of some runs into a
:class:`JudgementSample`; each sampled answer becomes an :class:`AnnotationTask` of
kind ``judgement`` for ``k`` experts. An expert sees the question, the plot, the
reference answer and the model's answer, and gives a score from 0 (nonsense) to 1.0
(perfect) in steps of 0.1. The expert is blind: the screen never shows which model or
run answered, nor what the LLM judge said (bonus points covered, defects). The report
correlates the experts' mean score per answer with BPC, RougeL and BERTScore.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Q, QuerySet, Sum

from benchmarks.models import Benchmark
from modeling.models import Prediction, Run
from modeling.pipelines.chartom_qa.predictions import generative_predictions

from .check_decisions import settled_in_force
from .models import (
    DEFAULT_REVIEW_SPREAD,
    AnnotationTask,
    JudgementSample,
    TaskAssignment,
    TaskKind,
)
from .workflow import WorkflowError, assignment_lock, assignment_submit, task_take

KIND = TaskKind.JUDGEMENT
MAX_K = 10
MAX_COMMENT = 2000
NOT_FOUND = "no such task in your queue"
SCORES = [round(i / 10, 1) for i in range(11)]  # 0.0, 0.1, ... 1.0


# --- selectors -------------------------------------------------------------------------


def judgeable_answers(run_ids: Sequence[int]) -> QuerySet[Prediction]:
    """First-sample generative answers of ``run_ids`` that have a text to judge."""
    return (
        generative_predictions(run_ids)
        .filter(sample_index=0)
        .filter(Q(raw_output__gt="") | Q(call__raw_output__gt=""))
    )


def generative_runs() -> list[dict[str, Any]]:
    """CharToM-QA runs with generative answers to judge, and how many they have."""
    runs = list(
        Run.objects.filter(benchmark=Benchmark.CHARTOM_QA).order_by("pk").values("pk", "name")
    )
    counts = dict(
        judgeable_answers([r["pk"] for r in runs])
        .order_by()
        .values_list("run_id")
        .annotate(n=Count("pk"))
    )
    return [{**r, "answers": counts[r["pk"]]} for r in runs if counts.get(r["pk"])]


def judgement_samples() -> list[dict[str, Any]]:
    """Every sample with its answers, scores in and scores due."""
    samples = list(JudgementSample.objects.order_by("-created_at"))
    tasks = {
        row["sample_id"]: row
        for row in AnnotationTask.objects.filter(kind=KIND)
        .order_by()
        .values("sample_id")
        .annotate(answers=Count("pk"), due=Sum("k"))
    }
    submitted = dict(
        TaskAssignment.objects.filter(task__kind=KIND, submitted_at__isnull=False)
        .order_by()
        .values_list("task__sample_id")
        .annotate(n=Count("pk"))
    )
    return [
        {
            "sample": s,
            "answers": tasks.get(s.pk, {}).get("answers", 0),
            "due": tasks.get(s.pk, {}).get("due", 0),
            "submitted": submitted.get(s.pk, 0),
        }
        for s in samples
    ]


def judgement_slot(*, assignment_id: int, annotator: AbstractBaseUser) -> TaskAssignment | None:
    """The annotator's own judgement slot with its sample; None for anything else."""
    return (
        TaskAssignment.objects.filter(pk=assignment_id, annotator=annotator, task__kind=KIND)
        .select_related("task", "task__sample")
        .first()
    )


def judgement_screen(slot: TaskAssignment) -> dict[str, Any]:
    """Exactly what the expert may see of the answer: never the run, model or judge output.

    The screen is built from this dict alone, so nothing else of the prediction can
    reach the page by a template change.
    """
    return answer_screen(slot.task.prediction_id)


def answer_screen(prediction_id: int) -> dict[str, Any]:
    """The blind view of one answer (:func:`judgement_screen`), also the reviewer's."""
    prediction = (
        Prediction.objects.select_related("call", "qa_item", "qa_item__character")
        .only(
            "raw_output",
            "call__raw_output",
            "qa_item__question",
            "qa_item__answer",
            "qa_item__dimension",
            "qa_item__context_0",
            "qa_item__context_1000",
            "qa_item__context_2000",
            "qa_item__character__name",
        )
        .get(pk=prediction_id)
    )
    item = prediction.qa_item
    return {
        "question": item.question,
        "character": item.character.name if item.character else "",
        "dimension": item.get_dimension_display(),
        "context_0": item.context_0 or "",
        "context_1000": item.context_1000 or "",
        "context_2000": item.context_2000 or "",
        "reference": item.answer,
        "answer": prediction.reply,
    }


def judgement_scores(
    *, run_ids: Sequence[int] | None = None, settled: bool = True
) -> dict[int, list[float]]:
    """Submitted expert scores per prediction id (all samples pooled).

    With ``settled`` (the default) every score of an answer a reviewer settled is the
    settled score, so its mean is the decision; without it, the experts' own scores.
    """
    rows = TaskAssignment.objects.filter(task__kind=KIND, submitted_at__isnull=False)
    if run_ids is not None:
        rows = rows.filter(task__prediction__run_id__in=list(run_ids))
    decided = settled_in_force(kind=KIND) if settled else {}
    scores: dict[int, list[float]] = defaultdict(list)
    for task_id, prediction_id, answer in rows.order_by("pk").values_list(
        "task_id", "task__prediction_id", "answer"
    ):
        if isinstance(answer, dict) and isinstance(answer.get("score"), int | float):
            settled_score = decided[task_id].score if task_id in decided else None
            scores[prediction_id].append(
                float(answer["score"]) if settled_score is None else settled_score
            )
    return dict(scores)


# --- services --------------------------------------------------------------------------


def _same_settings(sample: JudgementSample, run_ids: list[int], size: int, seed: int, k: int):
    runs = sorted(sample.runs.values_list("pk", flat=True))
    return (runs, sample.size, sample.seed, sample.k) == (run_ids, size, seed, k)


def judgement_sample_create(
    *,
    name: str,
    run_ids: list[int],
    size: int,
    seed: int = 0,
    k: int = 2,
    review_spread: float | None = None,
    created_by: AbstractBaseUser | None = None,
) -> JudgementSample:
    """Sample ``size`` generative answers of ``run_ids`` for ``k`` experts each.

    ``review_spread`` is the reviewer queue's threshold (default
    :data:`~annotation.chartom.models.DEFAULT_REVIEW_SPREAD`); it picks no answer, so a
    second call with another one sets it on the existing sample.

    The sample is the first ``size`` of the runs' judgeable answers (first sample,
    non-empty) in primary-key order shuffled with ``seed``: the same settings give the
    same answers, in the same (shuffled, so runs interleave) queue order. Calling it
    again with the same name and settings returns the existing sample and creates
    nothing; the same name with other settings is refused. A ``size`` above the answers
    there are takes them all (``sample.tasks.count()`` says how many).
    """
    name = name.strip()
    run_ids = sorted(set(run_ids))
    if not name:
        raise WorkflowError("name: required")
    if not run_ids:
        raise WorkflowError("runs: choose at least one generative run")
    if size < 1:
        raise WorkflowError("size: sample at least one answer")
    if seed < 0:
        raise WorkflowError("seed: must not be negative")
    if not 1 <= k <= MAX_K:
        raise WorkflowError(f"k: between 1 and {MAX_K} experts per answer")
    spread = review_spread_clean(DEFAULT_REVIEW_SPREAD if review_spread is None else review_spread)
    with transaction.atomic():
        # The runs' rows serialise two creations over the same runs.
        runs = list(
            Run.objects.select_for_update()
            .filter(pk__in=run_ids, benchmark=Benchmark.CHARTOM_QA)
            .order_by("pk")
        )
        missing = sorted(set(run_ids) - {r.pk for r in runs})
        if missing:
            raise WorkflowError(f"runs: no CharToM-QA run {', '.join(map(str, missing))}")
        ids = list(judgeable_answers(run_ids).order_by("pk").values_list("pk", flat=True))
        if not ids:
            raise WorkflowError("runs: these runs have no generative answer to judge")
        existing = JudgementSample.objects.filter(name=name).first()
        if existing is not None:
            if not _same_settings(existing, run_ids, size, seed, k):
                raise WorkflowError(f"name: a sample named {name!r} exists with other settings")
            sample = existing
            if review_spread is not None and sample.review_spread != spread:
                sample.review_spread = spread
                sample.save(update_fields=["review_spread"])
        else:
            sample = JudgementSample.objects.create(
                name=name, size=size, seed=seed, k=k, review_spread=spread, created_by=created_by
            )
            sample.runs.set(runs)
        random.Random(seed).shuffle(ids)
        taken = set(sample.tasks.values_list("prediction_id", flat=True))
        AnnotationTask.objects.bulk_create(
            AnnotationTask(kind=KIND, sample=sample, prediction_id=pid, k=k, position=position)
            for position, pid in enumerate(ids[:size])
            if pid not in taken
        )
    return sample


def judgement_take(
    *, annotator: AbstractBaseUser, sample: JudgementSample
) -> TaskAssignment | None:
    """The expert's open answer of ``sample``, or the next one with room for them."""
    return task_take(kind=KIND, annotator=annotator, sample=sample)


def score_clean(score: Any) -> float:
    """A score of 0 to 1.0 in steps of 0.1, as a float rounded to one decimal."""
    try:
        value = float(score)
    except (TypeError, ValueError):
        raise WorkflowError("score: a number from 0 to 1.0") from None
    tenths = value * 10
    if not math.isfinite(value) or not 0 <= value <= 1 or abs(tenths - round(tenths)) > 1e-6:
        raise WorkflowError("score: from 0 to 1.0 in steps of 0.1")
    return round(round(tenths) / 10, 1)


def review_spread_clean(spread: Any) -> float:
    """A reviewer-queue threshold: 0.1 to 1.0 in steps of 0.1 (a spread of 0 is no
    disagreement)."""
    try:
        value = score_clean(spread)
    except WorkflowError:
        raise WorkflowError("review spread: from 0.1 to 1.0 in steps of 0.1") from None
    if value < 0.1:
        raise WorkflowError("review spread: from 0.1 to 1.0 in steps of 0.1")
    return value


def judgement_submit(
    *, assignment_id: int, annotator: AbstractBaseUser, score: float, comment: str = ""
) -> TaskAssignment:
    """Record an expert's score (0-1.0, steps of 0.1) and optional comment on an answer.

    In one transaction: the expert's live slot is locked and submitted with
    ``{"score": score, "comment": comment}``. A replay finds the slot submitted and is
    refused without changing anything; another expert's slot is "not found".
    """
    value = score_clean(score)
    comment = (comment or "").strip()
    if len(comment) > MAX_COMMENT:
        raise WorkflowError(f"comment: at most {MAX_COMMENT} characters")
    with transaction.atomic():
        assignment = assignment_lock(assignment_id=assignment_id, annotator=annotator)
        if assignment.task.kind != KIND:
            raise WorkflowError(NOT_FOUND)
        return assignment_submit(assignment, {"score": value, "comment": comment})
