from celery import shared_task

from annotation.dyntom.validation.services import validation_batch_for_job

from .services import GENERATION_TASK_NAME, generation_job_run


@shared_task(name=GENERATION_TASK_NAME, acks_late=True)
def generation_job_task(job_id: int) -> str:
    """Generate a job's stages, then queue the finished ones for validation.

    A redelivered task continues where the job stopped.
    """
    status = generation_job_run(job_id=job_id)
    validation_batch_for_job(job_id=job_id)
    return status
