import logging

from celery import shared_task
from celery.signals import worker_init, worker_ready

from ..backends.base import backends_preload
from .backend_services import TEST_TASK_NAME, backend_test_execute
from .executor import run_execute
from .leases import RunLeased
from .services import RUN_TASK_NAME, TRAIN_TASK_NAME, runs_requeue_orphaned

logger = logging.getLogger(__name__)


@shared_task(bind=True, name=RUN_TASK_NAME, max_retries=None, acks_late=True)
def run_model_task(self, run_id: int) -> str:
    """Execute or resume a run; if a live worker holds it, try again when its lease ends."""
    try:
        return run_execute(run_id=run_id)
    except RunLeased as exc:
        raise self.retry(countdown=exc.seconds + 0.5) from None


# Routed to the "gpu" queue by CELERY_TASK_ROUTES ("modeling.tasks.train_*", by task name): only GPU
# workers (celery -A config worker -Q gpu) train the baselines.
@shared_task(bind=True, name=TRAIN_TASK_NAME, max_retries=None, acks_late=True)
def train_baseline_task(self, run_id: int) -> str:
    """Train (or resume from its last checkpoint) and evaluate a trained-baseline run."""
    try:
        return run_execute(run_id=run_id)
    except RunLeased as exc:
        raise self.retry(countdown=exc.seconds + 0.5) from None


@shared_task(name=TEST_TASK_NAME, acks_late=True)
def backend_test_task(backend_id: int) -> str:
    """One short prompt to a backend (Test connection), its outcome stored on the backend."""
    return backend_test_execute(backend_id=backend_id)


@worker_init.connect
def preload_backends(**kwargs) -> None:
    """Import the HTTP backend before the pool forks: every child starts with it, and
    no run's first wave waits on the import (issue 51)."""
    backends_preload()


@worker_ready.connect
def requeue_orphaned_runs(**kwargs) -> None:
    """A starting worker picks up the runs a dead worker left unfinished."""
    ids = runs_requeue_orphaned()
    if ids:
        logger.info("requeued unfinished model run(s) %s", ", ".join(map(str, ids)))
