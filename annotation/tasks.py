from celery import shared_task

from .services import generation_job_run
from .validation_services import validation_batch_for_job


@shared_task(name="annotation.generation_job", acks_late=True)
def generation_job_task(job_id: int) -> str:
    """Generate a job's stages, then queue the finished ones for validation.

    A redelivered task continues where the job stopped.
    """
    status = generation_job_run(job_id=job_id)
    validation_batch_for_job(job_id=job_id)
    return status
