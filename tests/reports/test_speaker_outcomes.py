"""The compact columns behind the speaker tables: counts in first-answer order.

The scene bootstraps draw clusters by position, so per-scene counts must come in the
order each scene's first answer appears, whatever order the instances and scene
responses interleave in. Worked by hand on five answers:

  answer   0    1    2    3    4
  instance 10   20   11   21   10      scenes: 10, 11 -> 1; 20, 21 -> 2
  correct  yes  no   yes  yes  no
  response 100  200  100  200  300
"""

from reports.tables.speaker_outcomes import HumanAnswers, Outcomes

SCENE_OF = {10: 1, 11: 1, 20: 2, 21: 2}


def _outcomes() -> Outcomes:
    return Outcomes(
        [10, 20, 11, 21, 10], [True, False, True, True, False], [100, 200, 100, 200, 300]
    )


def test_per_instance_and_per_scene_counts_in_first_answer_order():
    outcomes = _outcomes()
    assert list(outcomes.per_instance.items()) == [
        (10, (2, 1)),
        (20, (1, 0)),
        (11, (1, 1)),
        (21, (1, 1)),
    ]
    # Scene 1: instances 10 and 11, 3 answers, 2 right; scene 2: 2 answers, 1 right.
    assert outcomes.per_scene(SCENE_OF) == ([3, 2], [2, 1])


def test_scene_responses_need_every_answer_right():
    # Response 100 (scene 1) right, 200 (scene 2) has a wrong answer, 300 (scene 1) wrong.
    assert _outcomes().scene_responses(SCENE_OF) == ([2, 1], [1, 0])


def test_within_and_select_keep_the_order():
    outcomes = _outcomes()
    assert outcomes.within(None) is outcomes
    assert outcomes.within({10, 11, 20, 21}) is outcomes
    kept = outcomes.within({10, 20})
    assert (kept.instances, kept.correct, kept.responses) == (
        [10, 20, 10],
        [True, False, False],
        [100, 200, 300],
    )


def test_unjudged_human_answers_count_as_wrong_but_are_not_scored():
    answers = HumanAnswers(
        instances=[10, 20, 11], responses=[100, 200, 100], answers=["joey", "", "ross"],
        correct=[True, None, False], tags=[(), (), ()],
    )  # fmt: skip
    assert answers.outcomes().correct == [True, False, False]
    scored = answers.scored()
    assert (scored.instances, scored.correct, scored.responses) == (
        [10, 11],
        [True, False],
        [100, 100],
    )


def test_keep_drops_answers_from_every_column():
    answers = HumanAnswers(
        instances=[10, 20, 11], responses=[100, 200, 100], answers=["joey", "", "ross"],
        correct=[True, None, False], tags=[("belief",), (), ()],
    )  # fmt: skip
    answers.keep([True, False, True])
    assert (answers.instances, answers.responses, answers.answers) == (
        [10, 11], [100, 100], ["joey", "ross"]
    )  # fmt: skip
    assert (answers.correct, answers.tags) == ([True, False], [("belief",), ()])
