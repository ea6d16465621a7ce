"""Queued work is never lost: every job sent to Celery has a :class:`QueuedJob` row.

- Sending (``common.tasks``) writes the row in the caller's transaction, so a job and
  its envelope commit together, then puts the message on the broker with the row's
  id in a header.
- A worker takes the row with one conditional UPDATE before it runs the task
  (``common.celery_task``): a second delivery of the same envelope finds it taken
  and does nothing. The job's own row (run, import, report…) then decides what is
  left to do, as before.
- :func:`queued_jobs_sweep` sends again every envelope no worker took within
  ``TOMLAB_REQUEUE_AFTER_S``, and every envelope whose worker process died on this
  host before finishing. Workers sweep when they start and every
  ``TOMLAB_SWEEP_EVERY_S`` (config/celery.py).
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from .models import QueuedJob

logger = logging.getLogger(__name__)

# The message header that carries the envelope's id to the worker.
HEADER = "tomlab_job"


def job_key(task: str, args: Sequence[Any]) -> str:
    """The string a job's envelope is found by: its task name and arguments."""
    return f"{task}:{json.dumps(list(args), separators=(',', ':'), sort_keys=True)}"[:255]


def queued_job_create(task: str, args: Sequence[Any], *, queue: str | None = None) -> QueuedJob:
    return QueuedJob.objects.create(
        task=task, args=list(args), queue=queue or "", key=job_key(task, args)
    )


def queued_job_send(job: QueuedJob) -> None:
    """Put ``job``'s message on the broker (or, eagerly, run it here)."""
    from celery import current_app

    app = current_app
    if job.task not in app.tasks:
        # A web process has not imported the task modules yet: autodiscovery runs on
        # this signal-driven import, as it does when a worker starts.
        app.loader.import_default_modules()
    options: dict[str, Any] = {"headers": {HEADER: job.pk}}
    if job.queue:
        options["queue"] = job.queue
    app.tasks[job.task].apply_async(tuple(job.args), **options)


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def queued_job_take(job_id: int) -> bool:
    """Claim the envelope for this process; False when another delivery has it.

    An envelope taken by a process that died on this host, unfinished, is taken over:
    the broker's redelivery of a killed pool process's message then runs at once
    rather than waiting for the sweep.
    """
    now = timezone.now()
    if QueuedJob.objects.filter(pk=job_id, taken_at__isnull=True).update(
        taken_at=now, taken_by=_worker_id()
    ):
        return True
    row = QueuedJob.objects.filter(pk=job_id, finished_at__isnull=True).first()
    if row is None or not row.taken_by or not _dead_on_this_host(row.taken_by):
        return False
    return bool(
        QueuedJob.objects.filter(pk=job_id, taken_by=row.taken_by, finished_at__isnull=True).update(
            taken_at=now, taken_by=_worker_id()
        )
    )


def queued_job_release(job_id: int) -> None:
    """The task will be delivered again (Celery retry): let that delivery take it."""
    QueuedJob.objects.filter(pk=job_id).update(taken_at=None, taken_by="", queued_at=timezone.now())


def queued_job_finish(job_id: int) -> None:
    QueuedJob.objects.filter(pk=job_id, finished_at__isnull=True).update(finished_at=timezone.now())


def _requeue_after() -> timedelta:
    return timedelta(seconds=settings.TOMLAB_REQUEUE_AFTER_S)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _dead_on_this_host(taken_by: str) -> bool:
    host, _, pid = taken_by.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return int(pid) != os.getpid() and not _process_alive(int(pid))


def _resend(job: QueuedJob, *, was_taken: bool) -> bool:
    """Send ``job`` again if no other sweeper did meanwhile (conditional UPDATE)."""
    now = timezone.now()
    claimed = QueuedJob.objects.filter(
        pk=job.pk,
        queued_at=job.queued_at,
        taken_at=job.taken_at if was_taken else None,
        finished_at__isnull=True,
    ).update(queued_at=now, sends=F("sends") + 1, taken_at=None, taken_by="")
    if not claimed:
        return False
    job.refresh_from_db()
    queued_job_send(job)
    return True


@dataclass(frozen=True)
class SweepResult:
    untaken: list[int]
    orphaned: list[int]

    @property
    def count(self) -> int:
        return len(self.untaken) + len(self.orphaned)


def queued_jobs_sweep(*, now: datetime | None = None) -> SweepResult:
    """Send again what no worker took in time and what a dead worker left unfinished."""
    cutoff = (now or timezone.now()) - _requeue_after()
    untaken = [
        job.pk
        for job in QueuedJob.objects.filter(
            taken_at__isnull=True, finished_at__isnull=True, queued_at__lte=cutoff
        ).order_by("pk")
        if _resend(job, was_taken=False)
    ]
    orphaned = [
        job.pk
        for job in QueuedJob.objects.filter(taken_at__isnull=False, finished_at__isnull=True)
        .order_by("pk")
        .iterator()
        if _dead_on_this_host(job.taken_by) and _resend(job, was_taken=True)
    ]
    if untaken or orphaned:
        logger.info(
            "sweep: re-sent %d job(s) no worker took (%s) and %d a dead worker left (%s)",
            len(untaken),
            ", ".join(map(str, untaken)) or "-",
            len(orphaned),
            ", ".join(map(str, orphaned)) or "-",
        )
    return SweepResult(untaken=untaken, orphaned=orphaned)


def queued_job_requeue(job_id: int) -> QueuedJob | None:
    """Send a job again now, at a researcher's request; None when a worker has it."""
    with transaction.atomic():
        job = QueuedJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.taken_at is not None or job.finished_at is not None:
            return None
        QueuedJob.objects.filter(pk=job.pk).update(queued_at=timezone.now(), sends=F("sends") + 1)
        job.refresh_from_db()
    queued_job_send(job)
    return job


def queued_job_waiting(task: str | Iterable[str], args: Sequence[Any]) -> QueuedJob | None:
    """The newest envelope of this job that no worker has taken yet, if any.

    A job page shows it ("queued 7 min ago, no worker has taken it"). None once any
    envelope of the job was taken: the job's own status says the rest.
    """
    tasks = [task] if isinstance(task, str) else list(task)
    keys = [job_key(name, args) for name in tasks]
    newest = QueuedJob.objects.filter(key__in=keys).order_by("-queued_at", "-pk").first()
    if newest is None or newest.taken_at is not None or newest.finished_at is not None:
        return None
    taken = QueuedJob.objects.filter(
        Q(key__in=keys), Q(taken_at__isnull=False), Q(taken_at__gte=newest.queued_at)
    ).exists()
    return None if taken else newest


# Model label ("modeling.run") -> the task names that work on one row of it, with
# the row's pk as their only argument. Each app registers its own next to the task
# names (in its services), so a page can ask "is this row's job waiting?".
_JOB_TASKS: dict[str, tuple[str, ...]] = {}
# Task name -> the URL name of its job's page (taking the pk), for the queued-jobs list.
_JOB_PAGES: dict[str, str] = {}


def job_tasks_register(model_label: str, *task_names: str, page: str = "") -> None:
    _JOB_TASKS[model_label.lower()] = task_names
    if page:
        _JOB_PAGES.update(dict.fromkeys(task_names, page))


def queued_job_page(job: QueuedJob) -> str:
    """The URL of the job's own page, or "" (no page, or not one row's job)."""
    from django.urls import reverse

    name = _JOB_PAGES.get(job.task)
    return reverse(name, args=job.args) if name and len(job.args) == 1 else ""


def queued_job_waiting_for(obj: Any) -> QueuedJob | None:
    """The waiting envelope of a job row (a run, a report job…), if any."""
    tasks = _JOB_TASKS.get(obj._meta.label_lower)
    if not tasks:
        raise LookupError(f"no task registered for {obj._meta.label_lower}")
    return queued_job_waiting(tasks, (obj.pk,))


def queued_jobs_waiting() -> list[QueuedJob]:
    """Every envelope no worker has taken yet, oldest first, each with its ``page``."""
    jobs = list(
        QueuedJob.objects.filter(taken_at__isnull=True, finished_at__isnull=True).order_by(
            "queued_at", "pk"
        )
    )
    for job in jobs:
        job.page = queued_job_page(job)
    return jobs
