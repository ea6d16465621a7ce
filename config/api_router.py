from django.urls import include, path

from interop.api import HarnessExportApi

urlpatterns = [
    path("annotation/", include("annotation.api.urls")),
    path("benchmarks/", include("benchmarks.api.urls")),
    path("imports/", include("benchmarks.api.import_urls")),
    path("modeling/", include("modeling.api.urls")),
    path("reports/", include("reports.api.urls")),
    # The package route first: the studies API cannot import reports (layers).
    path("studies/", include("reports.api.package_urls")),
    path("studies/", include("studies.api.urls")),
    path("harness/export/", HarnessExportApi.as_view(), name="harness-export"),
]
