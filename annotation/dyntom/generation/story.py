"""A generated stage as the release's ``story.json`` (see ``data/dyntom/trial50``).

The question generator (:mod:`annotation.dyntom.questions`) and the importer
(:mod:`benchmarks.importers.dyntom`) read exactly this, unchanged.
"""

from __future__ import annotations

from typing import Any

RELATIONSHIP_KEY = "main character with supporting character 1"


def stage_story(
    *,
    characters: list[dict[str, Any]],
    characters_information: str,
    location: str,
    location_category: str,
    relationship: str,
    scenario_count: int,
    trajectory: dict[str, Any],
    scenarios: dict[str, Any],
) -> dict[str, Any]:
    """The ``story.json`` content of a stage whose steps 1-3 are done."""
    return {
        "main character": characters[0]["full_name"],
        "scenario numbers": scenario_count,
        "characters information": characters_information,
        "social setting": location,
        "social setting type": location_category,
        "sketch": {
            "relationships among characters": {RELATIONSHIP_KEY: relationship},
            **trajectory,
        },
        "story": scenarios,
    }
