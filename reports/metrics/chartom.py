"""CharToM-QA's generative-QA metrics: Bonus Point Coverage and Penalty Rate.

CharToM-QA Section 6.1, "Metrics": "BPC is calculated as the percentage of bonus
points that are judged as being included in responses. PR is the rate of model
responses that are judged as defective. Note that a response that includes all bonus
points can still contain defects." So BPC pools bonus points over all responses (a
micro-average: a question with three bonus points weighs three times one with one)
and PR counts responses. Both are fractions here; tables print them in percent.

The paper's two worked cases (Appendix M, Tables 18-19, GPT-4o) give BPC = (1 + 2) /
(2 + 2) = 75% and PR = 1 / 2 = 50%.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def bonus_point_coverage(judgements: Sequence[tuple[int, int]]) -> float | None:
    """Included bonus points over all bonus points, pooled over responses.

    ``judgements`` holds ``(included, total)`` per judged response. ``None`` when there
    are no bonus points at all.
    """
    included_sum = total_sum = 0
    for included, total in judgements:
        if not 0 <= included <= total:
            raise ValueError(f"included bonus points must lie in 0..{total}, got {included}")
        included_sum += included
        total_sum += total
    if total_sum == 0:
        return None
    return included_sum / total_sum


def penalty_rate(has_defect: Sequence[bool]) -> float | None:
    """Share of judged responses with at least one defect; ``None`` for none judged."""
    if not has_defect:
        return None
    return sum(bool(d) for d in has_defect) / len(has_defect)


def generative_judgement(details: Mapping[str, Any]) -> tuple[int, int, bool]:
    """``(included, total, has_defect)`` from a generative prediction's ``details``.

    ``details`` is the imported shape ``{"bonus_points_total": int,
    "bonus_points_included": [indices], "defects": [str, ...]}``. Only the number of
    distinct indices matters (so 0- or 1-based both work; an evaluator listing "1,1"
    covered one point). A defect that is blank
    or the evaluator's literal "None" ("Penalty: None" in the paper's Table 19) does
    not count.
    """
    total = int(details["bonus_points_total"])
    included = {int(i) for i in details.get("bonus_points_included") or []}
    if len(included) > total:
        raise ValueError(f"{len(included)} bonus points included but only {total} exist")
    defects = details.get("defects") or []
    if isinstance(defects, str):
        defects = [defects]
    has_defect = any(
        isinstance(d, str) and d.strip() and d.strip().lower() != "none" for d in defects
    )
    return len(included), total, has_defect
