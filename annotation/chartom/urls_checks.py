"""CharToM-QA construction pages (checks) at /annotation/chartom/, namespace "annotation".

Note checks (section 4.1) and expert judgement of model answers (Appendix E), and the
reviewer queue of their conflicts.
"""

from common.urls import screen_and_submit, under

from . import views_check_review as review
from . import views_checks as views

urlpatterns = under(
    "checks/",
    [
        ("", views.checks_index, "chartom-checks"),
        ("notes/sample/", views.note_check_sample, "chartom-note-check-sample"),
        ("notes/take/", views.note_check_take, "chartom-note-check-take"),
        screen_and_submit(
            "notes/<int:assignment_id>/",
            views.note_check_screen,
            views.note_check_submit,
            "chartom-note-check",
        ),
        ("judgement/samples/", views.judgement_sample_create, "chartom-judgement-sample-create"),
        ("judgement/samples/<int:sample_id>/take/", views.judgement_take, "chartom-judgement-take"),
        screen_and_submit(
            "judgement/<int:assignment_id>/",
            views.judgement_screen,
            views.judgement_submit,
            "chartom-judgement",
        ),
        # The reviewer queue (annotation.adjudicate).
        ("review/", review.check_review_queue, "chartom-check-review"),
        ("review/decisions.csv", review.check_decisions_csv, "chartom-check-decisions-csv"),
        (
            "review/samples/<int:sample_id>/threshold/",
            review.check_review_threshold,
            "chartom-check-review-threshold",
        ),
        ("review/<int:task_id>/", review.check_review_task, "chartom-check-review-task"),
    ],
)
