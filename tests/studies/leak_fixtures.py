"""A small ToM-in-AMC movie whose masked test scenes leak in every way the check knows.

ToM-in-AMC masks names in narration, so a candidate's name in the heading, an action
line or a stage direction holds a scene back, as does an unmasked speaker cue; a name
spoken in dialogue is only listed. Neither demo fixture (``fixtures/demo/tom_in_amc.json``
and the Lighthouse Keepers screenplay) has such a leak: their narration is masked.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.models import Character, Scene, Work
from tests.factories import CharacterFactory, SceneFactory, SpeakerInstanceFactory, WorkFactory

CANDIDATES = ["vincent", "lola", "marcus"]

# source_id -> (heading, lines); every scene has two masked speakers, P0 and P1.
SCENES: dict[str, tuple[str, list[dict[str, str]]]] = {
    "01 heading": (
        "INT. LOLA'S CAR - NIGHT",
        [
            {"type": "scene", "title": "NULL", "text": "Rain on the windscreen."},
            {"type": "dialog", "title": "P0", "text": "We go at dawn."},
            {"type": "dialog", "title": "P1", "text": "Not before I count it."},
        ],
    ),
    "02 direction": (
        "EXT. DOCKS - NIGHT",
        [
            {"type": "dialog", "title": "P0", "text": "(to Marcus) Keep the engine running."},
            {"type": "dialog", "title": "P1", "text": "Hey Vincent, relax."},
        ],
    ),
    "03 cue": (
        "INT. WAREHOUSE - DAY",
        [
            {"type": "dialog", "title": "MARCUS", "text": "Where is everyone?"},
            {"type": "dialog", "title": "P0", "text": "Late."},
            {"type": "dialog", "title": "P1", "text": "Early, for once."},
        ],
    ),
    "04 speech": (
        "INT. DINER - DAY",
        [
            {"type": "dialog", "title": "P0", "text": "Order for you, Lola?"},
            {"type": "dialog", "title": "P1", "text": "Coffee."},
        ],
    ),
    # Clean until the alias table knows Vincent's nickname (as "The Bings'" in Friends).
    "05 clean": (
        "EXT. VINNIE'S ROOFTOP - DAWN",
        [
            {"type": "dialog", "title": "P0", "text": "It's over."},
            {"type": "dialog", "title": "P1", "text": "For now."},
        ],
    ),
}
BLOCKING = ["01 heading", "02 direction", "03 cue"]  # held back by the check
LISTED_ONLY = ["04 speech"]  # a name spoken in dialogue: listed, not held back


@dataclass(frozen=True)
class NightShift:
    work: Work
    characters: dict[str, Character]
    scenes: dict[str, Scene]


def night_shift_create() -> NightShift:
    """The movie "Night Shift" (ToM-in-AMC, test split) with the five scenes of ``SCENES``."""
    work = WorkFactory(key="night-shift", title="Night Shift")
    characters = {
        name: CharacterFactory(work=work, name=name, position=i)
        for i, name in enumerate(CANDIDATES)
    }
    scenes = {}
    for i, (source_id, (heading, lines)) in enumerate(SCENES.items()):
        scene = SceneFactory(
            work=work,
            source_id=source_id,
            position=i,
            heading=heading,
            lines=lines,
            participants=["P0", "P1"],
        )
        for code, gold in (("P0", CANDIDATES[i % 3]), ("P1", CANDIDATES[(i + 1) % 3])):
            SpeakerInstanceFactory(
                scene=scene, code=code, gold_character=characters[gold], candidates=CANDIDATES
            )
        scenes[source_id] = scene
    return NightShift(work=work, characters=characters, scenes=scenes)
