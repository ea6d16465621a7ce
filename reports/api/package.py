"""``GET /api/studies/<id>/package/``: a study's replication package (zip), for researchers.

Query: ``with_items=1``, ``runs=all|3,5``, ``with_platform_ids=1``, as the study page's
download and ``manage.py export_study`` take them. Mounted by ``reports.api.package_urls``
under ``/api/studies/`` (before the studies API's own routes).
"""

from __future__ import annotations

from django.http import FileResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from reports.replication.downloads import BadOptions, options_from_query, package_file_response
from reports.replication.exporting import ExportRefused
from studies.models import Study


class StudyPackageApi(APIView):
    """The study, its model runs and its report as a replication package (a zip)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("with_items", bool, description="1: bundle the items"),
            OpenApiParameter(
                "runs", str, description="'all' (default: every finished run) or ids 3,5"
            ),
            OpenApiParameter(
                "with_platform_ids",
                bool,
                description="1: include recruiting-platform ids (the manifest warns)",
            ),
        ],
        responses={
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY),
            400: OpenApiResponse(description="a bad option or a run of another benchmark"),
        },
    )
    def get(self, request: Request, study_id: int) -> FileResponse:
        study = get_object_or_404(Study, pk=study_id)
        try:
            return package_file_response(study, options_from_query(request.query_params))
        except BadOptions as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        except ExportRefused as exc:
            raise ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [str(exc)]}) from None
