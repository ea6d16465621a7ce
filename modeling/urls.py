"""Run pages, mounted at /runs/ by config/urls.py."""

from common.urls import under

from .runs import backend_views, explorer_views, views

app_name = "modeling"

RUN = "<int:run_id>/"

urlpatterns = [
    *under(
        "",
        [
            ("", views.run_list, "run-list"),
            ("new/", views.run_new, "run-new"),
            ("baselines/new/", views.baseline_run_new, "baseline-run-new"),
            ("compare/", explorer_views.run_compare, "run-compare"),
        ],
    ),
    *under(
        RUN,
        [
            ("", views.run_detail, "run-detail"),
            ("cancel/", views.run_cancel, "run-cancel"),
            ("resume/", views.run_resume, "run-resume"),
            ("mental-states/", views.run_mental_states, "run-mental-states"),
            ("predictions/", explorer_views.prediction_list, "prediction-list"),
            (
                "predictions/<int:prediction_id>/",
                explorer_views.prediction_detail,
                "prediction-detail",
            ),
        ],
    ),
    *under(
        "backends/",
        [
            ("", backend_views.backend_list, "backend-list"),
            ("new/", backend_views.backend_new, "backend-new"),
            ("<int:backend_id>/edit/", backend_views.backend_edit, "backend-edit"),
            ("<int:backend_id>/toggle/", backend_views.backend_toggle, "backend-toggle"),
            ("<int:backend_id>/test/", backend_views.backend_test, "backend-test"),
            (
                "<int:backend_id>/test/status/",
                backend_views.backend_test_status,
                "backend-test-status",
            ),
        ],
    ),
    *under(
        "templates/",
        [
            ("", views.template_list, "template-list"),
            ("<int:template_id>/", views.template_detail, "template-detail"),
            ("<int:template_id>/revise/", views.template_revise, "template-revise"),
        ],
    ),
]
