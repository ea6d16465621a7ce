"""Model runs API routes, mounted at /api/modeling/ by config/api_router.py.

Route names carry a ``modeling-`` prefix: the API has no namespaces and other apps
register plain names (``work-list``, ``api-root``).
"""

from django.urls import path
from rest_framework.routers import DefaultRouter

from . import views

router = DefaultRouter()
router.root_view_name = "modeling-api-root"
router.register("backends", views.BackendViewSet, basename="modeling-backend")
router.register(
    "prompt-templates", views.PromptTemplateViewSet, basename="modeling-prompt-template"
)
router.register("runs", views.RunViewSet, basename="modeling-run")

urlpatterns = [
    path(
        "runs/<int:run_id>/predictions/",
        views.RunPredictionListApi.as_view(),
        name="modeling-run-predictions",
    ),
    *router.urls,
]
