"""Pearson and Spearman correlation, a correlation matrix over shared keys, mean ± sd.

``correlation_matrix`` reproduces ToM-in-AMC Figure 5 ("Spearman correlation
coefficient matrix between models across different genres"): each system is a mapping
genre -> accuracy and each pair is correlated over the genres both have. ``mean_sd``
gives DynToM's human row (Table 3: mean and standard deviation across the ten
annotators' accuracies).

Pairs with a ``None`` on either side are dropped. A correlation is ``None`` when fewer
than two pairs remain or either side is constant (0/0).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Literal

Number = float | int


def _pairs(x: Sequence[Number | None], y: Sequence[Number | None]) -> list[tuple[float, float]]:
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} values, y {len(y)}")
    return [
        (float(a), float(b)) for a, b in zip(x, y, strict=True) if a is not None and b is not None
    ]


def _pearson_pairs(pairs: list[tuple[float, float]]) -> float | None:
    n = len(pairs)
    if n < 2:
        return None
    mean_x = sum(a for a, _ in pairs) / n
    mean_y = sum(b for _, b in pairs) / n
    sxy = sum((a - mean_x) * (b - mean_y) for a, b in pairs)
    sxx = sum((a - mean_x) ** 2 for a, _ in pairs)
    syy = sum((b - mean_y) ** 2 for _, b in pairs)
    if sxx == 0 or syy == 0:
        return None
    # Clamp rounding noise so a perfect fit reads exactly ±1.
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def pearson(x: Sequence[Number | None], y: Sequence[Number | None]) -> float | None:
    """Pearson's r over the pairs where both values are present."""
    return _pearson_pairs(_pairs(x, y))


def average_ranks(values: Sequence[Number]) -> list[float]:
    """1-based ranks, tied values sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        shared = (start + end) / 2 + 1  # mean of ranks start+1 .. end+1
        for k in range(start, end + 1):
            ranks[order[k]] = shared
        start = end + 1
    return ranks


def spearman(x: Sequence[Number | None], y: Sequence[Number | None]) -> float | None:
    """Spearman's rho: Pearson's r of the average ranks (ties share their mean rank)."""
    pairs = _pairs(x, y)
    rank_x = average_ranks([a for a, _ in pairs])
    rank_y = average_ranks([b for _, b in pairs])
    return _pearson_pairs(list(zip(rank_x, rank_y, strict=True)))


def correlation_matrix(
    series: Mapping[str, Mapping[Hashable, Number | None]],
    method: Literal["spearman", "pearson"] = "spearman",
) -> tuple[list[str], list[list[float | None]]]:
    """Correlate every pair of series over the keys both have (with non-None values).

    Returns the series names in the mapping's order and the symmetric matrix; the
    diagonal is 1.0 where a series has at least two distinct values, else ``None``.
    """
    if method not in ("spearman", "pearson"):
        raise ValueError(f"method must be 'spearman' or 'pearson', got {method!r}")
    correlate = spearman if method == "spearman" else pearson
    names = list(series)
    matrix: list[list[float | None]] = [[None] * len(names) for _ in names]
    for i, first in enumerate(names):
        for j in range(i, len(names)):
            a, b = series[first], series[names[j]]
            shared = [k for k in a if k in b and a[k] is not None and b[k] is not None]
            value = correlate([a[k] for k in shared], [b[k] for k in shared])
            matrix[i][j] = matrix[j][i] = value
    return names, matrix


def mean_sd(values: Sequence[Number | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (n - 1) of the present values.

    ``(None, None)`` for no values; the sd is ``None`` for a single value.
    """
    present = [float(v) for v in values if v is not None]
    if not present:
        return None, None
    n = len(present)
    mean = sum(present) / n
    if n == 1:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in present) / (n - 1))
