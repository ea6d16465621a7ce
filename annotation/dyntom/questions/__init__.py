"""DynToM questions by deterministic code (generation step 4 of the paper, no LLM).

Given a stage's ``story.json`` content, :func:`generate_questions` returns the
content of its ``question_new.json`` in the release's format: keys
``type_d_how_K`` (Transformation-3), ``type_d_why_K`` and ``type_c_how_K``
(Transformation-2), ``type_d_whether_K`` (Transformation-1) and ``type_a_what_K``
(Understanding), in that order, each with ``question``, ``true answer`` (a letter),
``options`` (``"a. ..."``), ``question type`` (``type_a``/``type_c``/``type_d``) and
``option reasons`` (gold first, then each distractor with what it tests). A stage
of N scenarios gets 15N-4 questions: for N=5, 20 Understanding, 16 T-1, 31 T-2
(16 why + 15 how) and 4 T-3, 71 in all.

The logic follows the authors' ``synthesize_data/generate_rule_based_question.py``
and ``process_data.py`` (GAIR-NLP/DynToM), rewritten here. Questions, gold options
and most distractors are deterministic functions of the story.

What is random (one :class:`random.Random` per stage, see :func:`stage_rng`):

- the order of every question's options, hence its ``true answer`` letter
  (the authors shuffled with the unseeded global ``random``);
- all seven distractors of each ``type_d_how`` (T-3) question: the shuffled order,
  the two scenarios swapped, the reversed list (reversed after the swap, so it
  varies too), the scenario removed, and for each of the three other states the
  scenario whose text is replaced by that state's.

So against the release, keys, question texts and gold option texts match; option
order, letters and the ``type_d_how`` distractor texts differ by chance.

Quirks of the original kept on purpose, so that distractor sets match the release:
- T-1 ("whether") questions read Belief's ``Changed`` flag for all four states;
- in ``type_c_how``, the last scenario's influence is never a distractor;
- the T-3 swap works in place, so the reversed, removed and replaced distractors
  (and later states' replacements) are built from the swapped list;
- a distractor equal to the gold text is dropped with the authors' index-shifting
  pops, which can drop a neighbour instead and leave a repeat;
- each transition reason is ``Reasons.split(";")[k]`` with its first 5 characters
  (``"1->2:"``) cut off, whatever the stage wrote there;
- ``explain`` of the T-3 order distractors says "belief" for every state.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from .lettering import letter_options
from .templates import (
    Question,
    transformation_1_questions,
    transformation_2_how_questions,
    transformation_2_why_questions,
    transformation_3_questions,
    understanding_questions,
)
from .trajectory import Trajectory, read_trajectory

__all__ = ["generate_questions", "questions_from_trajectory", "read_trajectory", "stage_rng"]


def stage_rng(seed: int, stage_key: str) -> random.Random:
    """The random source of one stage: the same seed and stage always draw the same.

    Seeded from ``"<seed>:<stage_key>"`` (a string seed is hashed with SHA-512 by
    :class:`random.Random`, independent of ``PYTHONHASHSEED``), so a stage's
    questions do not depend on which other stages were generated with it.
    """
    return random.Random(f"{seed}:{stage_key}")


def questions_from_trajectory(trajectory: Trajectory, rng: random.Random) -> dict[str, Question]:
    """All questions of a stage, lettered, in the release's key order."""
    questions: dict[str, Question] = {}
    questions.update(transformation_3_questions(trajectory, rng))
    questions.update(transformation_2_why_questions(trajectory))
    questions.update(transformation_1_questions(trajectory))
    questions.update(transformation_2_how_questions(trajectory))
    questions.update(understanding_questions(trajectory))
    # Shuffled after all are built, in key order, as the authors' second pass did.
    return {key: letter_options(q, rng, key=key) for key, q in questions.items()}


def generate_questions(
    story: Any, *, rng: random.Random, path: Path | str = "story.json"
) -> dict[str, Question]:
    """The ``question_new.json`` content for a parsed ``story.json``.

    ``path`` only names the source in errors
    (:class:`benchmarks.importers.base.ImportDataError`, with record and field).
    """
    return questions_from_trajectory(read_trajectory(story, path=path), rng)
