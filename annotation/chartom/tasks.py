import logging

from celery import shared_task
from celery.signals import worker_ready

from common.scoping import scoped_to
from modeling.runs.leases import LeaseHeld

from .llm_steps import construction_step_run, construction_workspace, constructions_requeue_stale
from .workflow import STEP_TASK_NAME

logger = logging.getLogger(__name__)


@shared_task(bind=True, name=STEP_TASK_NAME, acks_late=True, max_retries=None)
def chartom_step_task(self, construction_id: int) -> str:
    """Run a CharToM-QA construction's LLM step (claimed under a lease).

    A redelivered task finds the step done (skipped) or continues it, taking it over
    from a holder that is gone: calls already answered come back from their RunCall
    rows. While a worker on another host holds it, the task tries again when that
    worker's lease would expire (if the worker died, the step is free by then).
    """
    try:
        # As a member of the batch's workspace: its prompt revisions, its rows.
        with scoped_to(construction_workspace(construction_id)):
            return construction_step_run(construction_id=construction_id)
    except LeaseHeld as exc:
        if self.request.is_eager:
            return "skipped"  # an eager retry would run again at once, in this call
        raise self.retry(countdown=exc.seconds + 0.5) from None


@worker_ready.connect
def requeue_stale_steps(**kwargs) -> None:
    """A starting worker sends again the LLM steps dead workers left running."""
    ids = constructions_requeue_stale()
    if ids:
        logger.info("requeued stale CharToM-QA step(s) %s", ", ".join(map(str, ids)))
