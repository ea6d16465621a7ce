from celery import shared_task

from .run_packs import RUN_PACK_TASK_NAME
from .services import REPORT_TASK_NAME, report_job_execute, run_pack_build
from .study_packs import STUDY_PACK_TASK_NAME, study_pack_build


@shared_task(name=REPORT_TASK_NAME, acks_late=True)
def build_report_task(job_id: int) -> str:
    """Build and store a background report; a redelivered message finds it done and stops."""
    return report_job_execute(job_id=job_id)


@shared_task(name=STUDY_PACK_TASK_NAME, acks_late=True)
def study_pack_task(study_id: int) -> str:
    """Pack a closed scene study's answers; a redelivery finds the pack current."""
    return study_pack_build(study_id=study_id)


@shared_task(name=RUN_PACK_TASK_NAME, acks_late=True)
def run_pack_task(run_id: int) -> str:
    """Pack a finished run's predictions for its reports; a redelivery finds them packed."""
    return run_pack_build(run_id=run_id)
