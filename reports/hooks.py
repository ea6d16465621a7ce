"""Reactions to the run engine (``modeling.runs.signals``): keep DynToM runs' packed
outcomes current, so a report finds them ready instead of packing on first use.
And to participation (``studies.participation.signals``): a withdrawal reaches the
report jobs stored before it."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import receiver

from modeling.runs.signals import predictions_changed, run_finished
from studies.participation.services import participant_report_jobs_rebuilt_record
from studies.participation.signals import participant_withdrawn, participants_exclusion_changed

from .dyntom_outcomes import dyntom_outcomes_invalidate, dyntom_outcomes_refresh, dyntom_run_ids
from .services import report_jobs_rebuild_after_withdrawal

logger = logging.getLogger(__name__)


def _refresh_after_commit(run_ids: list[int]) -> None:
    run_ids = dyntom_run_ids(run_ids)  # other benchmarks' runs queue nothing
    if not run_ids:
        return

    def refresh() -> None:
        # A failure here must not fail the run or the import: the report packs on
        # first use whatever is missing or stale.
        try:
            dyntom_outcomes_refresh(run_ids=run_ids)
        except Exception:
            logger.exception("packing DynToM outcomes of runs %s failed", run_ids)

    transaction.on_commit(refresh)


@receiver(run_finished, dispatch_uid="reports.dyntom_outcomes.run_finished")
def pack_finished_run(sender: Any, *, run_id: int, **kwargs: Any) -> None:
    _refresh_after_commit([run_id])


@receiver(predictions_changed, dispatch_uid="reports.dyntom_outcomes.predictions_changed")
def repack_changed_runs(sender: Any, *, run_ids: list[int], **kwargs: Any) -> None:
    # In the writer's transaction: answers changed in place keep count and ids.
    dyntom_outcomes_invalidate(run_ids=run_ids)
    _refresh_after_commit(list(run_ids))


@receiver(participants_exclusion_changed, dispatch_uid="reports.jobs.rebuild_after_exclusion")
def rebuild_jobs_after_exclusion(
    sender: Any, *, study: Any, participants: list[Any], **kwargs: Any
) -> None:
    """Stored report jobs read before someone was excluded (or taken back in) could
    count them wrongly: emptied and queued again, as after a withdrawal."""
    with transaction.atomic():
        report_jobs_rebuild_after_withdrawal(
            benchmark=study.benchmark, since=min(p.created_at for p in participants)
        )


@receiver(participant_withdrawn, dispatch_uid="reports.jobs.rebuild_after_withdrawal")
def rebuild_jobs_after_withdrawal(sender: Any, *, participant: Any, **kwargs: Any) -> None:
    """Stored report jobs that could hold the participant's rows are emptied and queued
    to be built again, and the participant's ledger says when (the live report pages
    already leave withdrawn participants out)."""
    with transaction.atomic():  # the withdrawal's own transaction, when it has one
        ids = report_jobs_rebuild_after_withdrawal(
            benchmark=participant.study.benchmark, since=participant.created_at
        )
        if ids:
            participant_report_jobs_rebuilt_record(participant=participant, jobs=len(ids))
