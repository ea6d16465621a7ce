"""Any benchmark imported through a field mapping (``benchmarks.MCItem``), on the run
engine: ``pipeline`` builds one prompt per item and scores the replies, ``answers``
reads a reply's choice (a pure function, tested over many reply shapes)."""

from .answers import ChoiceReading, option_letter, read_choice
from .pipeline import GenericPipeline, option_order, parse_categories, score_reply

__all__ = [
    "ChoiceReading",
    "GenericPipeline",
    "option_letter",
    "option_order",
    "parse_categories",
    "read_choice",
    "score_reply",
]
