"""Inter-rater agreement: percent agreement, Cohen's and Fleiss' kappa, Krippendorff's alpha.

``ratings`` is always units x raters: one row per unit (a masked speaker, a question),
one cell per rater, ``None`` where that rater gave no rating. Rows may be ragged (a
short row is missing its last raters). Labels can be any hashable for the nominal
statistics.

A statistic whose value is 0/0 (e.g. kappa when every rating is the same category, so
chance agreement is already perfect) is ``None``: the data cannot tell agreement from
chance, and reporting 1.0 or 0.0 would claim something it does not show. Percent
agreement still reports 100% for such data.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import chain
from numbers import Real

import krippendorff
import numpy as np

from metrics.bootstrap import check_bootstrap_args, percentile_interval, resamplable

Ratings = Sequence[Sequence[Hashable | None]]
LEVELS = ("nominal", "ordinal", "interval", "ratio")


def _unit_values(ratings: Ratings) -> list[list[Hashable]]:
    # Units without a missing rating are kept as they are: the membership test runs in
    # C, and reports of 100,000 ratings call this several times.
    return [
        list(unit) if None not in unit else [r for r in unit if r is not None] for unit in ratings
    ]


def _category_counts(values: list[list[Hashable]]) -> np.ndarray:
    """Units x categories: each unit's ratings per category, categories numbered in the
    order they first appear (int64, at least one column).

    The order matters: sums over categories run in it, so another order could move a
    statistic in its last bit. Coded through dict lookups mapped in C (100,000 ratings
    are counted several times per report).
    """
    flat = list(chain.from_iterable(values))
    codes = {value: code for code, value in enumerate(dict.fromkeys(flat))}
    coded = np.fromiter(map(codes.__getitem__, flat), dtype=np.int64, count=len(flat))
    width = max(1, len(codes))
    rows = np.repeat(np.arange(len(values), dtype=np.int64), list(map(len, values)))
    return np.bincount(rows * width + coded, minlength=len(values) * width).reshape(
        len(values), width
    )


def _numeric_counts(values: list[list[Hashable]]) -> tuple[np.ndarray, np.ndarray] | str:
    """(sorted distinct values as floats, units x values counts), or the first value
    that is not a number (bools are not), shown, for the caller's refusal."""
    flat = list(chain.from_iterable(values))
    for kind in set(map(type, flat)):
        if kind is bool or not issubclass(kind, Real):
            return repr(next(v for v in flat if type(v) is kind))
    numbers = np.array(flat, dtype=float)
    domain, codes = np.unique(numbers, return_inverse=True)
    width = max(1, len(domain))
    rows = np.repeat(np.arange(len(values), dtype=np.int64), list(map(len, values)))
    counts = np.bincount(rows * width + codes.reshape(-1), minlength=len(values) * width)
    return domain, counts.reshape(len(values), width)


def percent_agreement(ratings: Ratings) -> float | None:
    """Mean over units of the share of agreeing rater pairs.

    A unit rated by m >= 2 raters contributes (agreeing ordered pairs) / (m (m - 1));
    units with fewer than two ratings are left out, so missing ratings are allowed.
    With complete data this is Fleiss' P-bar; with two raters it is the share of units
    on which they agree. ``None`` when no unit has two ratings.
    """
    shares = []
    for values in _unit_values(ratings):
        m = len(values)
        if m < 2:
            continue
        agreeing = sum(c * (c - 1) for c in Counter(values).values())
        shares.append(agreeing / (m * (m - 1)))
    if not shares:
        return None
    return sum(shares) / len(shares)


def cohen_kappa(a: Sequence[Hashable | None], b: Sequence[Hashable | None]) -> float | None:
    """Cohen's kappa for two raters over the units both rated.

    kappa = (p_o - p_e) / (1 - p_e) with p_e from each rater's own marginals. ``None``
    when no unit was rated by both, or when p_e = 1 (both used one and the same
    category throughout, so kappa is 0/0).
    """
    if len(a) != len(b):
        raise ValueError(f"rater a has {len(a)} ratings, rater b {len(b)}")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(x == y for x, y in pairs) / n
    margin_a = Counter(x for x, _ in pairs)
    margin_b = Counter(y for _, y in pairs)
    expected = sum(margin_a[c] * margin_b[c] for c in margin_a) / (n * n)
    if math.isclose(expected, 1.0):
        return None
    return (observed - expected) / (1 - expected)


def fleiss_kappa(ratings: Ratings) -> float | None:
    """Fleiss' kappa (Fleiss 1971) for any number of raters per unit, equal across units.

    Fleiss' formula assumes every unit has the same number m of ratings. Units with no
    rating at all are skipped; if the rated units differ in m, or m < 2, this raises
    ``ValueError`` naming the first offending unit (by its index in ``ratings``) rather
    than silently dropping ratings: use :func:`krippendorff_alpha`, which is built for
    missing ratings. ``None`` for no rated unit, or when chance agreement is perfect.
    """
    units = [(i, values) for i, values in enumerate(_unit_values(ratings)) if values]
    if not units:
        return None
    first_index, first = units[0]
    m = len(first)
    if m < 2:
        raise ValueError(f"unit {first_index} has 1 rating; Fleiss' kappa needs at least 2")
    for index, values in units:
        if len(values) != m:
            raise ValueError(
                f"unit {index} has {len(values)} ratings but unit {first_index} has {m}; "
                "Fleiss' kappa needs the same number of ratings per unit "
                "(use krippendorff_alpha for missing ratings)"
            )
    n_units = len(units)
    category_totals: Counter[Hashable] = Counter()
    agreement_sum = 0.0
    for _, values in units:
        counts = Counter(values)
        category_totals.update(counts)
        agreement_sum += (sum(c * c for c in counts.values()) - m) / (m * (m - 1))
    p_bar = agreement_sum / n_units
    total = n_units * m
    p_e = sum((c / total) ** 2 for c in category_totals.values())
    if math.isclose(p_e, 1.0):
        return None
    return (p_bar - p_e) / (1 - p_e)


def krippendorff_alpha(ratings: Ratings, level: str = "nominal") -> float | None:
    """Krippendorff's alpha through the ``krippendorff`` package; missing ratings allowed.

    ``level`` is ``nominal`` (any hashable labels), ``ordinal``, ``interval`` or
    ``ratio`` (numeric labels). ``None`` when alpha is undefined: no unit has two
    ratings, or the pairable ratings show no variation (expected disagreement 0).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    units = _unit_values(ratings)
    pairable = [values for values in units if len(values) >= 2]
    if not pairable or len({v for values in pairable for v in values}) < 2:
        return None
    if level == "nominal":
        # Per-unit category counts are what the package makes of the matrix (categories
        # 0, 1, … in first-seen order, the sorted domain it would find): handed over
        # directly, the same arithmetic follows without a raters x units matrix.
        return _package_alpha({"value_counts": _category_counts(units)}, level)
    # Per-unit counts over the sorted values, with that domain: what the package makes
    # of a raters x units matrix, without filling one cell by cell.
    numeric = _numeric_counts(units)
    if isinstance(numeric, str):
        raise ValueError(f"{level} alpha needs numeric ratings, got {numeric}")
    domain, counts = numeric
    return krippendorff_alpha_of_counts(counts, domain, level)


def krippendorff_alpha_of_counts(
    counts: np.ndarray, domain: np.ndarray, level: str = "ordinal"
) -> float | None:
    """:func:`krippendorff_alpha` at an ``ordinal``, ``interval`` or ``ratio`` level
    from units x values counts over ``domain``, the sorted distinct values: for callers
    that count ratings in arrays (the validation report reads 128,000 scores).
    ``None`` where alpha is undefined, as there."""
    if level not in LEVELS[1:]:
        raise ValueError(f"level must be one of {LEVELS[1:]}, got {level!r}")
    counts = np.asarray(counts)
    pairable = counts.sum(axis=1) >= 2
    if not pairable.any() or (counts[pairable].sum(axis=0) > 0).sum() < 2:
        return None
    domain = np.asarray(domain, dtype=float)
    return _package_alpha({"value_counts": counts, "value_domain": domain}, level)


def _package_alpha(data: dict[str, np.ndarray], level: str) -> float | None:
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        alpha = float(krippendorff.alpha(**data, level_of_measurement=level))
    return None if math.isnan(alpha) else alpha


def ordinal_alpha(ratings: Ratings) -> float | None:
    """``krippendorff_alpha(ratings, "ordinal")``, named so that :func:`agreement_cis`
    knows it and weighs its resamples in array operations (Likert rubrics)."""
    return krippendorff_alpha(ratings, "ordinal")


def interval_alpha(ratings: Ratings) -> float | None:
    """``krippendorff_alpha(ratings, "interval")``, resampled fast as :func:`ordinal_alpha`."""
    return krippendorff_alpha(ratings, "interval")


def agreement_ci(
    ratings: Ratings,
    statistic: Callable[[Ratings], float | None],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of an agreement ``statistic``, resampling units.

    ``statistic`` takes a ratings matrix (e.g. ``fleiss_kappa``, or
    ``lambda r: krippendorff_alpha(r, "ordinal")``; for Cohen's kappa
    ``lambda r: cohen_kappa([u[0] for u in r], [u[1] for u in r])``). Resamples where
    it is undefined (``None``) are left out; ``(None, None)`` when all are, or when
    there are no units.
    """
    return agreement_cis(ratings, [statistic], n_resamples=n_resamples, seed=seed, level=level)[0]


def agreement_cis(
    ratings: Ratings,
    statistics: Sequence[Callable[[Ratings], float | None]],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> list[tuple[float | None, float | None]]:
    """:func:`agreement_ci` of each of ``statistics`` over the same units.

    One seed draws the same resamples for every statistic, so each interval is the one
    ``agreement_ci`` gives alone; the units are counted and each resample weighed once
    for all of them (a report asks for agreement and alpha over 100,000 answers).
    """
    check_bootstrap_args(n_resamples, level)
    units = [list(unit) for unit in ratings]
    if not resamplable(len(units)):
        return [(None, None) for _ in statistics]
    draws = _draws(seed, n_resamples, len(units))
    fast = _resampled_from_counts(units, statistics, draws)
    intervals = []
    for statistic in statistics:
        if statistic in fast:
            intervals.append(percentile_interval(fast[statistic], level))
            continue
        stats = []
        for row in draws:
            value = statistic([units[i] for i in row])
            stats.append(math.nan if value is None else float(value))
        intervals.append(percentile_interval(stats, level))
    return intervals


_last_draws: tuple[tuple[int, int, int], np.ndarray] | None = None


def _draws(seed: int, n_resamples: int, n_units: int) -> np.ndarray:
    """The resamples' unit indices for ``seed``: the same array for the same arguments.

    A report asks for one interval per criterion, and the criteria of one kind of
    object score the same units: the last draws are kept (read-only) and handed out
    again rather than drawn anew (1,000 resamples of 3,200 units are 3.2 million).
    """
    global _last_draws
    key = (seed, n_resamples, n_units)
    last = _last_draws
    if last is not None and last[0] == key:
        return last[1]
    draws = np.random.default_rng(seed).integers(0, n_units, size=(n_resamples, n_units))
    draws.setflags(write=False)
    _last_draws = (key, draws)
    return draws


# Resamples weighed at once (bounds memory: rows x units or kinds).
_CHUNK = 64
# ``_resampled_from_counts`` weighs more resamples at once while rows x units stays under
# this many cells (16 MB of floats an array): per chunk it makes a handful of array
# calls whose fixed cost, at 64 rows of a TVShowGuess study's 1,600 speakers, was most
# of the agreement table. Each resample's row is computed alone, so the values are the
# same whatever the chunk.
_CHUNK_CELLS = 2**21
_FROM_COUNTS = (percent_agreement, fleiss_kappa, krippendorff_alpha)
_ORDERED = {ordinal_alpha: "ordinal", interval_alpha: "interval"}


def _resampled_from_counts(
    units: list[list[Hashable | None]], statistics: Sequence[Callable], draws: np.ndarray
) -> dict[Callable, np.ndarray]:
    """The bootstrap statistics of ``percent_agreement``, ``fleiss_kappa``, nominal
    ``krippendorff_alpha``, ``ordinal_alpha`` and ``interval_alpha`` among
    ``statistics`` from per-unit category counts, all
    resamples in a few array operations; any other statistic (or data the generic loop
    must judge) is left out of the answer.

    Each of the three is a ratio of sums over units of per-unit terms, so a resample's
    value is the same sums weighted by how often it drew each unit: the same numbers
    as calling the statistic on every resample (a test compares them), in time linear
    in units rather than resamples x ratings (issue 17: 100,000 human answers took
    minutes).
    """
    out: dict[Callable, np.ndarray] = {}
    for statistic, level in _ORDERED.items():
        if statistic in statistics:
            values = _ordered_resamples(units, draws, level)
            if values is not None:
                out[statistic] = values
    chosen = [s for s in dict.fromkeys(statistics) if s in _FROM_COUNTS]
    if not chosen:
        return out
    counts = _category_counts(_unit_values(units)).astype(float)
    m = counts.sum(axis=1)
    squares = (counts**2).sum(axis=1)
    if fleiss_kappa in chosen and (m.min() < 2 or m.max() != m.min()):
        chosen.remove(fleiss_kappa)  # empty or unequal units: the generic loop raises
    results: dict[Callable, list[np.ndarray]] = {s: [] for s in chosen}
    if not chosen:
        return out
    rows = max(_CHUNK, _CHUNK_CELLS // max(len(units), 1))
    for start in range(0, len(draws), rows):
        weights = _weights(draws[start : start + rows], len(units))
        with np.errstate(invalid="ignore", divide="ignore"):
            for statistic, parts in results.items():
                parts.append(_weighted_statistic(statistic, weights, counts, m, squares))
    return out | {statistic: np.concatenate(parts) for statistic, parts in results.items()}


def _weights(chunk: np.ndarray, n_units: int) -> np.ndarray:
    """How often each resample of ``chunk`` drew each unit: one bincount over (resample,
    unit) cells (np.add.at counted the same, several times slower)."""
    cells = (chunk + np.arange(len(chunk))[:, None] * n_units).ravel()
    counted = np.bincount(cells, minlength=len(chunk) * n_units)
    return counted.reshape(len(chunk), n_units).astype(float)


# Ordinal and interval alpha resampled in array operations, up to this many distinct
# values (a units x values^2 matrix); more go through the generic loop.
_ORDERED_MAX_VALUES = 32


def _kinds_of_counts(
    counts: np.ndarray, domain: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(sorted distinct values, kinds of unit as value counts, each unit's kind) for the
    ordered alphas; ``None`` for too many distinct values, or a single value (alpha is
    undefined in every resample).

    Units with the same counts have the same coincidences: k raters on a 1-5 scale
    make at most a few dozen kinds of unit, so a resample is weighed per kind, not per
    unit (1,000 validated stages: thousands of units per criterion).
    """
    if not 2 <= len(domain) <= _ORDERED_MAX_VALUES:
        return None
    base = int(counts.max()) + 1
    if base ** counts.shape[1] < 2**62:
        # Each row as one number, its counts the digits (first value most significant):
        # sorting numbers orders kinds as np.unique(counts, axis=0) does, several times
        # faster than its sort of rows.
        digits = base ** np.arange(counts.shape[1] - 1, -1, -1, dtype=np.int64)
        codes, kind_of = np.unique(counts.astype(np.int64) @ digits, return_inverse=True)
        kinds = (codes[:, None] // digits) % base
    else:
        kinds, kind_of = np.unique(counts, axis=0, return_inverse=True)
    return np.asarray(domain, dtype=float), kinds.astype(float), kind_of.reshape(-1)


def _ordered_resamples(
    units: list[list[Hashable | None]], draws: np.ndarray, level: str
) -> np.ndarray | None:
    """Ordinal or interval Krippendorff's alpha of every resample of ``draws``, the
    arithmetic of the ``krippendorff`` package on weighted sums (``_ordered_alphas``).
    ``None`` (the generic loop decides) for non-numeric values, or where
    :func:`_kinds_of_counts` gives none."""
    numeric = _numeric_counts(_unit_values(units))
    if isinstance(numeric, str):
        return None
    found = _kinds_of_counts(numeric[1], numeric[0])
    if found is None:
        return None
    domain, kinds, kind_of = found
    chunks = (
        _weights(kind_of[draws[start : start + _CHUNK]], len(kinds))
        for start in range(0, len(draws), _CHUNK)
    )
    return _ordered_alphas(domain, kinds, chunks, level)


def _ordered_alphas(
    domain: np.ndarray, kinds: np.ndarray, chunks: Iterable[np.ndarray], level: str
) -> np.ndarray:
    """Ordinal or interval alpha of each resample, given how often it drew each kind of
    unit (``chunks`` of resamples x kinds, weighed a chunk at a time to bound memory).
    A resample's coincidence matrix is the kinds' coincidence matrices weighted by those
    counts (Krippendorff 2011, "Computing Krippendorff's alpha-reliability", sections C
    and D). The ordinal distance reads the resample's own value counts, as the package
    does; values absent from it count 0 there, which leaves the distance unchanged. NaN
    where alpha is undefined."""
    width = len(domain)
    m = kinds.sum(axis=1)
    pairable = m >= 2
    # Each kind's coincidences: (n_uc n_uk - [c = k] n_uc) / (m_u - 1), pairable only.
    per_kind = kinds[:, :, None] * kinds[:, None, :] - kinds[:, :, None] * np.eye(width)
    per_kind = (
        np.where(pairable[:, None, None], per_kind, 0.0)
        / np.where(pairable, m - 1, 1)[:, None, None]
    )
    per_kind = per_kind.reshape(len(kinds), width * width)
    interval = (domain[:, None] - domain[None, :]) ** 2
    parts = []
    for weights in chunks:
        parts.append(_ordered_chunk(per_kind, weights, width, interval, level))
    return np.concatenate(parts)


def _ordered_chunk(
    per_kind: np.ndarray, weights: np.ndarray, width: int, interval: np.ndarray, level: str
) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (weights @ per_kind).reshape(len(weights), width, width)
        n_v = observed.sum(axis=1)
        n = n_v.sum(axis=1)
        expected = (n_v[:, :, None] * n_v[:, None, :] - n_v[:, :, None] * np.eye(width)) / (n - 1)[
            :, None, None
        ]
        if level == "interval":
            distance = np.broadcast_to(interval, observed.shape)
        else:
            # (sum of n_g for g from c to k) - (n_c + n_k) / 2, squared.
            cumulative = np.cumsum(n_v, axis=1)
            low = np.minimum.outer(np.arange(width), np.arange(width))
            high = np.maximum.outer(np.arange(width), np.arange(width))
            between = cumulative[:, high] - cumulative[:, low] + n_v[:, low]
            distance = (between - (n_v[:, :, None] + n_v[:, None, :]) / 2) ** 2
        d_o = (observed * distance).sum(axis=(1, 2))
        d_e = (expected * distance).sum(axis=(1, 2))
        defined = ((n_v > 0).sum(axis=1) >= 2) & (d_e > 0)
        return np.where(defined, 1 - d_o / np.where(defined, d_e, 1), np.nan)


def ordinal_alpha_ci(
    ratings: Ratings, *, n_resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of :func:`ordinal_alpha`, resampling units.

    A resample's alpha depends only on how often it drew each kind of unit (units with
    the same value counts), and resampling n units with replacement draws those counts
    from Multinomial(n, each kind's share): they are drawn directly, as ``accuracy_ci``
    draws a Binomial. The same distribution as ``agreement_ci(ratings, ordinal_alpha)``
    (a test compares them), other draws for the same seed, and no n_resamples x n
    array: the validation report asks for ten criteria of up to 6,000 objects each.
    Kinds are taken in sorted order, so the interval depends only on the data and the
    seed. Non-numeric ratings go through ``agreement_ci`` (which refuses them).
    """
    check_bootstrap_args(n_resamples, level)
    numeric = _numeric_counts(_unit_values(ratings))
    if isinstance(numeric, str):
        return agreement_ci(ratings, ordinal_alpha, n_resamples=n_resamples, seed=seed, level=level)
    domain, counts = numeric
    return ordinal_alpha_ci_of_counts(
        counts, domain, n_resamples=n_resamples, seed=seed, level=level
    )


def ordinal_alpha_ci_of_counts(
    counts: np.ndarray,
    domain: np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float | None, float | None]:
    """:func:`ordinal_alpha_ci` from units x values counts over ``domain``, the sorted
    distinct values (as :func:`krippendorff_alpha_of_counts` takes them)."""
    check_bootstrap_args(n_resamples, level)
    counts = np.asarray(counts)
    if not resamplable(len(counts)) or len(domain) < 2:
        return None, None  # one unit or none; or one value: alpha undefined in every resample
    found = _kinds_of_counts(counts, domain)
    if found is None:  # more distinct values than the array arithmetic takes
        units = [list(np.repeat(np.asarray(domain), row)) for row in counts]
        return agreement_ci(units, ordinal_alpha, n_resamples=n_resamples, seed=seed, level=level)
    values, kinds, kind_of = found
    shares = np.bincount(kind_of, minlength=len(kinds)) / len(counts)
    drawn = np.random.default_rng(seed).multinomial(len(counts), shares, size=n_resamples)
    chunks = (
        drawn[start : start + _CHUNK].astype(float) for start in range(0, n_resamples, _CHUNK)
    )
    return percentile_interval(_ordered_alphas(values, kinds, chunks, "ordinal"), level)


def _weighted_statistic(
    statistic: Callable, weights: np.ndarray, counts: np.ndarray, m: np.ndarray, squares: np.ndarray
) -> np.ndarray:
    pairable = m >= 2
    if statistic is percent_agreement:
        share = np.where(pairable, (squares - m) / np.where(pairable, m * (m - 1), 1), 0.0)
        n = weights @ pairable
        return np.where(n > 0, (weights @ share) / np.where(n > 0, n, 1), np.nan)
    if statistic is fleiss_kappa:
        size = m[0]
        n_units = weights.sum(axis=1)
        p_bar = (weights @ ((squares - size) / (size * (size - 1)))) / n_units
        p = (weights @ counts) / (n_units * size)[:, None]
        p_e = (p**2).sum(axis=1)
        undefined = np.isclose(p_e, 1.0, rtol=1e-9, atol=0.0)
        return np.where(undefined, np.nan, (p_bar - p_e) / np.where(undefined, 2.0, 1 - p_e))
    # Nominal Krippendorff's alpha over the pairable units: observed disagreement
    # sum_u (m_u^2 - sum_c n_uc^2) / (m_u - 1); expected from the pooled counts n_c.
    observed = np.where(pairable, (m**2 - squares) / np.where(pairable, m - 1, 1), 0.0)
    pooled = weights @ (counts * pairable[:, None])
    n = pooled.sum(axis=1)
    expected = n**2 - (pooled**2).sum(axis=1)
    defined = ((pooled > 0).sum(axis=1) >= 2) & (expected > 0)
    alpha = 1 - (n - 1) * (weights @ observed) / np.where(defined, expected, 1)
    return np.where(defined, alpha, np.nan)
