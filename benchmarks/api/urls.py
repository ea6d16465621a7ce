"""Item bank API routes, mounted at /api/benchmarks/ by config/api_router.py."""

from rest_framework.routers import DefaultRouter

from . import views

router = DefaultRouter()
router.register("works", views.WorkViewSet, basename="work")
router.register("characters", views.CharacterViewSet, basename="character")
router.register("scenes", views.SceneViewSet, basename="scene")
router.register("speaker-instances", views.SpeakerInstanceViewSet, basename="speaker-instance")
router.register("qa-items", views.QAItemViewSet, basename="qa-item")
router.register("dyntom-stages", views.DynToMStageViewSet, basename="dyntom-stage")
router.register("dyntom-questions", views.DynToMQuestionViewSet, basename="dyntom-question")

urlpatterns = router.urls
