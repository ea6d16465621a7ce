"""``POST /api/imports/``: upload files, get the dry run; ``?confirm=1`` imports.

The same service as the ``/data/`` pages (:mod:`benchmarks.services`): an upload is
stored, laid out and imported inside a transaction that is rolled back (the dry run).
``?confirm=1`` then imports it: in the request (201, the report) or, above
``TOMLAB_IMPORT_BACKGROUND_BYTES``, on a worker (202, the job and its status URL).
Errors a client can cause are 400 with ``errors``: each names the request field, or
the file, record and field of the data; nothing is written then. Researchers only
(the default permission).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiTypes,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import services
from ..models import Benchmark, ImportJob, Split
from ..uploads import OPTION_LABELS, OPTION_MAX, UploadRefused, upload_sources

TRUE = ("1", "true", "yes", "on")


def _format_choices() -> list[tuple[str, str]]:
    return [(source.name, source.label) for source in upload_sources()]


@extend_schema_field({"type": "string", "format": "binary"})
class UploadFileField(serializers.FileField):
    """A file part of the multipart body (binary in the schema, not a URL)."""


class ImportUploadSerializer(serializers.Serializer):
    """The multipart request: files, the format and the format's options."""

    format = serializers.ChoiceField(choices=[], help_text="what the files are")
    files = serializers.ListField(
        child=UploadFileField(), help_text="the files (also accepted as files[])"
    )
    books = serializers.ListField(
        child=UploadFileField(),
        required=False,
        help_text="chartom-qa: " + OPTION_LABELS["books"][1],
    )
    split = serializers.ChoiceField(
        choices=[s for s in Split.values if s], required=False, help_text=OPTION_LABELS["split"][1]
    )
    title = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=OPTION_MAX["title"],
        help_text="screenplay: " + OPTION_LABELS["title"][1],
    )
    stage = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=OPTION_MAX["stage"],
        help_text="dyntom: " + OPTION_LABELS["stage"][1],
    )
    name = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=OPTION_MAX["name"],
        help_text="predictions (required): "
        + OPTION_LABELS["name"][1]
        + " generic (required): the benchmark's name, e.g. ToMBench.",
    )
    version = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=OPTION_MAX["version"],
        help_text="generic: " + OPTION_LABELS["version"][1],
    )
    preset = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=OPTION_MAX["preset"],
        help_text="generic: a mapping preset's name (ToMBench, or one saved in the "
        "workspace), used when no mapping is given",
    )
    mapping = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=OPTION_MAX["mapping"],
        help_text="generic: the field mapping as JSON text (docs/formats.md)",
    )
    save_as = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=OPTION_MAX["save_as"],
        help_text="generic: " + OPTION_LABELS["save_as"][1],
    )
    benchmark = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=20,
        help_text=f"predictions, one of {', '.join(Benchmark.values)}: "
        + OPTION_LABELS["benchmark"][1],
    )
    model = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=OPTION_MAX["model"],
        help_text="predictions: " + OPTION_LABELS["model"][1],
    )
    strict = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=5,
        help_text="replication-package: " + OPTION_LABELS["strict"][1],
    )
    keep_unknown = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=5,
        help_text="inspect, lm-eval: " + OPTION_LABELS["keep_unknown"][1],
    )
    id_field = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=OPTION_MAX["id_field"],
        help_text="lm-eval: " + OPTION_LABELS["id_field"][1],
    )
    item_map = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=OPTION_MAX["item_map"],
        help_text="lm-eval: " + OPTION_LABELS["item_map"][1],
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["format"].choices = _format_choices()


class ImportErrorSerializer(serializers.Serializer):
    file = serializers.CharField(allow_null=True, help_text="the uploaded file (and member)")
    record = serializers.CharField(allow_null=True, help_text="line, row or key in the file")
    field = serializers.CharField(allow_null=True, help_text="the data's field, or the request's")
    message = serializers.CharField()


class ImportErrorsSerializer(serializers.Serializer):
    errors = ImportErrorSerializer(many=True)
    error_count = serializers.IntegerField(
        required=False, help_text="failing records in all (errors lists the first 200)"
    )
    details = serializers.DictField(
        required=False,
        help_text="generic: the source fields found, the records that parsed (preview) "
        "and the items per category value",
    )


class ImportCountSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="Work, Scene, DynToMQuestion, Prediction…")
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()


class ImportReportSerializer(serializers.Serializer):
    counts = ImportCountSerializer(many=True)
    warnings = serializers.ListField(child=serializers.CharField())
    notes = serializers.ListField(child=serializers.CharField())


class ImportProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField(help_text="records, counted by the dry run")


class ImportJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    format = serializers.CharField()
    status = serializers.CharField(help_text=" | ".join(ImportJob.Status.values))
    files = serializers.ListField(child=serializers.CharField())
    options = serializers.DictField()
    upload_bytes = serializers.IntegerField()
    background = serializers.BooleanField(help_text="Confirm imports on a worker")
    progress = ImportProgressSerializer()
    dry_run = ImportReportSerializer(help_text="what Confirm would do")
    report = ImportReportSerializer(allow_null=True, help_text="what was imported")
    preview = serializers.ListField(
        child=serializers.DictField(), help_text="the first records, each with a kind"
    )
    error = serializers.CharField()
    status_url = serializers.URLField()
    confirm_url = serializers.URLField()
    page_url = serializers.URLField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


def _job_payload(request: Request, job: ImportJob) -> dict[str, Any]:
    def url(name: str) -> str:
        return request.build_absolute_uri(reverse(name, args=[job.pk]))

    return {
        "id": job.pk,
        "format": job.format_name,
        "status": job.status,
        "files": list(job.files),
        "options": dict(job.options),
        "upload_bytes": job.upload_bytes,
        "background": services.import_upload_background(job),
        "progress": dict(zip(("done", "total"), services.import_job_progress(job), strict=True)),
        "dry_run": job.dry_run or {"counts": [], "warnings": [], "notes": []},
        "report": job.report or None,
        "preview": list(job.preview),
        "error": job.error,
        "status_url": url("import-job-api"),
        "confirm_url": url("import-job-confirm-api"),
        "page_url": url("benchmarks:import-job"),
        "created_at": job.created_at,
        "finished_at": job.finished_at,
    }


def _errors(*errors: dict[str, Any]) -> Response:
    return Response({"errors": list(errors)}, status=status.HTTP_400_BAD_REQUEST)


def _refused(exc: UploadRefused) -> Response:
    """Every located error of a refused upload; a mapped import's failing records all
    listed (up to 200), with their count and what the others parsed to."""
    body: dict[str, Any] = {"errors": exc.as_dicts()}
    if exc.errors:
        body["error_count"] = exc.error_count
    if exc.details:
        body["details"] = exc.details
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


def _serializer_errors(detail: dict[str, Any]) -> Response:
    out = []
    for name, messages in detail.items():
        if isinstance(messages, dict):  # a list field's items: {index: [messages]}
            messages = [m for sub in messages.values() for m in sub]
        for message in messages:
            out.append({"file": None, "record": None, "field": name, "message": str(message)})
    return _errors(*out)


def _confirmed(request: Request, job: ImportJob) -> Response:
    try:
        job = services.import_upload_confirm(job=job)
    except UploadRefused as exc:
        return _errors(exc.as_dict())
    payload = _job_payload(request, job)
    if job.status == ImportJob.Status.SUCCEEDED:
        return Response(payload, status=status.HTTP_201_CREATED)
    if job.status == ImportJob.Status.FAILED:
        return Response(
            {
                **payload,
                "errors": [{"file": None, "record": None, "field": None, "message": job.error}],
            },
            status=status.HTTP_400_BAD_REQUEST,
        )
    return Response(payload, status=status.HTTP_202_ACCEPTED)


class ImportCreateApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        operation_id="imports_create",
        summary="Upload files: dry run, or import with ?confirm=1",
        request={"multipart/form-data": ImportUploadSerializer},
        parameters=[
            OpenApiParameter(
                "confirm",
                OpenApiTypes.BOOL,
                description="import after the dry run (201, or 202 when queued for a worker)",
            )
        ],
        responses={
            200: ImportJobSerializer,
            201: ImportJobSerializer,
            202: ImportJobSerializer,
            400: ImportErrorsSerializer,
        },
    )
    def post(self, request: Request) -> Response:
        # A plain dict, not request.data.copy(): copying a QueryDict deep-copies its
        # files, and a large upload's is an open temporary file that cannot be copied.
        data: dict[str, Any] = {
            name: request.data.get(name)
            for name in ImportUploadSerializer().fields
            if name not in ("files", "books") and name in request.data
        }
        data["files"] = request.FILES.getlist("files") or request.FILES.getlist("files[]")
        data["books"] = request.FILES.getlist("books") or request.FILES.getlist("books[]")
        serializer = ImportUploadSerializer(data=data)
        if not serializer.is_valid():
            return _serializer_errors(serializer.errors)
        values = serializer.validated_data
        try:
            job = services.import_upload_start(
                user=request.user,
                format_name=values["format"],
                files=values["files"],
                books=values.get("books", []),
                options={name: values.get(name, "") for name in OPTION_LABELS if name != "books"},
            )
        except UploadRefused as exc:
            return _refused(exc)
        if job.status == ImportJob.Status.QUEUED:  # a format without a dry run
            return Response(_job_payload(request, job), status=status.HTTP_202_ACCEPTED)
        if request.query_params.get("confirm", "").lower() in TRUE:
            return _confirmed(request, job)
        return Response(_job_payload(request, job))


def _job(request: Request, job_id: int) -> ImportJob:
    # An upload belongs to the researcher who made it; the command's jobs to everyone.
    job = get_object_or_404(ImportJob, pk=job_id)
    if job.created_by_id is not None and job.created_by_id != request.user.pk:
        raise Http404("No such import.")
    return job


class ImportJobApi(APIView):
    @extend_schema(
        operation_id="imports_job_retrieve",
        summary="An import's status, progress, dry run and report",
        responses={200: ImportJobSerializer},
    )
    def get(self, request: Request, job_id: int) -> Response:
        return Response(_job_payload(request, _job(request, job_id)))


class ImportJobConfirmApi(APIView):
    @extend_schema(
        operation_id="imports_job_confirm",
        summary="Import a dry run (201, or 202 when queued for a worker)",
        request=None,
        responses={
            201: ImportJobSerializer,
            202: ImportJobSerializer,
            400: ImportErrorsSerializer,
        },
    )
    def post(self, request: Request, job_id: int) -> Response:
        return _confirmed(request, _job(request, job_id))


class ImportJobCancelApi(APIView):
    @extend_schema(
        operation_id="imports_job_cancel",
        summary="Cancel a dry run or a queued import; its files are deleted",
        request=None,
        responses={200: ImportJobSerializer, 400: ImportErrorsSerializer},
    )
    def post(self, request: Request, job_id: int) -> Response:
        job = _job(request, job_id)
        try:
            job = services.import_upload_cancel(job=job)
        except UploadRefused as exc:
            return _errors(exc.as_dict())
        return Response(_job_payload(request, job))
