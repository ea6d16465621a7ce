"""Model runs API for researchers (the global permission): backends, prompt templates,
runs (list, detail, create, cancel, resume) and a run's predictions.

Writes go through ``modeling.runs.services``; a ``ValueError`` from a service is the
caller's mistake and becomes a 400 carrying its message. Every list selects what its
serializer reads, so a page costs the same few queries whatever its size.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from common.scoping import ScopedQuerysetMixin
from modeling.models import Prediction, Run
from modeling.runs import selectors, services

from . import filters, serializers

# Every endpoint: a query on a secret column is a 400 before any filtering.
FILTER_BACKENDS = (filters.NoSecretLookups, DjangoFilterBackend)


def _service_error(exc: ValueError) -> ValidationError:
    return ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [str(exc)]})


class BackendViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """Configured LLM endpoints (never their keys or options)."""

    queryset = selectors.backend_list()
    serializer_class = serializers.BackendSerializer
    filter_backends = FILTER_BACKENDS
    # Only these: a filter or ordering on api_key or options would let a client
    # binary-search a key.
    filterset_fields = ("kind",)


class PromptTemplateViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """Every prompt template version, with how many runs used it."""

    queryset = selectors.prompt_template_list()
    serializer_class = serializers.PromptTemplateSerializer
    filter_backends = FILTER_BACKENDS
    filterset_class = filters.PromptTemplateFilter


class RunViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """Model runs with their progress, usage and settings; create, cancel and resume."""

    queryset = selectors.run_list().select_related("created_by")
    serializer_class = serializers.RunSerializer
    filter_backends = FILTER_BACKENDS
    filterset_class = filters.RunFilter
    # The input nests objects (selection, params), which only JSON carries.
    parser_classes = (JSONParser,)

    def _fresh(self, run_id: int) -> Response:
        return Response(self.get_serializer(self.get_queryset().get(pk=run_id)).data)

    @extend_schema(
        request=serializers.RunCreateInputSerializer,
        responses={201: serializers.RunSerializer},
        summary="Create a run and queue it for a worker",
    )
    # **kwargs: the router's format-suffix routes (runs.json) pass format=.
    def create(self, request: Request, **kwargs: object) -> Response:
        data = serializers.RunCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            run = services.run_create(**data.service_kwargs(), created_by=request.user)
        except ValueError as exc:
            raise _service_error(exc) from None
        response = self._fresh(run.pk)
        response.status_code = status.HTTP_201_CREATED
        return response

    @extend_schema(request=None, responses=serializers.RunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str, **kwargs: object) -> Response:
        """Stop the run after the calls in flight; a finished run is left as it is."""
        run = self.get_object()
        services.run_cancel(run_id=run.pk)
        return self._fresh(run.pk)

    @extend_schema(
        request=serializers.RunResumeInputSerializer, responses=serializers.RunSerializer
    )
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str, **kwargs: object) -> Response:
        """Queue a stopped or failed run again; done calls are not repeated, except, with
        ``send_again``, those answered from the cache. The body may be left out."""
        run = self.get_object()
        data = serializers.RunResumeInputSerializer(data=request.data or {})
        data.is_valid(raise_exception=True)
        try:
            services.run_resume(run_id=run.pk, send_again=data.validated_data["send_again"])
        except ValueError as exc:
            raise _service_error(exc) from None
        return self._fresh(run.pk)


@extend_schema(
    parameters=[
        OpenApiParameter(
            "q",
            OpenApiTypes.STR,
            description="text in the prompt sent or the raw reply (case-insensitive, "
            "at most 200 characters), as the prediction explorer's search",
        )
    ]
)
class RunPredictionListApi(generics.ListAPIView):
    """A run's predictions, in the order they were made, with raw outputs."""

    serializer_class = serializers.PredictionSerializer
    filter_backends = FILTER_BACKENDS
    filterset_class = filters.PredictionFilter

    def get_queryset(self) -> QuerySet[Prediction]:
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Prediction.objects.none()
        run = get_object_or_404(Run, pk=self.kwargs["run_id"])
        try:
            q = selectors.prediction_search_clean(self.request.query_params.get("q", ""))
        except ValueError as exc:
            raise ValidationError({"q": [str(exc).removeprefix("q: ")]}) from None
        return selectors.run_predictions(run=run, q=q)
