"""The researcher's data pages, mounted at /data/ by config/urls.py."""

from django.urls import path

from . import views

app_name = "benchmarks"

urlpatterns = [
    path("import/", views.import_new, name="import"),
    path("imports/", views.import_list, name="import-list"),
    path("imports/<int:job_id>/", views.import_job, name="import-job"),
    path("imports/<int:job_id>/confirm/", views.import_confirm, name="import-confirm"),
    path("imports/<int:job_id>/cancel/", views.import_cancel, name="import-cancel"),
]
