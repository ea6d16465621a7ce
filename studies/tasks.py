"""Celery tasks of the studies app (found by ``app.autodiscover_tasks()``)."""

from celery import shared_task

from .participation.webhooks import WEBHOOK_TASK_NAME, webhook_deliver


@shared_task(bind=True, name=WEBHOOK_TASK_NAME, acks_late=True, max_retries=None)
def deliver_webhook(self, delivery_id: int) -> str:
    """One try of a webhook delivery; the next, if any, after the delivery's backoff.

    The tries are counted on the delivery row (``max_attempts``), not by Celery, so a
    redelivered or re-sent message never adds a try. Eagerly (tests, the embedded
    default's CELERY_TASK_ALWAYS_EAGER) Celery runs the retry at once, in this call.
    """
    attempt = webhook_deliver(delivery_id=delivery_id)
    if attempt.retry_in is not None:
        raise self.retry(countdown=attempt.retry_in)
    return attempt.status
