"""Study API routes, mounted at /api/studies/ by config/api_router.py.

Names carry a ``studies-`` prefix: the API has no namespaces.
"""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.StudyListApi.as_view(), name="studies-list"),
    path("<int:study_id>/", views.StudyDetailApi.as_view(), name="studies-detail"),
    path("<int:study_id>/go-live/", views.StudyGoLiveApi.as_view(), name="studies-go-live"),
    path("<int:study_id>/pause/", views.StudyPauseApi.as_view(), name="studies-pause"),
    path("<int:study_id>/resume/", views.StudyResumeApi.as_view(), name="studies-resume"),
    path("<int:study_id>/close/", views.StudyCloseApi.as_view(), name="studies-close"),
    path("<int:study_id>/invites/", views.StudyInvitesApi.as_view(), name="studies-invites"),
    path(
        "<int:study_id>/participants/",
        views.StudyParticipantsApi.as_view(),
        name="studies-participants",
    ),
    path("<int:study_id>/responses/", views.StudyResponsesApi.as_view(), name="studies-responses"),
    path(
        "<int:study_id>/exit-answers/",
        views.StudyExitAnswersApi.as_view(),
        name="studies-exit-answers",
    ),
    path("<int:study_id>/exit-wide/", views.StudyExitWideApi.as_view(), name="studies-exit-wide"),
    path(
        "<int:study_id>/exit-codebook/",
        views.StudyExitCodebookApi.as_view(),
        name="studies-exit-codebook",
    ),
]
