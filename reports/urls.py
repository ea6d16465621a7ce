"""Report pages, mounted at /reports/ by config/urls.py."""

from django.urls import path, register_converter

from . import validation_views, views
from .replication import views as package_views


class ImageFormat:
    regex = "svg|png"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class ExportFormat(ImageFormat):
    regex = "csv|xlsx|json"


register_converter(ImageFormat, "report_image")
register_converter(ExportFormat, "report_export")

app_name = "reports"

urlpatterns = [
    path("", views.report_index, name="index"),
    path("jobs/<int:job_id>/", views.report_job_detail, name="job"),
    path(
        "jobs/<int:job_id>/charts/<slug:key>.<report_image:fmt>",
        views.report_job_chart,
        name="job-chart",
    ),
    path(
        "jobs/<int:job_id>/export.<report_export:fmt>",
        views.report_job_export,
        name="job-export",
    ),
    path(
        "jobs/<int:job_id>/tables/<slug:key>.csv",
        views.report_job_table_csv,
        name="job-table-csv",
    ),
    path(
        "runs/<int:run_id>/training/<slug:key>.<report_image:fmt>",
        views.run_training_chart,
        name="run-training-chart",
    ),
    # Replication packages (issue 30). Before the benchmark routes, as "validation" is.
    path("packages/", package_views.package_index, name="package-index"),
    path("packages/import/", package_views.package_upload, name="package-upload"),
    path(
        "packages/study/<int:study_id>/",
        package_views.package_export_page,
        name="package-export",
    ),
    path(
        "packages/study/<int:study_id>/download/",
        package_views.package_download,
        name="package-download",
    ),
    # Before the benchmark routes: "validation" would otherwise read as a benchmark.
    path("validation/", validation_views.validation_report, name="validation"),
    path(
        "validation/export.<report_export:fmt>",
        validation_views.validation_export,
        name="validation-export",
    ),
    path(
        "validation/tables/<slug:key>.csv",
        validation_views.validation_table_csv,
        name="validation-table-csv",
    ),
    path(
        "validation/charts/<slug:key>.<report_image:fmt>",
        validation_views.validation_chart,
        name="validation-chart",
    ),
    path(
        "chartom-qa/text-similarity/",
        views.chartom_text_similarity,
        name="chartom-text-similarity",
    ),
    path("<slug:benchmark>/", views.report_detail, name="report"),
    path("<slug:benchmark>/jobs/", views.report_job_create, name="job-create"),
    path("<slug:benchmark>/charts/<slug:key>.<report_image:fmt>", views.report_chart, name="chart"),
    path("<slug:benchmark>/export.<report_export:fmt>", views.report_export, name="export"),
    path("<slug:benchmark>/tables/<slug:key>.csv", views.report_table_csv, name="table-csv"),
    path("<slug:benchmark>/tidy.csv", views.report_tidy_csv, name="tidy-csv"),
]
