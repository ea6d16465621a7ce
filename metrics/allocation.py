"""Adaptive allocation of human answers across strata (issue 50): pure, no Django.

A study's test items fall into strata (a category such as a ToMBench ability). Every
item first gets ``min_per_item`` answers (phase one); the rest of the study's budget of
answers then goes, place by place, where the design says:

- ``uniform``: to the stratum whose items have the fewest answers each (today's
  behaviour: every item ends with the same number of answers);
- ``balanced``: the within-stratum spread decides (Neyman allocation, in its
  equal-precision form for per-stratum estimates): the next place goes to the stratum
  whose human-accuracy interval is widest and that an answer narrows (each stratum's
  spread of item means, the answers' noise pooled over strata: see ``next_strata``);
- ``widest``: the next place goes where it narrows the intervals of the human - model
  difference most, the widest counting most (Newcombe's interval as the report gives
  it, predicted from the tallies: see ``GAIN_POWER``), the model side being fixed runs
  named by the researcher (their per-item accuracy, ``model``).

Within a stratum the item with the fewest answers is chosen by the caller (the
assignment engine), so items of one stratum stay level.

The state of a stratum is a :class:`Tally` of sufficient statistics. The study keeps
one per stratum up to date on each counted answer (:func:`tally_update`), rebuilds them
when answers stop counting (:func:`tally_of_items`), and reads them once per request to
choose (:func:`next_strata`). Every function is deterministic: ties go to the stratum
key in sorted order, so nothing depends on dict order or process.
"""

from __future__ import annotations

import functools
import heapq
import math
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from metrics.accuracy import score_interval
from metrics.bootstrap import check_bootstrap_args

UNIFORM = "uniform"
BALANCED = "balanced"
WIDEST = "widest"
DESIGNS = (UNIFORM, BALANCED, WIDEST)
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Tally:
    """Sufficient statistics of one stratum's counted answers.

    ``m_i`` is item i's number of answers and ``p_i`` its share correct; ``model_i`` is
    the named runs' accuracy on item i (0..1) when the design compares with a model.
    """

    items: int  # test items in the stratum (N_h)
    answers: int = 0  # Σ m_i
    answered: int = 0  # items with m_i ≥ 1
    mean_sum: float = 0.0  # Σ p_i over answered items
    mean_sq: float = 0.0  # Σ p_i² over answered items
    within: float = 0.0  # Σ p_i (1 - p_i) m_i / (m_i - 1) over items with m_i ≥ 2
    within_items: int = 0  # items with m_i ≥ 2
    model_sum: float = 0.0  # Σ model_i over answered items
    model_sq: float = 0.0  # Σ model_i² over answered items
    cross: float = 0.0  # Σ p_i · model_i over answered items

    def as_dict(self) -> dict[str, float | int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, float | int]) -> Tally:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


_NO_TERMS = (0,) * 9


def _item_terms(m: int, c: int, model: float | None) -> tuple[float | int, ...]:
    """One item's contribution to each of a tally's sums (all zero for an unanswered
    item), in the order of the fields after ``items``."""
    if m <= 0:
        return _NO_TERMS
    p = c / m
    x = model if model is not None else 0.0
    several = m >= 2
    return (
        m,  # answers
        1,  # answered
        p,  # mean_sum
        p * p,  # mean_sq
        p * (1 - p) * m / (m - 1) if several else 0.0,  # within
        1 if several else 0,  # within_items
        x,  # model_sum
        x * x,  # model_sq
        p * x,  # cross
    )


def tally_update(
    tally: Tally,
    *,
    before: tuple[int, int],
    after: tuple[int, int],
    model: float | None = None,
) -> Tally:
    """``tally`` with one item's ``(answers, correct)`` changed from ``before`` to
    ``after`` (one answer added: ``(m, c)`` → ``(m + 1, c + correct)``)."""
    o, n = _item_terms(*before, model), _item_terms(*after, model)
    t = tally
    # Spelled out, field by field: the engine calls this on every counted answer.
    return Tally(
        t.items,
        t.answers + n[0] - o[0],
        t.answered + n[1] - o[1],
        t.mean_sum + n[2] - o[2],
        t.mean_sq + n[3] - o[3],
        t.within + n[4] - o[4],
        t.within_items + n[5] - o[5],
        t.model_sum + n[6] - o[6],
        t.model_sq + n[7] - o[7],
        t.cross + n[8] - o[8],
    )


def tally_of_items(
    items: Iterable[tuple[int, int, float | None]], *, n_items: int | None = None
) -> Tally:
    """A stratum's tally from scratch: ``(answers, correct, model)`` per test item."""
    rows = list(items)
    # Summed field by field in one pass: a take works out every stratum's tally from
    # its items' counts, so this runs over all of a study's items on each take.
    size = n_items if n_items is not None else len(rows)
    if not rows:
        return Tally(items=size)
    terms = zip(*(_item_terms(*row) for row in rows), strict=True)
    return Tally(size, *(sum(column) for column in terms))


# -- estimates ------------------------------------------------------------------------------


def _spreads(
    tally: Tally, *, diff: bool, within: float | None = None
) -> tuple[float | None, float, float]:
    """``(mean, S_b², S_w²)`` of the item-level quantity (human accuracy, or human -
    model when ``diff``), from the tally's sums; spreads fall back to a Bernoulli spread
    of 0.25 until there are enough items to estimate them. ``within`` stands for the
    stratum's own S_w² when given (the value pooled over strata)."""
    k = tally.answered
    if k == 0:
        return None, 0.25, 0.25
    if diff:
        mean = (tally.mean_sum - tally.model_sum) / k
        sq = tally.mean_sq - 2 * tally.cross + tally.model_sq
    else:
        mean = tally.mean_sum / k
        sq = tally.mean_sq
    if within is not None:
        s_w2 = within
    else:
        s_w2 = tally.within / tally.within_items if tally.within_items else 0.25
    observed = (sq - k * mean * mean) / (k - 1) if k >= 2 else 0.25
    per_item = tally.answers / k
    # The observed spread of item means holds within-item noise s_w² / m as well.
    s_b2 = max(0.0, observed - s_w2 / per_item)
    return mean, s_b2, s_w2


def _variance_parts(
    tally: Tally, spreads: tuple[float | None, float, float], extra: int
) -> tuple[float, float]:
    """The estimate's variance, between items and within them, as if ``extra`` more
    answers were spread over the stratum's items."""
    _mean, s_b2, s_w2 = spreads
    n = max(tally.items, 1)
    per_item = max((tally.answers + extra) / n, 1e-9)
    return s_b2 / n, s_w2 / (n * per_item)


def answers_to_reach(
    tally: Tally, half_width: float, *, diff: bool = False, level: float = 0.95
) -> int | None:
    """How many more answers bring the stratum's 95% half-width to ``half_width``
    (a fraction, 0.05 for ±5 points): 0 when it is there already, ``None`` when more
    raters on these items cannot (the items' own spread is wider than that). For
    human - model (``diff``) it is the predicted width of Newcombe's interval, the one
    the report and widest comparison use (:func:`_answers_to_reach_difference`).

    Two conditions, the larger count wins: the variance of the mean of item means,
    between items (which more raters do not shrink) and within them (which they do),
    must fit in the target; and, for human accuracy, the score interval the report
    gives (:func:`_interval`) must: however the answers cluster in items, it is at
    least as wide as that of as many independent answers, which near 0% or 100% is
    the wider of the two (an all-right stratum has no spread to measure, but its
    interval still reaches down from 100%).
    """
    if diff:
        return _answers_to_reach_difference(tally, half_width)
    _mean, s_b2, s_w2 = _spreads(tally, diff=diff)
    n = max(tally.items, 1)
    room = (half_width / Z95) ** 2 - s_b2 / n
    if room <= 0:
        return None
    needed = math.ceil(s_w2 / room)  # Σ m_i = n · s_w² / (n · room)
    if not diff and _mean is not None:
        df = tally.answered - 1
        quantile = t_quantile((1 + level) / 2, df) if df >= 1 else Z95
        needed = max(needed, _score_answers(_mean, half_width, quantile))
    return max(0, needed - tally.answers)


# More answers than any study gets: a half-width still too wide with these is the items'.
_ENDLESS = 10**7


def _answers_to_reach_difference(tally: Tally, half_width: float) -> int | None:
    """:func:`answers_to_reach` of human - model: the fewest more answers whose
    predicted Newcombe interval (the one the report gives, as widest comparison
    predicts it: :meth:`_ComparisonSides.half_width`) is no wider than ``half_width``.
    The predicted width falls as answers grow, so doubling, then bisection."""
    side = _comparison_sides({"": tally})[""]
    spreads = _relative_spreads({"": tally})[""]

    def wider(extra: int) -> bool:
        return side.half_width(tally, spreads, extra) > half_width

    if not wider(0):
        return 0
    if wider(_ENDLESS):
        return None
    high = 1
    while wider(high):
        high *= 2
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if wider(mid) else (low, mid)
    return high


def _score_half_width(p: float, n: float, quantile: float) -> float:
    """Half the width of the score interval of ``p`` over ``n`` answers (within 0..1,
    as the report and the study page show it)."""
    low, high = score_interval(p, n, z=quantile)
    return (high - low) / 2


def _score_answers(p: float, half_width: float, quantile: float) -> int:
    """The fewest answers whose score interval at ``p`` is no wider than ±half_width
    (the half-width falls as answers grow: doubling, then bisection)."""
    high = 1
    while _score_half_width(p, high, quantile) > half_width:
        high *= 2
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if _score_half_width(p, mid, quantile) > half_width else (low, mid)
    return high


# -- choosing ------------------------------------------------------------------------------


def next_strata(
    design: str,
    tallies: Mapping[str, Tally],
    n: int,
    *,
    min_per_item: int = 1,
    cap_per_item: int | None = None,
    pending: Mapping[str, int] | None = None,
) -> list[str]:
    """The strata of the next ``n`` places, in order, by ``design``.

    Phase one first: while a stratum has fewer than ``min_per_item`` answers per item
    it is chosen before any other (the one furthest behind first). A stratum whose
    items all hold ``cap_per_item`` answers is full. Fewer than ``n`` keys come back
    when every stratum is full. The tallies are advanced as places are handed out, so
    a batch of places spreads as the same places one by one would. ``pending`` counts
    places already handed out but not yet answered, per stratum: they are treated as
    answers to come, so two participants arriving together are not sent to the same
    stratum for the same gap.
    """
    if design not in DESIGNS:
        raise ValueError(f"unknown allocation design {design!r}; one of {', '.join(DESIGNS)}")
    state = {key: tallies[key] for key in sorted(tallies) if tallies[key].items > 0}
    planned: dict[str, int] = {key: (pending or {}).get(key, 0) for key in state}
    # A stratum's spreads come from its answers only, which places handed out here do
    # not change: worked out once, not once per place.
    if design == UNIFORM:
        spreads = {key: _spreads(state[key], diff=False) for key in state}
    elif design == BALANCED:
        spreads = _shrunk_spreads(state, diff=False)
    else:
        spreads = _relative_spreads(state)
    sides = _comparison_sides(state) if design == WIDEST else {}

    def rank(key: str) -> tuple[int, float, str] | None:
        """The stratum's place in the queue (lowest first), ``None`` when it is full.
        Phase one (and uniform): the lowest load first; then the widest interval that
        one more answer still narrows; ties to the sorted key."""
        tally = state[key]
        load = (tally.answers + planned[key]) / tally.items
        if cap_per_item is not None and load >= cap_per_item:
            return None
        if load < min_per_item or design == UNIFORM:
            return (0, load, key)
        if design == WIDEST:
            side = sides[key]
            now = side.half_width(tally, spreads[key], planned[key]) ** GAIN_POWER
            then = side.half_width(tally, spreads[key], planned[key] + 1) ** GAIN_POWER
            return (1, then - now if now > then else 1.0, key)
        between, within = _variance_parts(tally, spreads[key], planned[key])
        now = between + within
        then = sum(_variance_parts(tally, spreads[key], planned[key] + 1))
        return (1, -now if now > then else 1.0, key)

    # Handing a place to a stratum changes only that stratum's rank, so a heap of ranks
    # gives the same places as comparing every stratum for every place.
    queue = [entry for key in state if (entry := rank(key)) is not None]
    heapq.heapify(queue)
    chosen: list[str] = []
    while queue and len(chosen) < n:
        key = heapq.heappop(queue)[2]
        planned[key] += 1
        chosen.append(key)
        if (entry := rank(key)) is not None:
            heapq.heappush(queue, entry)
    return chosen


# Widest comparison sends the next place where it lowers the sum over strata of each
# stratum's predicted half-width of human - model raised to this power the most: a
# smooth maximum (the power mean of order 30 over 31 strata is within 11% of the widest)
# that still credits narrowing the strata that are nearly the widest, which the luck of
# their items may make the widest in the report. At 1 it would be the largest narrowing
# of any one interval, wherever it is; at hundreds, the widest predicted interval alone.
# Chosen in simulation (make bench-allocation, docs/benchmarks.md, 30 Nov 2026): on
# ToMBench (60 studies) the widest half-width was 0.92x uniform's at 1, 0.88x at 4,
# 0.86-0.87x at 30 and 0.91-0.93x at 60-300; on TVShowGuess 0.96-0.98x throughout.
GAIN_POWER = 30.0


@functools.lru_cache(maxsize=4096)
def _t95(df: int) -> float:
    return t_quantile(0.975, df) if df >= 1 else Z95


@dataclass(frozen=True)
class _ComparisonSides:
    """What a stratum's predicted interval of human - model needs besides the human
    side's spreads: the model's accuracy over the items and its variance, the two
    sides' covariance (all over the answered items' sums) and the t quantile."""

    model: float
    model_var: float  # of the model's mean over the stratum's items
    cov: float  # of the two means
    quantile: float

    @staticmethod
    def raw(tally: Tally) -> tuple[float, float, float]:
        """``(model mean, model spread over items, covariance with the item means)``."""
        k = tally.answered
        if k == 0:
            return 0.5, 0.25, 0.0
        q = tally.model_sum / k
        if k < 2:
            return q, 0.25, 0.0
        p = tally.mean_sum / k
        s_m2 = max(0.0, (tally.model_sq - k * q * q) / (k - 1))
        return q, s_m2, (tally.cross - k * p * q) / (k - 1)

    def half_width(
        self, tally: Tally, spreads: tuple[float | None, float, float], extra: int
    ) -> float:
        """Half the width of Newcombe's interval of human - model (as the report's
        :func:`_difference_interval`, each side a score interval of its effective
        number of answers) as if ``extra`` more answers were spread over the items."""
        mean = spreads[0] if spreads[0] is not None else 0.5
        var_h = sum(_variance_parts(tally, spreads, extra))
        answers = max(tally.answers + extra, 1)
        people = score_interval(mean, _effective(mean, var_h, answers), z=self.quantile)
        items = max(tally.answered, 1)
        machine = score_interval(
            self.model, _effective(self.model, self.model_var, items), z=self.quantile
        )
        sd = math.sqrt(var_h * self.model_var)
        rho = max(-1.0, min(1.0, self.cov / sd)) if sd > 0 else 0.0
        low, high = _difference_interval(mean, people, self.model, machine, rho)
        return (high - low) / 2


def _comparison_sides(state: Mapping[str, Tally]) -> dict[str, _ComparisonSides]:
    """Every stratum's model side, from its own items: the named runs' outcomes are
    fixed before any answer, so unlike the human side they carry no luck of answers
    that choosing by them could turn into bias."""
    sides = {}
    for key, tally in state.items():
        q, s_m2, s_hm = _ComparisonSides.raw(tally)
        n = max(tally.items, 1)
        sides[key] = _ComparisonSides(q, s_m2 / n, s_hm / n, _t95(tally.answered - 1))
    return sides


def _relative_spreads(state: Mapping[str, Tally]) -> dict[str, tuple[float | None, float, float]]:
    """The human side's spreads widest comparison decides by: the answers' noise pooled
    over strata, and the items' spread as a share of p(1 - p) (the design effect a
    score interval's effective number of answers divides by) shrunk towards its value
    pooled over strata, the pooled value counting as ``PRIOR_ITEMS`` items.

    :func:`_shrunk_spreads` pools the spread itself, which near 100% is too wide: a
    stratum people get 99% right has almost no spread of items to share, and its
    predicted interval of human - model came out 4-5 points wider than the report's
    (TVShowGuess's "direct" speakers, bench diagnostics). As a share of p(1 - p) the
    spread pools across strata of any accuracy; a stratum at 0 or 100% keeps its own
    (none), where the score interval takes its answers as they are."""
    pooled = _pooled_within(state.values())
    own = {key: _spreads(state[key], diff=False, within=pooled) for key in state}
    ratio = {}
    df = {}
    for key, (mean, s_b2, _) in own.items():
        if mean is not None and 0 < mean < 1:
            ratio[key] = s_b2 / (mean * (1 - mean))
            df[key] = max(state[key].answered - 1, 0)
    total = sum(df.values())
    centre = sum(df[k] * ratio[k] for k in ratio) / total if total else 0.0
    out = {}
    for key, (mean, s_b2, w) in own.items():
        if key in ratio:
            r = (df[key] * ratio[key] + PRIOR_ITEMS * centre) / (df[key] + PRIOR_ITEMS)
            out[key] = (mean, r * mean * (1 - mean), w)
        else:
            out[key] = (mean, s_b2, w)
    return out


def _effective(p: float, variance: float, most: float) -> float:
    """The effective number of answers of a proportion ``p`` whose estimate varies by
    ``variance``, at most ``most`` (as :func:`_score_interval` sets it)."""
    pq = p * (1 - p)
    if pq <= 0 or variance <= 0:
        return most
    return min(most, pq / variance)


# How many items' worth of evidence the between-item spread pooled over strata counts
# for in a stratum's own (see _shrunk_spreads). Chosen in simulation (make
# bench-allocation, docs/benchmarks.md, round two): the worst ToMBench ability's bias
# was 0.7 points with no pooling, about 0.3 at 100 items, and about 0 fully pooled,
# where the balanced design no longer sees which abilities people disagree on and its
# widest TVShowGuess stratum rose past 0.8x uniform's.
PRIOR_ITEMS = 100


def _shrunk_spreads(
    state: Mapping[str, Tally], *, diff: bool
) -> dict[str, tuple[float | None, float, float]]:
    """The spreads an adaptive design decides by: every stratum's ``(mean, S_b², S_w²)``
    with the answers' noise S_w² pooled over strata and the items' spread S_b² shrunk
    towards its pooled value (empirical Bayes, the pooled value counting as
    ``PRIOR_ITEMS`` items against the stratum's answered items - 1).

    Why: a stratum's own estimates of both spreads rise and fall with its own luck,
    and with its mean (p(1 - p) is smallest where the answers happen to agree), so
    sending answers after them biases the mean of item means: a stratum that happened
    to look sure stops early, and high. Round one pooled the noise (bias on the worst
    ToMBench ability 1.5 -> 0.7 points); the items' spread still followed the luck.
    """
    pooled = _pooled_within(state.values())
    own = {key: _spreads(state[key], diff=diff, within=pooled) for key in state}
    df = {key: max(state[key].answered - 1, 0) for key in state}
    total = sum(df.values())
    centre = sum(df[key] * own[key][1] for key in state) / total if total else 0.25
    return {
        key: (mean, (df[key] * s_b2 + PRIOR_ITEMS * centre) / (df[key] + PRIOR_ITEMS), pooled)
        for key, (mean, s_b2, _) in own.items()
    }


def _pooled_within(tallies: Iterable[Tally]) -> float:
    """The within-item spread of answers over every stratum's items with two answers
    or more; the Bernoulli bound 0.25 until there are any."""
    rows = [(t.within, t.within_items) for t in tallies]
    items = sum(n for _, n in rows)
    return sum(w for w, _ in rows) / items if items else 0.25


def weighted_overall(means: Mapping[str, float | None], items: Mapping[str, int]) -> float | None:
    """The overall figure of a stratified design: stratum means weighted by their share
    of items (not of answers)."""
    keys = [k for k in sorted(means) if means[k] is not None and items.get(k, 0) > 0]
    total = sum(items[k] for k in keys)
    if not total:
        return None
    return sum(items[k] * float(means[k]) for k in keys) / total  # type: ignore[arg-type]


def stratified_bootstrap(
    strata: Mapping[str, Sequence[Sequence[bool]]],
    *,
    model: Mapping[str, Sequence[float]] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, tuple[float | None, float | None, float | None]]:
    """Estimates of a stratified design with seeded two-stage bootstrap intervals.

    ``strata`` maps a stratum key to its items, each item the list of its counted
    answers' outcomes. Returns ``{key: (estimate, low, high)}`` plus the key ``""`` for
    the overall figure. A stratum's estimate is the mean of its answered items' means
    (human - model when ``model`` gives each item's model accuracy, in the same item
    order); the overall figure weights strata by their number of items
    (:func:`weighted_overall`), answered or not. An item without answers has no mean
    and is left out of its stratum's estimate; a stratum without answered items has
    ``(None, None, None)``; a stratum with one answered item has its estimate and no
    interval (a bootstrap over one object says nothing about the spread of items).

    Each resample draws, stratum by stratum, as many items as were answered, with
    replacement, and for each drawn item as many answers as it has, with replacement
    from its own answers (two stages, Davison & Hinkley 1997, section 3.8). Done
    naively the two stages count the answers' noise twice: an item mean's spread
    already holds it, and redrawing the answers adds it again (intervals about 1.4x
    too wide when answers are few). So, as there, the items' means are first shrunk
    towards the stratum mean by the factor that leaves only their spread beyond the
    answers' noise, and the redrawn answers add that noise back once: a resampled
    mean then varies as much as the item means do, around the right centre, and a
    stratum of a few items still gets a smooth interval. The interval of human
    accuracy is a score interval whose effective number of answers the draws' variance
    sets (:func:`_score_interval`): near 0 or 1 the draws cannot reach past what they
    resample. The interval of human - model combines that interval with the same kind
    of interval of the model's accuracy over the items, and the two sides' correlation
    in the draws (:func:`_difference_interval`).

    The answers of an item enter only as counts and the items of a stratum are put in a
    canonical order first, so nothing depends on the order of answers, items or strata.
    Each stratum draws from its own generator, seeded by ``seed`` and the stratum key,
    so a stratum's interval does not change when another stratum is added.
    """
    human, diff = stratified_bootstrap_pair(
        strata, model=model, n_resamples=n_resamples, seed=seed, level=level
    )
    return human if diff is None else diff


def stratified_bootstrap_pair(
    strata: Mapping[str, Sequence[Sequence[bool]]],
    *,
    model: Mapping[str, Sequence[float]] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[
    dict[str, tuple[float | None, float | None, float | None]],
    dict[str, tuple[float | None, float | None, float | None]] | None,
]:
    """:func:`stratified_bootstrap` of human accuracy and, when ``model`` is given, of
    human - model, from the same draws (each is what that function returns for it;
    the second is ``None`` without a model). Half the work of two calls."""
    return stratified_bootstrap_counts(
        {
            key: [(len(outcomes), sum(bool(o) for o in outcomes)) for outcomes in items]
            for key, items in strata.items()
        },
        model=model,
        n_resamples=n_resamples,
        seed=seed,
        level=level,
    )


def stratified_bootstrap_counts(
    strata: Mapping[str, Sequence[tuple[int, int]]],
    *,
    model: Mapping[str, Sequence[float]] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[
    dict[str, tuple[float | None, float | None, float | None]],
    dict[str, tuple[float | None, float | None, float | None]] | None,
]:
    """:func:`stratified_bootstrap_pair` with each item given as its ``(answers,
    correct)`` counts instead of its answers' outcomes: the same figures (the answers
    enter only as counts), without lists of outcomes. The bench feeds it items with a
    very large number of answers to find the floor of its intervals."""
    check_bootstrap_args(n_resamples, level)
    if "" in strata:
        raise ValueError("a stratum key must not be empty: '' is the overall figure")
    sides = ("human", "model") if model is not None else ("human",)
    draws: dict[str, dict[str, np.ndarray]] = {side: {} for side in sides}
    estimates: dict[str, dict[str, float | None]] = {side: {} for side in sides}
    human: dict[str, tuple[float | None, float | None, float | None]] = {}
    diff: dict[str, tuple[float | None, float | None, float | None]] = {}
    counts: dict[str, tuple[int, int]] = {}  # answered items, answers
    for key in sorted(strata):
        items = _stratum_items(key, strata[key], model)
        if items is None:
            for side in sides:
                estimates[side][key] = None
            continue
        estimates["human"][key] = float(items.mean.mean())
        if model is not None:
            estimates["model"][key] = float(items.model.mean())
        counts[key] = (items.mean.size, int(items.answers.sum()))
        means = _two_stage_means(items, key, n_resamples, seed)
        for side in sides:
            draws[side][key] = means[side]
    sizes = {key: len(strata[key]) for key in strata}
    for key in [*sorted(strata), ""]:
        if key:
            drawn = {side: draws[side].get(key) for side in sides}
            answered, answers = counts.get(key, (0, 0))
            df = answered - 1
            values = {side: estimates[side][key] for side in sides}
        else:
            keys = sorted(draws["human"])
            answered = sum(counts[k][0] for k in keys)
            answers = sum(counts[k][1] for k in keys)
            df = answered - len(keys)
            values = {side: weighted_overall(estimates[side], sizes) for side in sides}
            drawn = {side: None for side in sides}
            if keys and answered > 1:
                weights = np.array([sizes[k] for k in keys], dtype=float)
                weights /= weights.sum()
                drawn = {
                    side: np.column_stack([draws[side][k] for k in keys]) @ weights
                    for side in sides
                }
        h, x = values["human"], values.get("model")
        if h is None or answered < 2 or drawn["human"] is None:
            # One answered item: a bootstrap over one object says nothing of the spread.
            human[key] = (h, None, None)
            diff[key] = (None if h is None or x is None else h - x, None, None)
            continue
        people = _score_interval(h, drawn["human"], answers=answers, df=df, level=level)
        human[key] = (h, *people)
        if model is not None and x is not None:
            machine = _score_interval(x, drawn["model"], answers=answered, df=df, level=level)
            rho = _correlation(drawn["human"], drawn["model"])
            diff[key] = (h - x, *_difference_interval(h, people, x, machine, rho))
    return human, (diff if model is not None else None)


# Cap on one stratum's resamples x items multiplicity matrix (8 MB of float64): drawn in
# chunks of rows this size, and kept for reuse when it fits in one.
_CHUNK_CELLS = 1_000_000


@dataclass(frozen=True)
class _Items:
    """A stratum's answered items as arrays, in canonical order."""

    answers: np.ndarray  # m_i
    correct: np.ndarray  # c_i
    model: np.ndarray  # model_i (0 without a model)

    @property
    def mean(self) -> np.ndarray:
        return self.correct / self.answers


def _answered(items: Sequence[Sequence[bool]]) -> int:
    return sum(1 for outcomes in items if len(outcomes))


def _stratum_items(
    key: str, items: Sequence[tuple[int, int]], model: Mapping[str, Sequence[float]] | None
) -> _Items | None:
    if model is not None:
        if key not in model:
            raise ValueError(f"no model accuracies for stratum {key!r}")
        if len(model[key]) != len(items):
            raise ValueError(
                f"stratum {key!r} has {len(items)} items but {len(model[key])} model accuracies"
            )
    rows = sorted(
        (int(m), int(c), float(model[key][i]) if model else 0.0)
        for i, (m, c) in enumerate(items)
        if m > 0
    )
    if not rows:
        return None
    table = np.array(rows, dtype=float)
    counts = table[:, :2].astype(np.int64)
    return _Items(answers=counts[:, 0], correct=counts[:, 1], model=table[:, 2])


def _two_stage_means(items: _Items, key: str, n_resamples: int, seed: int) -> dict[str, np.ndarray]:
    """``n_resamples`` bootstrap means of a stratum's human accuracy (``"human"``) and of
    the model's (``"model"``, the items drawn: a run's outcome on an item has no noise
    of answers), from the same draws (see :func:`stratified_bootstrap` for the two
    stages and the shrinking).

    The second stage is drawn by kind of item: the redrawn answers of all the drawn
    items with the same m answers and c correct sum to Binomial(m · draws, c / m), one
    number per kind and resample (a sum of binomials with one p is a binomial). Items
    whose answers all agree, or that have one answer, redraw to themselves.
    """
    m, p = items.answers, items.mean
    k = p.size
    noisy = (m >= 2) & (items.correct > 0) & (items.correct < m)
    # An answer redrawn from m answers varies by p(1 - p)/m; scaling the redrawn mean's
    # deviation by sqrt(m / (m - 1)) makes that p(1 - p)/(m - 1), the unbiased estimate
    # of the item mean's noise.
    noise = float(np.where(noisy, p * (1 - p) / np.maximum(m - 1, 1), 0.0).mean())
    # Resampling k items spreads them by their plain variance (divisor k), which falls
    # short of the unbiased one (k - 1) by (k - 1)/k, a tenth at 10 items: the shrink
    # factor aims at the unbiased spread beyond the answers' noise.
    spread = float(p.var(ddof=1)) if k > 1 else 0.0
    plain = float(p.var())
    shrink = math.sqrt(max(0.0, spread - noise) / plain) if plain > 0 else 0.0
    centres = {"human": p.mean() + shrink * (p - p.mean()), "model": items.model}
    # The items are sorted by (m, c), so each kind is a run of columns.
    counts = np.column_stack([m, items.correct])
    starts = np.flatnonzero(np.r_[True, np.any(counts[1:] != counts[:-1], axis=1)])
    redraws = noisy[starts]
    kind_m = m[starts][redraws]
    kind_p = p[starts][redraws]
    scale = np.sqrt(kind_m / (kind_m - 1)) / kind_m
    stream = zlib.crc32(key.encode())
    answers = np.random.default_rng([seed, stream, 1])
    sums: dict[str, list[np.ndarray]] = {"human": [], "model": []}
    for times in _multiplicities(seed, stream, k, n_resamples):
        drawn = np.add.reduceat(times, starts, axis=1)[:, redraws]
        trials = np.rint(drawn).astype(np.int64) * kind_m
        hits = answers.binomial(trials, kind_p)
        redrawn = ((hits - trials * kind_p) * scale).sum(axis=1)
        sums["human"].append(times @ centres["human"] + redrawn)
        sums["model"].append(times @ centres["model"])
    return {side: np.concatenate(chunks) / k for side, chunks in sums.items()}


def _multiplicities(seed: int, stream: int, k: int, n_resamples: int) -> Iterator[np.ndarray]:
    """How many times each resample draws each of ``k`` items (resamples x k), in
    chunks of rows; the one chunk of a small stratum comes from a cache, so reports of
    the same seed over strata of the same size draw items once."""
    if n_resamples * k <= _CHUNK_CELLS:
        yield _cached_multiplicities(seed, stream, k, n_resamples)
    else:
        yield from _multiplicity_chunks(seed, stream, k, n_resamples)


@functools.lru_cache(maxsize=64)
def _cached_multiplicities(seed: int, stream: int, k: int, n_resamples: int) -> np.ndarray:
    (times,) = _multiplicity_chunks(seed, stream, k, n_resamples)
    times.flags.writeable = False  # shared by every caller through the cache
    return times


def _multiplicity_chunks(seed: int, stream: int, k: int, n_resamples: int) -> Iterator[np.ndarray]:
    # The chunking is part of the stream: integers() drops the unused half of its last
    # 64-bit draw at the end of each call (as metrics.accuracy's cluster draws).
    picks = np.random.default_rng([seed, stream, 0])
    rows = max(1, _CHUNK_CELLS // k)
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        drawn = picks.integers(0, k, size=(size, k)) + (np.arange(size) * k)[:, None]
        yield np.bincount(drawn.reshape(-1), minlength=size * k).reshape(size, k).astype(float)


def _score_interval(
    estimate: float, draws: np.ndarray, *, answers: int, df: int, level: float
) -> tuple[float, float]:
    """The interval of a proportion (human accuracy, or the model's over items) from
    its bootstrap draws: the Wilson score interval, with the draws' variance setting
    its effective number of answers (Korn & Graubard 1998; Dean & Pagano 2015).

    Near 0 or 1 a percentile interval cannot reach past what it resamples: a stratum
    whose 114 answers happen to be all right draws nothing else and gets [100%, 100%],
    which on a kind of item people get 98% right happens in about one study in ten.
    The score interval's variance is taken at the bound, not at the estimate, so it
    reaches down from 100% as a binomial of that many answers does. The effective
    number is p(1 - p) over the draws' variance (the answers' clustering in items), at
    most ``answers`` (the model's side: its items), and ``answers`` when there is no
    spread to measure (p at 0 or 1); Student's t over the items takes the place of
    the normal quantile. A p strictly between 0 and 1 that no draw moves has a point
    interval.
    """
    prob = (1 + level) / 2
    quantile = t_quantile(prob, df) if df >= 1 else NormalDist().inv_cdf(prob)
    spread = float(draws.var())
    pq = estimate * (1 - estimate)
    if pq > 0 and spread <= 0:
        # Between 0 and 1 yet the same in every draw: items that all agree on it (a
        # model as right on every item, averaged over samples): nothing to vary.
        return estimate, estimate
    n = answers if pq <= 0 else min(answers, pq / spread)
    return score_interval(estimate, n, z=quantile)


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    """The correlation of two sides' draws (0 when either does not vary)."""
    sa, sb = float(a.std()), float(b.std())
    if sa <= 0 or sb <= 0:
        return 0.0
    return float(np.clip(np.mean((a - a.mean()) * (b - b.mean())) / (sa * sb), -1.0, 1.0))


def _difference_interval(
    human: float,
    people: tuple[float, float],
    model: float,
    machine: tuple[float, float],
    rho: float,
) -> tuple[float, float]:
    """The interval of human - model from each side's score interval: Newcombe's
    hybrid score interval for a paired difference of proportions (Newcombe 1998,
    method 10; Zou & Donner 2008 call the construction MOVER), the sides' correlation
    ``rho`` taken from the bootstrap draws (both sides are drawn on the same items).

    Each side's distance to its own bounds carries that side's asymmetry: the model's
    accuracy is a mean of right-or-wrong outcomes over a few dozen items, skewed near
    0 or 1, which a percentile interval of the difference (round two's, expanded for
    Student's t) under-covered on TVShowGuess (0.939 against 0.95, human accuracy
    near 98%, the model 20 points lower). This keeps human - model consistent with
    the human side's interval: the same score interval and t quantile.
    """
    (h_low, h_high), (m_low, m_high) = people, machine
    below = (human - h_low, m_high - model)  # human lower, model higher
    above = (h_high - human, model - m_low)
    down = math.sqrt(max(0.0, below[0] ** 2 - 2 * rho * below[0] * below[1] + below[1] ** 2))
    up = math.sqrt(max(0.0, above[0] ** 2 - 2 * rho * above[0] * above[1] + above[1] ** 2))
    difference = human - model
    return max(difference - down, -1.0), min(difference + up, 1.0)


def t_quantile(prob: float, df: int) -> float:
    """Student's t quantile (prob > 0.5) for whole degrees of freedom: bisection on the
    exact finite series of its distribution function (Abramowitz & Stegun 26.7.3-4);
    beyond 1,000 degrees the first term of the Cornish-Fisher expansion."""
    z = NormalDist().inv_cdf(prob)
    if df > 1000:
        return z * (1 + (z * z + 1) / (4 * df))
    central = 2 * prob - 1  # P(|T| <= t)
    low, high = z, max(2 * z, 1.0)
    while _t_central(high, df) < central:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if _t_central(mid, df) < central else (low, mid)
    return (low + high) / 2


def _t_central(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with ``df`` (whole) degrees of freedom."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 0:
        total = term = 1.0
        for j in range(1, df // 2):
            term *= c2 * (2 * j - 1) / (2 * j)
            total += term
        return math.sin(theta) * total
    if df == 1:
        return 2 * theta / math.pi
    total = term = math.cos(theta)
    for j in range(1, (df - 1) // 2):
        term *= c2 * (2 * j) / (2 * j + 1)
        total += term
    return 2 / math.pi * (theta + math.sin(theta) * total)
