"""Adaptive allocation of human answers across strata (issue 50): pure, no Django.

A study's test items fall into strata (a category such as a ToMBench ability). Every
item first gets ``min_per_item`` answers (phase one); the rest of the study's budget of
answers then goes, place by place, where the design says:

- ``uniform``: to the stratum whose items have the fewest answers each (today's
  behaviour: every item ends with the same number of answers);
- ``balanced``: the within-stratum spread decides (Neyman allocation, in its
  equal-precision form for per-stratum estimates): the next place goes to the stratum
  whose human-accuracy interval is widest and that an answer narrows;
- ``widest``: the same on the interval of the human - model difference, the model side
  being fixed runs named by the researcher (their per-item accuracy, ``model``).

Within a stratum the item with the fewest answers is chosen by the caller (the
assignment engine), so items of one stratum stay level.

The state of a stratum is a :class:`Tally` of sufficient statistics. The study keeps
one per stratum up to date on each counted answer (:func:`tally_update`), rebuilds them
when answers stop counting (:func:`tally_of_items`), and reads them once per request to
choose (:func:`next_strata`). Every function is deterministic: ties go to the stratum
key in sorted order, so nothing depends on dict order or process.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from metrics.bootstrap import check_bootstrap_args, percentile_interval

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


def _item_terms(m: int, c: int, model: float | None) -> dict[str, float | int]:
    """One item's contribution to a tally (all zero for an unanswered item)."""
    if m <= 0:
        return dict.fromkeys(
            (
                "answers",
                "answered",
                "mean_sum",
                "mean_sq",
                "within",
                "within_items",
                "model_sum",
                "model_sq",
                "cross",
            ),
            0,
        )
    p = c / m
    x = model if model is not None else 0.0
    return {
        "answers": m,
        "answered": 1,
        "mean_sum": p,
        "mean_sq": p * p,
        "within": p * (1 - p) * m / (m - 1) if m >= 2 else 0.0,
        "within_items": 1 if m >= 2 else 0,
        "model_sum": x,
        "model_sq": x * x,
        "cross": p * x,
    }


def tally_update(
    tally: Tally,
    *,
    before: tuple[int, int],
    after: tuple[int, int],
    model: float | None = None,
) -> Tally:
    """``tally`` with one item's ``(answers, correct)`` changed from ``before`` to
    ``after`` (one answer added: ``(m, c)`` → ``(m + 1, c + correct)``)."""
    old, new = _item_terms(*before, model), _item_terms(*after, model)
    return replace(
        tally,
        **{name: getattr(tally, name) + new[name] - old[name] for name in new},
    )


def tally_of_items(
    items: Iterable[tuple[int, int, float | None]], *, n_items: int | None = None
) -> Tally:
    """A stratum's tally from scratch: ``(answers, correct, model)`` per test item."""
    rows = list(items)
    tally = Tally(items=n_items if n_items is not None else len(rows))
    for m, c, model in rows:
        tally = tally_update(tally, before=(0, 0), after=(m, c), model=model)
    return tally


# -- estimates ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StratumEstimate:
    """A stratum's estimate (mean of item means) and its approximate variance, split
    into the part more answers shrink (``within``) and the part they cannot (``between``:
    the items are a sample of the stratum's kind of item)."""

    mean: float | None
    between: float
    within: float

    @property
    def variance(self) -> float:
        return self.between + self.within

    @property
    def half_width(self) -> float | None:
        return None if self.mean is None else Z95 * math.sqrt(max(self.variance, 0.0))


def _spreads(tally: Tally, *, diff: bool) -> tuple[float | None, float, float]:
    """``(mean, S_b², S_w²)`` of the item-level quantity (human accuracy, or human -
    model when ``diff``), from the tally's sums; spreads fall back to a Bernoulli spread
    of 0.25 until there are enough items to estimate them."""
    k = tally.answered
    if k == 0:
        return None, 0.25, 0.25
    if diff:
        mean = (tally.mean_sum - tally.model_sum) / k
        sq = tally.mean_sq - 2 * tally.cross + tally.model_sq
    else:
        mean = tally.mean_sum / k
        sq = tally.mean_sq
    s_w2 = tally.within / tally.within_items if tally.within_items else 0.25
    observed = (sq - k * mean * mean) / (k - 1) if k >= 2 else 0.25
    per_item = tally.answers / k
    # The observed spread of item means holds within-item noise s_w² / m as well.
    s_b2 = max(0.0, observed - s_w2 / per_item)
    return mean, s_b2, s_w2


def stratum_estimate(tally: Tally, *, diff: bool = False, extra: int = 0) -> StratumEstimate:
    """The stratum's estimate, and its variance as if ``extra`` more answers were
    spread over its items."""
    mean, s_b2, s_w2 = _spreads(tally, diff=diff)
    n = max(tally.items, 1)
    per_item = max((tally.answers + extra) / n, 1e-9)
    return StratumEstimate(mean=mean, between=s_b2 / n, within=s_w2 / (n * per_item))


def answers_to_reach(tally: Tally, half_width: float, *, diff: bool = False) -> int | None:
    """How many more answers bring the stratum's 95% half-width to ``half_width``
    (a fraction, 0.05 for ±5 points): 0 when it is there already, ``None`` when more
    raters on these items cannot (the items' own spread is wider than that)."""
    _mean, s_b2, s_w2 = _spreads(tally, diff=diff)
    n = max(tally.items, 1)
    room = (half_width / Z95) ** 2 - s_b2 / n
    if room <= 0:
        return None
    needed = math.ceil(s_w2 / room)  # Σ m_i = n · s_w² / (n · room)
    return max(0, needed - tally.answers)


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
    chosen: list[str] = []
    for _ in range(n):
        key = _pick(design, state, planned, min_per_item, cap_per_item)
        if key is None:
            break
        planned[key] += 1
        chosen.append(key)
    return chosen


def _pick(
    design: str,
    state: Mapping[str, Tally],
    planned: Mapping[str, int],
    min_per_item: int,
    cap: int | None,
) -> str | None:
    def load(key: str) -> float:
        return (state[key].answers + planned[key]) / state[key].items

    open_keys = [k for k in state if cap is None or load(k) < cap]
    if not open_keys:
        return None
    behind = [k for k in open_keys if load(k) < min_per_item]
    if behind or design == UNIFORM:
        return min(behind or open_keys, key=lambda k: (load(k), k))
    diff = design == WIDEST

    def gain(key: str) -> float:
        now = stratum_estimate(state[key], diff=diff, extra=planned[key])
        then = stratum_estimate(state[key], diff=diff, extra=planned[key] + 1)
        return now.variance - then.variance

    def width(key: str) -> float:
        return stratum_estimate(state[key], diff=diff, extra=planned[key]).variance

    # The widest interval that one more answer still narrows; ties to the sorted key.
    return max(open_keys, key=lambda k: (width(k) if gain(k) > 0 else -1.0, -open_keys.index(k)))


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
    stratum of a few items still gets a smooth interval. The interval is the
    percentile interval, clipped to the range of the quantity (0..1, or -1..1 for a
    difference), which a two-stage draw on very few items can overstep.

    The answers of an item enter only as counts and the items of a stratum are put in a
    canonical order first, so nothing depends on the order of answers, items or strata.
    """
    check_bootstrap_args(n_resamples, level)
    if "" in strata:
        raise ValueError("a stratum key must not be empty: '' is the overall figure")
    rng = np.random.default_rng(seed)
    estimates: dict[str, float | None] = {}
    draws: dict[str, np.ndarray] = {}
    result: dict[str, tuple[float | None, float | None, float | None]] = {}
    bounds = (-1.0, 1.0) if model is not None else (0.0, 1.0)
    for key in sorted(strata):
        items = _stratum_items(key, strata[key], model)
        if items is None:
            estimates[key] = None
            result[key] = (None, None, None)
            continue
        estimates[key] = float(items.value.mean())
        draws[key] = _two_stage_means(items, n_resamples, rng)
        low, high = (None, None)
        if items.value.size > 1:
            low, high = _clipped(percentile_interval(draws[key], level), bounds)
        result[key] = (estimates[key], low, high)
    sizes = {key: len(strata[key]) for key in strata}
    overall = weighted_overall(estimates, sizes)
    answered = sum(_answered(strata[key]) for key in draws)
    low, high = (None, None)
    if overall is not None and answered > 1:
        keys = sorted(draws)
        weights = np.array([sizes[k] for k in keys], dtype=float)
        stats = np.column_stack([draws[k] for k in keys]) @ (weights / weights.sum())
        low, high = _clipped(percentile_interval(stats, level), bounds)
    result[""] = (overall, low, high)
    return result


@dataclass(frozen=True)
class _Items:
    """A stratum's answered items as arrays, in canonical order."""

    answers: np.ndarray  # m_i
    mean: np.ndarray  # p_i, share correct
    value: np.ndarray  # p_i, or p_i - model_i


def _answered(items: Sequence[Sequence[bool]]) -> int:
    return sum(1 for outcomes in items if len(outcomes))


def _stratum_items(
    key: str, items: Sequence[Sequence[bool]], model: Mapping[str, Sequence[float]] | None
) -> _Items | None:
    if model is not None:
        if key not in model:
            raise ValueError(f"no model accuracies for stratum {key!r}")
        if len(model[key]) != len(items):
            raise ValueError(
                f"stratum {key!r} has {len(items)} items but {len(model[key])} model accuracies"
            )
    rows = sorted(
        (len(outcomes), sum(bool(o) for o in outcomes), float(model[key][i]) if model else 0.0)
        for i, outcomes in enumerate(items)
        if len(outcomes)
    )
    if not rows:
        return None
    table = np.array(rows, dtype=float)
    mean = table[:, 1] / table[:, 0]
    return _Items(answers=table[:, 0].astype(np.int64), mean=mean, value=mean - table[:, 2])


def _two_stage_means(items: _Items, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``n_resamples`` bootstrap means of a stratum's item values (see
    :func:`stratified_bootstrap` for the two stages and the shrinking)."""
    m, p, y = items.answers, items.mean, items.value
    k = y.size
    # An answer redrawn from m answers varies by p(1 - p)/m; scaling the redrawn mean's
    # deviation by sqrt(m / (m - 1)) makes that p(1 - p)/(m - 1), the unbiased estimate
    # of the item mean's noise. One answer redrawn is itself: no noise to add.
    several = m >= 2
    scale = np.where(several, np.sqrt(m / np.maximum(m - 1, 1)), 0.0)
    noise = np.where(several, p * (1 - p) / np.maximum(m - 1, 1), 0.0)
    spread = float(y.var(ddof=1)) if k > 1 else 0.0
    shrink = math.sqrt(max(0.0, 1.0 - float(noise.mean()) / spread)) if spread > 0 else 0.0
    centre = y.mean() + shrink * (y - y.mean())
    picks = rng.integers(0, k, size=(n_resamples, k))
    noisy = several & (p > 0) & (p < 1)
    stats = centre[picks]
    if noisy.any():
        redrawn = rng.binomial(m[picks], p[picks]) / m[picks]
        stats = stats + (redrawn - p[picks]) * scale[picks]
    return stats.mean(axis=1)


def _clipped(
    interval: tuple[float | None, float | None], bounds: tuple[float, float]
) -> tuple[float | None, float | None]:
    low, high = interval
    if low is None or high is None:
        return low, high
    return min(max(low, bounds[0]), bounds[1]), min(max(high, bounds[0]), bounds[1])
