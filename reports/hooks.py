"""Reactions to the run engine (``modeling.runs.signals``): keep DynToM and CharToM-QA
runs packed (``reports.run_packs``), so a report finds them ready instead of packing
on first use.
And to participation (``studies.participation.signals``): a withdrawal reaches the
report jobs stored before it. And to a study closing (``studies.signals``): a closed
scene study is packed by a worker (``reports.study_packs``)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import receiver

from modeling.models import Run
from modeling.runs.signals import predictions_changed, run_finished
from studies.participation.services import participant_report_jobs_rebuilt_record
from studies.participation.signals import participant_withdrawn, participants_exclusion_changed
from studies.signals import study_closed

from .run_packs import packed_run_ids, packs_invalidate
from .selectors import SPEAKER_BENCHMARKS
from .services import report_jobs_rebuild_after_withdrawal, run_pack_queue, runs_pack
from .study_packs import study_pack_queue, study_packs_delete

logger = logging.getLogger(__name__)


@receiver(run_finished, dispatch_uid="reports.run_packs.run_finished")
def pack_finished_run(sender: Any, *, run_id: int, **kwargs: Any) -> None:
    """A finished run of a packed benchmark is packed by a worker once its end commits,
    so its first report finds it packed; the engine returns (and its worker takes the
    next run) without waiting for it."""
    if packed_run_ids([run_id]):
        run_pack_queue(run_id=run_id)


@receiver(predictions_changed, dispatch_uid="reports.run_packs.predictions_changed")
def repack_changed_runs(sender: Any, *, run_ids: list[int], **kwargs: Any) -> None:
    # In the writer's transaction: answers changed in place keep count and ids.
    packs_invalidate(run_ids=run_ids)
    # A running run (a CharToM-QA pipeline merges judge verdicts batch by batch) is
    # packed once it finishes, not after every batch.
    finished = list(
        Run.objects.filter(pk__in=list(run_ids))
        .exclude(status=Run.Status.RUNNING)
        .values_list("pk", flat=True)
    )
    if finished:
        transaction.on_commit(lambda: runs_pack(finished))


@receiver(study_closed, dispatch_uid="reports.study_packs.study_closed")
def pack_closed_study(sender: Any, *, study: Any, **kwargs: Any) -> None:
    """A closed scene study's answers no longer grow: packed by a worker now, so its
    first report does not pay for it (``reports.study_packs``)."""
    if study.benchmark in SPEAKER_BENCHMARKS:
        study_pack_queue(study_id=study.pk)


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
    already leave withdrawn participants out); their study's packed answers go."""
    with transaction.atomic():  # the withdrawal's own transaction, when it has one
        # The packed answers hold theirs (a report would pack the study again anyway:
        # the withdrawal moves its fingerprint).
        study_packs_delete(study_id=participant.study_id)
        ids = report_jobs_rebuild_after_withdrawal(
            benchmark=participant.study.benchmark, since=participant.created_at
        )
        if ids:
            participant_report_jobs_rebuilt_record(participant=participant, jobs=len(ids))
