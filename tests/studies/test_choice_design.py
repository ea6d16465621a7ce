"""The CharToM-QA read/not-read design (paper 6.3): 8 participants, 5 books, 150 questions."""

from __future__ import annotations

from collections import Counter

import pytest

from studies.choice.design import Slot, design_compute

BOOKS = ["Father Goriot", "Monte Cristo", "Jane Eyre", "Wuthering Heights", "Little Women"]
# Sample declarations, as eight people might answer "which of these have you read?".
DECLARED = {
    "p1": {"Father Goriot", "Jane Eyre"},
    "p2": {"Monte Cristo", "Little Women", "Jane Eyre"},
    "p3": {"Wuthering Heights"},
    "p4": {"Father Goriot", "Monte Cristo"},
    "p5": {"Jane Eyre", "Wuthering Heights", "Little Women"},
    "p6": {"Little Women"},
    "p7": {"Monte Cristo", "Wuthering Heights"},
    "p8": {"Father Goriot", "Little Women"},
}
QUESTIONS = {book: [f"{book} q{i}" for i in range(30)] for book in BOOKS}


def _check_paper_balance(design, fixed=()):
    book_of = {q: b for b, qs in QUESTIONS.items() for q in qs}
    slots = [*fixed, *design.slots]
    per_question = Counter((s.question, s.read) for s in slots)
    for q in book_of:
        assert per_question[(q, True)] == 1, q
        assert per_question[(q, False)] == 1, q
    for s in slots:  # a reader slot really went to a reader, and vice versa
        assert (book_of[s.question] in DECLARED[s.participant]) == s.read
    assert len({(s.question, s.participant) for s in slots}) == len(slots)
    return design.counts(fixed)


def test_paper_design_is_balanced():
    design = design_compute(questions=QUESTIONS, readers=DECLARED, seed=3)
    assert design.uncovered == [] and design.excluded == {}
    counts = _check_paper_balance(design)
    assert len(design.slots) == 300  # 150 questions x (reader, non-reader); x2 windows = 600
    for person, (read, unread) in counts.items():
        assert read == unread, person
    loads = [r + n for r, n in counts.values()]
    assert sum(loads) == 300 and max(loads) - min(loads) <= 2


def test_same_seed_same_design_other_seed_other_questions():
    a = design_compute(questions=QUESTIONS, readers=DECLARED, seed=1)
    b = design_compute(questions=QUESTIONS, readers=DECLARED, seed=1)
    c = design_compute(questions=QUESTIONS, readers=DECLARED, seed=2)
    assert a.slots == b.slots
    assert set(a.slots) != set(c.slots)


def test_what_cannot_be_covered_says_why():
    readers = {"p1": {"Father Goriot"}, "p2": {"Father Goriot", "Jane Eyre"}, "p3": set()}
    questions = {"Father Goriot": ["g1"], "Jane Eyre": ["j1"], "Monte Cristo": ["m1"]}
    design = design_compute(questions=questions, readers=readers)
    assert design.excluded == {"p3": "has read none of the books: nothing to balance with"}
    assert ("m1", "no participant has read Monte Cristo") in design.uncovered
    assert ("g1", "every participant has read Father Goriot") in design.uncovered
    assert {(s.question, s.participant, s.read) for s in design.slots} >= {("j1", "p1", False)}


def test_rebalance_keeps_started_slots_and_shares_the_rest():
    first = design_compute(questions=QUESTIONS, readers=DECLARED, seed=3)
    started = [s for s in first.slots if s.participant in ("p1", "p2")][:10]
    late = {**DECLARED, "p9": {"Jane Eyre", "Monte Cristo"}}
    again = design_compute(questions=QUESTIONS, readers=late, fixed=started, seed=4)
    assert not set(again.slots) & set(started)
    DECLARED["p9"] = late["p9"]
    try:
        counts = _check_paper_balance(again, fixed=started)
    finally:
        del DECLARED["p9"]
    assert counts["p9"][0] == counts["p9"][1] > 0
    loads = [r + n for r, n in counts.values()]
    assert max(loads) - min(loads) <= 2


@pytest.mark.parametrize("withdrawn", ["p3", "p6"])
def test_a_withdrawal_hands_its_unstarted_questions_to_the_others(withdrawn):
    first = design_compute(questions=QUESTIONS, readers=DECLARED, seed=3)
    started = [s for s in first.slots if s.participant == withdrawn][:4]
    others = {p: b for p, b in DECLARED.items() if p != withdrawn}
    # The withdrawn participant's started slots no longer count (reports leave them out).
    again = design_compute(questions=QUESTIONS, readers=others, fixed=started, seed=5)
    assert all(s.participant != withdrawn for s in again.slots)
    per_question = Counter((s.question, s.read) for s in again.slots)
    assert all(per_question[(q, k)] == 1 for qs in QUESTIONS.values() for q in qs for k in (1, 0))


def test_fixed_slot_of_an_unknown_participant_is_ignored():
    design = design_compute(
        questions={"A": ["a1"], "B": ["b1"]},
        readers={"x": {"A"}, "y": {"B"}},
        fixed=[Slot("a1", "gone", True)],
    )
    assert Counter((s.question, s.read) for s in design.slots) == Counter(
        {("a1", True): 1, ("a1", False): 1, ("b1", True): 1, ("b1", False): 1}
    )
