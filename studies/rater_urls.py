"""Rater pages (invite links), mounted at /s/.

``<token>/`` is the only address a rater needs: it renders the step they are at.
"""

from django.urls import path

from accounts.throttling import token_patterns_throttled

from . import rater_views as views
from .models import Participant

app_name = "rater"

urlpatterns = [
    path("join/<int:study_id>/", views.join, name="join"),
    path("<str:token>/", views.start, name="start"),
    path("<str:token>/consent/", views.consent, name="consent"),
    path(
        "<str:token>/works/<int:study_work_id>/familiarity/",
        views.familiarity,
        name="familiarity",
    ),
    path("<str:token>/history/<int:session_id>/", views.history, name="history"),
    path(
        "<str:token>/history/<int:session_id>/confirm/",
        views.history_confirm,
        name="history-confirm",
    ),
    path("<str:token>/scenes/<int:assignment_id>/save/", views.scene_save, name="scene-save"),
    path("<str:token>/scenes/<int:assignment_id>/submit/", views.scene_submit, name="scene-submit"),
    path("<str:token>/scenes/<int:assignment_id>/result/", views.scene_result, name="scene-result"),
]

# Unknown invite tokens count against the client's address; past the limit, 429.
urlpatterns = token_patterns_throttled(
    urlpatterns, known=lambda token: Participant.objects.filter(token=token).exists()
)
