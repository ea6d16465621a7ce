"""The replication package route, mounted at /api/studies/ by config/api_router.py before
``studies.api.urls`` (the studies API cannot import reports: layers)."""

from django.urls import path

from .package import StudyPackageApi

urlpatterns = [
    path("<int:study_id>/package/", StudyPackageApi.as_view(), name="studies-package"),
]
