"""Import API routes, mounted at /api/imports/ by config/api_router.py."""

from django.urls import path

from . import imports

urlpatterns = [
    path("", imports.ImportCreateApi.as_view(), name="import-create-api"),
    path("jobs/<int:job_id>/", imports.ImportJobApi.as_view(), name="import-job-api"),
    path(
        "jobs/<int:job_id>/confirm/",
        imports.ImportJobConfirmApi.as_view(),
        name="import-job-confirm-api",
    ),
    path(
        "jobs/<int:job_id>/cancel/",
        imports.ImportJobCancelApi.as_view(),
        name="import-job-cancel-api",
    ),
]
