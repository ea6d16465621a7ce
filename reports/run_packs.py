"""Runs' predictions packed for their reports, and when a packed copy may be used.

A report of a million predictions cannot read a million rows per build. Each run of a
packed benchmark is instead packed once into a :class:`~reports.models.PackedRun`
row: what that benchmark's tables read, in a few bytes per prediction. The DynToM
pack (``reports.dyntom_outcomes``) holds question outcomes; the CharToM-QA pack
(``reports.chartom_answers``) answers with their scores. This module keeps the copies
current, whatever they hold.

Packing happens when a run finishes (in a worker) or its predictions are imported
(``reports.hooks``) and, for anything those missed, on first use: :func:`run_packs`
compares each stored copy's fingerprint (count and highest id of the run's
predictions) with the database and packs again where they differ. Predictions changed
in place (a re-import with other answers, judge verdicts or text scores merged into
details) keep count and ids, so their writer sends
``modeling.runs.signals.predictions_changed`` and :func:`packs_invalidate` marks the
copy stale first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from django.db.models import F, OuterRef, Subquery
from django.utils import timezone

from benchmarks.models import Benchmark
from modeling.models import Run

from .models import PackedRun

PACKED_BENCHMARKS = (Benchmark.DYNTOM, Benchmark.CHARTOM_QA)
# A finished run is packed by a worker (``reports.hooks.pack_finished_run``).
RUN_PACK_TASK_NAME = "reports.run_pack"

# Reads a run's predictions: (count and highest id of all of them, the packed bytes).
Packer = Callable[[int], tuple[int, int, bytes]]


def packed_run_ids(run_ids: Iterable[int]) -> dict[str, list[int]]:
    """The runs among ``run_ids`` whose benchmark is packed, by benchmark."""
    by_benchmark: dict[str, list[int]] = {}
    for benchmark, pk in (
        Run.objects.filter(pk__in=list(run_ids), benchmark__in=PACKED_BENCHMARKS)
        .order_by("pk")
        .values_list("benchmark", "pk")
    ):
        by_benchmark.setdefault(benchmark, []).append(pk)
    return by_benchmark


def run_packs(
    run_ids: Sequence[int], counts: dict[int, dict[str, int]], pack: Packer
) -> dict[int, bytes | None]:
    """Each run's packed bytes (``None`` for a run without predictions), packing with
    ``pack`` (and storing) any copy that is missing or stale.

    ``counts`` is ``selectors.run_prediction_counts`` of (at least) these runs. Safe
    when two requests pack the same run at once: both store the same bytes, and a copy
    invalidated meanwhile is not overwritten with what was read before.
    """
    stored = {row.run_id: row for row in PackedRun.objects.filter(run_id__in=list(run_ids))}
    result: dict[int, bytes | None] = {}
    for run_id in run_ids:
        row = stored.get(run_id)
        current = counts.get(run_id, {"predictions": 0, "last_prediction": 0})
        n, last = current["predictions"], current["last_prediction"]
        if n == 0:
            result[run_id] = None
        elif row is not None and (row.predictions, row.last_prediction) == (n, last):
            result[run_id] = bytes(row.data)
        else:
            n, last, data = pack(run_id)
            pack_store(run_id, None if row is None else row.generation, n, last, data)
            result[run_id] = data
    return result


def pack_store(run_id: int, generation: int | None, n: int, last: int, data: bytes) -> None:
    """Store a pack read from ``n`` predictions up to id ``last``, over the generation
    it started from only: an invalidation while it was read wins."""
    if generation is None:
        PackedRun.objects.bulk_create(
            [PackedRun(run_id=run_id, predictions=n, last_prediction=last, data=data)],
            ignore_conflicts=True,
        )
    else:
        PackedRun.objects.filter(run_id=run_id, generation=generation).update(
            predictions=n, last_prediction=last, data=data, packed_at=timezone.now()
        )


def unpacked_predictions(counts: dict[int, dict[str, int]]) -> int:
    """How many predictions of the runs in ``counts`` (``run_prediction_counts``) have
    no current packed copy: the work a report would do first."""
    fresh = {
        run_id
        for run_id, n, last in PackedRun.objects.filter(run_id__in=list(counts)).values_list(
            "run_id", "predictions", "last_prediction"
        )
        if (n, last) == (counts[run_id]["predictions"], counts[run_id]["last_prediction"])
    }
    return sum(c["predictions"] for run_id, c in counts.items() if run_id not in fresh)


def pack_generation() -> Subquery:
    """A run's pack generation, for ``Run`` querysets (``None`` for a run never packed):
    it moves on with every invalidation, so it tells a cached report that answers
    changed in place since it was built."""
    return Subquery(PackedRun.objects.filter(run_id=OuterRef("pk")).values("generation")[:1])


def packs_invalidate(*, run_ids: Iterable[int]) -> None:
    """Mark the packed copies of these runs stale (their predictions changed in place).

    Leaves a placeholder row for a run not packed yet, so a build that started before
    the change cannot store what it read.
    """
    ids = [pk for pks in packed_run_ids(run_ids).values() for pk in pks]
    if not ids:
        return
    PackedRun.objects.bulk_create(
        [PackedRun(run_id=run_id) for run_id in ids], ignore_conflicts=True
    )
    PackedRun.objects.filter(run_id__in=ids).update(
        predictions=None, data=b"", generation=F("generation") + 1
    )
