"""Report API for researchers (the global permission): a whole report, or one table.

``?runs=`` picks model runs, ``?studies=`` human studies (``none`` for none), ``?seed=``
the bootstrap seed.

Both build the report with ``reports.tables.build_report``, the function behind the
report page, the exports and the ``report`` command, so every surface agrees.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from common.request_params import BadNumber, number_list
from reports.report_types import Report
from reports.tables import BUILDERS, build_report, report_json

from . import serializers

QUERY_PARAMETERS = [
    OpenApiParameter("runs", str, description="comma-separated run ids (default: all)"),
    OpenApiParameter(
        "studies",
        str,
        description=(
            "comma-separated human study ids, or 'none' (default: every study of the "
            "benchmark; ToM-in-AMC and TVShowGuess only)"
        ),
    ),
    OpenApiParameter("seed", int, description="bootstrap seed (default 0)"),
]


def _study_ids(request: Request) -> list[int] | None:
    """``?studies=3,5`` as ids, ``?studies=none`` as no study, absent or empty as all."""
    value = request.query_params.get("studies", "").strip()
    if not value:
        return None
    if value.lower() == "none":
        return []
    try:
        return number_list(value, name="studies")
    except BadNumber:
        raise ValidationError(
            {"studies": ["a comma-separated list of study ids, e.g. 3,5, or 'none'"]}
        ) from None


def _report(request: Request, benchmark: str) -> Report:
    if benchmark not in BUILDERS:
        raise Http404(f"no benchmark {benchmark!r}")
    query = serializers.ReportQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    study_ids = _study_ids(request)
    try:
        return build_report(
            benchmark,
            run_ids=query.validated_data.get("runs"),
            study_ids=study_ids,
            seed=query.validated_data["seed"],
        )
    except ValueError as exc:
        raise ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [str(exc)]}) from None


class ReportApi(APIView):
    """A benchmark's whole report: facts, tables (rows as objects) and chart specs."""

    @extend_schema(parameters=QUERY_PARAMETERS, responses=serializers.ReportSerializer)
    def get(self, request: Request, benchmark: str) -> Response:
        return Response(report_json(_report(request, benchmark)))


class ReportTableApi(APIView):
    """One table of a benchmark's report, by its key (e.g. ``accuracy``)."""

    @extend_schema(parameters=QUERY_PARAMETERS, responses=serializers.TableSerializer)
    def get(self, request: Request, benchmark: str, key: str) -> Response:
        report = _report(request, benchmark)
        try:
            table = report.table(key)
        except KeyError:
            raise Http404(f"the {benchmark} report has no table {key!r}") from None
        return Response(
            {
                "key": table.key,
                "title": table.title,
                "note": table.note,
                "columns": table.columns,
                "rows": table.records(),
            }
        )
