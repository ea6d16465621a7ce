"""Rater pages (invite links), mounted at /s/.

``<token>/`` is the only address a rater needs: it renders the step they are at.
"""

from django.urls import path, register_converter

from accounts.throttling import token_patterns_throttled

from .choice import views as choice_views
from .models import Participant
from .participation import views as participant_views
from .scene import views

app_name = "rater"


class TokenConverter:
    """An invite token as ``secrets.token_urlsafe`` writes them: URL-safe base64, at most
    the column's 64 characters. Anything else (a NUL byte, which PostgreSQL refuses in
    a query, or a 5,000-character string) matches no page: a plain 404, no query."""

    regex = r"[A-Za-z0-9_-]{1,64}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(TokenConverter, "invite_token")

urlpatterns = [
    path("join/<int:study_id>/", views.join, name="join"),
    # Multiple-choice studies (CharToM-QA, DynToM, mapped benchmarks): same link, their
    # own steps.
    path("<invite_token:token>/books/", choice_views.books, name="choice-books"),
    path("<invite_token:token>/items/take/", choice_views.batch_take, name="choice-batch-take"),
    path(
        "<invite_token:token>/stages/<int:study_work_id>/take/",
        choice_views.stage_take,
        name="choice-stage-take",
    ),
    path(
        "<invite_token:token>/choices/<int:assignment_id>/",
        choice_views.answer,
        name="choice-answer",
    ),
    path(
        "<invite_token:token>/choices/<int:assignment_id>/pick/",
        choice_views.pick,
        name="choice-pick",
    ),
    path(
        "<invite_token:token>/choices/<int:assignment_id>/result/",
        choice_views.result,
        name="choice-result",
    ),
    path("p/<invite_token:public_token>/", participant_views.public_join, name="public"),
    path("<invite_token:token>/", views.start, name="start"),
    path("<invite_token:token>/refuse/", participant_views.refuse, name="refuse"),
    path("<invite_token:token>/continue/", participant_views.sitting_continue, name="continue"),
    path(
        "<invite_token:token>/released/",
        participant_views.released_acknowledge,
        name="released-ack",
    ),
    path("<invite_token:token>/exit/", participant_views.exit_answers, name="exit"),
    path("<invite_token:token>/withdraw/", participant_views.withdraw_data, name="withdraw"),
    path(
        "<invite_token:token>/scenes/<int:assignment_id>/confidence/",
        participant_views.confidence,
        name="confidence",
    ),
    path("<invite_token:token>/consent/", views.consent, name="consent"),
    path(
        "<invite_token:token>/works/<int:study_work_id>/familiarity/",
        views.familiarity,
        name="familiarity",
    ),
    path("<invite_token:token>/history/<int:session_id>/", views.history, name="history"),
    path(
        "<invite_token:token>/history/<int:session_id>/confirm/",
        views.history_confirm,
        name="history-confirm",
    ),
    path(
        "<invite_token:token>/scenes/<int:assignment_id>/save/", views.scene_save, name="scene-save"
    ),
    path(
        "<invite_token:token>/scenes/<int:assignment_id>/submit/",
        views.scene_submit,
        name="scene-submit",
    ),
    path(
        "<invite_token:token>/scenes/<int:assignment_id>/result/",
        views.scene_result,
        name="scene-result",
    ),
]

# Unknown invite tokens count against the client's address; past the limit, 429.
urlpatterns = token_patterns_throttled(
    urlpatterns, known=lambda token: Participant.objects.filter(token=token).exists()
)
