"""Read queries of the annotation pages."""

from __future__ import annotations

from django.db.models import QuerySet

from ...models import GeneratedStage, GenerationJob


def generation_job_list() -> QuerySet[GenerationJob]:
    """Jobs, newest first, with what a list row shows."""
    return GenerationJob.objects.select_related("backend").order_by("-created_at", "-pk")


def generated_stages(*, job: GenerationJob) -> QuerySet[GeneratedStage]:
    """A job's stages in order, without the large JSON a status table does not show."""
    return (
        GeneratedStage.objects.filter(job=job)
        .only(
            "pk",
            "job_id",
            "index",
            "status",
            "status_reason",
            "location",
            "location_category",
            "characters",
            "work_key",
        )
        .order_by("index")
    )
