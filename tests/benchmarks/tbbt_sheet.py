"""A small sheet in the shape of TVShowGuess's tbbt.tsv, and a .raw of its scenes.

Written for the tests in our own words (not the show's lines). The shape is the
release's Big Bang Theory sheet: 9 columns (one evidence group), the header word
"need history event", a guessed name with a qualifier ("penny (abductive)"), an
"Unsolvable" need-history row, "history event" evidence, and a scene id with a
trailing space as tbbt.tsv has one.
"""

from __future__ import annotations

import csv
from pathlib import Path

CANDIDATES = ["sheldon", "penny", "leonard", "amy"]


def _scene(scene_id: str, lines: list[str]) -> str:
    # The release separates a scene's parts with "\r".
    return "\r".join([scene_id, repr(CANDIDATES), " [Scene: The stairwell.]", *lines])


SCENES = [
    (
        "08x01 100",
        [
            " P0 : Knock, knock, knock. Are you awake? Knock, knock, knock. Are you awake?",
            " P1 : I am now. It is six in the morning.",
            " background : (P1 opens the door in a bathrobe.)",
        ],
        {"P0": "sheldon", "P1": "penny"},
    ),
    (
        "08x01 101",
        [
            " P0 : I fixed the laser. It only took four hours.",
            " P1 : Four hours is a personal best for you, dear.",
            " P2 : Incorrect. My personal best is three hours and fifty minutes.",
        ],
        {"P0": "leonard", "P1": "amy", "P2": "sheldon"},
    ),
    ("08x01 102", [" P0 : Who ate my leftover noodles?"], {"P0": "penny"}),
]

HEADER = [
    "Episode",
    "need history event",
    "Facts abstracted from memory",
    "Character Code",
    "Guessed Character Name",
    "Evidence-a1",
    "Evidence-a2",
    "Evidence-a3",
    "Reasoning Type",
]
ROWS = [
    ["08x01 100", "no", "no", "P0", "sheldon", "linguistic style", "", "", "no"],
    ["08x01 100", "yes", "yes", "P1", "penny (abductive)", "history event", "personality", "", ""],
    [
        "08x01 101", "no", "yes", "P0", "leonard",
        "fact(relation)", "inside_scene(background)", "", "multihop-textual",
    ],
    ["08x01 101", "Unsolvable", "no", "P1", "amy", "inside_scene(exclusive)", "", "", "no"],
    ["08x01 101", "no", "no", "P2", "sheldon", "inside_scene(mention)", "", "", "commonsense"],
    [
        "08x01 102 ", "yes", "no", "P0", "penny",
        "history event", "fact(status)", "", "multihop-character",
    ],
]  # fmt: skip

# The shares by hand, in percent of all 6 rows (the authors' denominator):
# dependence: direct rows 2 and 6, indirect row 3, none rows 1 and 5; row 4 is
#   Unsolvable, left out of the dependence counts but not of the 6 (so 5/6 in all).
# reasoning: "no" rows 1 and 4 -> not required; row 2 blank with a second evidence
#   -> default conjunction; one each of multihop-textual, commonsense, multihop-character.
# evidence (first three evidence columns): history event -> memory (rows 2 and 6),
#   fact(relation) row 3 and fact(status) row 6 -> fact (any) 2, exclusive -> exclusion.
SIXTH, THIRD = 16.67, 33.33
EXPECTED_SHARES = {
    "dependence": {"direct": THIRD, "indirect": SIXTH, "none": THIRD},
    "reasoning": {
        "default conjunction": SIXTH,
        "multihop-character": SIXTH,
        "multihop-textual": SIXTH,
        "commonsense": SIXTH,
        "not required": THIRD,
    },
    "evidence": {
        "linguistic style": SIXTH,
        "personality": SIXTH,
        "fact(attribute)": 0.0,
        "fact(relation)": SIXTH,
        "fact(status)": SIXTH,
        "fact (any)": THIRD,
        "memory": THIRD,
        "inside scene(background)": SIXTH,
        "inside scene(mention)": SIXTH,
        "inside scene(exclusion)": SIXTH,
    },
}
EXPECTED_COUNTS = {"direct": 2, "indirect": 1, "none": 2}


def write_tbbt(folder: Path, *, header: list[str] | None = None) -> Path:
    """Write ``tbbt.raw`` and ``tbbt.tsv`` into ``folder``; returns the .raw path."""
    raw = folder / "tbbt.raw"
    with raw.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["No.", "Scene", "Answer"])
        for number, (scene_id, lines, answer) in enumerate(SCENES, start=1):
            writer.writerow([str(number), _scene(scene_id, lines), repr(answer)])
    rows = [header or HEADER, *ROWS]
    raw.with_suffix(".tsv").write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    return raw
