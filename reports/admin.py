"""Admin for background report jobs: browse them, open the page, queue one again.

Jobs are written by ``reports.services`` only, so their fields are read-only here; the
stored report JSON is not shown in the change form (it can be megabytes), only its size
and a link to the page that renders it.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from . import services
from .models import ReportJob


@admin.register(ReportJob)
class ReportJobAdmin(admin.ModelAdmin):
    list_display = ("id", "benchmark", "runs", "status", "progress", "created_by", "created_at")
    list_filter = ("status", "benchmark")
    list_select_related = ("created_by",)
    date_hierarchy = "created_at"
    exclude = ("result",)
    readonly_fields = (
        "benchmark",
        "work",
        "run_ids",
        "samples",
        "seed",
        "status",
        "progress_done",
        "progress_total",
        "error",
        "result_size",
        "page",
        "created_by",
        "created_at",
        "started_at",
        "finished_at",
        "rebuilt_after_withdrawal_at",
    )
    actions = ("build_again",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReportJob]:
        return super().get_queryset(request).defer("result")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # jobs come from the report page or report_job_create

    @admin.display(description="runs")
    def runs(self, job: ReportJob) -> str:
        return ", ".join(map(str, job.run_ids)) if job.run_ids else "all"

    @admin.display(description="progress")
    def progress(self, job: ReportJob) -> str:
        return f"{job.progress_done}/{job.progress_total}"

    @admin.display(description="stored report")
    def result_size(self, job: ReportJob) -> str:
        if not job.result:
            return "none"
        tables, charts = job.result.get("tables", []), job.result.get("charts", [])
        return f"{len(tables)} tables, {len(charts)} charts"

    @admin.display(description="page")
    def page(self, job: ReportJob) -> str:
        url = reverse("reports:job", args=[job.pk])
        return format_html('<a href="{}">{}</a>', url, url)

    @admin.action(description="Build the selected reports again (as new jobs)")
    def build_again(self, request: HttpRequest, queryset: QuerySet[ReportJob]) -> None:
        created = []
        for job in queryset:
            try:
                created.append(
                    services.report_job_create(
                        benchmark=job.benchmark,
                        run_ids=job.run_ids,
                        study_ids=job.study_ids,
                        include_excluded=job.include_excluded,
                        work_id=job.work_id,
                        samples=job.samples,
                        seed=job.seed,
                        created_by=request.user,
                    )
                )
            except ValueError as exc:  # e.g. one of its runs was deleted since
                self.message_user(request, f"Job {job.pk}: {exc}", messages.ERROR)
        self.message_user(
            request,
            f"Queued {len(created)} new report job(s): {', '.join(str(j.pk) for j in created)}.",
            messages.SUCCESS,
        )
