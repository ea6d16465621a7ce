import logging

from celery import shared_task
from celery.signals import worker_ready

from annotation.dyntom.validation.services import validation_batch_for_job
from annotation.models import GenerationJob
from modeling.runs.leases import LeaseHeld

from .services import GENERATION_TASK_NAME, generation_job_run, generation_jobs_requeue_stale

logger = logging.getLogger(__name__)


@shared_task(bind=True, name=GENERATION_TASK_NAME, acks_late=True, max_retries=None)
def generation_job_task(self, job_id: int) -> str:
    """Generate a job's stages, then queue the finished ones for validation.

    A redelivered task continues where the job stopped, taking it over from a holder
    that is gone. While a worker on another host holds it, the task tries again when
    that worker's lease would expire (if the worker died, the job is free by then).
    """
    try:
        status = generation_job_run(job_id=job_id)
    except LeaseHeld as exc:
        if self.request.is_eager:
            return "skipped"  # an eager retry would run again at once, in this call
        raise self.retry(countdown=exc.seconds + 0.5) from None
    # Skipped because another process holds the job: that process queues its stages
    # when it ends. Skipped because the job ended: queue them, in case the process
    # that ended it died before it could.
    if GenerationJob.objects.filter(pk=job_id, status__in=GenerationJob.FINISHED).exists():
        validation_batch_for_job(job_id=job_id)
    return status


@worker_ready.connect
def requeue_stale_generation_jobs(**kwargs) -> None:
    """A starting worker sends again the generation jobs dead workers left running."""
    ids = generation_jobs_requeue_stale()
    if ids:
        logger.info("requeued stale generation job(s) %s", ", ".join(map(str, ids)))
