"""CharToM-QA's one place: prompts, reading replies and scoring them against gold.

``pipeline`` runs it on the engine, ``reading`` reads answers and judge replies (pure
functions, both scoring modes), ``imported`` scores predictions made elsewhere and
``prompts`` holds the default templates. Other modules use the names below.
"""

from .imported import ItemIndex, generative_details, multichoice_score
from .pipeline import JUDGE_METHODS, CharToMQAPipeline, judgements_apply
from .predictions import generative_predictions, prediction_details_merge
from .prompts import TEMPLATES
from .reading import (
    CONTEXT_LABELS,
    CONTEXTS,
    GENERATIVE,
    JUDGE_BONUS,
    JUDGE_DEFECTS,
    MULTICHOICE,
    MULTICHOICE_OPTIONS,
    REFERENCE,
    SCORING_MODES,
    STRICT,
    UNJUDGED,
    UNPARSEABLE,
    AnswerError,
    ResponseScore,
    bonus_judgement,
    defects_judgement,
    option_letter,
    published_defects,
    read_bonus_reference,
    read_bonus_strict,
    read_context,
    read_defects_reference,
    read_defects_strict,
    read_pick,
    read_response,
    response_score,
    score_pick,
    truncate_response,
    truncation_limit,
)

__all__ = [
    "CONTEXTS",
    "CONTEXT_LABELS",
    "GENERATIVE",
    "JUDGE_BONUS",
    "JUDGE_DEFECTS",
    "JUDGE_METHODS",
    "MULTICHOICE",
    "MULTICHOICE_OPTIONS",
    "REFERENCE",
    "SCORING_MODES",
    "STRICT",
    "TEMPLATES",
    "UNJUDGED",
    "UNPARSEABLE",
    "AnswerError",
    "CharToMQAPipeline",
    "ItemIndex",
    "ResponseScore",
    "bonus_judgement",
    "defects_judgement",
    "generative_details",
    "generative_predictions",
    "judgements_apply",
    "multichoice_score",
    "option_letter",
    "prediction_details_merge",
    "published_defects",
    "read_bonus_reference",
    "read_bonus_strict",
    "read_context",
    "read_defects_reference",
    "read_defects_strict",
    "read_pick",
    "read_response",
    "response_score",
    "score_pick",
    "truncate_response",
    "truncation_limit",
]
