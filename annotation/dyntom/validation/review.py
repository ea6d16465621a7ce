"""Reads of the reviewer queue: which validation objects the annotators disagree on.

An object is *disputed* once every annotator it waits for has submitted (its decision
is no longer pending), at least two have, and either

- the spread (max - min) of their scores on some criterion reaches the batch's
  ``review_spread`` (a Likert spread of 2 by default; on a yes/no criterion a "yes"
  against a "no" is a spread of 1), or
- the batch's ``review_split`` is on and the rules, applied to each annotator's scores
  alone, keep the object for one annotator and not for another.

A reviewer then settles it (:func:`annotation.dyntom.validation.services.
validation_adjudicate`). Annotators never see each other's answers: a reviewer who is
an annotator, not a researcher, is not shown the objects they scored themselves.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, F, Prefetch

from ...models import (
    Adjudication,
    DecisionRule,
    ValidationAssignment,
    ValidationBatch,
    ValidationDecision,
    ValidationObject,
    ValidationScore,
)
from . import rules as rules_lang
from .rubrics import KIND_LABELS, SCALE_VALUES, criterion_keys, scale_choices
from .services import active_rubrics, active_rules


@dataclass
class Dispute:
    """One decided object with its annotators' answers side by side."""

    obj: ValidationObject
    answers: list[dict[str, Any]]  # annotator, annotator_id, scores, comment, alone
    criteria: list[dict[str, Any]]  # the rubric's criteria with values, spread, wide
    spread: int
    split: bool
    disputed: bool
    rule_outcome: str
    rule_reason: str
    adjudication: Adjudication | None = None  # the one in force
    history: list[Adjudication] = field(default_factory=list)  # newest first

    @property
    def kind_label(self) -> str:
        return KIND_LABELS.get(self.obj.kind, self.obj.kind)


def _alone(spec: dict[str, Any], scores: dict[str, int], keys: list[str]) -> str:
    """The rules' outcome from one annotator's scores, as if they were the only one."""
    one = {key: [value] for key, value in scores.items()}
    return rules_lang.decide(spec, one, criterion_keys=keys, submitted=1, k=1).outcome


def disagreement(
    *,
    answers: list[dict[str, Any]],
    criteria: list[dict[str, Any]],
    spec: dict[str, Any],
    spread_at: int,
    split_counts: bool,
) -> tuple[list[dict[str, Any]], int, bool, bool]:
    """(criteria rows with their values and spread, the widest spread, split, disputed).

    ``answers`` get their ``alone`` outcome filled in. Pure: no database.
    """
    keys = criterion_keys(criteria)
    rows = []
    for c in criteria:
        values = [a["scores"][c["key"]] for a in answers if c["key"] in a["scores"]]
        spread = max(values) - min(values) if values else 0
        rows.append(
            {
                **c,
                "values": values,
                "cells": [a["scores"].get(c["key"]) for a in answers],  # column per annotator
                "spread": spread,
                "wide": bool(values) and spread >= spread_at,
            }
        )
    for a in answers:
        a["alone"] = _alone(spec, a["scores"], keys)
    alone = {a["alone"] for a in answers}
    split = rules_lang.KEEP in alone and bool(alone - {rules_lang.KEEP})
    widest = max((r["spread"] for r in rows), default=0)
    disputed = len(answers) >= 2 and (widest >= spread_at or (split_counts and split))
    return rows, widest, split, disputed


def batch_disputes(
    batch: ValidationBatch,
    *,
    object_ids: list[int] | None = None,
    hide_scored_by: AbstractBaseUser | None = None,
) -> list[Dispute]:
    """Every decided object of ``batch`` scored by two or more annotators, in stage
    order, with its disagreement and its adjudication history (disputed or not: the
    caller filters); with ``object_ids``, those objects whatever their state.
    ``hide_scored_by`` leaves out the objects that person scored."""
    objects = (
        ValidationObject.objects.filter(batch=batch)
        .select_related("vstage", "decision")
        .order_by("vstage__position", "position")
    )
    if object_ids is None:
        objects = objects.exclude(decision__outcome=rules_lang.PENDING).exclude(
            decision__isnull=True
        )
    else:
        # One object's page opens whatever it holds: pending, or one answer so far.
        objects = objects.filter(pk__in=object_ids)
    if hide_scored_by is not None:
        objects = objects.exclude(assignments__annotator=hide_scored_by)
    objs = list(objects)
    slots: dict[int, list[ValidationAssignment]] = defaultdict(list)
    for a in (
        ValidationAssignment.objects.filter(object__in=objs, submitted_at__isnull=False)
        .select_related("annotator", "rubric")
        .prefetch_related(Prefetch("scores", queryset=ValidationScore.objects.order_by()))
        .order_by("pk")
    ):
        slots[a.object_id].append(a)
    history: dict[int, list[Adjudication]] = defaultdict(list)
    for row in (
        Adjudication.objects.filter(object__in=objs).select_related("reviewer").order_by("-pk")
    ):
        history[row.object_id].append(row)
    rules: dict[str, DecisionRule] = active_rules()
    rubrics = active_rubrics()
    out = []
    for obj in objs:
        mine = slots.get(obj.pk, [])
        if len(mine) < 2 and object_ids is None:
            continue
        answers = [
            {
                "annotator": a.annotator.get_username(),
                "annotator_id": a.annotator_id,
                "scores": {s.criterion: s.value for s in a.scores.all()},
                "comment": a.comment,
            }
            for a in mine
        ]
        rows, spread, split, disputed = disagreement(
            answers=answers,
            criteria=mine[0].rubric.criteria if mine else rubrics[obj.kind].criteria,
            spec=rules[obj.kind].spec,
            spread_at=batch.review_spread,
            split_counts=batch.review_split,
        )
        past = history.get(obj.pk, [])
        decision = getattr(obj, "decision", None)  # absent until the first submission
        out.append(
            Dispute(
                obj=obj,
                answers=answers,
                criteria=rows,
                spread=spread,
                split=split,
                disputed=disputed,
                rule_outcome=decision.outcome if decision else rules_lang.PENDING,
                rule_reason=decision.reason if decision else "no scores yet",
                adjudication=past[0] if past and past[0].outcome else None,
                history=past,
            )
        )
    return out


def settle_choices(criteria: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The criteria with the values a reviewer may settle on (the scale's)."""
    return [
        {**c, "choices": scale_choices(c), "allowed": SCALE_VALUES[c["scale"]]} for c in criteria
    ]


def decisions_changed(*, batch_ids: list[int] | None = None) -> dict[str, int]:
    """Object kind -> how many objects' outcome in force differs from the rules' (a
    reviewer's or a researcher's decision changed it). The one count of "decisions
    changed": the queue page and the validation report both read it."""
    decisions = ValidationDecision.objects.exclude(override_outcome="").exclude(
        override_outcome=F("outcome")
    )
    if batch_ids is not None:
        decisions = decisions.filter(object__batch_id__in=batch_ids)
    return dict(
        decisions.order_by()
        .values("object__kind")
        .annotate(n=Count("pk"))
        .values_list("object__kind", "n")
    )
