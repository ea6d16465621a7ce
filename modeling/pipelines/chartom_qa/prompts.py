"""Default CharToM-QA answering and judging templates, in our own words.

Each follows the structure and output format of its table in the paper's appendices:
generative QA (Table 14: book, plot, question, one concise sentence of about the
reference answer's length), multiple choice (Table 15: four numbered candidates,
reply with the index only), and the judge's two prompts (Table 16: which bonus
points the response includes, ``[Included Bonus Points]: "1,2"`` or ``None``;
Table 17: the response's defects given the plot, ``[Defects]: ...`` or ``None``).
They are written to :class:`~modeling.models.PromptTemplate` like every default
template (``modeling.prompts.DEFAULT_TEMPLATES`` includes them); researchers edit
them as new versions.
"""

from __future__ import annotations

from typing import Any

from .reading import (
    BONUS_PREFIX,
    DEFECTS_PREFIX,
    GENERATIVE,
    JUDGE_BONUS,
    JUDGE_DEFECTS,
    MULTICHOICE,
)

BENCHMARK = "chartom-qa"

_ROLE = "You are an expert in psychology and in literature, and you know the book {book_name} well."


def template_name(method: str) -> str:
    return f"{BENCHMARK}-{method}"


TEMPLATES: list[dict[str, Any]] = [
    {
        "name": template_name(GENERATIVE),
        "version": 1,
        "benchmark": BENCHMARK,
        "method": GENERATIVE,
        "system": "",
        "user": (
            _ROLE + " Answer the [Question] about a character of the book. The [Story Plot] "
            "is the passage that leads up to the moment the question is about.\n\n"
            "[Story Plot]: {story_plot}\n\n"
            "[Question]: {question}\n\n"
            "Answer in a single concise sentence of about {length_of_answer} words.\n\n"
            "Your answer:"
        ),
        "fields": ["book_name", "story_plot", "question", "length_of_answer"],
        "output_format": "one sentence; cut to max(n + 5, 1.5 n) words of the reference answer",
        "notes": "Default: CharToM-QA generative QA (paper Table 14), our wording.",
    },
    {
        "name": template_name(MULTICHOICE),
        "version": 1,
        "benchmark": BENCHMARK,
        "method": MULTICHOICE,
        "system": "",
        "user": (
            _ROLE + " Answer the [Question] about a character of the book by choosing one of "
            "the [Candidate Choices]. The [Story Plot] is the passage that leads up to the "
            "moment the question is about.\n\n"
            "[Story Plot]: {story_plot}\n\n"
            "[Question]: {question}\n\n"
            "[Candidate Choices]:\n{choices}\n\n"
            "Rules:\n"
            "1. Choose exactly one candidate: {indices}.\n"
            "2. Reply with the number of the candidate you choose and nothing else.\n"
            "3. Add no explanation, text or symbol.\n\n"
            "Your choice:"
        ),
        "fields": ["book_name", "story_plot", "question", "choices", "indices"],
        "output_format": "the index of one candidate, e.g. 3",
        "notes": "Default: CharToM-QA multiple choice (paper Table 15), our wording.",
    },
    {
        "name": template_name(JUDGE_BONUS),
        "version": 1,
        "benchmark": BENCHMARK,
        "method": JUDGE_BONUS,
        "system": _ROLE,
        "user": (
            "Grade the [Response] to the [Question] against the [Reference Answer] and its "
            "[Bonus Points]: tell which bonus points the response includes, explicitly or "
            "implicitly.\n\n"
            "[Question]: {question}\n\n"
            "[Reference Answer]: {reference_answer}\n\n"
            "[Bonus Points]:\n{bonus_points}\n\n"
            "[Response]: {response}\n\n"
            "Keep in mind: (1) the reference answer and the bonus points are what you grade "
            "against; (2) a response may word a bonus point differently: when it means the "
            "same thing without error, the point is included; (3) when the response includes "
            f"no bonus point, reply '{BONUS_PREFIX} None'.\n\n"
            "Reply with one line in exactly this format:\n"
            f'{BONUS_PREFIX} "<numbers of the included bonus points, separated by commas, '
            'such as 1,2>"'
        ),
        "fields": ["book_name", "question", "reference_answer", "bonus_points", "response"],
        "output_format": f'one line: {BONUS_PREFIX} "1,2" (or None)',
        "notes": "Default: CharToM-QA judge, bonus points (paper Table 16), our wording.",
    },
    {
        "name": template_name(JUDGE_DEFECTS),
        "version": 1,
        "benchmark": BENCHMARK,
        "method": JUDGE_DEFECTS,
        "system": _ROLE,
        "user": (
            "Using the [Story Plot] and the [Reference Answer], find out whether the "
            "[Response] to the [Question] has any defect.\n\n"
            "[Story Plot]: {story_plot}\n\n"
            "[Question]: {question}\n\n"
            "[Reference Answer]: {reference_answer}\n\n"
            "[Response]: {response}\n\n"
            "Keep in mind: (1) the reference answer and the story plot are what you judge "
            "by; (2) a defect is a factual or a logical error in the response; (3) do not "
            "force yourself to find defects in a response that is entirely reasonable: when "
            f"there is none, reply '{DEFECTS_PREFIX} None'.\n\n"
            "Reply in exactly this format:\n"
            f"{DEFECTS_PREFIX} <the defects of the response>"
        ),
        "fields": ["book_name", "story_plot", "question", "reference_answer", "response"],
        "output_format": f"{DEFECTS_PREFIX} <defects> (or None)",
        "notes": "Default: CharToM-QA judge, defects (paper Table 17), our wording.",
    },
]
