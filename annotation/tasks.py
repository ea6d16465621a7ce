from celery import shared_task

from .chartom.llm_steps import construction_step_run
from .chartom.workflow import STEP_TASK_NAME
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


@shared_task(name=STEP_TASK_NAME, acks_late=True)
def chartom_step_task(construction_id: int) -> str:
    """Run a CharToM-QA construction's LLM step (claimed with one conditional UPDATE).

    A redelivered task finds the step done (skipped) or continues it: calls already
    answered come back from their RunCall rows.
    """
    return construction_step_run(construction_id=construction_id)
