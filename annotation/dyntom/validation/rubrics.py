"""Default DynToM validation rubrics and decision rules, in our own words.

They follow the paper's human validation (section 3.1, Appendix A): profiles and the
relationship are judged realistic or not, and any "no" discards; the trajectory is
scored for coherence, rationality and authenticity on 1-5; each scenario for its
consistency with the trajectory, the coherence of its storyline and its authenticity;
each question for clarity and answerability. An object whose mean on any criterion is
below 4.0 is discarded, except questions, which are regenerated.

Like the prompt templates (``annotation.dyntom.generation.prompts``), rubrics and rules are
records: editing one saves a new version
(:func:`annotation.dyntom.validation.services.rubric_revise`,
:func:`annotation.dyntom.validation.services.decision_rule_revise`), and
:func:`validation_defaults_ensure` writes the version-1 defaults that are missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction

YES_NO, LIKERT = "yes_no", "likert5"
SCALES = (YES_NO, LIKERT)
SCALE_VALUES = {YES_NO: (1, 0), LIKERT: (1, 2, 3, 4, 5)}
YES_NO_LABELS = {"1": "yes", "0": "no"}
LIKERT_LABELS = {
    "1": "very poor",
    "2": "poor",
    "3": "acceptable",
    "4": "good",
    "5": "excellent",
}

# The four objects of a stage, in the order the scoring screen walks them.
CONTEXT, TRAJECTORY, SCENARIO, QUESTION = "context", "trajectory", "scenario", "question"
KINDS = (CONTEXT, TRAJECTORY, SCENARIO, QUESTION)
KIND_LABELS = {
    CONTEXT: "profiles and relationship",
    TRAJECTORY: "mental-state trajectory",
    SCENARIO: "scenario",
    QUESTION: "question",
}
# Paper's threshold (Appendix A).
THRESHOLD = 4.0


def _likert(key: str, label: str, help_text: str) -> dict[str, Any]:
    return {"key": key, "label": label, "help": help_text, "scale": LIKERT, "labels": LIKERT_LABELS}


def _yes_no(key: str, label: str, help_text: str) -> dict[str, Any]:
    return {"key": key, "label": label, "help": help_text, "scale": YES_NO, "labels": YES_NO_LABELS}


DEFAULT_RUBRICS: dict[str, list[dict[str, Any]]] = {
    CONTEXT: [
        _yes_no(
            "profiles_realistic",
            "Profiles realistic",
            "Could both people exist as described: name, age, job, education, personality?",
        ),
        _yes_no(
            "relationship_realistic",
            "Relationship realistic",
            "Is the relationship plausible for these two people in this setting?",
        ),
    ],
    TRAJECTORY: [
        _likert(
            "coherence",
            "Coherence",
            "Do belief, emotion, intention and action fit together in each scenario and "
            "follow on from one scenario to the next?",
        ),
        _likert(
            "rationality",
            "Rationality",
            "Is every change of mental state explained by what happened, as a person would reason?",
        ),
        _likert(
            "authenticity",
            "Authenticity",
            "Would a real person in this situation think and feel like this?",
        ),
    ],
    SCENARIO: [
        _likert(
            "consistency",
            "Consistent with the trajectory",
            "Does the background and dialogue show the planned belief, emotion, intention "
            "and action of this scenario?",
        ),
        _likert(
            "storyline",
            "Coherent storyline",
            "Does the scenario follow from the earlier ones and hang together on its own?",
        ),
        _likert(
            "authenticity",
            "Authenticity",
            "Does the dialogue sound like these two people talking?",
        ),
    ],
    QUESTION: [
        _likert("clarity", "Clarity", "Is the question and every option clear and unambiguous?"),
        _likert(
            "answerability",
            "Answerability",
            "Can a careful reader of the stage pick the correct option, and only that one?",
        ),
    ],
}


def paper_rule(kind: str) -> dict[str, Any]:
    """The paper's default rule set for a rubric kind."""
    if kind == CONTEXT:
        return {
            "rules": [
                {
                    "when": {
                        "stat": "count",
                        "criterion": "*",
                        "score_op": "<=",
                        "score": 0,
                        "op": ">=",
                        "value": 1,
                    },
                    "then": "discard",
                }
            ],
            "otherwise": "keep",
        }
    return {
        "rules": [
            {
                "when": {"stat": "mean", "criterion": "*", "op": "<", "value": THRESHOLD},
                "then": "regenerate" if kind == QUESTION else "discard",
            }
        ],
        "otherwise": "keep",
    }


class RubricError(ValueError):
    """Criteria that a rubric cannot hold; the message names the criterion."""


def criteria_validate(criteria: Any) -> None:
    """Raise :class:`RubricError` unless ``criteria`` is a non-empty list of sound criteria."""
    if not isinstance(criteria, list) or not criteria:
        raise RubricError("criteria: a non-empty list")
    seen: set[str] = set()
    for i, criterion in enumerate(criteria):
        where = f"criteria[{i}]"
        if not isinstance(criterion, Mapping):
            raise RubricError(f"{where}: an object with key, label, scale and labels")
        key = criterion.get("key")
        if not isinstance(key, str) or not key.isidentifier():
            raise RubricError(f"{where}.key: letters, digits and _ only, got {key!r}")
        if key in seen:
            raise RubricError(f"{where}.key: {key!r} appears twice")
        seen.add(key)
        if not isinstance(criterion.get("label"), str) or not criterion["label"].strip():
            raise RubricError(f"{where}.label: a non-empty text")
        scale = criterion.get("scale")
        if scale not in SCALES:
            raise RubricError(f"{where}.scale: one of {', '.join(SCALES)}, got {scale!r}")
        labels = criterion.get("labels", {})
        expected = {str(v) for v in SCALE_VALUES[scale]}
        if not isinstance(labels, Mapping) or set(labels) != expected:
            raise RubricError(
                f"{where}.labels: one label for each of {', '.join(sorted(expected))}"
            )


def scale_choices(criterion: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(value, label) in the order the screen shows them: yes before no, 1 to 5."""
    return [(v, criterion["labels"][str(v)]) for v in SCALE_VALUES[criterion["scale"]]]


def criterion_keys(criteria: Sequence[Mapping[str, Any]]) -> list[str]:
    return [c["key"] for c in criteria]


@transaction.atomic
def validation_defaults_ensure() -> int:
    """Create the missing version-1 default rubrics and rules; returns how many were made.

    Idempotent: a kind that already has any version is left alone, so an edited rubric
    is never overwritten by the defaults.
    """
    from ...models import DecisionRule, Rubric

    made = 0
    have_rubric = set(Rubric.objects.values_list("kind", flat=True))
    have_rule = set(DecisionRule.objects.values_list("kind", flat=True))
    for kind in KINDS:
        if kind not in have_rubric:
            Rubric.objects.get_or_create(
                kind=kind,
                version=1,
                defaults={
                    "criteria": DEFAULT_RUBRICS[kind],
                    "notes": "Default (DynToM Appendix A), our wording.",
                },
            )
            made += 1
        if kind not in have_rule:
            DecisionRule.objects.get_or_create(
                kind=kind,
                version=1,
                defaults={
                    "spec": paper_rule(kind),
                    "notes": "Paper default: discard under mean 4.0 (yes/no: any no)"
                    + ("; questions are regenerated." if kind == QUESTION else "."),
                },
            )
            made += 1
    return made
