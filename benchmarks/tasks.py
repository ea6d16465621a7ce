from celery import shared_task

from .services import IMPORT_TASK_NAME, import_job_run


@shared_task(name=IMPORT_TASK_NAME)
def run_import_job(job_id: int) -> str:
    """Run one queued import; a redelivered message for a finished job is a no-op."""
    return import_job_run(job_id=job_id)
