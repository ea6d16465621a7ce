"""CharToM-QA's generative-QA metrics: Bonus Point Coverage and Penalty Rate.

CharToM-QA Section 6.1, "Metrics": "BPC is calculated as the percentage of bonus
points that are judged as being included in responses. PR is the rate of model
responses that are judged as defective. Note that a response that includes all bonus
points can still contain defects." So BPC pools bonus points over all responses (a
micro-average: a question with three bonus points weighs three times one with one)
and PR counts responses. Both are fractions here; tables print them in percent.

How a judge's reply becomes ``(included, total, has_defect)`` is the pipeline's
business (``modeling.pipelines.chartom_qa.response_score``, in a strict and a
reference mode); this module only aggregates.

The paper's two worked cases (Appendix M, Tables 18-19, GPT-4o) give BPC = (1 + 2) /
(2 + 2) = 75% and PR = 1 / 2 = 50%.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from metrics.bootstrap import check_bootstrap_args, percentile_interval, resamplable


def bonus_point_coverage(
    judgements: Sequence[tuple[int, int]], *, bounded: bool = True
) -> float | None:
    """Included bonus points over all bonus points, pooled over responses.

    ``judgements`` holds ``(included, total)`` per judged response. ``None`` when there
    are no bonus points at all. ``bounded=False`` accepts more included points than
    exist: the published evaluator's aggregation counts an unreadable reply as 3
    (see ``modeling.pipelines.chartom_qa``), and reproducing it needs that.
    """
    included_sum = total_sum = 0
    for included, total in judgements:
        if included < 0 or (bounded and included > total):
            raise ValueError(f"included bonus points must lie in 0..{total}, got {included}")
        included_sum += included
        total_sum += total
    if total_sum == 0:
        return None
    return included_sum / total_sum


def bonus_point_coverage_ci(
    judgements: Iterable[tuple[int, int]],
    *,
    bounded: bool = True,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of :func:`bonus_point_coverage`, resampling responses.

    BPC of a resample depends only on how often it drew each distinct ``(included,
    total)`` judgement, and resampling n responses with replacement draws those counts
    from Multinomial(n, each judgement's share). So the counts are drawn directly, as
    ``accuracy_ci`` draws a Binomial: the same distribution in O(n_resamples x distinct
    judgements) rather than O(n_resamples x n), which at 100,000 responses per report
    took more than a minute. Judgements are taken in sorted order, so the interval
    depends only on the data and the seed. ``(None, None)`` for no judgements, and
    resamples with no bonus point at all are left out.
    """
    check_bootstrap_args(n_resamples, level)
    pairs = list(judgements)
    if not pairs:
        return None, None
    bonus_point_coverage(pairs, bounded=bounded)  # the same refusal of impossible counts
    kinds = Counter(pairs)
    ordered = sorted(kinds)
    return bonus_point_coverage_ci_of_counts(
        [k[0] for k in ordered],
        [k[1] for k in ordered],
        [kinds[k] for k in ordered],
        n_resamples=n_resamples,
        seed=seed,
        level=level,
    )


def bonus_point_coverage_ci_of_counts(
    included: Sequence[int],
    total: Sequence[int],
    counts: Sequence[int],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float | None, float | None]:
    """:func:`bonus_point_coverage_ci` from how many responses had each distinct
    ``(included[i], total[i])`` judgement (``counts[i]``), the judgements in sorted
    order as that function takes them, so the same counts give the same interval.

    For callers that count judgements with arrays (the CharToM-QA tables count them per
    group and run); the counts are not checked against ``bounded`` here.
    """
    check_bootstrap_args(n_resamples, level)
    n = int(sum(counts))
    if not resamplable(n):
        return None, None
    shares = np.array(counts, dtype=float) / n
    drawn = np.random.default_rng(seed).multinomial(n, shares, size=n_resamples)
    included_drawn = drawn @ np.array(included, dtype=np.int64)
    total_drawn = drawn @ np.array(total, dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        stats = np.where(
            total_drawn > 0,
            included_drawn / np.where(total_drawn > 0, total_drawn, 1),
            np.nan,
        )
    return percentile_interval(stats, level)


def penalty_rate(has_defect: Sequence[bool]) -> float | None:
    """Share of judged responses with at least one defect; ``None`` for none judged."""
    if not has_defect:
        return None
    return sum(bool(d) for d in has_defect) / len(has_defect)


def length_ratio(response_lengths: Sequence[int], answer_lengths: Sequence[int]) -> float | None:
    """Total response length over total reference-answer length (``None`` without answers).

    The published evaluator's "rate of token numbers" is this over character counts.
    """
    total = sum(answer_lengths)
    return sum(response_lengths) / total if total else None
