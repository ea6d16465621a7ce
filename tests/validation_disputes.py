"""Four annotators who disagree on a DynToM validation batch (real stages), for the
reviewer-queue tests, fast and in the browser.

Two real stages (trial149, trial210), profiles+relationship and trajectory, k = 4. Every
score is the top of its scale except:
- trial149 relationship realistic: yes, yes, yes, no (a split: the rule "any no
  discards" keeps it for three annotators alone, not for the fourth; it discards);
- trial149 trajectory rationality 5, 5, 2, 5: spread 3, mean 4.25 (the rules keep it);
- trial210 trajectory rationality 4, 4, 4, 4 (kept, nothing disputed).
"""

from __future__ import annotations

from pathlib import Path

from django.core.management import call_command

from annotation.dyntom.validation.services import (
    validation_batch_create,
    validation_stage_take,
    validation_submit,
)
from annotation.models import ValidationAssignment, ValidationBatch
from benchmarks.models import DynToMStage
from tests.factories import UserFactory

TRIALS = ("trial149", "trial210")
SCORES = {
    ("trial149", "relationship_realistic"): (1, 1, 1, 0),
    ("trial149", "rationality"): (5, 5, 2, 5),
    ("trial210", "rationality"): (4, 4, 4, 4),
}


def disputed_batch(shared_data: Path, tmp_path: Path) -> tuple[ValidationBatch, list]:
    for trial in TRIALS:
        (tmp_path / trial).symlink_to(shared_data / "dyntom" / trial)
    call_command("import_benchmark", "dyntom", str(tmp_path))
    batch = validation_batch_create(
        name="disputed",
        stages=DynToMStage.objects.filter(work__key__in=TRIALS),
        kinds=["context", "trajectory"],
        k=4,
    )
    annotators = [UserFactory(username=f"ann{i}", role="annotator") for i in range(4)]
    for i, ann in enumerate(annotators):
        while validation_stage_take(batch=batch, annotator=ann) is not None:
            pass
        for slot in ValidationAssignment.objects.filter(annotator=ann).select_related(
            "rubric", "vstage"
        ):
            validation_submit(
                assignment_id=slot.pk,
                annotator=ann,
                values={
                    c["key"]: SCORES.get(
                        (slot.vstage.label, c["key"]),
                        (1,) * 4 if c["scale"] == "yes_no" else (5,) * 4,
                    )[i]
                    for c in slot.rubric.criteria
                },
            )
    return batch, annotators
