"""Queueing Celery tasks from services by name, each with its envelope row.

Tasks import services, never the reverse: a service names its task (the ``name=`` of
its ``@shared_task``) and this module looks it up in the Celery app's registry. The
registry lookup, unlike ``send_task``, returns the task object itself, so
``CELERY_TASK_ALWAYS_EAGER`` still runs it in-process. Every send writes a
:class:`~common.models.QueuedJob` first (see ``common.queueing``): a message the broker
loses is sent again, and a second delivery is a no-op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from .models import QueuedJob
from .queueing import queued_job_create, queued_job_send


def task_send(name: str, args: Sequence[Any], *, queue: str | None = None) -> QueuedJob:
    """Send the task registered as ``name`` with ``args`` now."""
    job = queued_job_create(name, args, queue=queue)
    queued_job_send(job)
    return job


def task_send_on_commit(name: str, args: Sequence[Any], *, queue: str | None = None) -> QueuedJob:
    """Send the task once the current transaction commits.

    The envelope is written now, in that transaction: a rollback drops both the job
    and its envelope, and a crash between commit and send leaves an envelope that the
    sweep sends.
    """
    job = queued_job_create(name, args, queue=queue)
    transaction.on_commit(lambda: queued_job_send(job))
    return job
