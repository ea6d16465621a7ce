"""Queueing Celery tasks from services by name, after commit.

Tasks import services, never the reverse: a service names its task (the ``name=`` of
its ``@shared_task``) and this module looks it up in the Celery app's registry when
the transaction commits. The registry lookup, unlike ``send_task``, returns the task
object itself, so ``CELERY_TASK_ALWAYS_EAGER`` still runs it in-process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from celery import current_app
from django.db import transaction


def task_send(name: str, args: Sequence[Any], *, queue: str | None = None) -> None:
    """Send the task registered as ``name`` with ``args`` now."""
    app = current_app
    if name not in app.tasks:
        # A web process has not imported the task modules yet: autodiscovery runs on
        # this signal-driven import, as it does when a worker starts.
        app.loader.import_default_modules()
    options = {"queue": queue} if queue else {}
    app.tasks[name].apply_async(tuple(args), **options)


def task_send_on_commit(name: str, args: Sequence[Any], *, queue: str | None = None) -> None:
    """Send the task registered as ``name`` once the current transaction commits."""
    transaction.on_commit(lambda: task_send(name, args, queue=queue))
