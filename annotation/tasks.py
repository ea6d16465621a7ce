from celery import shared_task

from .services import generation_job_run


@shared_task(name="annotation.generation_job", acks_late=True)
def generation_job_task(job_id: int) -> str:
    """Generate a job's stages; a redelivered task continues where the job stopped."""
    return generation_job_run(job_id=job_id)
