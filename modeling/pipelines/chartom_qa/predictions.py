"""CharToM-QA prediction rows: the generative ones of a set of runs, and merging scores
into their ``details`` (text similarity and judge verdicts both write there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Q

from modeling.models import Prediction
from modeling.runs.signals import predictions_changed

from .reading import GENERATIVE

MERGE_CHUNK = 500


def generative_predictions(run_ids: Sequence[int]):
    """The generative CharToM-QA predictions of ``run_ids`` (by details or run method)."""
    return Prediction.objects.filter(run_id__in=list(run_ids), qa_item__isnull=False).filter(
        Q(details__task=GENERATIVE) | (~Q(details__has_key="task") & Q(run__method=GENERATIVE))
    )


@transaction.atomic
def prediction_details_merge(values: dict[int, dict[str, Any]], *, drop: Sequence[str] = ()) -> int:
    """Merge ``values[pk]`` into each prediction's ``details`` (rows locked, no key lost).

    Keys in ``drop`` are removed first, so a verdict read again replaces the old one
    whole (an unparseable reply leaves no stale ``bonus_points_included``). The runs'
    packed copies for reports go stale (``predictions_changed``): count and ids stay.
    """
    merged = 0
    run_ids: set[int] = set()
    ids = list(values)
    for start in range(0, len(ids), MERGE_CHUNK):
        chunk = ids[start : start + MERGE_CHUNK]
        rows = list(
            Prediction.objects.select_for_update()
            .filter(pk__in=chunk)
            .only("pk", "run_id", "details")
        )
        for row in rows:
            run_ids.add(row.run_id)
            details = {k: v for k, v in (row.details or {}).items() if k not in drop}
            row.details = {**details, **values[row.pk]}
        Prediction.objects.bulk_update(rows, ["details"], batch_size=MERGE_CHUNK)
        merged += len(rows)
    if run_ids:
        predictions_changed.send(sender=Prediction, run_ids=sorted(run_ids))
    return merged
