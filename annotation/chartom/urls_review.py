"""CharToM-QA construction pages (review) at /annotation/chartom/, namespace "annotation".

Stages 3-6: the qualification trial, key-note extraction, paraphrase review and
question choice (see :mod:`.views_construct`).
"""

from django.urls import path

from . import views_construct as views

urlpatterns = [
    path("work/<slug:kind>/", views.work, name="chartom-work"),
    path("work/<slug:kind>/take/", views.take, name="chartom-take"),
    path("extract/<int:assignment_id>/", views.extract_screen, name="chartom-extract"),
    path(
        "extract/<int:assignment_id>/submit/", views.extract_submit, name="chartom-extract-submit"
    ),
    path("paraphrase/<int:assignment_id>/", views.paraphrase_screen, name="chartom-paraphrase"),
    path(
        "paraphrase/<int:assignment_id>/submit/",
        views.paraphrase_submit,
        name="chartom-paraphrase-submit",
    ),
    path("question/<int:assignment_id>/", views.question_screen, name="chartom-question"),
    path(
        "question/<int:assignment_id>/submit/",
        views.question_submit,
        name="chartom-question-submit",
    ),
    path("qualification/", views.qualification_index, name="chartom-qualification"),
    path("qualification/start/", views.qualification_start, name="chartom-qualification-start"),
    path(
        "qualification/sets/<int:qset_id>/",
        views.qualification_set,
        name="chartom-qualification-set",
    ),
    path(
        "qualification/sets/<int:qset_id>/items/new/",
        views.qualification_gold_item,
        name="chartom-qualification-gold-item",
    ),
    path(
        "qualification/sets/<int:qset_id>/items/<int:item_id>/remove/",
        views.qualification_item_remove,
        name="chartom-qualification-item-remove",
    ),
    path(
        "qualification/sets/<int:qset_id>/threshold/",
        views.qualification_threshold,
        name="chartom-qualification-threshold",
    ),
    path(
        "qualification/sets/<int:qset_id>/retry/",
        views.qualification_retry,
        name="chartom-qualification-retry",
    ),
    path(
        "qualification/sets/<int:qset_id>/active/",
        views.qualification_activate,
        name="chartom-qualification-activate",
    ),
    path(
        "qualification/attempts/<int:attempt_id>/",
        views.qualification_attempt,
        name="chartom-qualification-attempt",
    ),
    path(
        "qualification/attempts/<int:attempt_id>/items/<int:position>/",
        views.qualification_item,
        name="chartom-qualification-item",
    ),
    path(
        "qualification/attempts/<int:attempt_id>/finish/",
        views.qualification_finish,
        name="chartom-qualification-finish",
    ),
]
