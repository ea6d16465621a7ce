"""Run pages, mounted at /runs/ by config/urls.py."""

from django.urls import path

from .runs import backend_views, explorer_views, views

app_name = "modeling"

urlpatterns = [
    path("", views.run_list, name="run-list"),
    path("new/", views.run_new, name="run-new"),
    path("baselines/new/", views.baseline_run_new, name="baseline-run-new"),
    path("<int:run_id>/", views.run_detail, name="run-detail"),
    path("<int:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("<int:run_id>/resume/", views.run_resume, name="run-resume"),
    path("<int:run_id>/mental-states/", views.run_mental_states, name="run-mental-states"),
    path("<int:run_id>/predictions/", explorer_views.prediction_list, name="prediction-list"),
    path(
        "<int:run_id>/predictions/<int:prediction_id>/",
        explorer_views.prediction_detail,
        name="prediction-detail",
    ),
    path("compare/", explorer_views.run_compare, name="run-compare"),
    path("backends/", backend_views.backend_list, name="backend-list"),
    path("backends/new/", backend_views.backend_new, name="backend-new"),
    path("backends/<int:backend_id>/edit/", backend_views.backend_edit, name="backend-edit"),
    path("backends/<int:backend_id>/toggle/", backend_views.backend_toggle, name="backend-toggle"),
    path("backends/<int:backend_id>/test/", backend_views.backend_test, name="backend-test"),
    path("templates/", views.template_list, name="template-list"),
    path("templates/<int:template_id>/", views.template_detail, name="template-detail"),
    path("templates/<int:template_id>/revise/", views.template_revise, name="template-revise"),
]
