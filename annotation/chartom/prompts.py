"""Default prompt templates of CharToM-QA construction, in our own words.

Each follows the structure and the output format of its table in the paper's
appendices: note filtering (Table 8: "Yes"/"No" on the first line, then the
dimension's description or the reason), paraphrasing (Table 9: the ToM description
only), question generation (Table 10: one question), verification without the plot
(Table 11: "Appropriate"/"Inappropriate", then a reason), bonus points (Table 12:
lines ``[Bonus Point]: "..."``) and distractors (Table 13: ``[Distraction Choice N]:``
three times). The four definitions restate Appendix B.

They are :class:`~modeling.models.PromptTemplate` records like every prompt of the
app: editing one saves a new version, and each construction field an LLM wrote
records ``name vN`` of the template used. :func:`chartom_templates_ensure_defaults`
writes the missing defaults; :func:`chartom_template` returns a step's newest active
version.
"""

from __future__ import annotations

from typing import Any

from modeling.models import PromptTemplate
from modeling.runs.prompt_templates import newest_active

BENCHMARK = "chartom-qa"
FILTER = "chartom-filter"
PARAPHRASE = "chartom-paraphrase"
QUESTION = "chartom-question"
VERIFY = "chartom-verify"
BONUS = "chartom-bonus"
DISTRACTORS = "chartom-distractors"

# Appendix B, restated: what each dimension covers, for the filter prompt.
DEFINITIONS = {
    "belief": (
        "what the character takes to be true or real: facts they know as well as their "
        "own impressions and assumptions about whether something exists or is the case, "
        "right or wrong"
    ),
    "intention": (
        "the plan behind what the character does: what they mean to do later and the "
        "purpose that drives what they are doing now"
    ),
    "emotion": (
        "a strong feeling that the character's situation, mood or relations with others "
        "give rise to, felt as more or less pleasant or unpleasant and tied to thoughts, "
        "sensations and ways of reacting"
    ),
    "desire": (
        "something the character wants, a bodily need or a longing of the mind, that "
        "pulls them towards acting; getting it feels good and being denied it feels bad"
    ),
}

_ROLE = (
    "You are an expert in psychology and in literature, used to reading characters' "
    "minds in novels (theory of mind)."
)
_NOTES_INTRO = (
    "Readers of novels on reading apps underline passages and write notes about them; "
    "some notes analyse the characters."
)

CHARTOM_TEMPLATES: list[dict[str, Any]] = [
    {
        "name": FILTER,
        "version": 1,
        "benchmark": BENCHMARK,
        "method": "construct-filter",
        "system": _ROLE,
        "user": (
            _NOTES_INTRO + " Decide, using theory of mind, whether the reader's note below "
            "states explicitly the {dimension} of the target character in the story.\n\n"
            "[What {dimension} means]: {definition}\n"
            "[Reader's Note]: {user_note}\n"
            "[Target Character]: {target_character}\n\n"
            "If it does, say what {target_character}'s {dimension} is; if it does not, say "
            "why. Keep in mind: (1) we want the {dimension} of the character in the novel as "
            "the reader describes it, not the reader's own {dimension}; (2) count only what "
            "the note says outright about the {dimension}, without guessing or reading more "
            "into it.\n\n"
            "Answer on two lines:\n"
            "Yes / No\n"
            "The {dimension} of {target_character} / Your reason"
        ),
        "fields": ["dimension", "definition", "user_note", "target_character"],
        "output_format": "first line Yes or No; then the dimension's description or the reason",
        "notes": "Default: note filtering (Appendix F, Table 8), our wording.",
    },
    {
        "name": PARAPHRASE,
        "version": 1,
        "benchmark": BENCHMARK,
        "method": "construct-paraphrase",
        "system": _ROLE,
        "user": (
            _NOTES_INTRO + " An annotator has cut out the parts of one note that show the "
            "{dimension} of the target character: the key note. Using theory of mind, turn "
            "these fragments into one complete statement of {target_character}'s "
            "{dimension}. The underlined passage and the whole note are given for "
            "reference.\n\n"
            "[Underlined Text]: {underlined_text}\n"
            "[Reader's Note]: {user_note}\n"
            "[Key Note]: {key_note}\n"
            "[Target Character]: {target_character}\n\n"
            "Keep in mind: (1) describe the {dimension} of the character in the novel, not "
            "the reader's; (2) use only what the note says outright about the {dimension}, "
            "with no guessing or prediction; (3) do not just copy the key note: polish the "
            "wording where needed but keep its meaning; (4) state the {dimension} directly, "
            "without further explanation.\n\n"
            "Write only the description of {target_character}'s {dimension}:"
        ),
        "fields": ["dimension", "underlined_text", "user_note", "key_note", "target_character"],
        "output_format": "the ToM description only, one short paragraph",
        "notes": "Default: key-note paraphrasing (Appendix G, Table 9), our wording.",
    },
    {
        "name": QUESTION,
        "version": 1,
        "benchmark": BENCHMARK,
        "method": "construct-question",
        "system": _ROLE,
        "user": (
            "From the [Story Plot] and the [Underlined Text] of {book_name}, ask a question "
            "about the {dimension} of a character.\n\n"
            "[Story Plot]: {story_plot}\n"
            "[Underlined Text]: {underlined_text}\n"
            "[Target Character]: {target_character}\n"
            "[ToM Description]: {tom_description}\n\n"
            "Requirements: (1) the [ToM Description] must be a fluent, logically sound and "
            "direct answer to your question; (2) the question must be tied closely to this "
            "part of the story; (3) it must be about what matters in the plot, not a small "
            "detail; (4) ask one question only.\n\n"
            "Write the one question that meets these requirements:"
        ),
        "fields": [
            "book_name",
            "dimension",
            "story_plot",
            "underlined_text",
            "target_character",
            "tom_description",
        ],
        "output_format": "one question, ending with a question mark",
        "notes": "Default: question generation (Appendix H, Table 10), our wording.",
    },
    {
        "name": VERIFY,
        "version": 1,
        "benchmark": BENCHMARK,
        "method": "construct-verify",
        "system": _ROLE,
        "user": (
            "You are reading {book_name}. Below are a description of the {dimension} of "
            "{target_character} and a question about the story. Judge whether the "
            "[Candidate Question] is a suitable question to which the [ToM Description] is "
            "the direct answer.\n\n"
            "[Candidate Question]: {candidate_question}\n"
            "[ToM Description]: {tom_description}\n\n"
            "A suitable question (1) is not too broad, and (2) has the [ToM Description] as "
            "a fluent, logically sound answer.\n\n"
            "Answer on two lines:\n"
            "Appropriate / Inappropriate\n"
            "Your reason"
        ),
        "fields": [
            "book_name",
            "dimension",
            "target_character",
            "candidate_question",
            "tom_description",
        ],
        "output_format": "first line Appropriate or Inappropriate; then the reason",
        "notes": "Default: question verification, without the plot (Table 11), our wording.",
    },
    {
        "name": BONUS,
        "version": 1,
        "benchmark": BENCHMARK,
        "method": "construct-bonus",
        "system": _ROLE,
        "user": (
            "Drawing on your knowledge of {book_name}, pick out the key points of the "
            "[Reference Answer] to the [Question]. These bonus points will be used to grade "
            "other people's answers fully. Here are the [Story Plot], the [Question] about "
            "{target_character} and the [Reference Answer].\n\n"
            "[Story Plot]: {story_plot}\n\n"
            "[Question]: {question}\n\n"
            "[Reference Answer]: {reference_answer}\n\n"
            "Keep in mind: (1) every bonus point must come from the reference answer, with "
            "nothing invented; keep the points an answer cannot do without and leave out "
            "explanations; (2) each point covers a different aspect of the reference answer; "
            "(3) do not cut too fine: each point is one sentence that makes a complete unit "
            "of meaning, and content that belongs together stays in one point.\n\n"
            "Put each bonus point on its own line, in exactly this form:\n"
            '[Bonus Point]: "the bonus point"'
        ),
        "fields": ["book_name", "target_character", "story_plot", "question", "reference_answer"],
        "output_format": 'one line per point: [Bonus Point]: "..."',
        "notes": "Default: bonus point extraction (Appendix I, Table 12), our wording.",
    },
    {
        "name": DISTRACTORS,
        "version": 1,
        "benchmark": BENCHMARK,
        "method": "construct-distractors",
        "system": _ROLE,
        "user": (
            "Turn the question below, about the [Story Plot] from {book_name}, into a "
            "multiple-choice question by writing wrong choices for it.\n\n"
            "[Story Plot]: {story_plot}\n\n"
            "[Question]: {question}\n\n"
            "[Reference Answer]: {reference_answer}\n\n"
            "[Misleadings]: {misleadings}\n\n"
            "Keep in mind: (1) the reference answer must stay the only correct answer; "
            "(2) each of the three wrong choices should sound plausible but be unreasonable "
            "on reflection; (3) you may draw on the reference answer and on the misleadings "
            "(mistakes others made when answering) to build them; (4) the three choices must "
            "not repeat one another.\n\n"
            "Write the three wrong choices in exactly this form:\n"
            "[Distraction Choice 1]: (the choice)\n"
            "[Distraction Choice 2]: (the choice)\n"
            "[Distraction Choice 3]: (the choice)"
        ),
        "fields": ["book_name", "story_plot", "question", "reference_answer", "misleadings"],
        "output_format": "three lines [Distraction Choice N]: ...",
        "notes": "Default: distraction choices (Appendix J, Table 13), our wording.",
    },
]
STEP_TEMPLATES = {
    spec["method"].removeprefix("construct-"): spec["name"] for spec in CHARTOM_TEMPLATES
}


def chartom_templates_ensure_defaults() -> int:
    """Create the missing default templates (idempotent); returns how many were created."""
    from modeling.runs.prompt_templates import prompt_templates_ensure_defaults

    wanted = {(spec["name"], spec["version"]) for spec in CHARTOM_TEMPLATES}
    have = set(
        PromptTemplate.objects.filter(name__in=[name for name, _ in wanted]).values_list(
            "name", "version"
        )
    )
    if wanted <= have:
        return 0
    return prompt_templates_ensure_defaults(specs=CHARTOM_TEMPLATES)


def chartom_template(name: str) -> PromptTemplate:
    """The newest active version of one of our templates (defaults made if missing)."""
    chartom_templates_ensure_defaults()
    template = newest_active(name)
    if template is None:
        raise ValueError(f"no active prompt template named {name!r}; activate one of its versions")
    return template


def template_label(template: PromptTemplate) -> str:
    """How provenance names a template version: ``name vN``."""
    return f"{template.name} v{template.version}"


def template_render(template: PromptTemplate, fields: dict[str, Any]) -> list[dict[str, str]]:
    """Chat messages from a template; an edited template naming an unknown field fails here.

    Raises ``ValueError`` naming the template version and the fields available.
    """
    try:
        messages = []
        if template.system:
            messages.append({"role": "system", "content": template.system.format(**fields)})
        messages.append({"role": "user", "content": template.user.format(**fields)})
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"prompt template {template_label(template)} cannot be filled: "
            f"{type(exc).__name__}: {exc} (fields available: {', '.join(sorted(fields))})"
        ) from None
    return messages
