"""The reviewers' decisions in force on CharToM-QA checks (note checks, expert judgement).

A decision is an :class:`~annotation.models.Adjudication` row on the check's task; the
newest row of a task is in force, and one with an empty ``outcome`` withdrew it. Every
reader of the checks' outcome (the report's shares and Table 7, the exports, the API)
asks here, so a settled label or score wins everywhere the same way. Writes are in
:mod:`annotation.chartom.check_review`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Adjudication is the one decision record of the app (DynToM objects and these checks).
from ..models import Adjudication
from .models import TaskKind


@dataclass(frozen=True)
class Settled:
    """A check's decision in force: the settled label, or the settled score."""

    task_id: int
    kind: str
    outcome: str  # the label, or the score as text
    score: float | None  # judgement only
    rule_outcome: str

    @property
    def value(self) -> str | float:
        return self.score if self.kind == TaskKind.JUDGEMENT else self.outcome

    @property
    def changed(self) -> bool:
        """Whether the decision differs from what the answers gave on their own."""
        return outcome_changed(self.kind, self.outcome, self.rule_outcome)


def outcome_changed(kind: str, outcome: str, rule_outcome: str) -> bool:
    """A settled label against the most frequent one ("split" when tied: any label
    changes it); a settled score against the experts' mean, numerically."""
    if kind != TaskKind.JUDGEMENT:
        return outcome != rule_outcome
    try:
        return abs(float(outcome) - float(rule_outcome)) > 1e-9
    except ValueError:
        return True


def settled_in_force(*, kind: str | None = None) -> dict[int, Settled]:
    """Task id -> the decision in force, for every check task a reviewer settled."""
    rows = Adjudication.objects.filter(task__isnull=False)
    if kind is not None:
        rows = rows.filter(task__kind=kind)
    seen: set[int] = set()
    out: dict[int, Settled] = {}
    for task_id, task_kind, outcome, scores, rule_outcome in rows.order_by(
        "task_id", "-pk"
    ).values_list("task_id", "task__kind", "outcome", "settled_scores", "rule_outcome"):
        if task_id in seen:
            continue
        seen.add(task_id)
        if outcome:
            out[task_id] = Settled(
                task_id=task_id,
                kind=task_kind,
                outcome=outcome,
                score=_score(scores),
                rule_outcome=rule_outcome,
            )
    return out


def _score(scores: Any) -> float | None:
    value = scores.get("score") if isinstance(scores, dict) else None
    return float(value) if isinstance(value, int | float) else None
