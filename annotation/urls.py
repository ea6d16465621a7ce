"""Annotation pages, mounted at /annotation/ by config/urls.py."""

from django.urls import path

from . import views

app_name = "annotation"

urlpatterns = [
    path("generation/", views.generation_index, name="generation"),
    path("generation/<int:job_id>/", views.generation_job, name="generation-job"),
]
