"""CharToM-QA board pages at /annotation/chartom/ (namespace "annotation").

Batches, progress, provenance, bonus point and distractor review.
"""

from django.urls import path, re_path

from . import views_board as views

urlpatterns = [
    path("", views.board_index, name="chartom"),
    path("batches/<int:batch_id>/", views.batch_detail, name="chartom-batch"),
    # At most 18 digits: the id stays a 64-bit integer (a longer one is simply no match).
    re_path(
        r"^batches/(?P<batch_id>[0-9]{1,18})/(?P<table>constructions|provenance)\.(?P<fmt>json|csv)$",
        views.batch_export,
        name="chartom-batch-export",
    ),
    path("batches/<int:batch_id>/start/", views.batch_start, name="chartom-batch-start"),
    path("batches/<int:batch_id>/retry/", views.batch_retry_all_view, name="chartom-batch-retry"),
    path(
        "constructions/<int:construction_id>/",
        views.construction_detail,
        name="chartom-construction",
    ),
    path(
        "constructions/<int:construction_id>/distractors/redo/",
        views.distractors_redo,
        name="chartom-distractors-redo",
    ),
    path(
        "constructions/<int:construction_id>/retry/",
        views.construction_retry_view,
        name="chartom-retry",
    ),
    path("bonus/take/", views.bonus_take, name="chartom-bonus-take"),
    path("bonus/<int:assignment_id>/", views.bonus_review, name="chartom-bonus"),
    path("bonus/<int:assignment_id>/submit/", views.bonus_submit, name="chartom-bonus-submit"),
    path("distractors/take/", views.distractor_take, name="chartom-distractor-take"),
    path("distractors/<int:assignment_id>/", views.distractor_review, name="chartom-distractor"),
    path(
        "distractors/<int:assignment_id>/submit/",
        views.distractor_submit,
        name="chartom-distractor-submit",
    ),
    path(
        "distractors/<int:assignment_id>/done/",
        views.distractor_done,
        name="chartom-distractor-done",
    ),
]
