"""Reading and validating the LLM's replies to the generation steps.

Each ``*_from_reply`` function returns the step's value or raises :class:`ReplyInvalid`
with a message meant for the model as much as for a person: it is sent back with the
retry prompt. JSON replies are checked against a JSON Schema built for the stage's
number of scenarios (``jsonschema``, already installed with drf-spectacular), then by
code for what a schema cannot say (the "1->2: …; 2->3: …" reasons, speaker names).
"""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator

MENTAL_STATES = ("belief", "emotion", "intention", "action")
INFLUENCE_KEYS = ("belief->emotion", "belief&emotion->intention", "intention->action")
PER_SCENARIO = "mental states analysis in every scenario"
ACROSS = "analysis of mental states across scenarios"
# Paper section 3.1: each scenario's dialogue has 3 to 5 rounds.
MIN_ROUNDS, MAX_ROUNDS = 3, 5
MAX_RELATIONSHIP_CHARS = 2000
# Errors listed in one message at most; the rest are counted.
MAX_ERRORS_SHOWN = 5

_FENCE_RE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?|\n?\s*```\s*$")
_TRANSITION_RE = re.compile(r"^\s*(\d+)\s*->\s*(\d+)\s*:")


class ReplyInvalid(ValueError):
    """A reply that cannot be used; the message says why and where."""


def _text(min_length: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_length, "pattern": r"\S"}


def scenario_keys(count: int) -> list[str]:
    return [f"scenario {n}" for n in range(1, count + 1)]


def trajectory_schema(count: int) -> dict[str, Any]:
    """The JSON Schema of step 2's reply for a stage of ``count`` scenarios."""
    per_scenario = {
        "type": "object",
        "required": [*MENTAL_STATES, "influence"],
        "additionalProperties": False,
        "properties": {
            **{state: _text() for state in MENTAL_STATES},
            "influence": {
                "type": "object",
                "required": list(INFLUENCE_KEYS),
                "additionalProperties": False,
                "properties": {key: _text() for key in INFLUENCE_KEYS},
            },
        },
    }
    numbers = [str(n) for n in range(1, count + 1)]
    across = {
        "type": "object",
        "required": ["Changed", *numbers, "Reasons"],
        "additionalProperties": False,
        "properties": {
            "Changed": {"enum": ["True", "False", True, False]},
            **{n: _text() for n in numbers},
            "Reasons": _text(),
        },
    }
    return {
        "type": "object",
        "required": [PER_SCENARIO, ACROSS],
        "additionalProperties": False,
        "properties": {
            PER_SCENARIO: {
                "type": "object",
                "required": scenario_keys(count),
                "additionalProperties": False,
                "properties": dict.fromkeys(scenario_keys(count), per_scenario),
            },
            ACROSS: {
                "type": "object",
                "required": [s.capitalize() for s in MENTAL_STATES],
                "additionalProperties": False,
                "properties": {s.capitalize(): across for s in MENTAL_STATES},
            },
        },
    }


def scenarios_schema(count: int) -> dict[str, Any]:
    """The JSON Schema of step 3's reply for a stage of ``count`` scenarios."""
    scenario = {
        "type": "object",
        "required": ["background", "dialogue"],
        "additionalProperties": False,
        "properties": {
            "background": _text(),
            "dialogue": {
                "type": "array",
                "minItems": MIN_ROUNDS,
                "maxItems": MAX_ROUNDS,
                "items": {
                    "type": "object",
                    "minProperties": 1,
                    "additionalProperties": _text(),
                },
            },
        },
    }
    return {
        "type": "object",
        "required": scenario_keys(count),
        "additionalProperties": False,
        "properties": dict.fromkeys(scenario_keys(count), scenario),
    }


def trajectory_shape(count: int) -> str:
    """An example of step 2's reply shape for the prompt (values describe what goes there)."""
    per = {
        key: {
            "belief": "...",
            "emotion": "...",
            "intention": "...",
            "action": "...",
            "influence": dict.fromkeys(INFLUENCE_KEYS, "..."),
        }
        for key in scenario_keys(count)
    }
    steps = "; ".join(f"{n}->{n + 1}: ..." for n in range(1, count))
    across = {
        state.capitalize(): {
            "Changed": "True or False",
            **{str(n): "..." for n in range(1, count + 1)},
            "Reasons": steps,
        }
        for state in MENTAL_STATES
    }
    return json.dumps({PER_SCENARIO: per, ACROSS: across}, indent=2)


def scenarios_shape(count: int, speakers: tuple[str, str]) -> str:
    a, b = speakers
    rounds = [{a: "...", b: "..."}] * MIN_ROUNDS
    return json.dumps(
        {key: {"background": "...", "dialogue": rounds} for key in scenario_keys(count)},
        indent=2,
    )


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object of a reply: code fences and prose around it are ignored."""
    cleaned = _FENCE_RE.sub("", text.strip())
    try:
        value = json.loads(cleaned)
    except json.JSONDecodeError as exc:
        start, end = cleaned.find("{"), cleaned.rfind("}")
        if start < 0 or end <= start:
            raise ReplyInvalid("the reply holds no JSON object") from None
        try:
            value = json.loads(cleaned[start : end + 1])
        except json.JSONDecodeError:
            raise ReplyInvalid(
                f"the reply is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
            ) from None
    if not isinstance(value, dict):
        raise ReplyInvalid(f"expected a JSON object, got a JSON {type(value).__name__}")
    return value


def _where(path: Any) -> str:
    parts = [str(p) for p in path]
    return " / ".join(parts) if parts else "the top level"


def _check_schema(value: Any, schema: dict[str, Any]) -> None:
    errors = sorted(
        Draft202012Validator(schema).iter_errors(value), key=lambda e: [str(p) for p in e.path]
    )
    if not errors:
        return
    shown = [f"at {_where(e.path)}: {e.message}" for e in errors[:MAX_ERRORS_SHOWN]]
    more = len(errors) - len(shown)
    raise ReplyInvalid(
        "the JSON does not have the shape asked for: "
        + "; ".join(shown)
        + (f"; and {more} more problem(s)" if more > 0 else "")
    )


def relationship_from_reply(text: str) -> str:
    """Step 1: the relationship as one paragraph of text."""
    value = " ".join(_FENCE_RE.sub("", text).split()).strip().strip('"')
    if not value:
        raise ReplyInvalid("the reply is empty; describe the relationship in a few sentences")
    if value.startswith("{") or value.startswith("["):
        raise ReplyInvalid("expected plain text, not JSON")
    if len(value) > MAX_RELATIONSHIP_CHARS:
        raise ReplyInvalid(
            f"the description has {len(value)} characters; keep it under {MAX_RELATIONSHIP_CHARS}"
        )
    return value


def trajectory_from_reply(text: str, *, count: int) -> dict[str, Any]:
    """Step 2: the two trajectory parts of the story's sketch, validated."""
    value = parse_json_object(text)
    _check_schema(value, trajectory_schema(count))
    problems = []
    for state, entry in value[ACROSS].items():
        # The release writes "True"/"False" as strings; booleans are normalised to them.
        entry["Changed"] = (
            str(entry["Changed"]) if isinstance(entry["Changed"], bool) else entry["Changed"]
        )
        parts = entry["Reasons"].split(";")
        if len(parts) != count - 1:
            problems.append(
                f"at {ACROSS} / {state} / Reasons: {len(parts)} part(s) separated by ';', "
                f"expected {count - 1} ('1->2: reason; 2->3: reason; ...')"
            )
            continue
        for step, part in enumerate(parts, start=1):
            match = _TRANSITION_RE.match(part)
            if not match or (int(match.group(1)), int(match.group(2))) != (step, step + 1):
                problems.append(
                    f"at {ACROSS} / {state} / Reasons: part {step} must start with "
                    f"'{step}->{step + 1}:'"
                )
                break
    if problems:
        raise ReplyInvalid("; ".join(problems[:MAX_ERRORS_SHOWN]))
    return value


def scenarios_from_reply(text: str, *, count: int, speakers: dict[str, set[str]]) -> dict[str, Any]:
    """Step 3: scenario key -> background and dialogue rounds, validated.

    ``speakers`` maps each character's full name to the names they may speak under
    (first name, full name); every speaker of every round must be one of them.
    """
    value = parse_json_object(text)
    _check_schema(value, scenarios_schema(count))
    allowed = {name.casefold() for names in speakers.values() for name in names}
    problems = []
    for key in scenario_keys(count):
        for number, round_ in enumerate(value[key]["dialogue"], start=1):
            for speaker in round_:
                if speaker.strip().casefold() not in allowed:
                    problems.append(
                        f"at {key} / dialogue / round {number}: speaker {speaker!r} is not one "
                        f"of the characters ({', '.join(sorted(speakers))})"
                    )
    if problems:
        raise ReplyInvalid("; ".join(problems[:MAX_ERRORS_SHOWN]))
    return value
