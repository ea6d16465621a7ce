"""Annotation pages, mounted at /annotation/ by config/urls.py."""

from django.urls import include, path

from common.urls import under

from .dyntom.generation import views
from .dyntom.validation import review_views
from .dyntom.validation import views as validation_views

app_name = "annotation"

SLOT = "slots/<int:assignment_id>/"

urlpatterns = [
    path("chartom/", include("annotation.chartom.urls_review")),
    path("chartom/", include("annotation.chartom.urls_checks")),
    path("chartom/", include("annotation.chartom.urls_board")),
    *under(
        "generation/",
        [
            ("", views.generation_index, "generation"),
            ("<int:job_id>/", views.generation_job, "generation-job"),
        ],
    ),
    *under(
        "validation/",
        [
            ("", validation_views.validation_index, "validation"),
            ("<int:batch_id>/", validation_views.validation_batch, "validation-batch"),
            ("<int:batch_id>/take/", validation_views.validation_take, "validation-take"),
            ("stages/<int:vstage_id>/", validation_views.validation_stage, "validation-stage"),
            (f"{SLOT}save/", validation_views.score_save, "validation-save"),
            (f"{SLOT}submit/", validation_views.score_submit, "validation-submit"),
            ("review/", review_views.review_index, "review"),
            ("review/<int:batch_id>/", review_views.review_queue, "review-queue"),
            ("review/<int:batch_id>/threshold/", review_views.review_threshold, "review-threshold"),
            ("review/objects/<int:object_id>/", review_views.review_object, "review-object"),
            (
                "objects/<int:object_id>/override/",
                validation_views.decision_override,
                "validation-override",
            ),
        ],
    ),
]
