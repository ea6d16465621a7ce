"""metrics.dyntom: Figure 3's compositional error types and Tables 4-5's spans."""

import dataclasses
import json
import random

import numpy as np
import pytest

from metrics import (
    CompositionalCounts,
    DynToMOutcome,
    compositional_analyses,
    compositional_analysis,
    time_span_accuracy,
)
from metrics.dyntom import classify, dependency_states, outcome_columns

U, T1, T2, T3 = "understanding", "transformation-1", "transformation-2", "transformation-3"


def outcome(qtype, state, first, last, correct, stage="s", count=None):
    return DynToMOutcome(stage, qtype, state, first, last, correct, count)


# Understanding answers of stage "s": belief right in 1 and 2, wrong in 3;
# emotion right in 1, wrong in 2.
UNDERSTANDING = [
    outcome(U, "belief", 1, 1, True),
    outcome(U, "belief", 2, 2, True),
    outcome(U, "belief", 3, 3, False),
    outcome(U, "emotion", 1, 1, True),
    outcome(U, "emotion", 2, 2, False),
]
PRIMARY = [
    # belief 1->2 right, deps b1 T b2 T -> fully correct
    outcome(T1, "belief", 1, 2, True),
    # belief 2->3 right, dep b3 F -> restoration error
    outcome(T1, "belief", 2, 3, True),
    # why belief changes 1->2, wrong, deps all right -> local error
    outcome(T2, "belief", 1, 2, False),
    # belief across 1..3, wrong, dep b3 F -> full error
    outcome(T3, "belief", 1, 3, False),
    # emotion 1->2 wrong, dep e2 F -> full error
    outcome(T1, "emotion", 1, 2, False),
    # in scenario 1, belief influences emotion: right, deps b1 T e1 T -> fully correct
    outcome(T2, "belief->emotion", 1, 1, True),
    # intention 1->2: no intention understanding answered -> incomplete
    outcome(T1, "intention", 1, 2, True),
    # not answered -> left out entirely
    outcome(T1, "belief", 3, 4, None),
]


@pytest.mark.parametrize(
    ("primary", "dependencies", "category"),
    [
        (True, [True, True], "fully_correct"),
        (False, [True, True], "local_error"),
        (True, [True, False], "restoration_error"),
        (False, [False, True], "full_error"),
    ],
)
def test_classify_follows_the_four_definitions(primary, dependencies, category):
    assert classify(primary, dependencies) == category


def test_compositional_analysis_by_hand():
    result = compositional_analysis(UNDERSTANDING + PRIMARY)
    assert list(result.by_state) == ["belief", "emotion", "intention", "belief->emotion"]
    assert result.by_state["belief"] == CompositionalCounts(1, 1, 1, 1, 0)
    assert result.by_state["belief"].shares() == {
        "fully_correct": 0.25,
        "local_error": 0.25,
        "restoration_error": 0.25,
        "full_error": 0.25,
    }
    assert result.by_state["emotion"] == CompositionalCounts(full_error=1)
    assert result.by_state["belief->emotion"] == CompositionalCounts(fully_correct=1)
    assert result.by_state["intention"] == CompositionalCounts(incomplete=1)
    assert result.by_state["intention"].shares()["fully_correct"] is None
    # overall: fully 2, local 1, restoration 1, full 2 (of 6 classified), 1 incomplete
    assert result.overall == CompositionalCounts(2, 1, 1, 2, 1)
    assert result.overall.total == 6
    assert result.overall.shares()["full_error"] == pytest.approx(2 / 6)


def test_compositional_analysis_filters_question_types():
    # Only "whether it changes" questions: belief 1->2 fully correct, 2->3 restoration,
    # emotion full error, intention incomplete.
    result = compositional_analysis(UNDERSTANDING + PRIMARY, question_types=(T1,))
    assert result.overall == CompositionalCounts(1, 0, 1, 1, 1)


def test_dependencies_are_looked_up_within_the_same_stage():
    other_stage = [outcome(T1, "belief", 1, 2, True, stage="t")]
    result = compositional_analysis(UNDERSTANDING + other_stage)
    assert result.overall == CompositionalCounts(incomplete=1)


def test_tuples_and_mappings_are_accepted():
    rows = [
        ("s", U, "belief", 1, 1, True),
        {
            "stage": "s",
            "question_type": U,
            "mental_state": "belief",
            "scenario_from": 2,
            "scenario_to": 2,
            "correct": False,
        },
        ("s", T1, "belief", 1, 2, False),
    ]
    # deps b1 T, b2 F; primary wrong -> full error
    assert compositional_analysis(rows).overall == CompositionalCounts(full_error=1)


def test_duplicate_understanding_answers_are_rejected():
    with pytest.raises(ValueError, match="two understanding outcomes for stage 's'"):
        compositional_analysis([outcome(U, "belief", 1, 1, True)] * 2)


def test_primary_questions_without_any_understanding_answer_are_incomplete():
    result = compositional_analysis([outcome(T1, "belief", 1, 2, True), *PRIMARY[5:6]])
    assert result.overall == CompositionalCounts(incomplete=2)
    assert list(result.by_state) == ["belief", "belief->emotion"]


def _analysis_written_out(outcomes):
    """Figure 3 question by question: each answered transformation question against the
    understanding answers of its stage, states and scenarios, classified by ``classify``."""
    understood = {
        (o.stage, o.mental_state, o.scenario_from): o.correct
        for o in outcomes
        if o.question_type == U and o.correct is not None and o.scenario_from == o.scenario_to
    }
    counts = {}
    for o in outcomes:
        if o.question_type == U or o.correct is None:
            continue
        states = dependency_states(o.mental_state)
        scenarios = range(o.scenario_from, o.scenario_to + 1) if o.scenario_to else range(0)
        keys = [(o.stage, s, n) for s in states for n in scenarios]
        found = [understood.get(key) for key in keys]
        kind = (
            "incomplete"
            if not keys or None in found
            else classify(bool(o.correct), [bool(f) for f in found])
        )
        counts.setdefault(o.mental_state, CompositionalCounts())
        counts[o.mental_state] = dataclasses.replace(
            counts[o.mental_state], **{kind: getattr(counts[o.mental_state], kind) + 1}
        )
    return counts


def _random_outcomes(seed, stages=40):
    rng = random.Random(seed)
    states = ["belief", "emotion", "intention", "action", "belief&emotion->intention"]
    rows = []
    for stage in range(stages):
        for scenario in range(1, 6):
            for state in states[:4]:
                if rng.random() < 0.85:  # some understanding answers missing
                    rows.append(outcome(U, state, scenario, scenario, rng.random() < 0.7, stage))
        for _ in range(12):
            first = rng.randint(1, 5)
            last = min(5, first + rng.choice([0, 1, 1, 2, 4]))
            correct = rng.choice([True, False, None])
            rows.append(
                outcome(rng.choice([T1, T2, T3]), rng.choice(states), first, last, correct, stage)
            )
    rng.shuffle(rows)
    return rows


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_compositional_analysis_is_the_written_out_classification(seed):
    """Stage codes from a report are small and dense (a table of keys answers the
    lookups) or not (a search over the sorted keys): both give Figure 3 as written out."""
    rows = _random_outcomes(seed)
    expected = _analysis_written_out(rows)
    columns = outcome_columns(rows)
    sparse = dataclasses.replace(columns, stage=columns.stage * 10**12 + 5)
    for data in (rows, columns, sparse):
        result = compositional_analysis(data)
        assert result.by_state == {state: expected[state] for state in result.by_state}
        assert set(result.by_state) == set(expected)
    duplicated = [*rows, next(o for o in rows if o.question_type == U)]
    dense_duplicate = outcome_columns(duplicated)
    for data in (
        dense_duplicate,
        dataclasses.replace(dense_duplicate, stage=dense_duplicate.stage * 10**12),
    ):
        with pytest.raises(ValueError, match="two understanding outcomes for stage"):
            compositional_analysis(data)


def test_systems_on_the_same_questions_are_analysed_together_as_one_by_one():
    """``compositional_analyses``: each correctness column (a run) against the same
    answered questions gives what an analysis of its own gives, also where a column
    leaves other questions unanswered (the dependencies are then worked out anew)."""
    rows = _random_outcomes(4)
    columns = outcome_columns(rows)
    rng = random.Random(8)
    corrects = [
        columns.correct,
        (columns.correct >= 0) * np.array([rng.random() < 0.5 for _ in rows]),
        np.where(columns.correct >= 0, 1 - columns.correct, -1),
        np.array([-1 if rng.random() < 0.2 else int(rng.random() < 0.6) for _ in rows]),
        columns.correct,
    ]
    together = compositional_analyses(columns, corrects)
    assert len(together) == len(corrects)
    for correct, result in zip(corrects, together, strict=True):
        alone = compositional_analysis(dataclasses.replace(columns, correct=correct))
        assert result == alone
    assert together[0] == compositional_analysis(rows)
    assert compositional_analyses(columns, []) == []


def test_compositional_analysis_of_nothing():
    result = compositional_analysis([])
    assert result.by_state == {}
    assert result.overall.total == 0
    assert result.overall.shares() == dict.fromkeys(
        ("fully_correct", "local_error", "restoration_error", "full_error")
    )


def spans_fixture():
    # Stage a (5 scenarios): 1-2 T, 2-3 F, 3-4 F, 4-5 T
    # Stage b (5 scenarios): 1-2 T, 2-3 T, 3-4 F, 4-5 T
    rows = []
    for stage, answers in (("a", [True, False, False, True]), ("b", [True, True, False, True])):
        for first, correct in enumerate(answers, start=1):
            rows.append(outcome(T1, "belief", first, first + 1, correct, stage, 5))
        rows.append(outcome(T3, "belief", 1, 5, False, stage, 5))
        rows.append(outcome(T2, "belief->emotion", 2, 2, True, stage, 5))
        rows.append(outcome(U, "belief", 1, 2, True, stage, 5))  # not a transformation
    return rows


def test_time_span_accuracy_gives_the_u_shape():
    spans = time_span_accuracy(spans_fixture(), n_resamples=200)
    # 1-2: 2/2, 2-3: 1/2, 3-4: 0/2, 4-5: 2/2
    assert [s.span for s in spans] == ["1-2", "2-3", "3-4", "4-5"]
    assert [s.estimate.accuracy for s in spans] == [1.0, 0.5, 0.0, 1.0]
    assert all(s.scenario_count == 5 and s.estimate.n == 2 for s in spans)
    assert all(s.estimate.units == 2 for s in spans)  # resampled by stage
    # 2-3: stage a wrong, b right; resampling two stages gives 0, 1/2 or 1.
    middle = spans[1].estimate
    assert middle.ci_low == 0.0 and middle.ci_high == 1.0
    assert spans == time_span_accuracy(spans_fixture(), n_resamples=200)


def test_time_span_accuracy_with_every_span():
    spans = time_span_accuracy(spans_fixture(), consecutive_only=False, n_resamples=50)
    # Sorted by (from, to): 1-2, 1-5, 2-2, 2-3, 3-4, 4-5.
    assert [s.span for s in spans] == ["1-2", "1-5", "2-2", "2-3", "3-4", "4-5"]
    by_span = {s.span: s.estimate.accuracy for s in spans}
    assert by_span["1-5"] == 0.0
    assert by_span["2-2"] == 1.0


def test_time_span_accuracy_groups_by_scenario_count():
    rows = [
        outcome(T1, "belief", 1, 2, True, "five", 5),
        outcome(T1, "belief", 1, 2, False, "seven", 7),
        outcome(T1, "belief", 1, 2, False, "unknown", None),
        outcome(T1, "belief", 1, 2, None, "seven", 7),
    ]
    spans = time_span_accuracy(rows, n_resamples=20)
    assert [(s.scenario_count, s.span, s.estimate.accuracy) for s in spans] == [
        (None, "1-2", 0.0),
        (5, "1-2", 1.0),
        (7, "1-2", 0.0),
    ]
    assert time_span_accuracy([]) == []


def test_every_real_transformation_question_has_its_dependencies(shared_data):
    # Real stages, every question answered correctly: each transformation question must
    # find all the understanding questions it depends on (none incomplete), and each
    # consecutive span holds the why- and whether-questions of the four states.
    # trial1191 has 6 scenarios (86 questions), trial1113 and trial149 have 5 (71).
    from benchmarks.importers.dyntom import QUESTION_TYPES, parse_question_text

    rows = []
    for name in ("trial1113", "trial1191", "trial149"):
        questions = json.loads((shared_data / "dyntom" / name / "question_new.json").read_text())
        parsed = [
            (key.rsplit("_", 1)[0], *parse_question_text(q["question"]))
            for key, q in questions.items()
        ]
        count = max(last for *_, last in parsed)
        rows += [
            DynToMOutcome(name, str(QUESTION_TYPES[prefix]), state, first, last, True, count)
            for prefix, state, first, last in parsed
        ]
    assert len(rows) == 71 + 86 + 71
    # 20 + 24 understanding ("what") questions in a 5- and a 6-scenario stage.
    transformation = len(rows) - (20 + 24 + 20)
    result = compositional_analysis(rows)
    assert result.overall.incomplete == 0
    assert result.overall.fully_correct == transformation
    assert list(result.by_state)[:4] == ["belief", "emotion", "intention", "action"]

    spans = time_span_accuracy(rows, n_resamples=10)
    # Per stage and span: 4 why- + 4 whether-questions.
    assert [(s.scenario_count, s.span, s.estimate.n) for s in spans] == [
        (5, "1-2", 16),
        (5, "2-3", 16),
        (5, "3-4", 16),
        (5, "4-5", 16),
        (6, "1-2", 8),
        (6, "2-3", 8),
        (6, "3-4", 8),
        (6, "4-5", 8),
        (6, "5-6", 8),
    ]
