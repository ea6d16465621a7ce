"""Seeded percentile bootstrap, shared by the accuracy and agreement metrics.

Every interval here is a plain percentile bootstrap (Efron & Tibshirani 1993, ch. 13):
resample the units with replacement ``n_resamples`` times, compute the statistic on
each resample and take the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles. The
generator is ``numpy.random.default_rng(seed)``, so one seed always gives one interval:
a report rebuilt from the same predictions shows the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


def check_bootstrap_args(n_resamples: int, level: float) -> None:
    """Reject settings that would give a meaningless interval."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")


# Fewer units than this give no interval: every resample of one unit is that unit, so
# the "interval" would be [x, x], a certainty the data cannot give (issue 49).
MIN_UNITS = 2


def resamplable(units: int) -> bool:
    """Whether ``units`` units (scenes, items, raters: what the bootstrap draws) are
    enough for an interval; one is not."""
    return units >= MIN_UNITS


def percentile_interval(
    statistics: Sequence[float] | np.ndarray, level: float
) -> tuple[float | None, float | None]:
    """The central ``level`` percentile interval of bootstrap statistics.

    NaN statistics (a resample where the statistic is undefined) are dropped first; when
    nothing is left the interval is ``(None, None)``.
    """
    values = np.asarray(statistics, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None, None
    tail = (1 - level) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[T],
    statistic: Callable[[list[T]], float | None],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of ``statistic`` over ``values`` resampled as units.

    ``statistic`` receives a list of resampled values (same length as ``values``) and
    may return ``None`` where it is undefined; those resamples are left out. Fewer than
    two ``values`` give ``(None, None)`` (:func:`resamplable`).
    """
    check_bootstrap_args(n_resamples, level)
    items = list(values)
    if not resamplable(len(items)):
        return None, None
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(items), size=(n_resamples, len(items)))
    stats = [_as_float(statistic([items[i] for i in row])) for row in draws]
    return percentile_interval(stats, level)


def _as_float(value: Any) -> float:
    if value is None:
        return math.nan
    return float(value)
