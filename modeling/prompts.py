"""Default prompt templates, written in our own words.

Each follows the structure and output format of its paper's appendix; researchers
edit them as new versions in the UI, or load other wordings (e.g. a paper's exact
text) as template records. ``prompt_templates_ensure_defaults`` writes them.

DynToM (paper Appendix B.2, Figure 17): one prompt per social stage — an instruction,
the characters' profiles, the story (every scenario's background and dialogue) and
all of the stage's questions with lettered options — asking for a JSON object that
maps each question key to one option letter. The chain-of-thought variant asks the
model to reason step by step first and to end with the same JSON object.
"""

from __future__ import annotations

from typing import Any

_DYNTOM_FIELDS = ["characters_information", "story", "questions"]

_DYNTOM_OUTPUT = (
    'A JSON object mapping every question key to one option letter, e.g. {"type_d_how_1": "a"}'
)

_DYNTOM_BODY = (
    "Characters:\n{characters_information}\n\nStory:\n{story}\n\nQuestions:\n{questions}\n\n"
)

_DYNTOM_ANSWER_FORMAT = (
    "Give your answers as one JSON object whose keys are the question keys in square "
    "brackets and whose values are the letter of the option you choose, for example: "
    '{{"type_d_how_1": "a", "type_a_what_2": "c"}}. Answer every question.'
)

DEFAULT_TEMPLATES: list[dict[str, Any]] = [
    {
        "name": "dyntom-vanilla",
        "version": 1,
        "benchmark": "dyntom",
        "method": "vanilla",
        "system": "",
        "user": (
            "Read the story below and answer the questions about its characters.\n\n"
            + _DYNTOM_BODY
            + _DYNTOM_ANSWER_FORMAT
        ),
        "fields": _DYNTOM_FIELDS,
        "output_format": _DYNTOM_OUTPUT,
        "notes": "Default: DynToM vanilla prompting (paper Appendix B.2, Figure 17), our wording.",
    },
    {
        "name": "dyntom-cot",
        "version": 1,
        "benchmark": "dyntom",
        "method": "cot",
        "system": "",
        "user": (
            "Read the story below and answer the questions about its characters. First think "
            "it through step by step: follow how the main character's beliefs, emotions, "
            "intentions and actions develop from scenario to scenario and weigh each option. "
            "Then give your final answers.\n\n"
            + _DYNTOM_BODY
            + _DYNTOM_ANSWER_FORMAT
            + " Put the JSON object at the very end of your reply."
        ),
        "fields": _DYNTOM_FIELDS,
        "output_format": _DYNTOM_OUTPUT + ", after the reasoning",
        "notes": "Default: DynToM zero-shot chain-of-thought (paper Appendix B.2, Figure 17).",
    },
]

# CharToM-QA's templates live with the rest of its pipeline.
from .pipelines.chartom_qa.prompts import TEMPLATES as _CHARTOM_QA_TEMPLATES  # noqa: E402

DEFAULT_TEMPLATES += _CHARTOM_QA_TEMPLATES
