"""Run pages, mounted at /runs/ by config/urls.py."""

from django.urls import path

from .runs import views

app_name = "modeling"

urlpatterns = [
    path("", views.run_list, name="run-list"),
    path("new/", views.run_new, name="run-new"),
    path("baselines/new/", views.baseline_run_new, name="baseline-run-new"),
    path("<int:run_id>/", views.run_detail, name="run-detail"),
    path("<int:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("<int:run_id>/resume/", views.run_resume, name="run-resume"),
    path("<int:run_id>/mental-states/", views.run_mental_states, name="run-mental-states"),
    path("templates/", views.template_list, name="template-list"),
    path("templates/<int:template_id>/", views.template_detail, name="template-detail"),
    path("templates/<int:template_id>/revise/", views.template_revise, name="template-revise"),
]
