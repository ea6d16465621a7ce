"""DynToM analyses: compositional error types (Figure 3) and accuracy by time span (Tables 4-5).

Input
-----
Both functions take outcomes, one per answered question: an iterable of
:class:`DynToMOutcome` (or tuples in its field order, or mappings with its field
names), or the same as columns, :class:`OutcomeColumns` (what the report passes: a
run's packed outcomes, with no object per answer)::

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
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from metrics.accuracy import AccuracyEstimate, cluster_accuracy_ci, first_seen_codes

UNDERSTANDING = "understanding"
TRANSFORMATION_TYPES = ("transformation-1", "transformation-2", "transformation-3")
# Question types as codes in OutcomeColumns (any other type: -1).
QUESTION_TYPE_CODES = (UNDERSTANDING, *TRANSFORMATION_TYPES)
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
class OutcomeColumns:
    """Outcomes as equal-length integer arrays, one entry per answered question.

    ``stage``: any integer code per stage and answering pass (as ``DynToMOutcome.stage``);
    ``question_type``: an index into :data:`QUESTION_TYPE_CODES` or -1; ``mental_state``:
    an index into ``labels`` (the mental state strings, ``""`` for none);
    ``scenario_from``/``scenario_to``/``scenario_count``: the number or -1 for ``None``;
    ``correct``: 1, 0, or -1 for ``None`` (no answer, left out).
    """

    stage: np.ndarray
    question_type: np.ndarray
    mental_state: np.ndarray
    labels: Sequence[str]
    scenario_from: np.ndarray
    scenario_to: np.ndarray
    correct: np.ndarray
    scenario_count: np.ndarray

    def __len__(self) -> int:
        return len(self.stage)


def outcome_columns(outcomes: Iterable[OutcomeLike] | OutcomeColumns) -> OutcomeColumns:
    """:class:`OutcomeColumns` of outcomes (stages and mental states numbered as met)."""
    if isinstance(outcomes, OutcomeColumns):
        return outcomes
    items = [as_outcome(o) for o in outcomes]
    stages: dict[Hashable, int] = {}
    labels: dict[str, int] = {}

    def ints(values: Iterable[int | None]) -> np.ndarray:
        return np.array([-1 if v is None else v for v in values], dtype=np.int64)

    return OutcomeColumns(
        stage=ints(stages.setdefault(i.stage, len(stages)) for i in items),
        question_type=ints(
            QUESTION_TYPE_CODES.index(i.question_type)
            if i.question_type in QUESTION_TYPE_CODES
            else -1
            for i in items
        ),
        mental_state=ints(labels.setdefault(i.mental_state or "", len(labels)) for i in items),
        labels=list(labels),
        scenario_from=ints(i.scenario_from for i in items),
        scenario_to=ints(i.scenario_to for i in items),
        correct=ints(None if i.correct is None else int(bool(i.correct)) for i in items),
        scenario_count=ints(i.scenario_count for i in items),
    )


def _type_mask(columns: OutcomeColumns, question_types: Sequence[str]) -> np.ndarray:
    codes = [QUESTION_TYPE_CODES.index(t) for t in question_types if t in QUESTION_TYPE_CODES]
    return np.isin(columns.question_type, codes)


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


# A dense key table is used while it needs at most this many entries per key it holds
# or looks up (else a binary search over the sorted keys).
_DENSE_KEYS_PER_VALUE = 8

# CATEGORIES index by 2 * primary right + all dependencies right, from ``classify``.
_CATEGORY_OF = np.array(
    [CATEGORIES.index(classify(p, [d])) for p in (False, True) for d in (False, True)]
)


def dependency_states(mental_state: str) -> list[str]:
    """The states a question names (both sides of an influence ``a&b->c``)."""
    return [s.strip() for s in _STATE_SPLIT_RE.split(mental_state or "") if s.strip()]


def compositional_analysis(
    outcomes: Iterable[OutcomeLike] | OutcomeColumns,
    *,
    question_types: Sequence[str] = TRANSFORMATION_TYPES,
) -> CompositionalAnalysis:
    """Classify each answered transformation question against its understanding questions.

    ``question_types`` picks the primary questions (e.g. ``("transformation-1",)`` for
    only the "whether it changes" questions of the paper's worked example). Raises
    ``ValueError`` when one stage has two answered understanding questions for the
    same state and scenario (two runs or samples mixed under one ``stage`` value).

    Works on arrays: every understanding answer becomes one integer key (stage, state,
    scenario), every primary question's dependencies are expanded to the same keys and
    looked up among the understanding keys.
    """
    cols = outcome_columns(outcomes)
    return _analyses(cols, [cols.correct], question_types, outcomes)[0]


def compositional_analyses(
    columns: OutcomeColumns,
    corrects: Sequence[np.ndarray],
    *,
    question_types: Sequence[str] = TRANSFORMATION_TYPES,
) -> list[CompositionalAnalysis]:
    """:func:`compositional_analysis` of ``columns`` with each of ``corrects`` as its
    ``correct`` column: systems that answered the same questions (a report's runs on
    one question set), each its own way.

    Which dependency each primary question has, and where its understanding answer is,
    depends on which questions were answered, not on how: it is worked out once for
    every system with the same answered questions, and only the correctness is read
    per system. The same counts as one call per system.
    """
    return _analyses(columns, corrects, question_types, columns)


@dataclass(frozen=True)
class _Dependencies:
    """What a compositional analysis reads of the questions answered, not of how."""

    answered: np.ndarray
    understood: np.ndarray
    primary: np.ndarray
    label: np.ndarray
    valid: np.ndarray
    owner: np.ndarray
    found: np.ndarray
    at: np.ndarray  # each dependency's understanding answer, among ``understood`` (0: none)
    incomplete: np.ndarray
    occurring: list[int]


def _dependencies(
    cols: OutcomeColumns, answered: np.ndarray, question_types: Sequence[str], outcomes: object
) -> _Dependencies:
    # One vocabulary for mental state strings and the states named inside them.
    vocabulary = {label: code for code, label in enumerate(cols.labels)}
    parts = [
        [vocabulary.setdefault(s, len(vocabulary)) for s in dependency_states(label)]
        for label in cols.labels
    ]
    width = max((len(p) for p in parts), default=0)
    part_table = np.full((max(1, len(parts)), max(1, width)), -1, dtype=np.int64)
    for code, codes in enumerate(parts):
        part_table[code, : len(codes)] = codes
    part_count = np.array([len(p) for p in parts] or [0], dtype=np.int64)
    n_states = max(1, len(vocabulary))
    scenarios = np.concatenate([cols.scenario_from, cols.scenario_to, [0]])
    span = int(scenarios.max()) + 2

    understood = (
        answered
        & (cols.question_type == QUESTION_TYPE_CODES.index(UNDERSTANDING))
        & (cols.scenario_from >= 0)
        & (cols.scenario_from == cols.scenario_to)
    )
    keys = (cols.stage[understood] * n_states + cols.mental_state[understood]) * span + (
        cols.scenario_from[understood]
    )

    primary = np.flatnonzero(answered & _type_mask(cols, question_types))
    label = cols.mental_state[primary]
    first, last = cols.scenario_from[primary], cols.scenario_to[primary]
    valid = (part_count[label] > 0) & (first >= 0) & (last >= first)
    length = np.where(valid, last - first + 1, 0)
    per_primary = part_count[label] * length
    owner = np.repeat(np.arange(primary.size), per_primary)
    within = np.arange(owner.size) - np.repeat(np.cumsum(per_primary) - per_primary, per_primary)
    part, offset = np.divmod(within, np.repeat(np.maximum(length, 1), per_primary))
    state = part_table[label[owner], part]
    wanted = (np.repeat(cols.stage[primary] * n_states, per_primary) + state) * span + (
        np.repeat(first, per_primary) + offset
    )
    found, at = _understood_lookup(keys, wanted, outcomes, cols, understood)
    missing = np.bincount(owner[~found], minlength=primary.size)
    n_labels = max(1, len(cols.labels))
    return _Dependencies(
        answered=answered,
        understood=understood,
        primary=primary,
        label=label,
        valid=valid,
        owner=owner,
        found=found,
        at=at,
        incomplete=~valid | (missing > 0),
        # Which labels occur: a count per label code, no sort of the answers.
        occurring=np.flatnonzero(np.bincount(label, minlength=n_labels)).tolist(),
    )


def _analyses(
    cols: OutcomeColumns,
    corrects: Sequence[np.ndarray],
    question_types: Sequence[str],
    outcomes: object,
) -> list[CompositionalAnalysis]:
    shared: _Dependencies | None = None
    results = []
    for correct in corrects:
        answered = correct >= 0
        if shared is None or not np.array_equal(answered, shared.answered):
            shared = _dependencies(cols, answered, question_types, outcomes)
        results.append(_classified(cols, shared, correct))
    return results


def _classified(
    cols: OutcomeColumns, deps: _Dependencies, correct: np.ndarray
) -> CompositionalAnalysis:
    right = correct[deps.understood]
    dependency_wrong = deps.found & (right[deps.at] == 0) if right.size else deps.found
    wrong = np.bincount(deps.owner[dependency_wrong], minlength=deps.primary.size)
    # One count per (label, outcome): the four categories, then 4 for incomplete.
    outcome = np.where(
        deps.incomplete,
        len(CATEGORIES),
        _CATEGORY_OF[2 * correct[deps.primary] + (wrong == 0)],
    )
    n_labels = max(1, len(cols.labels))
    per_label = np.bincount(
        deps.label * (len(CATEGORIES) + 1) + outcome,
        minlength=n_labels * (len(CATEGORIES) + 1),
    ).reshape(n_labels, len(CATEGORIES) + 1)
    counts = {name: per_label[:, i].tolist() for i, name in enumerate((*CATEGORIES, "incomplete"))}
    present = sorted(
        {cols.labels[c] for c in deps.occurring},
        key=lambda s: (
            (MENTAL_STATES.index(s), "") if s in MENTAL_STATES else (len(MENTAL_STATES), s)
        ),
    )
    code = {label: i for i, label in enumerate(cols.labels)}
    by_state = {
        state: CompositionalCounts(**{name: c[code[state]] for name, c in counts.items()})
        for state in present
    }
    overall = CompositionalCounts(
        **{
            name: sum(getattr(c, name) for c in by_state.values())
            for name in (*CATEGORIES, "incomplete")
        }
    )
    return CompositionalAnalysis(by_state=by_state, overall=overall)


def _understood_lookup(
    keys: np.ndarray,
    wanted: np.ndarray,
    outcomes: object,
    cols: OutcomeColumns,
    understood: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """For each ``wanted`` key: whether an understanding answer has it, and which one
    (its position in ``keys``; 0 where none). Raises ``ValueError`` when a key occurs
    twice.

    Keys are non-negative and, for a report's stages, dense (a few per answer): a
    table indexed by key then answers every lookup at once, several times faster than
    a binary search over the sorted keys, which stays for sparse keys.
    """
    top = int(max(keys.max(initial=-1), wanted.max(initial=-1))) + 1
    lowest = int(min(keys.min(initial=0), wanted.min(initial=0)))
    if lowest >= 0 and top <= _DENSE_KEYS_PER_VALUE * (keys.size + wanted.size) + 1024:
        table = np.full(top, -1, dtype=np.int64)
        table[keys] = np.arange(keys.size)
        if np.count_nonzero(table >= 0) == keys.size:
            at = table[wanted]
            found = at >= 0
            return found, np.where(found, at, 0)
        # Some key twice: the sorted keys below name it.
    order = np.argsort(keys)
    ordered = keys[order]
    twice = np.flatnonzero(ordered[1:] == ordered[:-1])
    if twice.size:
        row = np.flatnonzero(understood)[order][twice[0]]
        raise ValueError(
            f"two understanding outcomes for stage {_stage_name(outcomes, row)!r}, "
            f"{cols.labels[cols.mental_state[row]]} in scenario {cols.scenario_from[row]}; "
            "give each run/sample its own stage value"
        )
    if not keys.size:  # no understanding answer at all: every primary question is incomplete
        return np.zeros(wanted.size, dtype=bool), np.zeros(wanted.size, dtype=np.int64)
    at = np.minimum(np.searchsorted(ordered, wanted), keys.size - 1)
    found = ordered[at] == wanted
    return found, np.where(found, order[at], 0)


def _stage_name(outcomes: object, row: int) -> Hashable:
    # The caller's own stage value where it gave objects, else the code.
    if isinstance(outcomes, OutcomeColumns):
        return int(outcomes.stage[row])
    return as_outcome(list(outcomes)[row]).stage  # type: ignore[call-overload]


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
    outcomes: Iterable[OutcomeLike] | OutcomeColumns,
    *,
    question_types: Sequence[str] = TRANSFORMATION_TYPES,
    consecutive_only: bool = True,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    interval: bool = True,
) -> list[SpanAccuracy]:
    """Accuracy per (scenario count, time span), sorted by count then span.

    With ``consecutive_only`` (the paper's definition) only questions spanning two
    consecutive scenarios count: span ``k-(k+1)``. Without it every span appears,
    including whole-story ``1-5`` questions and single-scenario ``3-3`` ones.
    Questions without a span or an answer are left out. ``interval=False`` skips the
    bootstrap (``ci_low``/``ci_high`` stay ``None``) for callers that show accuracy only.
    """
    cols = outcome_columns(outcomes)
    first, last = cols.scenario_from, cols.scenario_to
    keep = (cols.correct >= 0) & _type_mask(cols, question_types) & (first >= 0) & (last >= 0)
    if consecutive_only:
        keep &= last == first + 1
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        return []
    # One integer per (count, first, last), ordered as (count is not None, count, first,
    # last): a missing count (-1) sorts first.
    count, first, last = cols.scenario_count[rows] + 1, first[rows], last[rows]
    width = int(max(first.max(), last.max())) + 1
    keys = (count * width + first) * width + last
    # Few small keys: counting them orders the groups without sorting the answers.
    groups = np.flatnonzero(np.bincount(keys))
    result = []
    for key in groups.tolist():
        members = rows[keys == key]
        correct = cols.correct[members]
        if interval:
            clusters = first_seen_codes(cols.stage[members])
            estimate = cluster_accuracy_ci(
                np.bincount(clusters),
                np.bincount(clusters, weights=correct).astype(np.int64),
                n_resamples=n_resamples,
                seed=seed,
                level=level,
            )
        else:  # nothing resampled: no interval and no units
            n, right = int(members.size), int(correct.sum())
            estimate = AccuracyEstimate(n, right, right / n, None, None, 0)
        stages, start, end = key // (width * width) - 1, key // width % width, key % width
        result.append(
            SpanAccuracy(None if stages < 0 else stages, start, end, f"{start}-{end}", estimate)
        )
    return result
