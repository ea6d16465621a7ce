"""How much of a release's ``question_new.json`` the generator reproduces.

A question counts as reproduced when the generated file has its key, the same
question text and the same gold option text (letters and option order are random,
so they are not compared). Shares are reported per scenario count and overall.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .lettering import LETTERS, gold_text


@dataclass(frozen=True)
class StageReproduction:
    """One stage's comparison: original questions, how many reproduced, which not."""

    stage: str
    scenario_count: int
    original: int
    reproduced: int
    missed: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        return self.reproduced / self.original if self.original else 1.0


@dataclass
class ReproductionSummary:
    """Stages, questions and reproduced questions per scenario count."""

    stages: dict[int, int] = field(default_factory=dict)
    original: dict[int, int] = field(default_factory=dict)
    reproduced: dict[int, int] = field(default_factory=dict)

    def add(self, stage: StageReproduction) -> None:
        n = stage.scenario_count
        self.stages[n] = self.stages.get(n, 0) + 1
        self.original[n] = self.original.get(n, 0) + stage.original
        self.reproduced[n] = self.reproduced.get(n, 0) + stage.reproduced

    def share(self, scenario_count: int | None = None) -> float:
        """Reproduced / original for one scenario count, or overall when None."""
        counts = [scenario_count] if scenario_count is not None else list(self.original)
        original = sum(self.original.get(n, 0) for n in counts)
        reproduced = sum(self.reproduced.get(n, 0) for n in counts)
        return reproduced / original if original else 1.0

    def lines(self) -> list[str]:
        """Human-readable lines: one per scenario count, then the overall share."""
        out = []
        for n in sorted(self.original):
            out.append(
                f"{n} scenarios: {self.stages[n]} stage(s), {self.reproduced[n]}/"
                f"{self.original[n]} questions reproduced ({self.share(n):.2%})"
            )
        total, done = sum(self.original.values()), sum(self.reproduced.values())
        out.append(
            f"overall: {sum(self.stages.values())} stage(s), {done}/{total} questions "
            f"reproduced ({self.share():.2%}) [key, question text and gold option text]"
        )
        return out


def compare_questions(
    stage: str, scenario_count: int, generated: dict[str, Any], original: Any
) -> StageReproduction:
    """Compare generated questions with a release file's parsed content."""
    if not isinstance(original, dict):
        raise ValueError(f"{stage}: question_new.json is not a JSON object of questions by key")
    missed = []
    for key, question in original.items():
        ours = generated.get(key)
        if ours is None or not _same(ours, question):
            missed.append(key)
    return StageReproduction(
        stage=stage,
        scenario_count=scenario_count,
        original=len(original),
        reproduced=len(original) - len(missed),
        missed=tuple(missed),
        extra=tuple(key for key in generated if key not in original),
    )


def summarise(stages: Iterable[StageReproduction]) -> ReproductionSummary:
    """Add up stage comparisons per scenario count."""
    summary = ReproductionSummary()
    for stage in stages:
        summary.add(stage)
    return summary


def _same(ours: dict[str, Any], theirs: Any) -> bool:
    if not isinstance(theirs, dict) or ours["question"] != theirs.get("question"):
        return False
    letter, options = theirs.get("true answer"), theirs.get("options")
    # A malformed original question (no usable letter) simply does not match.
    if not isinstance(letter, str) or letter not in LETTERS or not isinstance(options, list):
        return False
    if LETTERS.index(letter) >= len(options) or not isinstance(options[LETTERS.index(letter)], str):
        return False
    return gold_text(ours) == gold_text(theirs)
