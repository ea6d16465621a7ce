"""Read queries of the annotation pages."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from ...models import GeneratedStage, GenerationJob


def with_stage_counts(jobs: QuerySet[GenerationJob]) -> QuerySet[GenerationJob]:
    """``jobs`` annotated with ``stage_total`` and ``usable_stages`` (awaiting validation
    or kept), the counts :func:`generation_job_status_label` reads."""
    return jobs.annotate(
        stage_total=Count("stages"),
        usable_stages=Count("stages", filter=Q(stages__status__in=GeneratedStage.USABLE)),
    )


def generation_job_list() -> QuerySet[GenerationJob]:
    """Jobs, newest first, with what a list row shows (backend, stage counts)."""
    return with_stage_counts(GenerationJob.objects.select_related("backend")).order_by(
        "-created_at", "-pk"
    )


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


@dataclass(frozen=True)
class JobStatusLabel:
    text: str
    # The badge colour: a GenerationJob.Status value, or "warning".
    tone: str

    def __str__(self) -> str:
        return self.text


def generation_job_status_label(*, job: GenerationJob) -> JobStatusLabel:
    """What to call a job's status on every page: a finished job says how many of its
    stages are usable unless all are ("succeeded: 2 of 3 stages usable", "needs
    attention: 0 of 1 stage usable"). Reads :func:`with_stage_counts`' annotations."""
    usable, total = job.usable_stages, job.stage_total
    counted = f"{usable} of {total} stage{'' if total == 1 else 's'} usable"
    if job.status == GenerationJob.Status.NEEDS_ATTENTION:
        return JobStatusLabel(f"{job.get_status_display()}: {counted}", job.status)
    if job.status == GenerationJob.Status.SUCCEEDED and usable < total:
        return JobStatusLabel(f"{job.get_status_display()}: {counted}", "warning")
    return JobStatusLabel(job.get_status_display(), job.status)
