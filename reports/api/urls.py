"""Report API routes, mounted at /api/reports/ by config/api_router.py.

Names carry a ``reports-`` prefix: the API has no namespaces.
"""

from django.urls import path

from . import views

urlpatterns = [
    path("<str:benchmark>/", views.ReportApi.as_view(), name="reports-report"),
    path(
        "<str:benchmark>/tables/<slug:key>/",
        views.ReportTableApi.as_view(),
        name="reports-report-table",
    ),
]
