"""The five DynToM question templates and their distractors, before lettering.

Each builder returns ``{key: question}`` with the options in generation order: the
gold option first, then the distractors, each paired with its reason record in
``option reasons`` (same order, gold first). Texts, reason records and their key
order follow the authors' ``synthesize_data/generate_rule_based_question.py``
(GAIR-NLP/DynToM); see the package docstring for the quirks kept on purpose.
Only :func:`transformation_3_questions` draws random numbers.
"""

from __future__ import annotations

import random
from typing import Any

from .trajectory import INFLUENCES, MENTAL_STATES, Trajectory

Question = dict[str, Any]
ARROW = " -> "
GOLD_REASON = {"reason": "true answer", "explain": "true answer", "short": "true_answer"}


def transformation_3_questions(trajectory: Trajectory, rng: random.Random) -> dict[str, Question]:
    """``type_d_how_K``: how a state changes across all scenarios (one per state).

    Distractors: a shuffle, a swap of two scenarios, the reverse, one scenario
    removed, and one scenario replaced by another state's text in that scenario.
    """
    # The authors' swap works in place on the state's list, so the reverse, removal
    # and replacements below (and the replacements of later states) see the swapped
    # list; a working copy keeps that without touching the trajectory.
    working = {kind: list(values) for kind, values in trajectory.states.items()}
    questions = {}
    for number, kind in enumerate(MENTAL_STATES, start=1):
        values = working[kind]
        gold = ARROW.join(values)
        options = [
            gold,
            _shuffled(values, rng),
            _swap_two_in_place(values, rng),
            ARROW.join(reversed(values)),
            _without_one(values, rng),
        ]
        reasons = [
            _reason(gold, **GOLD_REASON),
            *(
                # "belief" is the authors' wording for every state.
                _reason_explained_first(
                    option,
                    explain=f"{verb} the order of belief in scenarios",
                    reason="test ability to recognize different time stage in correct order",
                    short="type_d_how_time_order",
                )
                for option, verb in zip(options[1:4], ("shuffle", "change", "reverse"), strict=True)
            ),
            _reason_explained_first(
                options[4],
                explain="remove one belief in one time stage",
                reason="test ability to recognize the completeness of the mental states",
                short="type_d_how_recognize_time_stage_completeness",
            ),
        ]
        for other in MENTAL_STATES:
            if other == kind:
                continue
            index = rng.choice(range(len(values)))
            replaced = list(values)
            replaced[index] = working[other][index]
            options.append(ARROW.join(replaced))
            reasons.append(
                _reason(
                    options[-1],
                    reason=f"test ability to recognize the relationship between {kind} and {other}",
                    explain=f"{other} change reason",
                    short="type_d_how_recognize_belief_emotion_intention_action",
                )
            )
        text = (
            f"How does the {kind} of {trajectory.main_character} change across the "
            f"{trajectory.scenario_count} scenarios?"
        )
        questions[f"type_d_how_{number}"] = _question(text, "type_d", options, reasons)
    return questions


def transformation_2_why_questions(trajectory: Trajectory) -> dict[str, Question]:
    """``type_d_why_K``: why a state changes from scenario n to n+1.

    Distractors: the same state's reasons for its other changes, then every reason
    of the three other states.
    """
    questions = {}
    number = 1
    for kind in MENTAL_STATES:
        for step, gold in enumerate(trajectory.reasons[kind]):
            options, reasons = [gold], [_reason(gold, **GOLD_REASON)]
            for other_step, option in enumerate(trajectory.reasons[kind]):
                if other_step != step:
                    options.append(option)
                    reasons.append(
                        _reason(
                            option,
                            reason=(
                                f"test ability to recognize the reason of {kind} change in "
                                "different time stage"
                            ),
                            explain=f"{kind} change reason in other time stage",
                            short="type_d_why_time_stage",
                        )
                    )
            for other in MENTAL_STATES:
                if other == kind:
                    continue
                for option in trajectory.reasons[other]:
                    options.append(option)
                    reasons.append(
                        _reason(
                            option,
                            reason=(
                                f"test ability to recognize the reason between {kind} and {other}"
                            ),
                            explain=f"{other} change reason",
                            short="type_d_why_recognize_belief_emotion_intention_action",
                        )
                    )
            text = (
                f"Why does the {kind} of {trajectory.main_character} change from scenario "
                f"{step + 1} to scenario {step + 2}?"
            )
            questions[f"type_d_why_{number}"] = _question(text, "type_d", options, reasons)
            number += 1
    return questions


def transformation_1_questions(trajectory: Trajectory) -> dict[str, Question]:
    """``type_d_whether_K``: did a state change from scenario n to n+1, and how.

    Gold: "Yes, from X to Y" (or "No" when the stage says nothing changed).
    Distractors: "No" and the same state's other changes.
    """
    questions = {}
    number = 1
    count = trajectory.scenario_count
    for kind in MENTAL_STATES:
        values = trajectory.states[kind]
        for step in range(count - 1):
            # The authors read Belief's "Changed" flag for all four states.
            changed = trajectory.belief_changed
            whether = f"test ability to recognize whether the {kind} change in the time stage"
            gold = _change(values, step) if changed else "No"
            options, reasons = [gold], [_reason(gold, **GOLD_REASON)]
            if changed:
                options.append("No")
                reasons.append(
                    _reason(
                        "No",
                        reason=whether,
                        explain="no change",
                        short="type_d_whether_recognize_if_change",
                    )
                )
            for other_step in range(count - 1):
                if changed and other_step == step:
                    continue
                option = _change(values, other_step)
                options.append(option)
                if changed:
                    reasons.append(
                        _reason(
                            option,
                            reason=(
                                f"test ability to recognize how the {kind} change in the correct "
                                "time stage"
                            ),
                            explain=f"how the {kind} change in other time stage",
                            short="type_d_whether_time_stage",
                        )
                    )
                else:
                    reasons.append(
                        _reason(
                            option,
                            reason=whether,
                            explain=f"how the {kind} change in some time stage",
                            short="type_d_whether_recognizae_if_change",
                        )
                    )
            text = (
                f"Whether the {kind} of {trajectory.main_character} change from scenario "
                f"{step + 1} to scenario {step + 2}? if yes, from what to what?"
            )
            questions[f"type_d_whether_{number}"] = _question(text, "type_d", options, reasons)
            number += 1
    return questions


def transformation_2_how_questions(trajectory: Trajectory) -> dict[str, Question]:
    """``type_c_how_K``: in scenario n, how does one state influence another.

    Distractors: the scenario's two other influences, then the same influence in
    the other scenarios (the authors' loop stops before the last scenario).
    """
    questions = {}
    number = 1
    count = trajectory.scenario_count
    mc = trajectory.main_character
    for cause, effect in INFLUENCES:
        link = f"{cause}->{effect}"
        for scenario in range(count):
            gold = trajectory.influences[scenario][link]
            options, reasons = [gold], [_reason(gold, **GOLD_REASON)]
            for other_link, option in trajectory.influences[scenario].items():
                if other_link != link:
                    options.append(option)
                    reasons.append(
                        _reason(
                            option,
                            reason=(
                                f"test ability to correctly recognize how the {cause} influence "
                                f"{effect} in the current time stage"
                            ),
                            explain=(
                                "how the other mental states influence each other in current "
                                "time stage"
                            ),
                            short="type_c_how_recognizae_influence_between_not_belief_emotion",
                        )
                    )
            # range(1, N) in the original: scenario N never serves as a distractor.
            for other in range(count - 1):
                if other != scenario:
                    option = trajectory.influences[other][link]
                    options.append(option)
                    reasons.append(
                        _reason(
                            option,
                            reason=(
                                f"test ability to correctly recognize how the {cause} influence "
                                f"{effect} in other time stage"
                            ),
                            explain=f"how the {cause} influence {effect} in other time stage",
                            short="type_c_how_time_stage",
                        )
                    )
            text = (
                f"In scenario {scenario + 1}, how does the {cause} of {mc} influence the "
                f"{effect} of {mc}?"
            )
            questions[f"type_c_how_{number}"] = _question(text, "type_c", options, reasons)
            number += 1
    return questions


def understanding_questions(trajectory: Trajectory) -> dict[str, Question]:
    """``type_a_what_K``: what is a state in scenario n.

    Distractors: the same state in the other scenarios, then the three other
    states in the same scenario.
    """
    questions = {}
    number = 1
    count = trajectory.scenario_count
    for kind in MENTAL_STATES:
        values = trajectory.states[kind]
        for scenario in range(count):
            gold = values[scenario]
            options, reasons = [gold], [_reason(gold, **GOLD_REASON)]
            for other in range(count):
                if other != scenario:
                    options.append(values[other])
                    reasons.append(
                        _reason(
                            values[other],
                            reason=f"test ability to recognize the {kind} in correct time stage",
                            explain=f"{kind} in other time stage",
                            short="type_a_what_time_stage",
                        )
                    )
            for other_kind in MENTAL_STATES:
                if other_kind != kind:
                    option = trajectory.states[other_kind][scenario]
                    options.append(option)
                    reasons.append(
                        _reason(
                            option,
                            reason=(
                                "test ability to recognize the difference between belief, "
                                "emotion, intention, and action"
                            ),
                            explain=f"{other_kind} in the same time stage",
                            short="type_a_what_recognize_belief_emotion_intention_action",
                        )
                    )
            text = f"What is the {kind} of {trajectory.main_character} in scenario {scenario + 1}?"
            questions[f"type_a_what_{number}"] = _question(text, "type_a", options, reasons)
            number += 1
    return questions


def _question(
    text: str, source_type: str, options: list[str], reasons: list[dict[str, str]]
) -> Question:
    _drop_gold_repeats(options, reasons)
    # "true answer" is "a" until the options are shuffled and lettered.
    return {
        "question": text,
        "true answer": "a",
        "options": options,
        "question type": source_type,
        "option reasons": reasons,
    }


def _drop_gold_repeats(options: list[str], reasons: list[dict[str, str]]) -> None:
    # The authors' keep_options_different: it finds the distractors equal to the
    # gold text, then pops those indices one after another from the shrinking
    # list, so from the second repeat on it drops the option after the repeat
    # (and a repeat can stay). Kept so distractor sets match the release; where
    # the original would raise IndexError we stop instead.
    repeats = [i for i in range(1, len(options)) if options[i] == options[0]]
    for index in repeats:
        if index >= len(options):
            break
        options.pop(index)
        reasons.pop(index)


def _change(values: list[str], step: int) -> str:
    return f"Yes, from {values[step]} to {values[step + 1]}"


def _shuffled(values: list[str], rng: random.Random) -> str:
    shuffled = list(values)
    # Reshuffle until the order differs (impossible when all texts are equal).
    if len(set(values)) > 1:
        while shuffled == values:
            rng.shuffle(shuffled)
    return ARROW.join(shuffled)


def _swap_two_in_place(values: list[str], rng: random.Random) -> str:
    # Two positions drawn with replacement, swapped in place until the list
    # differs from what it was: one effective swap of two different texts.
    before = list(values)
    if len(set(values)) > 1:
        while values == before:
            first, second = rng.choices(range(len(values)), k=2)
            values[first], values[second] = values[second], values[first]
    return ARROW.join(values)


def _without_one(values: list[str], rng: random.Random) -> str:
    index = rng.choice(range(len(values)))
    return ARROW.join(values[:index] + values[index + 1 :])


def _reason(option: str, *, reason: str, explain: str, short: str) -> dict[str, str]:
    return {"option": option, "reason": reason, "explain": explain, "short": short}


def _reason_explained_first(
    option: str, *, explain: str, reason: str, short: str
) -> dict[str, str]:
    # The time-order and completeness records list "explain" before "reason".
    return {"option": option, "explain": explain, "reason": reason, "short": short}
