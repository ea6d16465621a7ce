"""The Celery app; tasks live in the ``tasks`` module of each app or workflow package."""

import logging
import os
import threading

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

logger = logging.getLogger(__name__)

# Workflow packages below an app's top folder, whose ``tasks`` modules Django's app
# list alone would not reach (autodiscovery looks at ``<app>.tasks`` only).
TASK_PACKAGES = [
    "annotation.chartom",
    "annotation.dyntom.generation",
    "modeling.pipelines.chartom_qa",
    "modeling.runs",
]

# Every task takes its envelope (common.queueing) before it runs.
app = Celery("tomlab", task_cls="common.celery_task:QueuedJobTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.autodiscover_tasks(TASK_PACKAGES)

_stop_sweeping = threading.Event()


def _sweep_once() -> None:
    from django.db import close_old_connections

    from common.queueing import queued_jobs_sweep

    try:
        queued_jobs_sweep()
    except Exception:
        # A sweep that fails (database away) must not kill the worker; the next one runs.
        logger.exception("sweep of queued jobs failed")
    finally:
        close_old_connections()


def _leftovers_purge(older_than_s: float) -> None:
    """Files a killed process left: abandoned uploads, and the temporary folders of
    package imports run by the command (an upload unpacks in its own folder)."""
    from benchmarks.services import import_uploads_purge
    from reports.replication.importing import stale_unpacked_purge

    try:
        import_uploads_purge()
        stale_unpacked_purge(older_than_s=older_than_s)
    except Exception:
        logger.exception("removing leftover import files failed")


def _sweep_forever(every_s: float) -> None:
    while not _stop_sweeping.wait(every_s):
        _sweep_once()


@worker_ready.connect
def sweep_on_start(**kwargs) -> None:
    """Sweep now, then every TOMLAB_SWEEP_EVERY_S in a thread of this worker.

    A worker-side timer rather than Celery beat: the embedded default runs no beat, and
    every worker sweeping is safe (each re-send is one conditional UPDATE).
    """
    from django.conf import settings

    _sweep_once()
    _leftovers_purge(settings.TOMLAB_UPLOAD_TTL_S)
    every = settings.TOMLAB_SWEEP_EVERY_S
    if every > 0:
        _stop_sweeping.clear()
        threading.Thread(
            target=_sweep_forever, args=(every,), name="tomlab-sweep", daemon=True
        ).start()


@worker_shutdown.connect
def stop_sweeping(**kwargs) -> None:
    _stop_sweeping.set()
