"""DynToM analyses: compositional error types (Figure 3) and accuracy by time span (Tables 4-5).

Input
-----
Both functions take an iterable of outcomes, one per answered question, each a
:class:`DynToMOutcome` (or a tuple in its field order, or a mapping with its field
names)::

    DynToMOutcome(stage, question_type, mental_state, scenario_from, scenario_to,
                  correct, scenario_count=None)

- ``stage``: any hashable naming the social stage *and the answering pass*. Questions
  are matched to their dependencies within one ``stage`` value, so pass
  ``(run_id, sample_index, stage_id)`` when several runs or samples are mixed.
- ``question_type``: ``DynToMQuestion.question_type`` — ``"understanding"``,
  ``"transformation-1"`` (whether it changes), ``"transformation-2"`` (why it changes /
  how one state influences another), ``"transformation-3"`` (how it changes across
  all scenarios).
- ``mental_state``: ``DynToMQuestion.mental_state`` — ``"belief"``, ``"emotion"``,
  ``"intention"``, ``"action"``, or an influence ``"belief&emotion->intention"``.
- ``scenario_from`` / ``scenario_to``: the scenarios the question covers, inclusive
  (``"in scenario 3"`` is 3..3, ``"from scenario 1 to scenario 2"`` 1..2, ``"across
  the 5 scenarios"`` 1..5), as the importer stores them.
- ``correct``: ``Prediction.correct``; ``None`` (no answer) is left out.
- ``scenario_count``: how many scenarios the stage has (Tables 4-5 group by 5/6/7);
  ``None`` when not needed.

Compositional analysis
----------------------
DynToM Section 4.3: a transformation question (the primary question C) depends on the
understanding questions D that identify the states it is about, in the scenarios it
covers ("to answer [whether beliefs change between two scenarios] the model must first
correctly identify the character's beliefs in each individual scenario"). We take D to
be the understanding questions of every state named in C's ``mental_state`` (both
sides of an influence) in every scenario from ``scenario_from`` to ``scenario_to``.
Then: fully correct = C and all D right; local error = all D right, C wrong;
restoration error = C right, some D wrong; full error = C wrong and some D wrong.
A C whose dependencies are not all answered is counted as ``incomplete`` and left out
of the shares.

Time spans
----------
DynToM Section 4.3 / Tables 4-5: accuracy of transformation questions per time span,
"the interval between consecutive scenarios (e.g. span 1-2 represents the transition
from scenarios 1 to 2)"; its U shape (good at the ends, worse in the middle) is the
"lost in the middle" finding.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields

from reports.metrics.accuracy import AccuracyEstimate, accuracy_ci

UNDERSTANDING = "understanding"
TRANSFORMATION_TYPES = ("transformation-1", "transformation-2", "transformation-3")
MENTAL_STATES = ("belief", "emotion", "intention", "action")
CATEGORIES = ("fully_correct", "local_error", "restoration_error", "full_error")
_STATE_SPLIT_RE = re.compile(r"->|&")


@dataclass(frozen=True)
class DynToMOutcome:
    """One answered DynToM question; see the module docstring for each field."""

    stage: Hashable
    question_type: str
    mental_state: str
    scenario_from: int | None
    scenario_to: int | None
    correct: bool | None
    scenario_count: int | None = None


OutcomeLike = DynToMOutcome | Sequence | Mapping


def as_outcome(value: OutcomeLike) -> DynToMOutcome:
    """Accept a :class:`DynToMOutcome`, a tuple in its field order, or a mapping."""
    if isinstance(value, DynToMOutcome):
        return value
    if isinstance(value, Mapping):
        names = [f.name for f in fields(DynToMOutcome)]
        return DynToMOutcome(**{name: value[name] for name in names if name in value})
    return DynToMOutcome(*value)


@dataclass(frozen=True)
class CompositionalCounts:
    """How many primary questions fell in each of Figure 3's four types.

    ``incomplete`` counts primary questions left out because a dependency was not
    answered; ``total`` and ``shares`` cover the classified ones only.
    """

    fully_correct: int = 0
    local_error: int = 0
    restoration_error: int = 0
    full_error: int = 0
    incomplete: int = 0

    @property
    def total(self) -> int:
        return self.fully_correct + self.local_error + self.restoration_error + self.full_error

    def shares(self) -> dict[str, float | None]:
        """Each category's fraction of ``total`` (``None`` when nothing was classified)."""
        total = self.total
        return {name: (getattr(self, name) / total if total else None) for name in CATEGORIES}


@dataclass(frozen=True)
class CompositionalAnalysis:
    """Figure 3 per mental state (keys: belief, emotion, intention, action first, then
    any influence labels such as ``belief->emotion`` sorted) and over all of them."""

    by_state: dict[str, CompositionalCounts] = field(default_factory=dict)
    overall: CompositionalCounts = field(default_factory=CompositionalCounts)


def classify(primary_correct: bool, dependencies_correct: Iterable[bool]) -> str:
    """One of :data:`CATEGORIES` for a primary answer and its dependencies' answers."""
    all_dependencies = all(dependencies_correct)
    if primary_correct:
        return "fully_correct" if all_dependencies else "restoration_error"
    return "local_error" if all_dependencies else "full_error"


def dependency_keys(outcome: DynToMOutcome) -> list[tuple[Hashable, str, int]] | None:
    """``(stage, state, scenario)`` of each understanding question ``outcome`` needs.

    ``None`` when the question names no state or no scenario span.
    """
    states = [s.strip() for s in _STATE_SPLIT_RE.split(outcome.mental_state or "") if s.strip()]
    first, last = outcome.scenario_from, outcome.scenario_to
    if not states or first is None or last is None or last < first:
        return None
    return [
        (outcome.stage, state, scenario) for state in states for scenario in range(first, last + 1)
    ]


def compositional_analysis(
    outcomes: Iterable[OutcomeLike],
    *,
    question_types: Sequence[str] = TRANSFORMATION_TYPES,
) -> CompositionalAnalysis:
    """Classify each answered transformation question against its understanding questions.

    ``question_types`` picks the primary questions (e.g. ``("transformation-1",)`` for
    only the "whether it changes" questions of the paper's worked example). Raises
    ``ValueError`` when one stage has two answered understanding questions for the
    same state and scenario (two runs or samples mixed under one ``stage`` value).
    """
    items = [as_outcome(o) for o in outcomes]
    understood: dict[tuple[Hashable, str, int], bool] = {}
    for item in items:
        if item.question_type != UNDERSTANDING or item.correct is None:
            continue
        if item.scenario_from is None or item.scenario_from != item.scenario_to:
            continue  # an understanding question is about one scenario
        key = (item.stage, item.mental_state, item.scenario_from)
        if key in understood:
            raise ValueError(
                f"two understanding outcomes for stage {item.stage!r}, "
                f"{item.mental_state} in scenario {item.scenario_from}; "
                "give each run/sample its own stage value"
            )
        understood[key] = bool(item.correct)

    counts: dict[str, dict[str, int]] = defaultdict(
        lambda: dict.fromkeys((*CATEGORIES, "incomplete"), 0)
    )
    for item in items:
        if item.question_type not in question_types or item.correct is None:
            continue
        bucket = counts[item.mental_state or ""]
        keys = dependency_keys(item)
        if keys is None or any(k not in understood for k in keys):
            bucket["incomplete"] += 1
            continue
        bucket[classify(bool(item.correct), (understood[k] for k in keys))] += 1

    order = sorted(
        counts,
        key=lambda s: (
            (MENTAL_STATES.index(s), "") if s in MENTAL_STATES else (len(MENTAL_STATES), s)
        ),
    )
    by_state = {state: CompositionalCounts(**counts[state]) for state in order}
    overall = CompositionalCounts(
        **{
            name: sum(getattr(c, name) for c in by_state.values())
            for name in (*CATEGORIES, "incomplete")
        }
    )
    return CompositionalAnalysis(by_state=by_state, overall=overall)


@dataclass(frozen=True)
class SpanAccuracy:
    """Accuracy of the questions covering scenarios ``scenario_from``..``scenario_to``.

    ``span`` is the paper's label (``"1-2"``); ``scenario_count`` is the stages'
    number of scenarios (``None`` when the outcomes did not say). The interval
    resamples stages (the questions of one stage share its story).
    """

    scenario_count: int | None
    scenario_from: int
    scenario_to: int
    span: str
    estimate: AccuracyEstimate


def time_span_accuracy(
    outcomes: Iterable[OutcomeLike],
    *,
    question_types: Sequence[str] = TRANSFORMATION_TYPES,
    consecutive_only: bool = True,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> list[SpanAccuracy]:
    """Accuracy per (scenario count, time span), sorted by count then span.

    With ``consecutive_only`` (the paper's definition) only questions spanning two
    consecutive scenarios count: span ``k-(k+1)``. Without it every span appears,
    including whole-story ``1-5`` questions and single-scenario ``3-3`` ones.
    Questions without a span or an answer are left out.
    """
    groups: dict[tuple[int | None, int, int], list[DynToMOutcome]] = defaultdict(list)
    for item in map(as_outcome, outcomes):
        if item.question_type not in question_types or item.correct is None:
            continue
        first, last = item.scenario_from, item.scenario_to
        if first is None or last is None:
            continue
        if consecutive_only and last != first + 1:
            continue
        groups[(item.scenario_count, first, last)].append(item)

    def sort_key(key: tuple[int | None, int, int]) -> tuple[int, int, int, int]:
        count, first, last = key
        return (count is not None, count or 0, first, last)

    result = []
    for key in sorted(groups, key=sort_key):
        count, first, last = key
        members = groups[key]
        estimate = accuracy_ci(
            [m.correct for m in members],
            clusters=[m.stage for m in members],
            n_resamples=n_resamples,
            seed=seed,
            level=level,
        )
        result.append(SpanAccuracy(count, first, last, f"{first}-{last}", estimate))
    return result
