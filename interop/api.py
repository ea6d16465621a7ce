"""``GET /api/harness/export/``: items as an Inspect or lm-evaluation-harness task (zip).

The query takes the export page's fields (``source``, ``work``, ``works``, ``split``,
``study``, ``harness``, ``language``, ``category`` (repeated, one FIELD=VALUE each),
``limit``, ``method``) and is checked by the page's own form, so the API accepts what
the page accepts. A refusal is a 400 ``{"field": ..., "detail": ...}`` naming the
parameter; a study this workspace does not hold is a 404.
"""

from __future__ import annotations

from django.core.exceptions import NON_FIELD_ERRORS
from django.http import HttpResponse, QueryDict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from studies.models import Study

from .export import HARNESSES, SOURCES, STUDY, ExportError
from .exporting import error_param, export_build
from .forms import HarnessExportForm
from .views import zip_response


class HarnessExportErrorSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="the query parameter at fault")
    detail = serializers.CharField()


PARAMETERS = [
    OpenApiParameter("source", str, enum=SOURCES, description="what to export (default item_set)"),
    OpenApiParameter("work", str, description="item_set: the item set's key, e.g. tombench@1.0"),
    OpenApiParameter("works", str, description="dyntom: stage keys, comma-separated (may repeat)"),
    OpenApiParameter("split", str, description="dyntom: train, dev or test"),
    OpenApiParameter("study", int, description="study: the study's id"),
    OpenApiParameter("harness", str, enum=HARNESSES, description="default inspect"),
    OpenApiParameter(
        "language", str, description="item_set or study: e.g. en (default: its first/own)"
    ),
    OpenApiParameter(
        "category",
        str,
        many=True,
        explode=True,
        description="item_set: FIELD=VALUE, repeated; values of one field are alternatives",
    ),
    OpenApiParameter("limit", int, description="item_set: items; dyntom: stages"),
    OpenApiParameter(
        "method", str, enum=("vanilla", "cot"), description="inspect-plain: the prompt method"
    ),
]


def _form_data(query: QueryDict) -> dict[str, str]:
    """The page form's fields from the query: repeated values joined as the form's
    text areas take them, defaults for the radios."""
    data = {name: query.get(name, "") for name in ("work", "split", "study", "language")}
    data |= {name: query.get(name, "") for name in ("limit", "method")}
    data["source"] = query.get("source") or "item_set"
    data["harness"] = query.get("harness") or "inspect"
    data["works"] = ",".join(query.getlist("works"))
    data["categories"] = "\n".join(query.getlist("category"))
    return data


class HarnessExportApi(APIView):
    """Items (an item set, DynToM stages or a study's) as a harness task, in a zip."""

    @extend_schema(
        summary="Export items as an Inspect or lm-evaluation-harness task (zip)",
        parameters=PARAMETERS,
        responses={
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY),
            400: OpenApiResponse(HarnessExportErrorSerializer, description="a parameter at fault"),
            404: OpenApiResponse(description="no such study in this workspace"),
        },
    )
    def get(self, request: Request) -> HttpResponse:
        form = HarnessExportForm(_form_data(request.query_params))
        if not form.is_valid():
            name, errors = next(iter(form.errors.items()))
            return _refusal(name, " ".join(errors))
        export = form.export_request()
        if export.source == STUDY and not Study.objects.filter(pk=export.study_id).exists():
            raise NotFound(f"no study {export.study_id}")
        try:
            bundle = export_build(export)
        except ExportError as exc:
            return _refusal(*error_param(exc, source=export.source))
        return zip_response(bundle)


def _refusal(name: str, message: str) -> Response:
    """400 naming the query parameter (the form's text area ``categories`` is the
    repeated ``category`` here)."""
    name = {"categories": "category", NON_FIELD_ERRORS: "source"}.get(name, name)
    return Response(
        HarnessExportErrorSerializer({"field": name, "detail": message}).data, status=400
    )
