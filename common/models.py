"""The envelope of every queued Celery job: when it was sent, when a worker took it.

Each app's job row (a run, an import, a report…) says what the work is and how far it
got; this row says whether the message reached a worker at all, so a message a broker
lost is sent again (``common.queueing``) and a second delivery of it does nothing.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class QueuedJob(models.Model):
    task = models.CharField(max_length=100, help_text="the Celery task's registered name")
    args = models.JSONField(default=list, blank=True)
    queue = models.CharField(max_length=50, blank=True, default="")
    # task + args as one indexed string: the job pages find their envelope by it.
    key = models.CharField(max_length=255, db_index=True)
    queued_at = models.DateTimeField(default=timezone.now)
    sends = models.PositiveIntegerField(default=1, help_text="1 + times it was re-sent")
    taken_at = models.DateTimeField(null=True, blank=True)
    # host:pid of the worker process: a dead one's unfinished job is sent again.
    taken_by = models.CharField(max_length=255, blank=True, default="")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-queued_at", "-pk"]
        indexes = [models.Index(fields=["taken_at", "queued_at"], name="queuedjob_untaken")]

    def __str__(self) -> str:
        return f"{self.task}{tuple(self.args)}"

    @property
    def state(self) -> str:
        if self.finished_at:
            return "finished"
        return "taken" if self.taken_at else "queued"
