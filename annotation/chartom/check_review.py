"""The reviewer queue of CharToM-QA checks: note checks and expert judgements in conflict.

A check task is *disputed* once all its annotators have submitted (the task is closed)
and at least two did, and

- note check (section 4.1): their labels are not all the same;
- expert judgement (Appendix E): the spread (max - min) of their scores reaches the
  sample's ``review_spread`` (0.3 by default, set by the researcher).

A reviewer settles it with a label or a score and a reason (:func:`check_adjudicate`),
recorded as an :class:`~annotation.models.Adjudication` on the task, the same record
and permission as DynToM validation's queue (``annotation.dyntom.validation.review``).
What the answers gave on their own is the *rule outcome*: the most frequent label
("split" when two lead), or the experts' mean score. Annotators never see each other's
answers: a reviewer who is an annotator, not a researcher, is not shown the tasks they
answered themselves.
"""

from __future__ import annotations

import io
import json
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from common.csv_safe import csv_writer

from ..models import Adjudication
from .check_decisions import outcome_changed, settled_in_force
from .judgement import review_spread_clean, score_clean
from .models import AnnotationTask, JudgementSample, NoteCheckLabel, TaskAssignment, TaskKind
from .workflow import WorkflowError

NOTE, JUDGEMENT = TaskKind.NOTE_CHECK, TaskKind.JUDGEMENT
KINDS = (NOTE, JUDGEMENT)
SPLIT = "split"
MAX_REASON = 2000
LABELS = dict(NoteCheckLabel.choices)


class CheckReviewError(WorkflowError):
    """A decision refused; the message names the field."""


@dataclass
class CheckDispute:
    """One check task with its annotators' answers side by side."""

    task: AnnotationTask
    answers: list[dict[str, Any]]  # annotator, annotator_id, value, comment
    spread: float | None  # judgement: max - min of the scores
    disputed: bool
    rule_outcome: str
    rule_reason: str
    adjudication: Adjudication | None = None  # the one in force
    history: list[Adjudication] = field(default_factory=list)  # newest first

    @property
    def kind(self) -> str:
        return self.task.kind

    @property
    def changed(self) -> bool:
        a = self.adjudication
        return a is not None and outcome_changed(self.kind, a.outcome, a.rule_outcome)


# --- pure rules --------------------------------------------------------------------------


def _value(kind: str, answer: Any) -> str | float | None:
    """The label or score of a submitted answer; None for a malformed one."""
    if not isinstance(answer, dict):
        return None
    if kind == NOTE:
        label = answer.get("label")
        return label if label in LABELS else None
    score = answer.get("score")
    return float(score) if isinstance(score, int | float) else None


def answers_outcome(kind: str, values: list[Any]) -> tuple[str, str]:
    """(rule outcome, reason) of the answers on their own: the most frequent label, or
    "split" when two labels lead; the experts' mean score (as text, to 3 decimals)."""
    if not values:
        return "", "no answer yet"
    if kind == NOTE:
        counts = Counter(values)
        ranked = counts.most_common()
        reason = ", ".join(f"{n} {LABELS[label]}" for label, n in ranked)
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            return SPLIT, f"no majority: {reason}"
        return ranked[0][0], reason
    mean = statistics.fmean(values)
    shown = ", ".join(f"{v:.1f}" for v in values)
    return f"{round(mean, 3):g}", f"mean of {shown}"


def spread_of(values: list[float]) -> float:
    """max - min of scores on the 0.1 grid, rounded so 0.7 - 0.4 is 0.3 exactly."""
    return round(max(values) - min(values), 1) if values else 0.0


def in_conflict(kind: str, values: list[Any], *, spread_at: float) -> bool:
    """Whether two or more answers disagree beyond the threshold."""
    if len(values) < 2:
        return False
    if kind == NOTE:
        return len(set(values)) > 1
    return spread_of(values) >= spread_at - 1e-9


# --- selectors ---------------------------------------------------------------------------


def check_disputes(
    *,
    kind: str | None = None,
    task_ids: list[int] | None = None,
    hide_scored_by: AbstractBaseUser | None = None,
) -> list[CheckDispute]:
    """Every closed check task answered by two or more annotators, disputed or not (the
    caller filters), note checks first, in queue order; with ``task_ids``, those tasks
    whatever their state. ``hide_scored_by`` leaves out the tasks that person answered."""
    tasks = AnnotationTask.objects.filter(kind__in=[kind] if kind else KINDS).select_related(
        "note", "note__book", "batch", "sample"
    )
    tasks = tasks.filter(closed=True) if task_ids is None else tasks.filter(pk__in=task_ids)
    if hide_scored_by is not None:
        tasks = tasks.exclude(assignments__annotator=hide_scored_by)
    found = list(tasks.order_by("kind", "batch_id", "sample_id", "position", "pk"))
    found.sort(key=lambda t: KINDS.index(t.kind))  # stable: note checks first
    slots: dict[int, list[TaskAssignment]] = defaultdict(list)
    for slot in (
        TaskAssignment.objects.filter(task__in=found, submitted_at__isnull=False)
        .select_related("annotator")
        .order_by("submitted_at", "pk")
    ):
        slots[slot.task_id].append(slot)
    history: dict[int, list[Adjudication]] = defaultdict(list)
    for row in (
        Adjudication.objects.filter(task__in=found).select_related("reviewer").order_by("-pk")
    ):
        history[row.task_id].append(row)
    out = []
    for task in found:
        answers = [
            {
                "annotator": slot.annotator.get_username(),
                "annotator_id": slot.annotator_id,
                "value": _value(task.kind, slot.answer),
                "comment": (slot.answer or {}).get("comment", "")
                if isinstance(slot.answer, dict)
                else "",
            }
            for slot in slots.get(task.pk, [])
        ]
        answers = [a for a in answers if a["value"] is not None]
        if len(answers) < 2 and task_ids is None:
            continue
        values = [a["value"] for a in answers]
        outcome, reason = answers_outcome(task.kind, values)
        spread_at = task.sample.review_spread if task.sample_id else 0.0
        past = history.get(task.pk, [])
        out.append(
            CheckDispute(
                task=task,
                answers=answers,
                spread=spread_of(values) if task.kind == JUDGEMENT else None,
                disputed=task.closed and in_conflict(task.kind, values, spread_at=spread_at),
                rule_outcome=outcome,
                rule_reason=reason,
                adjudication=past[0] if past and past[0].outcome else None,
                history=past,
            )
        )
    return out


def check_decisions_changed() -> dict[str, int]:
    """Check kind -> how many tasks' decision in force differs from what the answers gave
    (the most frequent label, the experts' mean). The one count of "decisions changed":
    the queue page and the CharToM-QA report both read it."""
    counts = {kind: 0 for kind in KINDS}
    for settled in settled_in_force().values():
        if settled.changed:
            counts[settled.kind] = counts.get(settled.kind, 0) + 1
    return counts


def check_decision_rows(*, kind: str | None = None) -> list[dict[str, Any]]:
    """Every decision on a check (of ``kind``), newest first, with its provenance: the
    decisions CSV and ``GET /api/annotation/chartom-check-decisions/`` are made from
    these rows."""
    in_force = set(settled_in_force(kind=kind))
    newest: set[int] = set()
    rows = []
    decisions = Adjudication.objects.filter(task__isnull=False)
    if kind is not None:
        decisions = decisions.filter(task__kind=kind)
    for a in decisions.select_related("reviewer", "task", "task__batch", "task__sample").order_by(
        "-pk"
    ):
        task = a.task
        current = a.task_id not in newest and a.task_id in in_force
        newest.add(a.task_id)
        rows.append(
            {
                "id": a.pk,
                "task": a.task_id,
                "kind": task.kind,
                "batch": task.batch.name if task.batch_id else "",
                "sample": task.sample.name if task.sample_id else "",
                "note": task.note_id,
                "prediction": task.prediction_id,
                "reviewer": a.reviewer.get_username() if a.reviewer else "",
                "created_at": a.created_at,
                "outcome": a.outcome,
                "settled_score": (a.settled_scores or {}).get("score"),
                "reason": a.reason,
                "rule_outcome": a.rule_outcome,
                "rule_reason": a.rule_reason,
                "answers": a.answers,
                "in_force": current,
                "changed": bool(a.outcome)
                and outcome_changed(task.kind, a.outcome, a.rule_outcome),
            }
        )
    return rows


# --- services ----------------------------------------------------------------------------


def _settled(kind: str, value: Any) -> tuple[str, dict[str, float]]:
    """(outcome, settled_scores) of a reviewer's label or score; refused when off scale."""
    if kind == NOTE:
        if value not in LABELS:
            raise CheckReviewError(f"label: must be one of {', '.join(LABELS)}")
        return str(value), {}
    try:
        score = score_clean(value)
    except WorkflowError:
        raise CheckReviewError("score: from 0 to 1.0 in steps of 0.1") from None
    return f"{score:.1f}", {"score": score}


@transaction.atomic
def check_adjudicate(
    *,
    task: AnnotationTask,
    reviewer: AbstractBaseUser,
    reason: str,
    value: Any = None,
    withdraw: bool = False,
) -> Adjudication | None:
    """Settle a check task: the label (note check) or score (judgement) in force from
    now on, with the reviewer's reason (required); ``withdraw`` hands the task back to
    its answers. Returns the row in force, or None once withdrawn.

    A new :class:`Adjudication` row records the decision with the annotators' submitted
    answers as they stood and what they gave on their own; the history stays. The same
    decision sent again (a double submit) adds nothing, nor does withdrawing when no
    decision is in force.
    """
    if task.kind not in KINDS:
        raise CheckReviewError("task: not a note check or an expert judgement")
    # The task row serialises two reviewers deciding the same task at once.
    AnnotationTask.objects.select_for_update().filter(pk=task.pk).first()
    latest = Adjudication.objects.filter(task=task).order_by("-pk").first()
    in_force = latest if latest is not None and latest.outcome else None
    reason = (reason or "").strip()
    if len(reason) > MAX_REASON:
        raise CheckReviewError(f"reason: at most {MAX_REASON} characters")
    if withdraw:
        if in_force is None:
            return None
        outcome, settled = "", {}
    else:
        outcome, settled = _settled(task.kind, value)
        if not reason:
            raise CheckReviewError("reason: say why you decide so")
        if in_force is not None and (in_force.outcome, in_force.reason) == (outcome, reason):
            return in_force
    slots = list(
        TaskAssignment.objects.filter(task=task, submitted_at__isnull=False)
        .select_related("annotator")
        .order_by("submitted_at", "pk")
    )
    answers = []
    for slot in slots:
        found = _value(task.kind, slot.answer)
        if found is None:
            continue
        answers.append(
            {
                "annotator": slot.annotator.get_username(),
                ("label" if task.kind == NOTE else "score"): found,
                "comment": slot.answer.get("comment", ""),
                "submitted_at": slot.submitted_at.isoformat(),
            }
        )
    if len(answers) < 2 and not withdraw:
        raise CheckReviewError("task: fewer than two answers, nothing to settle")
    values = [a["label" if task.kind == NOTE else "score"] for a in answers]
    rule_outcome, rule_reason = answers_outcome(task.kind, values)
    row = Adjudication.objects.create(
        task=task,
        reviewer=reviewer,
        outcome=outcome,
        settled_scores=settled,
        reason=reason,
        answers=answers,
        rule_outcome=rule_outcome,
        rule_reason=rule_reason,
    )
    return row if outcome else None


@transaction.atomic
def judgement_review_spread_set(*, sample: JudgementSample, spread: Any) -> JudgementSample:
    """Set a judgement sample's reviewer-queue threshold (0.1 to 1.0, steps of 0.1)."""
    sample.review_spread = review_spread_clean(spread)
    sample.save(update_fields=["review_spread"])
    return sample


DECISION_COLUMNS = [
    "id",
    "task",
    "kind",
    "batch",
    "sample",
    "note",
    "prediction",
    "reviewer",
    "created_at",
    "outcome",
    "settled_score",
    "reason",
    "rule_outcome",
    "rule_reason",
    "in_force",
    "changed",
    "answers",
]


def check_decisions_csv() -> str:
    """:func:`check_decision_rows` as CSV (answers as JSON text), spreadsheet-safe."""
    out = io.StringIO()
    writer = csv_writer(out, lineterminator="\n")
    writer.writerow(DECISION_COLUMNS)
    for row in check_decision_rows():
        row = {
            **row,
            "created_at": row["created_at"].isoformat(),
            "answers": json.dumps(row["answers"], ensure_ascii=False),
        }
        writer.writerow(["" if row[c] is None else row[c] for c in DECISION_COLUMNS])
    return out.getvalue()
