"""Annotation API routes, mounted at /api/annotation/ by config/api_router.py.

Names carry an ``annotation-`` prefix: the API has no namespaces.
"""

from django.urls import path, re_path
from rest_framework.routers import DefaultRouter

from . import views

router = DefaultRouter()
router.root_view_name = "annotation-api-root"
router.register(
    "validation-batches", views.ValidationBatchViewSet, basename="annotation-validation-batch"
)
router.register("generation-jobs", views.GenerationJobViewSet, basename="annotation-generation-job")
router.register("chartom-batches", views.NoteBatchViewSet, basename="annotation-chartom-batch")

urlpatterns = [
    path(
        "validation-batches/<int:batch_id>/objects/",
        views.ValidationObjectListApi.as_view(),
        name="annotation-validation-objects",
    ),
    path(
        "validation-batches/<int:batch_id>/decisions/",
        views.ValidationDecisionListApi.as_view(),
        name="annotation-validation-decisions",
    ),
    path(
        "generation-jobs/<int:job_id>/stages/",
        views.GeneratedStageListApi.as_view(),
        name="annotation-generation-stages",
    ),
    path(
        "chartom-batches/<int:batch_id>/tasks/",
        views.AnnotationTaskListApi.as_view(),
        name="annotation-chartom-tasks",
    ),
    path(
        "chartom-check-decisions/",
        views.CheckDecisionListApi.as_view(),
        name="annotation-chartom-check-decisions",
    ),
    # The batch page's files under the page's names; at most 18 digits, as there.
    re_path(
        r"^chartom-batches/(?P<batch_id>[0-9]{1,18})/exports/"
        r"(?P<table>constructions|provenance)\.(?P<fmt>json|csv)$",
        views.NoteBatchExportApi.as_view(),
        name="annotation-chartom-export",
    ),
    *router.urls,
]
