from celery import shared_task

from .text_similarity import TEXT_SIMILARITY_TASK_NAME, predictions_text_similarity


# Sent to the "gpu" queue (see text_similarity.text_similarity_enqueue): scoring embeds
# every answer with a local model, work for the GPU workers.
@shared_task(name=TEXT_SIMILARITY_TASK_NAME, acks_late=True)
def score_text_similarity_task(run_ids: list[int]) -> int:
    """RougeL and BERTScore of the generative CharToM-QA predictions of ``run_ids``."""
    return predictions_text_similarity(run_ids=run_ids)
