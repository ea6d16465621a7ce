"""Study API routes, mounted at /api/studies/ by config/api_router.py.

Names carry a ``studies-`` prefix: the API has no namespaces.
"""

from django.urls import path

from . import views

urlpatterns = [
    path("<int:study_id>/responses/", views.StudyResponsesApi.as_view(), name="studies-responses"),
    path(
        "<int:study_id>/exit-answers/",
        views.StudyExitAnswersApi.as_view(),
        name="studies-exit-answers",
    ),
]
