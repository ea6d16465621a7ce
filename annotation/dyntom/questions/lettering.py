"""Shuffle a question's options and letter them, as the release's ``question_new.json`` has them."""

from __future__ import annotations

import random
import re
import string

from .templates import Question

LETTERS = string.ascii_lowercase
# "a. ", "b. " ... as the release prefixes options.
LETTER_PREFIX_RE = re.compile(r"^[a-z]\. ")


def letter_options(question: Question, rng: random.Random, *, key: str) -> Question:
    """Return ``question`` with its options shuffled and prefixed ``a. ``, ``b. `` ...

    ``true answer`` becomes the letter of the first option equal to the gold text
    (options[0] before shuffling), as the authors' ``process_data.py`` finds it.
    ``option reasons`` keep their generation order (gold first), as in the release.
    """
    options = list(question["options"])
    if len(options) > len(LETTERS):
        raise ValueError(f"question {key}: {len(options)} options, more than letters a-z")
    gold = options[0]
    rng.shuffle(options)
    gold_index = options.index(gold)
    return {
        **question,
        "true answer": LETTERS[gold_index],
        "options": [f"{LETTERS[i]}. {text}" for i, text in enumerate(options)],
    }


def letter_index(letter: str, n_options: int) -> int | None:
    """The index of the option a ``true answer`` letter keys (``"b"`` -> 1), or None when
    the letter keys none of the ``n_options`` options."""
    index = LETTERS.find((letter or "").strip().lower()[:1] or "?")
    return index if 0 <= index < n_options else None


def gold_text(question: Question) -> str:
    """The text of a lettered question's gold option, without its ``a. `` prefix."""
    index = LETTERS.index(question["true answer"])
    return LETTER_PREFIX_RE.sub("", question["options"][index], count=1)
