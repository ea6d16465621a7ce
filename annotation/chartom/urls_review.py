"""CharToM-QA construction pages (review) at /annotation/chartom/, namespace "annotation".

Stages 3-6: the qualification trial, key-note extraction, paraphrase review and
question choice (see :mod:`.views_construct`).
"""

from common.urls import screen_and_submit, under

from . import views_construct as views

QSET = "sets/<int:qset_id>/"
ATTEMPT = "attempts/<int:attempt_id>/"

urlpatterns = [
    *under(
        "",
        [
            ("work/<slug:kind>/", views.work, "chartom-work"),
            ("work/<slug:kind>/take/", views.take, "chartom-take"),
            screen_and_submit(
                "extract/<int:assignment_id>/",
                views.extract_screen,
                views.extract_submit,
                "chartom-extract",
            ),
            screen_and_submit(
                "paraphrase/<int:assignment_id>/",
                views.paraphrase_screen,
                views.paraphrase_submit,
                "chartom-paraphrase",
            ),
            screen_and_submit(
                "question/<int:assignment_id>/",
                views.question_screen,
                views.question_submit,
                "chartom-question",
            ),
        ],
    ),
    *under(
        "qualification/",
        [
            ("", views.qualification_index, "chartom-qualification"),
            ("start/", views.qualification_start, "chartom-qualification-start"),
            (QSET, views.qualification_set, "chartom-qualification-set"),
            (f"{QSET}items/new/", views.qualification_gold_item, "chartom-qualification-gold-item"),
            (
                f"{QSET}items/<int:item_id>/remove/",
                views.qualification_item_remove,
                "chartom-qualification-item-remove",
            ),
            (
                f"{QSET}threshold/",
                views.qualification_threshold,
                "chartom-qualification-threshold",
            ),
            (f"{QSET}retry/", views.qualification_retry, "chartom-qualification-retry"),
            (f"{QSET}active/", views.qualification_activate, "chartom-qualification-activate"),
            (ATTEMPT, views.qualification_attempt, "chartom-qualification-attempt"),
            (
                f"{ATTEMPT}items/<int:position>/",
                views.qualification_item,
                "chartom-qualification-item",
            ),
            (f"{ATTEMPT}finish/", views.qualification_finish, "chartom-qualification-finish"),
        ],
    ),
]
