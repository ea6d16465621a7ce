"""An adaptive generic study under real concurrency (issue 50): participants take their
batches while others answer, each thread on its own connection (``run_together``).

The takes lock the study's items as the uniform take does, read the strata once and
count each item's answers with its places; an answer writes nothing besides its own
rows. On PostgreSQL 20 participants take at once; on SQLite (write transactions
serialised) fewer, for the same invariants: the budget is exact, every item has its
phase one, nobody holds an item twice, and the tallies a take counts are those of
the counted answers.
"""

from __future__ import annotations

from collections import Counter

import pytest

from studies.choice import allocation
from studies.choice import services as cs
from studies.models import Assignment, StudyItem
from tests.studies.test_allocation import (
    answer_all,
    assert_take_counts_as_the_report,
    make_adaptive,
    split_hidden_emotions,
)
from tests.studies.test_choice_concurrency import _fresh
from tests.studies.test_concurrency import ON_POSTGRES, run_together
from tests.studies.test_generic_study import _joined

pytestmark = pytest.mark.django_db(transaction=True)
TAKERS = 20 if ON_POSTGRES else 6


def _check(study) -> Counter:
    live = Assignment.objects.filter(
        study_item__study=study, study_item__role=StudyItem.Role.TEST
    ).values_list("participant_id", "study_item_id")
    pairs = list(live)
    assert len(pairs) == len(set(pairs)), "an item handed to one participant twice"
    assert max(Counter(pid for pid, _ in pairs).values()) <= 3, "a batch over its size"
    return Counter(item for _, item in pairs)


@pytest.mark.postgres
def test_takes_and_answers_at_once_keep_the_budget_and_phase_one(mini):
    study = make_adaptive(mini, min_per_item=2)  # 12 items, budget 36, batches of 3
    first = _joined(study, 4)
    for p in first:  # a first wave, answered while the next participants take
        cs.generic_batch_take(participant=p)
    wave = _joined(study, TAKERS)
    jobs = [lambda p=p: cs.generic_batch_take(participant=_fresh(p)) for p in wave]
    jobs += [lambda p=p: answer_all(study, _fresh(p), split_hidden_emotions) for p in first]
    _, errors = run_together(jobs)
    assert errors == []
    per_item = _check(study)
    expected = min(36, 3 * (len(first) + TAKERS))
    assert sum(per_item.values()) == expected
    if expected == 36:  # the budget is spent to the answer: phase one for every item
        assert min(per_item.values()) >= 2 and len(per_item) == 12
    assert_take_counts_as_the_report(study)

    # Everyone answers at once, on the same strata.
    takers = [p for p in wave if p.assignments.exists()]
    _, errors = run_together(
        [lambda p=p: answer_all(study, _fresh(p), split_hidden_emotions) for p in takers]
    )
    assert errors == []
    answered = sum(r["answers"] for r in allocation.stratum_rows(study))
    assert answered == sum(per_item.values())
    assert_take_counts_as_the_report(study)
