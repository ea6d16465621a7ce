from django.urls import include, path

urlpatterns = [
    path("benchmarks/", include("benchmarks.api.urls")),
    path("modeling/", include("modeling.api.urls")),
    path("reports/", include("reports.api.urls")),
    path("studies/", include("studies.api.urls")),
]
