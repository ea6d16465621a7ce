"""Annotation pages, mounted at /annotation/ by config/urls.py."""

from django.urls import include, path

from .dyntom.generation import views
from .dyntom.validation import views as validation_views

app_name = "annotation"

urlpatterns = [
    path("chartom/", include("annotation.chartom.urls_review")),
    path("chartom/", include("annotation.chartom.urls_checks")),
    path("chartom/", include("annotation.chartom.urls_board")),
    path("generation/", views.generation_index, name="generation"),
    path("generation/<int:job_id>/", views.generation_job, name="generation-job"),
    path("validation/", validation_views.validation_index, name="validation"),
    path("validation/<int:batch_id>/", validation_views.validation_batch, name="validation-batch"),
    path(
        "validation/<int:batch_id>/take/", validation_views.validation_take, name="validation-take"
    ),
    path(
        "validation/stages/<int:vstage_id>/",
        validation_views.validation_stage,
        name="validation-stage",
    ),
    path(
        "validation/slots/<int:assignment_id>/save/",
        validation_views.score_save,
        name="validation-save",
    ),
    path(
        "validation/slots/<int:assignment_id>/submit/",
        validation_views.score_submit,
        name="validation-submit",
    ),
    path(
        "validation/objects/<int:object_id>/override/",
        validation_views.decision_override,
        name="validation-override",
    ),
]
