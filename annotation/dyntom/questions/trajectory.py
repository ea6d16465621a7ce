"""The part of a DynToM ``story.json`` that questions are made from: the trajectory.

Questions read only the ``sketch``: the four mental states per scenario and the
reasons for each change (``analysis of mental states across scenarios``) and the
influences inside each scenario (``mental states analysis in every scenario``).
Dialogues and backgrounds are not read, so every dialogue shape of the release is
accepted as it is. Scenario keys are read with the importer's
:func:`benchmarks.importers.dyntom.scenario_number`, so ``scenario 1``, ``1``,
``scenario_1``, ``scenario1`` and ``Scenario 1`` all work.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.importers.base import ImportDataError
from benchmarks.importers.dyntom import scenario_number

MENTAL_STATES = ("belief", "emotion", "intention", "action")
# (cause, effect) pairs of the within-scenario influences, in the authors' order.
INFLUENCES = (("belief", "emotion"), ("belief&emotion", "intention"), ("intention", "action"))
ANALYSIS = "analysis of mental states across scenarios"
PER_SCENARIO = "mental states analysis in every scenario"
# A question lists at most 4*(N-1) options; letters a..z bound N at 7 (24 options).
MIN_SCENARIOS, MAX_SCENARIOS = 2, 7
# The authors cut each "k->k+1: reason" transition after its first 5 characters.
TRANSITION_PREFIX_CHARS = 5


@dataclass(frozen=True)
class Trajectory:
    """One stage's mental-state trajectory, as the question templates need it.

    ``states[kind][i]`` is the text of ``kind`` in scenario ``i + 1``;
    ``reasons[kind][i]`` why it changed from scenario ``i + 1`` to ``i + 2``;
    ``influences[i]["belief->emotion"]`` etc. the influences inside scenario ``i + 1``.
    """

    main_character: str
    scenario_count: int
    states: dict[str, list[str]]
    reasons: dict[str, list[str]]
    influences: list[dict[str, str]]
    belief_changed: bool


def read_trajectory(story: Any, *, path: Path | str) -> Trajectory:
    """Read the trajectory from a parsed ``story.json``; errors name path, record, field."""
    if not isinstance(story, dict):
        raise ImportDataError(f"expected a JSON object, got {type(story).__name__}", path=path)
    main_character = story.get("main character")
    if not isinstance(main_character, str) or not main_character.strip():
        raise ImportDataError(
            "required non-empty string missing", path=path, field="main character"
        )
    count = story.get("scenario numbers")
    if isinstance(count, bool) or not isinstance(count, int):
        raise ImportDataError(
            f"expected an integer, got {count!r}", path=path, field="scenario numbers"
        )
    if not MIN_SCENARIOS <= count <= MAX_SCENARIOS:
        raise ImportDataError(
            f"is {count}; questions are made for {MIN_SCENARIOS} to {MAX_SCENARIOS} scenarios "
            "(option letters a-z hold the 4*(N-1) options of a why-question up to N=7)",
            path=path,
            field="scenario numbers",
        )
    sketch = story.get("sketch")
    if not isinstance(sketch, dict):
        raise ImportDataError("required object missing or not an object", path=path, field="sketch")
    analysis = _object(sketch, ANALYSIS, path=path, record="sketch")
    states: dict[str, list[str]] = {}
    reasons: dict[str, list[str]] = {}
    belief_changed = False
    for kind in MENTAL_STATES:
        entry = _kind_entry(analysis, kind, path=path)
        record = f"{ANALYSIS} / {kind.capitalize()}"
        states[kind] = [
            _string(entry, str(number), path=path, record=record) for number in range(1, count + 1)
        ]
        reasons[kind] = _transitions(
            _string(entry, "Reasons", path=path, record=record), count, path=path, record=record
        )
        if kind == "belief":
            belief_changed = entry.get("Changed") in ("True", "true", True)
    return Trajectory(
        main_character=main_character,
        scenario_count=count,
        states=states,
        reasons=reasons,
        influences=_influences(
            _object(sketch, PER_SCENARIO, path=path, record="sketch"), count, path
        ),
        belief_changed=belief_changed,
    )


def _transitions(text: str, count: int, *, path: Path | str, record: str) -> list[str]:
    # "1->2: A; 2->3: B" -> ["A", "B"]: split on ";" and drop the first five
    # characters ("1->2:") as the authors did, so the gold texts are theirs exactly,
    # even where a stage wrote its prefix another way.
    parts = text.split(";")
    if len(parts) < count - 1:
        raise ImportDataError(
            f"has {len(parts)} transition(s) separated by ';', needs {count - 1} "
            f"('1->2: reason; 2->3: reason; ...' for {count} scenarios)",
            path=path,
            record=record,
            field="Reasons",
        )
    return [part.strip(" ")[TRANSITION_PREFIX_CHARS:].strip(" ") for part in parts[: count - 1]]


def _influences(per_scenario: dict[str, Any], count: int, path: Path | str) -> list[dict[str, str]]:
    by_number: dict[int, Any] = {}
    for key, value in per_scenario.items():
        number = scenario_number(key)
        if number is None:
            raise ImportDataError(
                'scenario keys must read "scenario N" (any case or separator) or "N"',
                path=path,
                record=PER_SCENARIO,
                field=key,
            )
        by_number[number] = (key, value)
    influences = []
    for number in range(1, count + 1):
        if number not in by_number:
            raise ImportDataError(
                f"scenario {number} missing (the stage has {count})",
                path=path,
                record=PER_SCENARIO,
                field=f"scenario {number}",
            )
        key, scenario = by_number[number]
        record = f"{PER_SCENARIO} / {key}"
        if not isinstance(scenario, dict):
            raise ImportDataError("expected a JSON object", path=path, record=record)
        influence = _object(scenario, "influence", path=path, record=record)
        influences.append(
            {
                f"{cause}->{effect}": _string(
                    influence, f"{cause}->{effect}", path=path, record=f"{record} / influence"
                )
                for cause, effect in INFLUENCES
            }
        )
    return influences


def _kind_entry(analysis: dict[str, Any], kind: str, *, path: Path | str) -> dict[str, Any]:
    # The release writes "Belief"; any case is accepted (a generated stage may differ).
    for key, value in analysis.items():
        if key.lower() == kind:
            if not isinstance(value, dict):
                raise ImportDataError(
                    "expected a JSON object", path=path, record=ANALYSIS, field=key
                )
            return value
    raise ImportDataError(
        "required object missing", path=path, record=ANALYSIS, field=kind.capitalize()
    )


def _object(data: dict[str, Any], name: str, *, path: Path | str, record: str) -> dict[str, Any]:
    value = data.get(name)
    if not isinstance(value, dict):
        raise ImportDataError(
            "required object missing or not an object", path=path, record=record, field=name
        )
    return value


def _string(data: dict[str, Any], name: str, *, path: Path | str, record: str) -> str:
    value = data.get(name)
    if not isinstance(value, str):
        raise ImportDataError(
            "required string missing"
            if value is None
            else f"expected a string, got {type(value).__name__}",
            path=path,
            record=record,
            field=name,
        )
    return value
