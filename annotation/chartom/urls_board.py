"""CharToM-QA board pages at /annotation/chartom/ (namespace "annotation").

Batches, progress, provenance, bonus point and distractor review.
"""

from django.urls import re_path

from common.urls import screen_and_submit, under

from . import views_board as views

BATCH = "batches/<int:batch_id>/"
CONSTRUCTION = "constructions/<int:construction_id>/"
DISTRACTOR = "distractors/<int:assignment_id>/"

urlpatterns = [
    *under(
        "",
        [
            ("", views.board_index, "chartom"),
            (BATCH, views.batch_detail, "chartom-batch"),
            (f"{BATCH}start/", views.batch_start, "chartom-batch-start"),
            (f"{BATCH}retry/", views.batch_retry_all_view, "chartom-batch-retry"),
            (CONSTRUCTION, views.construction_detail, "chartom-construction"),
            (
                f"{CONSTRUCTION}distractors/redo/",
                views.distractors_redo,
                "chartom-distractors-redo",
            ),
            (f"{CONSTRUCTION}retry/", views.construction_retry_view, "chartom-retry"),
            ("bonus/take/", views.bonus_take, "chartom-bonus-take"),
            screen_and_submit(
                "bonus/<int:assignment_id>/",
                views.bonus_review,
                views.bonus_submit,
                "chartom-bonus",
            ),
            ("distractors/take/", views.distractor_take, "chartom-distractor-take"),
            screen_and_submit(
                DISTRACTOR, views.distractor_review, views.distractor_submit, "chartom-distractor"
            ),
            (f"{DISTRACTOR}done/", views.distractor_done, "chartom-distractor-done"),
        ],
    ),
    # At most 18 digits: the id stays a 64-bit integer (a longer one is simply no match).
    re_path(
        r"^batches/(?P<batch_id>[0-9]{1,18})/(?P<table>constructions|provenance)\.(?P<fmt>json|csv)$",
        views.batch_export,
        name="chartom-batch-export",
    ),
]
