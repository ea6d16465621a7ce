"""Appendix J: the judge's complaints about model answers as "misleading directions".

The paper made its distractors harder by giving the distractor writer the defects
that the generative-QA judge found in model answers to the same question. Those
answers exist only once a question is in the item bank, so the order here is: publish,
run generative QA with the judge (imported or our own runs), then send the published
construction back to the distractor step with :func:`construction_distractors_redo`.
The new distractors are reviewed as before, and publishing again revises the same
item (its id, and the predictions on it, stay).
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from modeling.models import Prediction

from .models import Construction, Stage
from .workflow import WorkflowError, construction_advance, construction_lock, field_set

# Past this, the prompt grows for little gain: the paper's judge lists a defect or two.
MAX_MISLEADINGS = 10


def judge_defects(construction: Construction) -> tuple[list[str], list[str]]:
    """Distinct defects the judge found in answers to the construction's published item.

    Returns ``(defects, run names)``; a blank defect or the judge's literal "None" is
    not a defect (as in :func:`modeling.pipelines.chartom_qa.published_defects`).
    """
    if construction.qa_item_id is None:
        return [], []
    defects: list[str] = []
    runs: list[str] = []
    predictions = (
        Prediction.objects.filter(qa_item_id=construction.qa_item_id)
        .select_related("run")
        .order_by("run_id", "sample_index", "pk")
    )
    for prediction in predictions:
        found = prediction.details.get("defects") or []
        if isinstance(found, str):
            found = [found]
        for defect in found:
            text = defect.strip() if isinstance(defect, str) else ""
            if text and text.lower() != "none" and text not in defects:
                defects.append(text)
                if prediction.run.name not in runs:
                    runs.append(prediction.run.name)
    return defects[:MAX_MISLEADINGS], runs


def construction_distractors_redo(
    *, construction_id: int, user: AbstractBaseUser | None
) -> list[str]:
    """Send a published construction back to the distractor step with the judge's defects.

    Refused when the construction is not published or no judged answer names a defect.
    Returns the misleadings given to the distractor writer.
    """
    with transaction.atomic():
        construction = construction_lock(construction_id)
        if construction.stage != Stage.PUBLISHED:
            raise WorkflowError(
                f"construction {construction_id} is not published: "
                "distractors are rewritten from the judge's defects after publishing"
            )
        defects, runs = judge_defects(construction)
        if not defects:
            raise WorkflowError(
                "no judged model answer to this item names a defect: run generative QA "
                "with the judge on it first"
            )
        field_set(
            construction,
            "misleadings",
            defects,
            user=user,
            model=f"LLM judge ({', '.join(runs)})"[:255],
            action="from judge",
        )
        construction_advance(construction, Stage.DISTRACTORS, user=user)
    return defects
