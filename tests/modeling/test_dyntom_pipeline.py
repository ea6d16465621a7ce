"""The DynToM pipeline: prompts built from the real stages, replies parsed tolerantly."""

from __future__ import annotations

import json

import pytest

from modeling.pipelines import get_pipeline
from modeling.pipelines.dyntom import parse_answers
from modeling.runs.prompt_templates import active_template

pytestmark = pytest.mark.django_db

KEYS = ["type_a_what_1", "type_d_why_2", "type_d_how_1"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"type_a_what_1": "a", "type_d_why_2": "c", "type_d_how_1": "b"}', "acb"),
        ('```json\n{"type_a_what_1":"a","type_d_why_2":"c","type_d_how_1":"b"}\n```', "acb"),
        (
            'Sure! Here you go:\n{"type_a_what_1": "A", "type_d_why_2": "C", "type_d_how_1": "B"}\n'
            "Hope this helps.",
            "acb",
        ),
        ("{'type_a_what_1': 'a', 'type_d_why_2': 'c', 'type_d_how_1': 'b'}", "acb"),
        ('{"type_a_what_1": "a", "type_d_why_2": "c", "type_d_how_1": "b",}', "acb"),
        (
            '{"type_a_what_1": "a. Julia is happy", "type_d_why_2": "(c)", "type_d_how_1": "b."}',
            "acb",
        ),
        ('{"answers": {"type_a_what_1": "a", "type_d_why_2": "c", "type_d_how_1": "b"}}', "acb"),
        # Chain of thought: braces in the reasoning, the answer object last.
        (
            "Scenario 1 {belief: trust} leads to ... so\n"
            '{"type_a_what_1": "a", "type_d_why_2": "c", "type_d_how_1": "b"}',
            "acb",
        ),
        # Not an object at all: the key/letter pairs still count.
        ("type_a_what_1: a\ntype_d_why_2: c\ntype_d_how_1 = b", "acb"),
    ],
)
def test_parse_answers_is_tolerant(text, expected):
    answers = parse_answers(text, KEYS)
    assert "".join(answers[k] for k in KEYS) == expected


def test_parse_answers_keeps_only_asked_keys():
    answers = parse_answers('{"type_a_what_1": "a", "type_x_y_9": "b"}', KEYS)
    assert answers == {"type_a_what_1": "a"}


def test_parse_answers_marks_non_letters():
    assert parse_answers('{"type_a_what_1": "maybe both"}', KEYS) == {"type_a_what_1": None}
    assert parse_answers('{"type_a_what_1": 3}', KEYS) == {"type_a_what_1": None}
    assert parse_answers("no answers here", KEYS) == {}


@pytest.fixture
def stage(dyntom_stages):
    return dyntom_stages.get(work__key="trial149")


def _unit(stage, method="vanilla"):
    pipeline = get_pipeline("dyntom")
    template = active_template(f"dyntom-{method}")
    (unit,) = pipeline.build_units(selection={"works": [stage.work.key]}, template=template)
    return pipeline, unit


def test_prompt_has_profiles_story_and_every_question_but_no_gold(stage):
    _, unit = _unit(stage)
    prompt = unit.messages[-1]["content"]
    assert stage.characters_information in prompt
    for scenario in stage.scenarios.all():
        assert f"Scenario {scenario.number}\nBackground: {scenario.background}" in prompt
    questions = list(stage.questions.order_by("position"))
    assert unit.item_ids == [q.pk for q in questions]
    for question in questions:
        assert f"[{question.key}] {question.text}" in prompt
    # Options are relettered from their position, and the release's "a. " is not doubled.
    assert "\nb. Julia is happy -> Julia might be hiding stress" in prompt
    assert "a. a." not in prompt
    # Neither the gold letter nor the distractor analysis reaches the model.
    assert "true answer" not in prompt
    assert "shuffle the order of belief in scenarios" not in prompt
    assert "mental states analysis" not in prompt
    assert '{"type_d_how_1": "a", "type_a_what_2": "c"}' in prompt


def test_cot_prompt_asks_for_reasoning_before_the_object(stage):
    _, unit = _unit(stage, "cot")
    prompt = unit.messages[-1]["content"]
    assert "step by step" in prompt
    assert "at the very end" in prompt


def test_parse_scores_by_exact_letter_and_reports_statuses(stage):
    pipeline, unit = _unit(stage)
    questions = list(stage.questions.order_by("position"))
    first, second, third = questions[:3]
    wrong = "a" if first.gold_letter != "a" else "b"
    reply = json.dumps({first.key: wrong, second.key: second.gold_letter, third.key: "z"})
    parsed = {p.item_id: p for p in pipeline.parse(unit=unit, text=reply)}
    assert len(parsed) == len(questions)
    assert (parsed[first.pk].parse_status, parsed[first.pk].correct) == ("ok", False)
    assert (parsed[second.pk].parse_status, parsed[second.pk].correct) == ("ok", True)
    assert (parsed[third.pk].parse_status, parsed[third.pk].correct) == ("unparseable", False)
    assert "option letters a-" in parsed[third.pk].details["reason"]
    rest = [parsed[q.pk] for q in questions[3:]]
    assert {p.parse_status for p in rest} == {"missing"}
    assert not any(p.correct for p in rest)


def test_nonsense_is_unparseable_and_refusal_is_refused(stage):
    pipeline, unit = _unit(stage)
    nonsense = pipeline.parse(unit=unit, text="lorem ipsum dolor")
    assert {(p.parse_status, p.correct) for p in nonsense} == {("unparseable", False)}
    refusal = pipeline.parse(unit=unit, text="I'm sorry, but I can't help with that request.")
    assert {(p.parse_status, p.correct) for p in refusal} == {("refused", False)}
