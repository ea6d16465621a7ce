"""Question choice (paper section 4.2, Figure 4): the annotator picks the best candidate.

The LLM proposed candidate questions and a plot-free second call verified them; at
most four were kept. The annotator picks one and may edit it. One
:class:`QuestionChoice` links the pick, the candidates passed over, the final text,
its diff and edit distance from the pick, the seconds taken (server clock, from
taking the task) and the model and template versions that produced the candidates.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from .models import (
    Construction,
    FieldChange,
    QuestionCandidate,
    QuestionChoice,
    Stage,
    TaskAssignment,
    TaskKind,
)
from .review_slot import review_slot_lock, review_take
from .text_edits import edit_distance, unified_diff
from .workflow import WorkflowError, assignment_submit, construction_advance, field_set

MAX_QUESTION = 1000


def question_choice_take(*, annotator: AbstractBaseUser) -> TaskAssignment | None:
    return review_take(kind=TaskKind.QUESTION_CHOICE, annotator=annotator)


def question_clean(text: str) -> str:
    """One line, spaces collapsed; empty or too long is refused by name."""
    text = " ".join(text.split())
    if not text:
        raise WorkflowError("text: the question cannot be empty")
    if len(text) > MAX_QUESTION:
        raise WorkflowError(f"text: the question is over {MAX_QUESTION} characters")
    return text


def candidates_change(construction: Construction) -> FieldChange | None:
    """The history entry the question step wrote with its candidates (latest round)."""
    return (
        FieldChange.objects.filter(construction=construction, field="candidates")
        .order_by("-changed_at", "-pk")
        .first()
    )


def template_versions(
    change: FieldChange | None, candidates: list[QuestionCandidate]
) -> dict[str, Any]:
    """Which template versions generated and verified the candidates, and by which calls.

    The question step records both templates on its ``candidates`` history entry as
    "generate vN, verify vM" (see ``llm_steps``); the candidates point at their calls.
    """
    generation, _, verification = (change.template if change else "").partition(", ")
    return {
        "generation": generation,
        "verification": verification,
        "generation_calls": sorted(
            {c.generation_call_id for c in candidates if c.generation_call_id}
        ),
        "verification_calls": sorted(
            {c.verification_call_id for c in candidates if c.verification_call_id}
        ),
    }


def candidates_for(construction: Construction) -> list[QuestionCandidate]:
    return list(QuestionCandidate.objects.filter(construction=construction).order_by("position"))


@transaction.atomic
def question_choose(
    *,
    assignment_id: int,
    annotator: AbstractBaseUser,
    candidate_id: int,
    text: str | None = None,
) -> QuestionChoice:
    """Record the pick (and its edit) and queue the bonus points.

    ``candidate_id`` must be a kept candidate of this task's construction; ``text`` is
    the final question (None: the candidate as it is).
    """
    assignment, construction = review_slot_lock(
        assignment_id=assignment_id, annotator=annotator, kind=TaskKind.QUESTION_CHOICE
    )
    candidates = candidates_for(construction)
    chosen = next((c for c in candidates if c.pk == candidate_id), None)
    if chosen is None or not chosen.kept:
        raise WorkflowError("candidate: pick one of the questions shown for this task")
    final = question_clean(chosen.text if text is None else text)
    seconds = (timezone.now() - assignment.taken_at).total_seconds()
    batch = construction.note.batch
    change = candidates_change(construction)
    choice = QuestionChoice.objects.create(
        construction=construction,
        chosen=chosen,
        final_text=final,
        diff=unified_diff(chosen.text, final),
        edit_distance=edit_distance(chosen.text, final),
        seconds=seconds,
        annotator=annotator,
        model=(change.model if change and change.model else batch.model),
        template_versions=template_versions(change, candidates),
    )
    choice.rejected.set([c for c in candidates if c.pk != chosen.pk])
    action = "chosen" if final == chosen.text else "edited"
    field_set(construction, "question", final, user=annotator, action=action)
    assignment_submit(
        assignment,
        {
            "candidate": chosen.pk,
            "action": action,
            "text": final,
            "diff": choice.diff,
            "edit_distance": choice.edit_distance,
            "choice": choice.pk,
        },
    )
    construction_advance(construction, Stage.BONUS, user=annotator)
    return choice
