"""Default prompt templates of DynToM generation, in our own words.

They follow the structure of the paper's generation steps (section 3.1, Appendix A):
the sampled profiles and setting go in; step 1 asks for the relationship as plain text,
step 2 for the mental-state trajectory (per scenario: belief, emotion, intention,
action and the influences between them; across scenarios: whether each state changed,
its value per scenario and the reason for each change) as JSON, step 3 for each
scenario's background and dialogue as JSON. ``{json_shape}`` is filled in by code with
the exact shape for the stage's number of scenarios. A reply that fails validation is
answered with ``dyntom-gen-retry``, which carries the validation error.

Like modeling's defaults they are PromptTemplate records (editing one saves a new
version); :func:`generation_templates_ensure_defaults` writes the missing ones.
"""

from __future__ import annotations

from typing import Any

from modeling.models import PromptTemplate
from modeling.runs.prompt_templates import newest_active

RELATIONSHIP = "dyntom-gen-relationship"
TRAJECTORY = "dyntom-gen-trajectory"
SCENARIOS = "dyntom-gen-scenarios"
RETRY = "dyntom-gen-retry"
STEP_TEMPLATES = {
    "relationship": RELATIONSHIP,
    "trajectory": TRAJECTORY,
    "scenarios": SCENARIOS,
    "retry": RETRY,
}

_SYSTEM = (
    "You write believable everyday social situations for research on how people "
    "understand what others believe, feel, intend and do. Keep people, places and "
    "events realistic and consistent with what you are given."
)

_CONTEXT = "Setting: {location} ({location_category}).\n\nCharacters:\n{characters_information}\n\n"

GENERATION_TEMPLATES: list[dict[str, Any]] = [
    {
        "name": RELATIONSHIP,
        "version": 1,
        "benchmark": "dyntom",
        "method": "generate-relationship",
        "system": _SYSTEM,
        "user": (
            _CONTEXT + "In two to four sentences, describe how {main_character} and "
            "{supporting_character} know each other and what their relationship is like: "
            "how long they have known each other, how close they are, and anything between "
            "them that could colour how they treat each other. Fit it to their jobs, "
            "education and personalities. Write the description only: no title, no list, "
            "no JSON."
        ),
        "fields": [
            "location",
            "location_category",
            "characters_information",
            "main_character",
            "supporting_character",
        ],
        "output_format": "plain text, two to four sentences",
        "notes": "Default: DynToM generation step 1 (paper section 3.1), our wording.",
    },
    {
        "name": TRAJECTORY,
        "version": 1,
        "benchmark": "dyntom",
        "method": "generate-trajectory",
        "system": _SYSTEM,
        "user": (
            _CONTEXT + "Relationship: {relationship}\n\n"
            "Plan a story of {scenario_count} scenarios, told in order, in which the mental "
            "states of {main_character} develop through meetings with {supporting_character}. "
            "For every scenario give {main_character}'s belief, emotion, intention and action "
            "(one sentence each, naming {main_character}), and how they connect inside the "
            "scenario: how the belief shapes the emotion, how belief and emotion together "
            "shape the intention, and how the intention leads to the action.\n"
            "Then, for each of the four states, say whether it changes across the scenarios "
            '("True" or "False"), repeat its value in every scenario under the scenario\'s '
            "number, and explain every change from one scenario to the next in one string "
            'written as "1->2: reason; 2->3: reason; ..." (one part per step, separated by '
            "semicolons). Let the belief change at least once.\n\n"
            "Reply with one JSON object of exactly this shape and nothing else:\n{json_shape}"
        ),
        "fields": [
            "location",
            "location_category",
            "characters_information",
            "relationship",
            "main_character",
            "supporting_character",
            "scenario_count",
            "json_shape",
        ],
        "output_format": "a JSON object with the two trajectory parts of the story's sketch",
        "notes": "Default: DynToM generation step 2, the mental-state trajectory; our wording.",
    },
    {
        "name": SCENARIOS,
        "version": 1,
        "benchmark": "dyntom",
        "method": "generate-scenarios",
        "system": _SYSTEM,
        "user": (
            _CONTEXT + "Relationship: {relationship}\n\n"
            "Planned mental states of {main_character}, scenario by scenario:\n{trajectory}\n\n"
            "Write the {scenario_count} scenarios. For each, a background of two to four "
            "sentences (where and when it happens and what led to it) and a dialogue between "
            "{main_character} and {supporting_character} of {min_rounds} to {max_rounds} "
            "rounds. A round is one object mapping each speaker's first name to what they say. "
            "The dialogue must let a careful reader infer {main_character}'s belief, emotion, "
            "intention and action in that scenario without stating them as labels, and must "
            "follow the plan.\n\n"
            "Reply with one JSON object of exactly this shape and nothing else:\n{json_shape}"
        ),
        "fields": [
            "location",
            "location_category",
            "characters_information",
            "relationship",
            "main_character",
            "supporting_character",
            "scenario_count",
            "trajectory",
            "min_rounds",
            "max_rounds",
            "json_shape",
        ],
        "output_format": "a JSON object: scenario key -> background and dialogue rounds",
        "notes": "Default: DynToM generation step 3, scenarios with dialogue; our wording.",
    },
    {
        "name": RETRY,
        "version": 1,
        "benchmark": "dyntom",
        "method": "generate-retry",
        "system": "",
        "user": (
            "That reply could not be used: {error}\n"
            "Send the whole answer again, corrected, in exactly the shape asked for and with "
            "nothing around it."
        ),
        "fields": ["error"],
        "output_format": "the previous step's format",
        "notes": "Sent after a reply that failed validation, with the validation error.",
    },
]


def generation_templates_ensure_defaults() -> int:
    """Create the missing default generation templates; returns how many were created."""
    from modeling.runs.prompt_templates import prompt_templates_ensure_defaults

    # One query when they all exist (every visit of the generation page asks).
    wanted = {(spec["name"], spec["version"]) for spec in GENERATION_TEMPLATES}
    have = set(
        PromptTemplate.objects.filter(name__in=[name for name, _ in wanted]).values_list(
            "name", "version"
        )
    )
    if wanted <= have:
        return 0
    return prompt_templates_ensure_defaults(specs=GENERATION_TEMPLATES)


def active_generation_templates() -> dict[str, PromptTemplate]:
    """Step -> the newest active version of its template (defaults created if missing)."""
    generation_templates_ensure_defaults()
    found: dict[str, PromptTemplate] = {}
    for step, name in STEP_TEMPLATES.items():
        template = newest_active(name)
        if template is None:
            raise ValueError(
                f"no active prompt template named {name!r}; activate one of its versions"
            )
        found[step] = template
    return found
