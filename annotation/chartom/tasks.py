from celery import shared_task

from .llm_steps import construction_step_run
from .workflow import STEP_TASK_NAME


@shared_task(name=STEP_TASK_NAME, acks_late=True)
def chartom_step_task(construction_id: int) -> str:
    """Run a CharToM-QA construction's LLM step (claimed with one conditional UPDATE).

    A redelivered task finds the step done (skipped) or continues it: calls already
    answered come back from their RunCall rows.
    """
    return construction_step_run(construction_id=construction_id)
