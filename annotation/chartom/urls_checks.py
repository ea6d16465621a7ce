"""CharToM-QA construction pages (checks) at /annotation/chartom/, namespace "annotation".

Note checks (section 4.1) and expert judgement of model answers (Appendix E).
"""

from django.urls import path

from . import views_checks as views

urlpatterns = [
    path("checks/", views.checks_index, name="chartom-checks"),
    path("checks/notes/sample/", views.note_check_sample, name="chartom-note-check-sample"),
    path("checks/notes/take/", views.note_check_take, name="chartom-note-check-take"),
    path("checks/notes/<int:assignment_id>/", views.note_check_screen, name="chartom-note-check"),
    path(
        "checks/notes/<int:assignment_id>/submit/",
        views.note_check_submit,
        name="chartom-note-check-submit",
    ),
    path(
        "checks/judgement/samples/",
        views.judgement_sample_create,
        name="chartom-judgement-sample-create",
    ),
    path(
        "checks/judgement/samples/<int:sample_id>/take/",
        views.judgement_take,
        name="chartom-judgement-take",
    ),
    path("checks/judgement/<int:assignment_id>/", views.judgement_screen, name="chartom-judgement"),
    path(
        "checks/judgement/<int:assignment_id>/submit/",
        views.judgement_submit,
        name="chartom-judgement-submit",
    ),
]
