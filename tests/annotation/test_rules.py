"""The decision-rule language (annotation.rules): validation errors and evaluation."""

from __future__ import annotations

import pytest

from annotation.dyntom.validation.rubrics import DEFAULT_RUBRICS, KINDS, criterion_keys, paper_rule
from annotation.dyntom.validation.rules import (
    DISCARD,
    KEEP,
    PENDING,
    REGENERATE,
    UNDECIDED,
    RuleError,
    decide,
    rule_spec_validate,
    stage_outcome,
)

TRAJ = ["coherence", "rationality", "authenticity"]


def test_paper_defaults_are_valid_for_their_rubrics():
    for kind in KINDS:
        rule_spec_validate(paper_rule(kind), criterion_keys(DEFAULT_RUBRICS[kind]))


def test_mean_below_four_discards_with_the_criterion_and_mean_in_the_reason():
    scores = {"coherence": [5, 4, 4, 5], "rationality": [4, 4, 3, 4], "authenticity": [5] * 4}
    d = decide(
        paper_rule("trajectory"),
        scores,
        criterion_keys=TRAJ,
        submitted=4,
        k=4,
        subject="trajectory",
    )
    assert d.outcome == DISCARD
    assert d.reason == "trajectory: mean rationality 3.75 < 4.0"


def test_mean_exactly_four_is_kept():
    scores = {c: [4, 4, 4, 4] for c in TRAJ}
    d = decide(paper_rule("trajectory"), scores, criterion_keys=TRAJ, submitted=4, k=4)
    assert d.outcome == KEEP


def test_questions_are_regenerated_not_discarded():
    scores = {"clarity": [5, 5, 5, 5], "answerability": [3, 4, 3, 4]}
    d = decide(
        paper_rule("question"),
        scores,
        criterion_keys=["clarity", "answerability"],
        submitted=4,
        k=4,
    )
    assert d.outcome == REGENERATE and "mean answerability 3.5 < 4.0" in d.reason


def test_any_no_discards_profiles():
    keys = ["profiles_realistic", "relationship_realistic"]
    yes = {"profiles_realistic": [1, 1, 1, 1], "relationship_realistic": [1, 1, 1, 1]}
    assert decide(paper_rule("context"), yes, criterion_keys=keys, submitted=4, k=4).outcome == KEEP
    one_no = {**yes, "relationship_realistic": [1, 1, 0, 1]}
    d = decide(paper_rule("context"), one_no, criterion_keys=keys, submitted=4, k=4)
    assert d.outcome == DISCARD
    assert d.reason == "1 score(s) <= 0 on relationship_realistic >= 1"


def test_pending_until_k_have_submitted():
    d = decide(paper_rule("trajectory"), {}, criterion_keys=TRAJ, submitted=3, k=4)
    assert d.outcome == PENDING and "3 of 4" in d.reason


def test_median_count_and_undecided_with_a_fifth_annotator():
    spec = {
        "rules": [
            {
                "when": {"stat": "median", "criterion": "*", "op": "<", "value": 3},
                "then": "discard",
            },
            {
                "when": {
                    "stat": "count",
                    "criterion": "answerability",
                    "score_op": "<=",
                    "score": 2,
                    "op": ">=",
                    "value": 2,
                },
                "then": "regenerate",
            },
            {
                "when": {
                    "all": [
                        {"stat": "mean", "criterion": "*", "op": ">=", "value": 3.5},
                        {"stat": "mean", "criterion": "*", "op": "<", "value": 4.0},
                    ]
                },
                "then": "undecided",
                "add_annotators": 1,
                "max_annotators": 5,
            },
            {
                "when": {"stat": "mean", "criterion": "*", "op": "<", "value": 4.0},
                "then": "discard",
            },
        ],
        "otherwise": "keep",
    }
    keys = ["clarity", "answerability"]
    rule_spec_validate(spec, keys)
    # median(2, 2, 3, 5) = 2.5 < 3
    d = decide(spec, {"clarity": [2, 2, 3, 5]}, criterion_keys=keys, submitted=4, k=4)
    assert (d.outcome, d.reason) == (DISCARD, "median clarity 2.5 < 3.0")
    # two annotators flag answerability at <= 2
    d = decide(
        spec,
        {"clarity": [5] * 4, "answerability": [2, 5, 1, 5]},
        criterion_keys=keys,
        submitted=4,
        k=4,
    )
    assert d.outcome == REGENERATE and d.reason.startswith("2 score(s) <= 2 on answerability")
    # mean 3.75: undecided, one more annotator; with the fifth score the next rule decides
    near = {"clarity": [5] * 4, "answerability": [4, 4, 3, 4]}
    d = decide(spec, near, criterion_keys=keys, submitted=4, k=4)
    assert (d.outcome, d.add_annotators) == (UNDECIDED, 1)
    fifth = {"clarity": [5] * 5, "answerability": [4, 4, 3, 4, 5]}  # mean 4.0
    assert decide(spec, fifth, criterion_keys=keys, submitted=5, k=5).outcome == KEEP
    fifth_low = {"clarity": [5] * 5, "answerability": [4, 4, 3, 4, 3]}  # mean 3.6
    assert decide(spec, fifth_low, criterion_keys=keys, submitted=5, k=5).outcome == DISCARD


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([], "must be a JSON object"),
        ({"rules": {}}, "rules: expected a list"),
        ({"rules": [{"when": {}, "then": "keep"}]}, "rules[0].when.stat"),
        ({"rules": [{"then": "keep"}]}, "'when' is missing"),
        (
            {
                "rules": [
                    {
                        "when": {"stat": "mean", "criterion": "x", "op": "<", "value": 4},
                        "then": "discard",
                    }
                ]
            },
            "rules[0].when.criterion: 'x' is not a criterion",
        ),
        (
            {
                "rules": [
                    {
                        "when": {"stat": "mean", "criterion": "*", "op": "=<", "value": 4},
                        "then": "discard",
                    }
                ]
            },
            "rules[0].when.op: operator must be one of",
        ),
        (
            {
                "rules": [
                    {
                        "when": {"stat": "mean", "criterion": "*", "op": "<", "value": "4"},
                        "then": "discard",
                    }
                ]
            },
            "rules[0].when.value: expected a number",
        ),
        (
            {
                "rules": [
                    {
                        "when": {"stat": "mean", "criterion": "*", "op": "<", "value": 4},
                        "then": "drop",
                    }
                ]
            },
            "rules[0].then: one of",
        ),
        (
            {
                "rules": [
                    {
                        "when": {"stat": "mean", "criterion": "*", "op": "<", "value": 4},
                        "then": "discard",
                        "add_annotators": 1,
                    }
                ]
            },
            "only go with then 'undecided'",
        ),
        ({"rules": [], "otherwise": "maybe"}, "otherwise: one of"),
        ({"rules": [], "extra": 1}, "unknown top-level field(s) extra"),
        (
            {
                "rules": [
                    {
                        "when": {"stat": "count", "criterion": "*", "op": ">=", "value": 1},
                        "then": "discard",
                    }
                ]
            },
            "rules[0].when.score_op",
        ),
    ],
)
def test_invalid_specs_are_refused_with_where_and_why(spec, message):
    with pytest.raises(RuleError) as info:
        rule_spec_validate(spec, TRAJ)
    assert message in str(info.value)


def test_stage_outcome():
    assert stage_outcome([("context", KEEP), ("trajectory", KEEP), ("question", KEEP)])[0] == KEEP
    assert stage_outcome([("context", KEEP), ("scenario", DISCARD), ("question", PENDING)]) == (
        DISCARD,
        "discarded: scenario",
    )
    assert stage_outcome([("context", KEEP), ("question", PENDING)])[0] == PENDING
    assert stage_outcome([("context", KEEP), ("question", REGENERATE)]) == (
        REGENERATE,
        "1 question(s) to regenerate",
    )
