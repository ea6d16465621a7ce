"""Answers to the run engine's questions (``modeling.runs.signals``): a generation
job's direct-call run names its job on the run page."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver
from django.urls import reverse

from modeling.models import Run
from modeling.runs.signals import run_owner_wanted

from ...models import GenerationJob


@receiver(run_owner_wanted, dispatch_uid="annotation.generation.job_run_owner")
def job_run_owner(sender: Any, run: Run, **kwargs: Any) -> tuple[str, str] | None:
    """The DynToM generation job whose calls the run records."""
    job = GenerationJob.objects.filter(run=run).only("pk").first()
    if job is None:
        return None
    return (
        f"DynToM {job}",
        reverse("annotation:generation-job", args=[job.pk]),
    )
