"""Report API for researchers (the global permission): a whole report, or one table.

``?runs=`` picks model runs, ``?studies=`` human studies (``none`` for none of either),
``?include_excluded=1`` counts excluded participants, ``?samples=first`` scores a run
with several samples per item on its first (default ``mean``: their mean), ``?seed=`` the
bootstrap seed: the
report page's selection (``reports.selection``), read by the same function. The generic
benchmark's report is one named benchmark's: ``?work=<id>`` (required there; 404 for a
work this workspace does not read).

Both build the report with ``reports.tables.build_report``, the function behind the
report page, the exports and the ``report`` command, so every surface agrees; through
the page's cache (``reports.services.report_build_cached``), so a report the page has
built is not built again while the data it reads is unchanged.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from reports.report_types import SAMPLES, SAMPLES_MEAN, Report
from reports.selection import BadSelection, selection_from_query
from reports.selectors import shared_reads
from reports.services import report_build_cached
from reports.tables import BUILDERS, report_json

from . import serializers

QUERY_PARAMETERS = [
    OpenApiParameter(
        "work",
        int,
        description=(
            "generic benchmark only (required there): the id of the named benchmark's "
            "work the report covers"
        ),
    ),
    OpenApiParameter("runs", str, description="comma-separated run ids, or 'none' (default: all)"),
    OpenApiParameter(
        "studies",
        str,
        description=(
            "comma-separated human study ids, or 'none' (default: every study of the "
            "benchmark but drafts and closed studies without a counted answer)"
        ),
    ),
    OpenApiParameter(
        "include_excluded",
        bool,
        description="1: count excluded participants too (default 0: leave them out)",
    ),
    OpenApiParameter(
        "samples",
        str,
        enum=list(SAMPLES),
        default=SAMPLES_MEAN,
        description=(
            "a run with several samples per item (Inspect epochs, a run with samples > 1): "
            "'mean' averages them (default), 'first' reads its first sample only "
            "(sample_index 0); the facts then say samples: first"
        ),
    ),
    OpenApiParameter("seed", int, description="bootstrap seed (default 0)"),
]


@shared_reads()  # the studies' answer counts read once for the selection and the build
def _report(request: Request, benchmark: str) -> Report:
    if benchmark not in BUILDERS:
        raise Http404(f"no benchmark {benchmark!r}")
    query = serializers.ReportQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    try:
        selection = selection_from_query(request.query_params, benchmark=benchmark)
    except BadSelection as exc:
        if exc.status == 404:
            raise NotFound(str(exc)) from None
        raise ValidationError({exc.field: [exc.message]}) from None
    try:
        # The page's cached build: the API answers from it while the data is unchanged.
        return report_build_cached(
            benchmark=benchmark, **selection.build_kwargs(), seed=query.validated_data["seed"]
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
