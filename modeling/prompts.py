"""Default prompt templates, written in our own words.

Each follows the structure and output format of its paper's appendix; researchers
edit them as new versions in the UI, or load other wordings (e.g. a paper's exact
text) as template records. ``prompt_templates_ensure_defaults`` writes them.

DynToM (paper Appendix B.2, Figure 17): one prompt per social stage — an instruction,
the characters' profiles, the story (every scenario's background and dialogue) and
all of the stage's questions with lettered options — asking for a JSON object that
maps each question key to one option letter. The chain-of-thought variant asks the
model to reason step by step first and to end with the same JSON object.

Speaker guessing (ToM-in-AMC Appendix C, D and H; TVShowGuess gets the same texts
under its own names): a scene with its main characters masked as P0, P1, …, the
candidates as lettered options, and one ``P0: NAME`` line per masked character as the
answer. In-context learning puts k solved history scenes first (Figure 7); ToMPro's
guessing prompt attaches each candidate's description from stage 1 (Figure 3b), whose
prompts update personalities (Figure 9), read the four instant dimensions from one
scene (Figure 8) or, in the long-context ablation, describe everyone from all history
scenes at once; the character-memory probe asks for a persona from memory (Figure 19).
The texts avoid words that are main characters' names in our test works ("will"): a
perturbed run's prompts are checked for leaked names.
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
# --- speaker guessing (ToM-in-AMC, TVShowGuess) ----------------------------------------

_GUESS_SYSTEM = (
    "You are playing a game: identify the anonymised characters of a scene from a "
    "{work_kind}. Each masked character is shown as P0, P1 and so on."
)
_GUESS_ANSWER = (
    "Who are the masked characters ({codes})? Choose from:\n{candidates}\n\n"
    "Answer with one line per masked character, written as CODE: NAME with a name from "
    "the list, for example:\nP0: NAME\nDo not add anything else."
)
_GUESS_OUTPUT = "One line per masked character, e.g. 'P0: NAME' (the paper's 'P0-NAME' also parses)"

_SPEAKER_TEMPLATES: dict[str, dict[str, Any]] = {
    "zero-shot": {
        "system": _GUESS_SYSTEM,
        "user": "Read this scene from a {work_kind}:\n\n{scene}\n\n" + _GUESS_ANSWER,
        "fields": ["work_kind", "scene", "codes", "candidates"],
        "notes": "Default: zero-shot guessing (paper Appendix C with no examples), title withheld.",
    },
    "icl": {
        "system": _GUESS_SYSTEM
        + " Solved scenes from earlier in the same {work_kind} come first, as examples "
        "and background.",
        "user": "{demonstrations}\n\nTest case. Read this scene from the same {work_kind}:\n\n"
        "{scene}\n\n" + _GUESS_ANSWER,
        "fields": ["work_kind", "demonstrations", "scene", "codes", "candidates"],
        "notes": "Default: k-shot in-context learning (paper Appendix C, Figure 7), our wording; "
        "the title is withheld in the examples and the test case.",
    },
    "names-only": {
        "system": _GUESS_SYSTEM,
        "user": 'Read this scene from the {work_kind} "{work_title}":\n\n{scene}\n\n'
        + _GUESS_ANSWER,
        "fields": ["work_kind", "work_title", "scene", "codes", "candidates"],
        "notes": "Default: the memorisation probe (paper section 7.4): real names and the "
        "title, no history and no descriptions.",
    },
    "tompro": {
        "system": _GUESS_SYSTEM
        + " Each candidate comes with a description of their personality and recent "
        "mental states, written from earlier scenes.",
        "user": "Read this scene from a {work_kind}:\n\n{scene}\n\n"
        + _GUESS_ANSWER.replace(
            "{candidates}",
            "{candidates}\n\nUse the descriptions: "
            "match what each masked character says and does to a candidate's personality, "
            "emotions, beliefs, desires and intentions.",
        ),
        "fields": ["work_kind", "scene", "codes", "candidates"],
        "notes": "Default: ToMPro stage 2 (paper section 6, Figure 3b), our wording.",
    },
    "character-memory": {
        "system": _GUESS_SYSTEM
        + " Each candidate comes with a description of their personality and traits.",
        "user": "Read this scene from a {work_kind}:\n\n{scene}\n\n" + _GUESS_ANSWER,
        "fields": ["work_kind", "scene", "codes", "candidates"],
        "notes": "Default: the character-memory baseline's guessing prompt (Appendix H), "
        "as ToMPro's stage 2.",
    },
    "tompro-personality": {
        "system": "We are updating descriptions of characters from a {work_kind}, one new "
        "scene at a time.",
        "user": "Here are the current descriptions of the characters:\n\n{descriptions}\n\n"
        "Now read a new scene from the {work_kind}, in which {characters} appear:\n\n"
        "{scene}\n\n"
        "Update the description of each of {characters} with the distinctive traits this "
        "scene shows. Keep what the earlier description says unless the scene clearly "
        "contradicts it: one scene should change a description only a little. Bring out "
        "each character's own personality, interests, background and weaknesses (name "
        "the weaknesses plainly, without advice), and keep the characters distinct from "
        "one another. Describe the person, not the events of the scene. Keep each "
        "description short; when it grows long, drop traits the characters share and "
        "keep the unique ones. If a description needs no change, repeat it.\n\n"
        "Answer with one line per character and nothing else, as:\nNAME: description",
        "fields": ["work_kind", "descriptions", "characters", "scene"],
        "notes": "Default: ToMPro stage 1, the recurrent personality update (Appendix D, "
        "Figure 9), our wording. Sampled at the stage-1 temperature.",
    },
    "tompro-instant": {
        "system": "You use theory of mind to explain what a character of a {work_kind} "
        "feels, believes, wants and intends, from one scene.",
        "user": "Definitions:\n{definitions}\n\nRead this scene from a {work_kind}:\n\n"
        "{scene}\n\nUsing theory of mind, describe the {dimensions} of {character} in "
        "this scene. Answer in exactly this form, one line each:\n{answer_format}",
        "fields": ["work_kind", "definitions", "scene", "dimensions", "character", "answer_format"],
        "notes": "Default: ToMPro stage 1, the instant dimensions of one character in one "
        "scene (Appendix D, Figure 8), our wording.",
    },
    "tompro-long-context": {
        "system": "You use theory of mind to describe the characters of a {work_kind}.",
        "user": "Read these scenes from a {work_kind}, in order:\n\n{scenes}\n\n"
        "For each of {characters}, describe their {dimensions} as they stand at the end "
        "of these scenes. Answer with one block per character, exactly as:\n"
        "{answer_format}",
        "fields": ["work_kind", "scenes", "characters", "dimensions", "answer_format"],
        "notes": "Default: the non-iterative ablation of ToMPro stage 1 (section 7.4): every "
        "history scene in one long prompt.",
    },
    "character-memory-recall": {
        "system": "",
        "user": "In a single paragraph, summarise the personality and traits of the "
        'character {character} in the {work_kind} "{work_title}".',
        "fields": ["character", "work_kind", "work_title"],
        "notes": "Default: the character-memory baseline's recall prompt (Appendix H, "
        "Figure 19), our wording. It names the character and the title by design.",
    },
}

for _benchmark in ("tom-in-amc", "tvshowguess"):
    for _method, _spec in _SPEAKER_TEMPLATES.items():
        DEFAULT_TEMPLATES.append(
            {
                "name": f"{_benchmark}-{_method}",
                "version": 1,
                "benchmark": _benchmark,
                "method": _method,
                "output_format": _GUESS_OUTPUT
                if _method in ("zero-shot", "icl", "names-only", "tompro", "character-memory")
                else "",
                **_spec,
            }
        )

# Generic multiple choice (mapped benchmarks): its templates live with its pipeline,
# as they hold Chinese text.
from .pipelines.generic.prompts import TEMPLATES as _GENERIC_TEMPLATES  # noqa: E402

DEFAULT_TEMPLATES += _GENERIC_TEMPLATES
