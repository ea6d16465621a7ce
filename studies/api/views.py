"""The studies API, for researchers only (the global permission), as the study pages:
list and create studies, read one, go live, pause, resume and close it, create invite
links, read the participant ledger (pseudonymised), and the answers and exit
questionnaire of one study, the rows of responses.json and exit.json, page by page.

Creation and invites bind the JSON to the pages' own forms and call the functions the
pages call (``studies.api_services``, ``studies.services``), so the API accepts what
the pages accept. A form's errors are a 400 keyed by field name; a refused transition
(a ``StudyError``) is a 409 carrying its message. ``?include_excluded=1`` adds
excluded participants' rows to the exports, as on the responses page.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from django.db.models import Count, Prefetch, Q, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from benchmarks.models import Work
from common.scoping import ScopedQuerysetMixin
from studies import api_services, exports, services
from studies.choice.forms import ChoiceStudyForm
from studies.choice.services import CHOICE_BENCHMARKS
from studies.errors import StudyError
from studies.forms import InviteForm, StudyCreateForm
from studies.models import Study, StudyWork
from studies.participation.ledger import STATUSES, ledger_counts, ledger_csv_fields, study_ledger
from studies.selectors import STUDY_BENCHMARKS
from studies.views import invite_url

from . import serializers

QUERY = [
    OpenApiParameter(
        "include_excluded", bool, description="1: excluded participants too (default 0)"
    ),
]


class _ExportApi(ScopedQuerysetMixin, GenericAPIView):
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
                serializers.GenericChoiceResponseRowSerializer,
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


class StudyExitWideApi(_ExportApi):
    """The exit questionnaire, one row per participant and one column per item (the
    keys ``q1``…, a grid's statements and a multiple choice's options ``q4_1``…); the
    rows of exit-wide.csv and exit-wide.json. The codebook says what each column holds."""

    export = staticmethod(exports.exit_wide_export)

    @extend_schema(parameters=QUERY, responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, study_id: int) -> Response:
        return self._rows(request)


class StudyExitCodebookApi(_ExportApi):
    """Each column of the exit answers' wide export: its question, the statement or
    option it stands for, its values; the rows of exit-codebook.csv and .json."""

    export = staticmethod(exports.exit_codebook)

    @extend_schema(parameters=QUERY, responses=serializers.ExitCodebookRowSerializer(many=True))
    def get(self, request: Request, study_id: int) -> Response:
        return self._rows(request)


# -- studies: list, create, detail, transitions, invites, participants -------------------


def _studies() -> QuerySet[Study]:
    """Studies with their works, newest first."""
    works = StudyWork.objects.select_related("work").order_by("position")
    return Study.objects.prefetch_related(Prefetch("study_works", queryset=works)).order_by(
        "-created_at", "-pk"
    )


def _with_counts(study: Study) -> Study:
    """``study`` with its participants counted per ledger status (one query)."""
    study.participant_counts = ledger_counts(study_ledger(study=study))
    return study


def _detail(study_id: int) -> Study:
    held = Count("study_items", filter=Q(study_items__held_back=True), distinct=True)
    study = _studies().annotate(n_items=Count("study_items", distinct=True), n_held_back=held)
    return _with_counts(study.get(pk=study_id))


def _refused(exc: StudyError) -> Response:
    return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)


REFUSED = {409: OpenApiResponse(serializers.ErrorSerializer, description="refused: why")}
INVALID = {400: OpenApiResponse(description="errors keyed by field name")}
CREATE_REQUEST = PolymorphicProxySerializer(
    component_name="StudyCreate",
    serializers=[serializers.SceneStudyCreateSerializer, serializers.ChoiceStudyCreateSerializer],
    resource_type_field_name=None,
)
BENCHMARKS = (*STUDY_BENCHMARKS, *CHOICE_BENCHMARKS)


def _works_benchmark(works: Any) -> str:
    """The benchmark of the first listed work that exists ("" if none): the page's rule,
    which takes the study's benchmark from its first work."""
    if not isinstance(works, list):
        return ""
    ids = []
    for value in works[: settings.DATA_UPLOAD_MAX_NUMBER_FIELDS]:
        text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
        if re.fullmatch(r"[0-9]{1,19}", text) and 0 < int(text) <= serializers.MAX_ID:
            ids.append(int(text))
    found = dict(Work.objects.filter(pk__in=ids).values_list("pk", "benchmark"))
    return next((found[pk] for pk in ids if pk in found), "")


def _create_form(payload: Any) -> forms.Form:
    """The page's create form bound to ``payload``: the multiple-choice form for
    CharToM-QA and DynToM (by ``benchmark``, else by the works), the scene form else."""
    if not isinstance(payload, dict):
        raise ValidationError({api_settings.NON_FIELD_ERRORS_KEY: ["expected a JSON object"]})
    benchmark = payload.get("benchmark")
    if benchmark is not None and benchmark not in BENCHMARKS:
        raise ValidationError({"benchmark": [f"one of {', '.join(BENCHMARKS)}"]})
    benchmark = benchmark or _works_benchmark(payload.get("works"))
    if benchmark in CHOICE_BENCHMARKS:
        data = serializers.form_data(ChoiceStudyForm, payload)
        data["benchmark"] = benchmark
        return ChoiceStudyForm(data)
    return StudyCreateForm(
        serializers.form_data(StudyCreateForm, payload, allowed_extra=("benchmark",))
    )


class StudyListApi(ScopedQuerysetMixin, GenericAPIView):
    """Every study, newest first, with its works and participants per ledger status;
    POST creates a draft, as the New study pages do."""

    queryset = Study.objects.none()  # the schema's model; the list is _studies()
    parser_classes = (JSONParser,)

    @extend_schema(
        parameters=[serializers.StudyListQuerySerializer],
        responses=serializers.StudySerializer(many=True),
        summary="List studies (filter by status, benchmark)",
    )
    def get(self, request: Request) -> Response:
        query = serializers.StudyListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        studies = _studies()
        for name in ("status", "benchmark"):
            if value := query.validated_data.get(name):
                studies = studies.filter(**{name: value})
        page = [_with_counts(s) for s in self.paginate_queryset(studies)]
        data = serializers.StudySerializer(page, many=True, context={"request": request}).data
        return self.get_paginated_response(data)

    @extend_schema(
        request=CREATE_REQUEST,
        responses={201: serializers.StudyCreatedSerializer, **INVALID},
        summary="Create a draft study (scene or multiple choice, by the works' benchmark)",
    )
    def post(self, request: Request) -> Response:
        """The fields of the New study page (scene studies: ToM-in-AMC, TVShowGuess) or
        of the New multiple-choice study page (CharToM-QA, DynToM), validated by that
        page's form; ``works`` are work ids, ``tags`` a list of strings."""
        form = _create_form(request.data)
        if not form.is_valid():
            raise ValidationError(serializers.form_errors(form))
        given = request.data.get("benchmark")
        if isinstance(form, StudyCreateForm) and given:
            first = form.cleaned_data["works"][0]
            if given != first.benchmark:
                raise ValidationError({"benchmark": [f"the works are {first.benchmark}"]})
        try:
            if isinstance(form, ChoiceStudyForm):
                choice = api_services.choice_study_create(form=form, created_by=request.user)
                study, leaks, skipped = choice.study, None, choice.skipped
                summary = api_services.choice_created_summary(choice)
            else:
                scene = api_services.scene_study_create(form=form, created_by=request.user)
                study, leaks, skipped = scene.study, scene.leaks, {}
                summary = scene.summary()
        except StudyError as exc:
            raise ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [str(exc)]}) from None
        study = _detail(study.pk)
        study.creation = {
            "items": study.n_items,
            "skipped": skipped,
            "leaks": leaks,
            "summary": summary,
        }
        data = serializers.StudyCreatedSerializer(study, context={"request": request}).data
        return Response(data, status=status.HTTP_201_CREATED)


class _StudyApi(ScopedQuerysetMixin, GenericAPIView):
    queryset = Study.objects.all()
    lookup_url_kwarg = "study_id"


class StudyDetailApi(_StudyApi):
    """One study with its settings, item counts and participants per ledger status."""

    @extend_schema(responses=serializers.StudyDetailSerializer)
    def get(self, request: Request, study_id: int) -> Response:
        study = _detail(self.get_object().pk)
        return Response(serializers.StudyDetailSerializer(study, context={"request": request}).data)


class StudyGoLiveApi(_StudyApi):
    """Draft (or paused) to live, as the page's Go live: a scene study's name maps are
    drawn and its leak check re-run first; the item set is fixed."""

    @extend_schema(request=None, responses={200: serializers.GoLiveSerializer, **REFUSED})
    def post(self, request: Request, study_id: int) -> Response:
        try:
            launched = services.study_launch(study=self.get_object())
        except StudyError as exc:
            return _refused(exc)
        return Response(serializers.GoLiveSerializer(launched).data)


class StudyResumeApi(StudyGoLiveApi):
    """Paused to live again, as the page's Resume (the same service as Go live)."""


class _TransitionApi(_StudyApi):
    service: Any

    @extend_schema(request=None, responses={200: serializers.StudyDetailSerializer, **REFUSED})
    def post(self, request: Request, study_id: int) -> Response:
        study = self.get_object()
        try:
            type(self).service(study=study)
        except StudyError as exc:
            return _refused(exc)
        return Response(
            serializers.StudyDetailSerializer(_detail(study.pk), context={"request": request}).data
        )


class StudyPauseApi(_TransitionApi):
    """Live to paused: nobody is given new items until it resumes."""

    service = staticmethod(services.study_pause)


class StudyCloseApi(_TransitionApi):
    """Draft, live or paused to closed, for good: open items are no longer handed out."""

    service = staticmethod(services.study_close)


class StudyInvitesApi(_StudyApi):
    """New invite links, as the page's invite form: the only answer that holds tokens."""

    parser_classes = (JSONParser,)

    @extend_schema(
        request=serializers.InviteCreateSerializer,
        responses={201: serializers.InvitesCreatedSerializer, **INVALID, **REFUSED},
    )
    def post(self, request: Request, study_id: int) -> Response:
        study = self.get_object()
        # No page defaults: an empty request must not make the one link the page shows.
        data = serializers.form_data(
            InviteForm, request.data, line_lists=("labels",), page_defaults=False
        )
        form = InviteForm(data)
        # A closed study is refused before the form is read, as on the page.
        if study.status != Study.Status.CLOSED and not form.is_valid():
            raise ValidationError(serializers.form_errors(form))
        try:
            created = api_services.invites_create(study=study, form=form)
        except StudyError as exc:
            return _refused(exc)
        invites = [
            {"participant_id": p.pk, "label": p.label, "url": invite_url(request, p.token)}
            for p in created
        ]
        body = {"count": len(invites), "invites": invites}
        return Response(
            serializers.InvitesCreatedSerializer(body).data, status=status.HTTP_201_CREATED
        )


PARTICIPANT_COLUMNS = (
    # ledger_csv_fields' columns less the identifying ones (label or account, platform ids).
    "participant_id",
    "status",
    "status_at",
    "excluded",
    "exclusion_source",
    "exclusion_reason",
    "suggested_action",
)


class StudyParticipantsApi(_StudyApi):
    """The participant ledger in invitation order, pseudonymised: each participant by
    the id raters.csv and platform-ids.csv carry, never a label, account or token."""

    @extend_schema(
        parameters=[
            OpenApiParameter("status", str, enum=list(STATUSES), description="one ledger status")
        ],
        responses=serializers.ParticipantRowSerializer(many=True),
    )
    def get(self, request: Request, study_id: int) -> Response:
        study = self.get_object()
        try:
            rows = study_ledger(study=study, status=request.query_params.get("status", ""))
        except StudyError as exc:
            raise ValidationError({"status": [str(exc)]}) from None
        page = [
            {key: fields[key] for key in PARTICIPANT_COLUMNS}
            | {
                "status_label": row.status.label,
                "detail": row.status.detail,
                "items_given": getattr(row.participant, "n_assigned", 0),
                "items_submitted": getattr(row.participant, "n_submitted", 0),
            }
            for row in self.paginate_queryset(rows)
            for fields in [ledger_csv_fields(row)]
        ]
        return self.get_paginated_response(
            serializers.ParticipantRowSerializer(page, many=True).data
        )
