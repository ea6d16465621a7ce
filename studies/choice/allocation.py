"""Adaptive allocation on a generic (mapped multiple-choice) study (issue 50).

The rules are pure (``metrics.allocation``); this module holds what needs the study:

- the settings (:class:`AllocationSpec`, stored in ``Study.sampling["allocation"]``):
  the design (``uniform``, ``balanced``, ``widest``), the stratum field, phase one's
  answers per item, the runs a ``widest`` design compares with and the target half-width
  the study page counts answers towards. The budget is the uniform design's: the
  study's overlap x its test items answers in all;
- the strata (``StratumTally``): made at go-live (:func:`tallies_start`), their items
  and model side; their tallies (``metrics.allocation.Tally``) are not stored but
  worked out from each item's counted answers, which the take counts in the statement
  that counts its places (:data:`TAKE_COUNTS`). An answer then costs nothing extra
  (in round one the answer kept a stored tally up to date: three statements per
  answer, 12.5 % fewer items/s under load), and an exclusion or withdrawal needs no
  rebuild: the counts are the answers';
- the choice of a batch's items (:func:`items_choose`), called by
  ``services.generic_batch_take`` under the item locks it already holds;
- the per-stratum table of the study page, its CSV and the API (:func:`stratum_rows`).

A ``widest`` design's model side (the named runs' accuracy per item) is read once, at
go-live, and stored with the tallies: the rule that decides where answers go must not
move while the study runs (a run still running or re-imported would otherwise change
past choices' meaning), and a take then needs no read of predictions.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count, Q

from metrics.allocation import (
    BALANCED,
    DESIGNS,
    UNIFORM,
    WIDEST,
    Tally,
    answers_to_reach,
    next_strata,
    stratified_bootstrap_pair,
    tally_of_items,
)

from ..counting import counted_participants
from ..models import Assignment, ChoiceAnswer, StratumTally, Study, StudyItem
from .generic import GENERIC, GenericSpecError, generic_facts
from .model_side import accuracy_of, runs_of

DESIGN_LABELS = {
    UNIFORM: "uniform",
    BALANCED: "balanced by category",
    WIDEST: "widest comparison",
}
DEFAULT_MIN_PER_ITEM = 2
DEFAULT_TARGET_POINTS = 5.0
NO_VALUE = "(none)"  # an item without the stratum field, as the report names it


@dataclass(frozen=True)
class AllocationSpec:
    """How a generic study's answers are spread (the form's allocation fields)."""

    design: str = UNIFORM
    stratum_field: str = ""
    min_per_item: int = DEFAULT_MIN_PER_ITEM
    runs: tuple[int, ...] = ()
    target_points: float = DEFAULT_TARGET_POINTS

    @property
    def adaptive(self) -> bool:
        return self.design != UNIFORM

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"runs": list(self.runs)}

    @classmethod
    def from_sampling(cls, sampling: Mapping[str, Any] | None) -> AllocationSpec:
        """The study's settings; a study made before issue 50 is uniform."""
        data = (sampling or {}).get("allocation") or {}
        return cls(
            design=data.get("design") or UNIFORM,
            stratum_field=data.get("stratum_field") or "",
            min_per_item=int(data.get("min_per_item") or DEFAULT_MIN_PER_ITEM),
            runs=tuple(int(r) for r in data.get("runs") or ()),
            target_points=float(data.get("target_points") or DEFAULT_TARGET_POINTS),
        )


def allocation_check(
    spec: AllocationSpec,
    *,
    work_id: int,
    category_fields: list[str],
    sampled_by: str,
    overlap: int,
    batch: int,
    test_items: int,
) -> AllocationSpec:
    """``spec`` with its stratum field filled in (the field the items are drawn by, else
    the benchmark's first), or :class:`GenericSpecError` naming the setting that
    cannot work: a design needs a field to stratify by, a batch smaller than the test
    items (else everyone answers everything and nothing is left to allocate), a budget
    that gives every item its phase one, and ``widest`` runs on this benchmark."""
    if spec.design not in DESIGNS:
        raise GenericSpecError("allocation", f"choose one of {', '.join(DESIGNS)}")
    field_ = spec.stratum_field or sampled_by or (category_fields[0] if category_fields else "")
    if field_ and field_ not in category_fields:
        raise GenericSpecError(
            "stratum_field",
            f"the benchmark has no category field {field_!r}; its fields are "
            f"{', '.join(category_fields) or 'none'}",
        )
    if spec.min_per_item < 1:
        raise GenericSpecError("min_per_item", "ask for at least one answer per item")
    if not 0 < spec.target_points <= 50:
        raise GenericSpecError("target_points", "give a half-width between 0 and 50 points")
    spec = AllocationSpec(
        design=spec.design,
        stratum_field=field_,
        min_per_item=spec.min_per_item,
        runs=tuple(sorted(set(spec.runs))) if spec.design == WIDEST else (),
        target_points=spec.target_points,
    )
    if not spec.adaptive:
        return spec
    if not field_:
        raise GenericSpecError(
            "stratum_field", "the benchmark has no category field to allocate by"
        )
    if not batch or batch >= test_items:
        raise GenericSpecError(
            "items_per_participant",
            f"an adaptive design needs batches smaller than the {test_items} test items "
            "(when everyone answers every item there is nothing to allocate)",
        )
    if spec.min_per_item > overlap:
        raise GenericSpecError(
            "min_per_item",
            f"the budget is {overlap} answer{'s' if overlap != 1 else ''} per item on "
            f"average (participants per item x test items): phase one can ask at most "
            f"{overlap}",
        )
    if spec.design == WIDEST:
        if not spec.runs:
            raise GenericSpecError("runs", "name the runs to compare with")
        known = {run_id for run_id, _ in runs_of(work_id)}
        if unknown := [r for r in spec.runs if r not in known]:
            raise GenericSpecError(
                "runs",
                f"run {', '.join(map(str, unknown))} has no answer on this benchmark's items",
            )
    return spec


def allocation_settings(
    spec: AllocationSpec, *, work, sampling: Mapping[str, Any], overlap: int, test_items: int
) -> dict[str, Any]:
    """What a generic study stores as ``sampling["allocation"]`` for ``spec`` over the
    items just drawn (``generic.generic_sample``'s ``sampling``), checked
    (:func:`allocation_check`)."""
    facts = generic_facts([work])[0]
    return allocation_check(
        spec,
        work_id=work.pk,
        category_fields=list(facts.categories),
        sampled_by=sampling.get("category_field") or "",
        overlap=overlap,
        batch=sampling.get("items_per_participant") or 0,
        test_items=test_items,
    ).as_dict()


def stratum_of(categories: Mapping[str, Any] | None, field_: str) -> str:
    value = (categories or {}).get(field_)
    return NO_VALUE if value in (None, "") else str(value)


def study_allocation(study: Study) -> AllocationSpec:
    return AllocationSpec.from_sampling(study.sampling)


def is_adaptive(study: Study) -> bool:
    return study.benchmark == GENERIC and study_allocation(study).adaptive


def _test_items(study: Study):
    return StudyItem.objects.filter(study=study, role=StudyItem.Role.TEST, held_back=False)


def study_budget(study: Study, test_items: int | None = None) -> int:
    """Answers in all: the uniform design's, overlap x test items, whatever the design."""
    n = _test_items(study).count() if test_items is None else test_items
    return study.overlap * n


def design_text(study: Study, *, answers: int | None = None) -> str:
    """One line saying which design ran ("balanced by ability, phase one 2 answers per
    item, 180 answers"), for the study page, the report and the replication package."""
    spec = study_allocation(study)
    budget = study_budget(study) if answers is None else answers
    if not spec.adaptive:
        by = f", strata by {spec.stratum_field}" if spec.stratum_field else ""
        return f"uniform, {study.overlap} answers per item{by}, {budget} answers"
    label = "balanced" if spec.design == BALANCED else "widest comparison"
    runs = f" with run {', '.join(map(str, spec.runs))}" if spec.runs else ""
    return (
        f"{label} by {spec.stratum_field}{runs}, phase one {spec.min_per_item} answer"
        f"{'s' if spec.min_per_item != 1 else ''} per item, {budget} answers"
    )


# -- tallies ---------------------------------------------------------------------------------


def _counted_answers(study: Study):
    """The study's counted answers on test items (as the reports count them)."""
    return ChoiceAnswer.objects.filter(
        counted_participants("assignment__"),
        assignment__study_item__study=study,
        assignment__study_item__role=StudyItem.Role.TEST,
        assignment__status=Assignment.Status.SUBMITTED,
        round=ChoiceAnswer.Round.FIRST,
    )


def _item_counts(study: Study) -> dict[int, tuple[int, int]]:
    """Counted answers and correct ones per test item: one grouped query."""
    rows = (
        _counted_answers(study)
        .order_by()
        .values("assignment__study_item_id")
        .annotate(m=Count("pk"), c=Count("pk", filter=Q(correct=True)))
    )
    return {r["assignment__study_item_id"]: (r["m"], r["c"]) for r in rows}


# What the take's counting statement (``studies.assignment.items_assign_with_room``)
# counts besides places, per item: its counted answers and the correct ones, as
# :func:`_counted_answers` counts them (its places are already the counted
# participants' assignments on test items).
_ANSWERED = Q(status=Assignment.Status.SUBMITTED, choices__round=ChoiceAnswer.Round.FIRST)
TAKE_COUNTS = {
    "answers": Count("choices", filter=_ANSWERED),
    "right": Count("choices", filter=_ANSWERED & Q(choices__correct=True)),
}


def _model_of(row: StratumTally, item_id: int) -> float | None:
    value = (row.model or {}).get(str(item_id))
    return None if value is None else float(value)


def _row_items(
    row: StratumTally, counts: Mapping[int, tuple[int, int]]
) -> list[tuple[int, int, float | None]]:
    """The stratum's items as ``(answers, correct, model)``: their counted answers and
    the model side fixed at go-live."""
    return [(*counts.get(pk, (0, 0)), _model_of(row, pk)) for pk in row.item_ids]


def row_tally(row: StratumTally, counts: Mapping[int, tuple[int, int]]) -> Tally:
    """The stratum's tally from its items' counted ``(answers, correct)``."""
    return tally_of_items(_row_items(row, counts))


def _strata_items(study: Study, field_: str) -> dict[str, list[int]]:
    strata: dict[str, list[int]] = defaultdict(list)
    for pk, categories in (
        _test_items(study).order_by("pk").values_list("pk", "mc_item__categories")
    ):
        strata[stratum_of(categories, field_)].append(pk)
    return dict(sorted(strata.items()))


@transaction.atomic
def tallies_start(*, study: Study) -> int:
    """The strata of an adaptive study, made once, when it first goes live (the item set
    is fixed then): their items and the ``widest`` runs' accuracy per item. Idempotent;
    returns the strata made."""
    spec = study_allocation(study)
    if study.benchmark != GENERIC or not spec.adaptive or study.stratum_tallies.exists():
        return 0
    strata = _strata_items(study, spec.stratum_field)
    model: dict[int, float] = {}
    if spec.design == WIDEST:
        work_id = study.study_works.order_by("position").values_list("work_id", flat=True)[0]
        by_mc = accuracy_of(spec.runs, work_id)
        for pk, mc_id in _test_items(study).values_list("pk", "mc_item_id"):
            model[pk] = by_mc.get(mc_id, 0.0)  # not answered: wrong, as the report counts it
    StratumTally.objects.bulk_create(
        StratumTally(
            study=study,
            key=key,
            item_ids=item_ids,
            model={str(pk): model[pk] for pk in item_ids} if model else {},
        )
        for key, item_ids in strata.items()
    )
    return len(strata)


def _strata_answers(study: Study) -> dict[str, list[tuple[int, int, float | None]]]:
    """Each stratum's items as ``(answers, correct, model)``, from the counted answers
    (one grouped query): an adaptive study's stored strata with their model side, else
    the items by the stratum field (no model side)."""
    counts = _item_counts(study)
    rows = list(StratumTally.objects.filter(study=study).order_by("key"))
    if rows:
        return {row.key: _row_items(row, counts) for row in rows}
    spec = study_allocation(study)
    if not spec.stratum_field:
        return {}
    return {
        key: [(*counts.get(pk, (0, 0)), None) for pk in item_ids]
        for key, item_ids in _strata_items(study, spec.stratum_field).items()
    }


def study_tallies(study: Study) -> dict[str, Tally]:
    """The strata's tallies from the counted answers (:func:`_strata_answers`)."""
    return {key: tally_of_items(items) for key, items in _strata_answers(study).items()}


# -- the take ------------------------------------------------------------------------------


def cap_per_item(budget: int, batch: int) -> int:
    """No item can hold more answers than the participants the budget seats."""
    return math.ceil(budget / batch)


def items_choose(
    *,
    design: str,
    tallies: Mapping[str, Tally],
    strata: Mapping[int, str],
    live: Mapping[int, int],
    ties: Mapping[int, float],
    n: int,
    min_per_item: int,
    cap: int,
) -> list[int]:
    """The ids of up to ``n`` items for one participant (who has none yet): pure.

    ``strata`` maps each open item to its stratum, ``live`` holds its counted places
    (answered or not; counted under the item locks), ``ties`` the session's seeded tie
    breaks. Phase one first, item by item: the items below ``min_per_item`` places,
    fewest first (after an exclusion, holes can open in a stratum that is on average
    past phase one). Then stratum by stratum as ``next_strata`` says, each time the
    stratum's item with the fewest places. Places not yet answered count as pending, so
    participants arriving together are spread as if they came one after another.
    """
    rank = {pk: (live[pk], ties[pk]) for pk in strata}
    below = sorted((pk for pk in strata if live[pk] < min_per_item), key=rank.__getitem__)
    chosen = below[:n]
    taken = set(chosen)
    placed: dict[str, int] = defaultdict(int)  # the stratum's places, chosen ones included
    for pk, key in strata.items():
        placed[key] += live[pk] + (pk in taken)
    free: dict[str, list[int]] = defaultdict(list)
    for pk in sorted(strata, key=rank.__getitem__):
        if pk not in taken and live[pk] < cap:
            free[strata[pk]].append(pk)
    while len(chosen) < n:
        open_ = {key: tallies[key] for key in sorted(free) if free[key] and key in tallies}
        # Places handed out and not answered yet: what the tally does not hold.
        pending = {key: max(0, placed[key] - open_[key].answers) for key in open_}
        picks = next_strata(
            design,
            open_,
            n - len(chosen),
            min_per_item=min_per_item,
            cap_per_item=cap,
            pending=pending,
        )
        # next_strata counts each place it hands out as pending, as this loop would
        # between calls, so one call gives the places one call per place gives, until
        # a stratum runs out of items: from there on the rest are asked for again
        # without it (its spread no longer enters the pooled one).
        for key in picks:
            if not free[key]:
                break
            chosen.append(free[key].pop(0))
            placed[key] += 1
        else:
            break  # every place given, or every stratum full
    return chosen


# -- the study page, its CSV and the API -------------------------------------------------------


STRATUM_COLUMNS = [
    "stratum",
    "items",
    "answers",
    "estimate_pct",
    "half_width_points",
    "answers_to_target",
]


def stratum_rows(study: Study) -> list[dict[str, Any]]:
    """One row per stratum: its items, counted answers, current estimate (mean of item
    means, %), 95% half-width (points: half the interval's width, as the interval is
    not symmetric) and the answers still needed to reach the study's target half-width
    (``None``: more raters on these items cannot, the items' own spread is wider). On
    the human - model difference for a ``widest`` design.

    The estimate and interval are the report's (``stratified_bootstrap_pair``, with its
    default resamples and seed 0, a report's default seed): the study page,
    ``strata.csv`` and the API all read this, and say what the report will say."""
    spec = study_allocation(study)
    diff = spec.design == WIDEST
    strata = _strata_answers(study)
    human, difference = stratified_bootstrap_pair(
        {
            key: [[True] * c + [False] * (m - c) for m, c, _ in items]
            for key, items in strata.items()
        },
        model=(
            {key: [x or 0.0 for _, _, x in items] for key, items in strata.items()}
            if diff
            else None
        ),
    )
    shown = difference if difference is not None else human
    rows = []
    for key, items in strata.items():
        tally = tally_of_items(items)
        mean, low, high = shown[key]
        rows.append(
            {
                "stratum": key,
                "items": tally.items,
                "answers": tally.answers,
                "estimate_pct": None if mean is None else round(100 * mean, 1),
                "half_width_points": (
                    None if low is None or high is None else round(100 * (high - low) / 2, 1)
                ),
                "answers_to_target": answers_to_reach(tally, spec.target_points / 100, diff=diff),
            }
        )
    return rows
