from celery import shared_task

from .services import REPORT_TASK_NAME, report_job_execute


@shared_task(name=REPORT_TASK_NAME, acks_late=True)
def build_report_task(job_id: int) -> str:
    """Build and store a background report; a redelivered message finds it done and stops."""
    return report_job_execute(job_id=job_id)
