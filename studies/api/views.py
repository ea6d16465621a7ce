"""Study export API for researchers (the global permission): the answers and the exit
questionnaire of one study, the rows of responses.json and exit.json, page by page.

``?include_excluded=1`` adds excluded participants' rows, as on the responses page.
"""

from __future__ import annotations

from collections.abc import Callable

from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from studies import exports
from studies.models import Study

from . import serializers

QUERY = [
    OpenApiParameter(
        "include_excluded", bool, description="1: excluded participants too (default 0)"
    ),
]


class _ExportApi(GenericAPIView):
    """Pages of an export's rows (the API's usual pagination, ``?page=&page_size=``)."""

    queryset = Study.objects.all()
    lookup_url_kwarg = "study_id"
    export: Callable[..., exports.Export]

    def _rows(self, request: Request) -> Response:
        study = self.get_object()
        query = serializers.ExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        export = self.export(study, include_excluded=query.validated_data["include_excluded"])
        page = self.paginate_queryset(list(export.rows))
        return self.get_paginated_response(page)


class StudyResponsesApi(_ExportApi):
    """Every answer of the study, one row each: a masked speaker (scene studies) or a
    pick (multiple-choice studies); the rows of responses.csv and responses.json."""

    export = staticmethod(exports.response_export)

    @extend_schema(
        parameters=QUERY,
        responses=PolymorphicProxySerializer(
            component_name="StudyResponseRow",
            serializers=[
                serializers.SceneResponseRowSerializer,
                serializers.ChoiceResponseRowSerializer,
            ],
            resource_type_field_name=None,
            many=True,
        ),
    )
    def get(self, request: Request, study_id: int) -> Response:
        return self._rows(request)


class StudyExitAnswersApi(_ExportApi):
    """The exit questionnaire: one row per participant and question, with the wording of
    the version they answered; the rows of exit.csv and exit.json."""

    export = staticmethod(exports.exit_export)

    @extend_schema(parameters=QUERY, responses=serializers.ExitAnswerRowSerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        return self._rows(request)
