"""Mappings shipped with ToMLab for the generic importer (``generic.py``).

Researchers' own mappings are :class:`benchmarks.models.MappingPreset` rows; these
built-in ones live in code so every installation has them and no one edits them by
accident. A saved preset may not take a built-in one's name.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

# ToMBench's 20 tasks, spelt as the release's file names. The spreadsheet's sheet names
# differ in case and trailing spaces ("Discrepant emotions "), so the task category
# maps both spellings to these and the two imports give the same items.
TOMBENCH_TASKS = [
    "Ambiguous Story Task",
    "Completion of Failed Actions",
    "Discrepant Desires",
    "Discrepant Emotions",
    "Discrepant Intentions",
    "Emotion Regulation",
    "False Belief Task",
    "Faux-pas Recognition Test",
    "Hidden Emotions",
    "Hinting Task Test",
    "Knowledge-Attention Links",
    "Knowledge-Pretend Play Links",
    "Moral Emotions",
    "Multiple Desires",
    "Percepts-Knowledge Links",
    "Persuasion Story Task",
    "Prediction of Actions",
    "Scalar Implicature Test",
    "Strange Story Task",
    "Unexpected Outcome Test",
]

TOMBENCH: dict[str, Any] = {
    "_about": "ToMBench (Chen et al., 2024): the 20 task files (JSONL) or the spreadsheet, "
    "Chinese and English.",
    # A folder holds both the task files and the spreadsheet: read the task files. One
    # file given on its own (the .xlsx) is read whatever its suffix.
    "files": {"include": ["*.jsonl"]},
    # The spreadsheet's draft sheet is not part of the release.
    "sheets": {"exclude": ["OLD====*"]},
    # 序号/INDEX numbers the questions of one story (1, 2, 1, 2…), so it repeats within
    # a task: the id is the task and the record's place in its file or sheet, which the
    # two forms of the release share.
    "id": {"template": "{task|slug}-{$n}"},
    "languages": [
        {
            "language": "zh",
            "context": "故事",
            "question": "问题",
            "options": ["选项A", "选项B", "选项C", "选项D"],
        },
        {
            "language": "en",
            "context": "STORY",
            "question": "QUESTION",
            "options": ["OPTION-A", "OPTION-B", "OPTION-C", "OPTION-D"],
        },
    ],
    # One answer is written "A. ": a letter with its label, read as A.
    "answer": {"field": "答案\nANSWER", "as": "letter"},
    "categories": {
        "ability": "能力\nABILITY",
        "task": {"field": "$source", "values": TOMBENCH_TASKS},
    },
    # One item of the release (Strange Story Task, line 293) has two Chinese options
    # and an English question and four options from another story: it keeps its
    # Chinese text, and the warning names it.
    "mismatched_languages": "drop",
}


@dataclass(frozen=True)
class BuiltinPreset:
    name: str
    description: str
    mapping: dict[str, Any]


BUILTIN_PRESETS: tuple[BuiltinPreset, ...] = (
    BuiltinPreset(
        name="ToMBench",
        description="ToMBench's 20 task files (JSONL) or its spreadsheet (XLSX): 2,860 "
        "items in Chinese and English, by ability and task.",
        mapping=TOMBENCH,
    ),
)


def builtin_preset(name: str) -> BuiltinPreset | None:
    """The built-in preset called ``name`` (case does not matter), or None."""
    folded = name.strip().casefold()
    for preset in BUILTIN_PRESETS:
        if preset.name.casefold() == folded:
            return BuiltinPreset(preset.name, preset.description, copy.deepcopy(preset.mapping))
    return None
