"""Researcher pages for studies, mounted at /studies/."""

from django.urls import path

from . import views
from .choice import researcher_views as choice_views
from .participation import researcher_views as running_views

app_name = "studies"

urlpatterns = [
    path("", views.study_list, name="list"),
    path("new/", views.study_new, name="new"),
    path("new/choice/", choice_views.study_new, name="choice-new"),
    path("<int:study_id>/design/", choice_views.design, name="choice-design"),
    path("<int:study_id>/directness/", choice_views.directness, name="choice-directness"),
    # The file the choice import reads back: responses.csv/.json under its older name.
    path(
        "<int:study_id>/choices.<str:fmt>",
        views.study_export,
        {"name": "responses"},
        name="choice-export",
    ),
    path("<int:study_id>/choices/import/", choice_views.import_, name="choice-import"),
    path("<int:study_id>/strata.csv", choice_views.strata_csv, name="strata-csv"),
    path("<int:study_id>/instructed/", choice_views.instructed, name="instructed"),
    path("<int:study_id>/", views.study_detail, name="detail"),
    path("<int:study_id>/go-live/", views.study_go_live, name="go-live"),
    path("<int:study_id>/pause/", views.study_pause, name="pause"),
    path("<int:study_id>/resume/", views.study_resume, name="resume"),
    path("<int:study_id>/close/", views.study_close, name="close"),
    path("<int:study_id>/edit/", views.study_edit, name="edit"),
    path("<int:study_id>/duplicate/", views.study_duplicate, name="duplicate"),
    path("<int:study_id>/delete/", views.study_delete, name="delete"),
    path("<int:study_id>/running/", running_views.study_running, name="running"),
    path("<int:study_id>/invite.csv/", running_views.study_invite_csv, name="invite-csv"),
    path(
        "<int:study_id>/exit-questions/",
        running_views.study_exit_questions,
        name="exit-questions",
    ),
    path("<int:study_id>/roles/", running_views.study_item_roles, name="roles"),
    path("<int:study_id>/preview/", running_views.study_preview, name="preview"),
    path("<int:study_id>/webhook/", running_views.study_webhook, name="webhook"),
    path(
        "<int:study_id>/webhook/rotate/", running_views.study_webhook_rotate, name="webhook-rotate"
    ),
    path(
        "<int:study_id>/webhook/remove/", running_views.study_webhook_remove, name="webhook-remove"
    ),
    path("<int:study_id>/webhook/test/", running_views.study_webhook_test, name="webhook-test"),
    path("<int:study_id>/raters.csv", running_views.study_quality_csv, name="raters-csv"),
    path(
        "<int:study_id>/platform-ids.csv",
        running_views.study_platform_ids_csv,
        name="platform-ids-csv",
    ),
    path(
        "<int:study_id>/participants/<int:participant_id>/exclusion/",
        running_views.participant_exclusion,
        name="exclusion",
    ),
    path("<int:study_id>/texts/", views.study_texts, name="texts"),
    path("<int:study_id>/invite/", views.study_invite, name="invite"),
    path(
        "<int:study_id>/participants/<int:participant_id>/withdraw/",
        views.participant_withdraw,
        name="withdraw",
    ),
    path("<int:study_id>/leaks/", views.study_leaks, name="leaks"),
    path("<int:study_id>/leaks/check/", views.study_leaks_check, name="leaks-check"),
    path("<int:study_id>/leaks/hold-all/", views.leaks_hold_all, name="leaks-hold-all"),
    path("<int:study_id>/scenes/<int:scene_id>/hold/", views.scene_hold_view, name="scene-hold"),
    path("<int:study_id>/works/<int:study_work_id>/aliases/", views.aliases_save, name="aliases"),
    path("<int:study_id>/works/<int:study_work_id>/genders/", views.genders_save, name="genders"),
    path("<int:study_id>/names/", views.names_build, name="names"),
    path("<int:study_id>/responses/", views.study_responses, name="responses"),
    *(
        path(
            f"<int:study_id>/{name}.{fmt}",
            views.study_export,
            {"name": name, "fmt": fmt},
            name=f"{name}-{fmt}",
        )
        for name in ("responses", "exit", "exit-wide", "exit-codebook")
        for fmt in ("csv", "json")
    ),
]
