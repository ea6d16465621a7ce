"""The annotation API: read-only endpoints for DynToM validation batches, DynToM
generation jobs and CharToM-QA construction batches, with their tasks, decisions and
exports, and the reviewers' decisions on CharToM-QA checks.

Researchers only, as the pages they mirror (the batch, job and export pages): the API's
default permission (``accounts.permissions.IsResearcher``) refuses raters and
annotators with 403. The models' managers scope every query to the request's
workspace, so another workspace's batch is not found (404), nested lists included.
"""

from __future__ import annotations

import json

from django.db.models import Count, Prefetch, QuerySet
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.request import Request
from rest_framework.views import APIView

from common.scoping import ScopedQuerysetMixin

from ..chartom import check_review, exports_board
from ..chartom.board import batch_list
from ..chartom.models import AnnotationTask, NoteBatch, TaskAssignment
from ..dyntom.generation.selectors import generation_job_list
from ..models import (
    AcceptedSet,
    Adjudication,
    GeneratedStage,
    GenerationJob,
    ValidationAssignment,
    ValidationBatch,
    ValidationDecision,
    ValidationObject,
)
from . import serializers

# --- DynToM validation ------------------------------------------------------------------


class ValidationBatchViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """DynToM validation batches, newest first, with their stage, object and decision
    counts; a batch's page adds the progress per annotator and its accepted sets."""

    queryset = ValidationBatch.objects.select_related("created_by").annotate(
        stage_count=Count("stages", distinct=True),
        object_count=Count("validation_objects", distinct=True),
        decided_count=Count("validation_objects__decision", distinct=True),
    )

    def get_queryset(self) -> QuerySet[ValidationBatch]:
        batches = super().get_queryset().order_by("-created_at", "-pk")
        if self.action == "retrieve":
            batches = batches.prefetch_related(
                Prefetch("accepted_sets", queryset=AcceptedSet.objects.order_by("-version"))
            )
        return batches

    def get_serializer_class(self) -> type[serializers.ValidationBatchSerializer]:
        if self.action == "retrieve":
            return serializers.ValidationBatchDetailSerializer
        return serializers.ValidationBatchSerializer


def _validation_batch(view: APIView, key: str = "batch_id") -> ValidationBatch:
    return get_object_or_404(ValidationBatch, pk=view.kwargs[key])


class ValidationObjectListApi(generics.ListAPIView):
    """A batch's objects to score (its tasks) in stage order, each with every
    annotator's slot (scores, comment, submitted) and its decision."""

    serializer_class = serializers.ValidationObjectSerializer

    def get_queryset(self) -> QuerySet[ValidationObject]:
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return ValidationObject.objects.none()
        slots = ValidationAssignment.objects.select_related("annotator", "rubric").prefetch_related(
            "scores"
        )
        return (
            ValidationObject.objects.filter(batch=_validation_batch(self))
            .select_related("vstage", "decision", "decision__rule", "decision__overridden_by")
            .prefetch_related(Prefetch("assignments", queryset=slots.order_by("pk")))
            .order_by("vstage__position", "position")
        )


class ValidationDecisionListApi(generics.ListAPIView):
    """A batch's decisions, one per decided object: the rules' outcome with its reason
    and rule version, and a researcher's override beside it."""

    serializer_class = serializers.ValidationDecisionSerializer

    def get_queryset(self) -> QuerySet[ValidationDecision]:
        if getattr(self, "swagger_fake_view", False):
            return ValidationDecision.objects.none()
        return (
            ValidationDecision.objects.filter(object__batch=_validation_batch(self))
            .select_related("rule", "overridden_by")
            .order_by("object__vstage__position", "object__position")
        )


# --- DynToM generation ------------------------------------------------------------------


class GenerationJobViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """DynToM generation jobs, newest first, with their status as the pages say it."""

    queryset = generation_job_list().select_related("run", "created_by")
    serializer_class = serializers.GenerationJobSerializer


class GeneratedStageListApi(generics.ListAPIView):
    """A job's generated stages in order: texts, questions, lineage (model, template
    versions, calls) and the keep/discard decision with who made it and why."""

    serializer_class = serializers.GeneratedStageSerializer

    def get_queryset(self) -> QuerySet[GeneratedStage]:
        if getattr(self, "swagger_fake_view", False):
            return GeneratedStage.objects.none()
        job = get_object_or_404(GenerationJob, pk=self.kwargs["job_id"])
        return GeneratedStage.objects.filter(job=job).select_related("decided_by").order_by("index")


# --- CharToM-QA construction ------------------------------------------------------------


class NoteBatchViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """CharToM-QA construction batches, newest first, with their note, construction,
    published and needs-retry counts; a batch adds its constructions per stage and state."""

    queryset = batch_list()

    def get_queryset(self) -> QuerySet[NoteBatch]:
        return super().get_queryset().order_by("-created_at", "-pk")

    def get_serializer_class(self) -> type[serializers.NoteBatchSerializer]:
        if self.action == "retrieve":
            return serializers.NoteBatchDetailSerializer
        return serializers.NoteBatchSerializer


def _note_batch(view: APIView) -> NoteBatch:
    return get_object_or_404(NoteBatch, pk=view.kwargs["batch_id"])


class AnnotationTaskListApi(generics.ListAPIView):
    """A batch's human tasks (note checks and construction steps), each with the
    annotators' slots and the answers they submitted (their decisions)."""

    serializer_class = serializers.AnnotationTaskSerializer

    def get_queryset(self) -> QuerySet[AnnotationTask]:
        if getattr(self, "swagger_fake_view", False):
            return AnnotationTask.objects.none()
        slots = TaskAssignment.objects.select_related("annotator").order_by("taken_at", "pk")
        return (
            AnnotationTask.objects.filter(batch=_note_batch(self))
            .prefetch_related(Prefetch("assignments", queryset=slots))
            .order_by("kind", "position", "pk")
        )


# The batch page's three downloads: (table, format) -> (builder, content type).
NOTE_BATCH_EXPORTS = {
    ("constructions", "json"): (
        lambda batch: json.dumps(
            exports_board.batch_export_json(batch), ensure_ascii=False, indent=1
        ),
        "application/json; charset=utf-8",
    ),
    ("constructions", "csv"): (exports_board.constructions_csv, "text/csv; charset=utf-8"),
    ("provenance", "csv"): (exports_board.provenance_csv, "text/csv; charset=utf-8"),
}


class _FileNegotiation(BaseContentNegotiation):
    """The export answers its file whatever the client accepts (``Accept: text/csv``
    would otherwise be a 406: no renderer serves it); errors still render as JSON."""

    def select_parser(self, request: Request, parsers: list) -> object:
        return parsers[0]

    def select_renderer(self, request: Request, renderers: list, format_suffix=None) -> tuple:
        return renderers[0], renderers[0].media_type


class NoteBatchExportApi(APIView):
    """The batch page's exports, the same files: ``constructions.json`` (each
    construction with its whole history), ``constructions.csv`` and ``provenance.csv``
    (one row per field change)."""

    content_negotiation_class = _FileNegotiation

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "batch_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="batch id"
            ),
            OpenApiParameter(
                "table",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                enum=["constructions", "provenance"],
            ),
            OpenApiParameter("fmt", OpenApiTypes.STR, OpenApiParameter.PATH, enum=["json", "csv"]),
        ],
        responses={
            (200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT),
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
        },
        summary="Download a construction batch's export",
    )
    def get(
        self, request: Request, batch_id: str, table: str, fmt: str, **kwargs: object
    ) -> HttpResponse:
        batch = _note_batch(self)
        if (table, fmt) not in NOTE_BATCH_EXPORTS:
            choices = ", ".join(f"{t}.{f}" for t, f in NOTE_BATCH_EXPORTS)
            raise Http404(f"no export {table}.{fmt}; choose {choices}")
        build, content_type = NOTE_BATCH_EXPORTS[table, fmt]
        response = HttpResponse(build(batch), content_type=content_type)
        response["Content-Disposition"] = (
            f'attachment; filename="chartom-batch-{batch.pk}-{table}.{fmt}"'
        )
        return response


class CheckDecisionListApi(generics.ListAPIView):
    """Every reviewer decision on a CharToM-QA check (note checks, expert judgement),
    newest first, with its provenance: the rows of the review queue's decisions CSV.
    ``?kind=note_check`` or ``?kind=judgement`` keeps one check."""

    serializer_class = serializers.CheckDecisionSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "kind", OpenApiTypes.STR, OpenApiParameter.QUERY, enum=list(check_review.KINDS)
            )
        ]
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> HttpResponse:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> list[dict[str, object]] | QuerySet[Adjudication]:
        if getattr(self, "swagger_fake_view", False):
            return Adjudication.objects.none()  # the schema reads the rows' model
        kind = self.request.query_params.get("kind") or None
        if kind is not None and kind not in check_review.KINDS:
            raise ValidationError({"kind": f"one of {', '.join(check_review.KINDS)}"})
        return check_review.check_decision_rows(kind=kind)
