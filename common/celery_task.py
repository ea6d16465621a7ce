"""The base class of every ToMLab Celery task (``Celery(task_cls=...)`` in config/celery.py).

A message sent through ``common.tasks`` carries its envelope's id in a header. Before
the task runs, the worker takes that envelope with one conditional UPDATE; a second
delivery of the same envelope (a re-send that crossed a slow first delivery, or a
broker's redelivery) finds it taken and returns at once. Messages without the header
(a task called directly) run as they are.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task
from celery.exceptions import Retry

logger = logging.getLogger(__name__)

DUPLICATE = "duplicate delivery: skipped"


def _job_id(request: Any) -> int | None:
    from .queueing import HEADER

    value = getattr(request, HEADER, None)
    if value is None:
        value = (getattr(request, "headers", None) or {}).get(HEADER)
    return int(value) if value is not None else None


class QueuedJobTask(Task):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        job_id = _job_id(self.request)
        if job_id is None:
            return super().__call__(*args, **kwargs)
        # Lazy: this class is loaded with the Celery app, before Django's apps are ready.
        from . import queueing

        # Eagerly run tasks have no broker to deliver them twice; an eager retry runs
        # the task again inside this call, so it must not find its envelope taken.
        if not queueing.queued_job_take(job_id) and not self.request.is_eager:
            logger.info("%s: job %s was already taken; %s", self.name, job_id, DUPLICATE)
            return DUPLICATE
        try:
            # self.run, not super().__call__: that would replace the worker's request
            # (id, retries, headers) with a bare one (Celery's docs do the same).
            result = self.run(*args, **kwargs)
        except Retry:
            queueing.queued_job_release(job_id)
            raise
        except Exception:
            # The task failed and its job row says so; an interrupted worker
            # (SystemExit, KeyboardInterrupt) leaves the envelope to the sweep instead.
            queueing.queued_job_finish(job_id)
            raise
        queueing.queued_job_finish(job_id)
        return result
