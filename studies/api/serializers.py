"""Input and output shapes of the studies API, and the study export API's rows.

A study is created and invited to through the page's own forms (``form_data`` turns
the JSON into form data for them); the serializers here describe that input for the
schema, and the output: studies, going live, invite links, the pseudonymised ledger.

The export rows are the exports' own dicts (``studies.exports.response_export`` and
``exit_export``), returned as they are so the API, responses.json and exit.json cannot
differ; these serializers describe them for the schema at /api/docs/, and a test holds
their fields to the export columns.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.urls import reverse
from django.utils.datastructures import MultiValueDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.settings import api_settings

from studies.choice import allocation
from studies.choice.forms import ChoiceStudyForm
from studies.choice.generic import GENERIC
from studies.choice.services import CHOICE_BENCHMARKS
from studies.forms import MAX_INVITES, StudyCreateForm
from studies.models import Study
from studies.participation.ledger import STATUSES
from studies.selectors import STUDY_BENCHMARKS


class ExportQuerySerializer(serializers.Serializer):
    include_excluded = serializers.BooleanField(
        required=False,
        default=False,
        help_text="1: excluded participants' rows too, marked (left out by default)",
    )


class _ParticipantColumns(serializers.Serializer):
    participant_id = serializers.IntegerField()
    participant = serializers.CharField(help_text="the invite's label, account or id")
    withdrawn = serializers.BooleanField()
    excluded = serializers.BooleanField(help_text="left out of reports and exports by default")
    exclusion_reason = serializers.CharField()


class _RoleColumns(serializers.Serializer):
    role = serializers.ChoiceField(choices=("test", "practice", "attention"))
    practice = serializers.BooleanField()
    attention_check = serializers.BooleanField()


class SceneResponseRowSerializer(_ParticipantColumns, _RoleColumns):
    """A masked speaker's answer in a ToM-in-AMC or TVShowGuess study."""

    work = serializers.CharField()
    scene = serializers.CharField()
    seen = serializers.BooleanField(help_text="the rater had seen the work")
    code = serializers.CharField(help_text="the masked speaker, P0, P1, …")
    answer = serializers.CharField()
    answer_shown = serializers.CharField(help_text="the name shown when names were perturbed")
    cant_tell = serializers.BooleanField()
    gold = serializers.CharField()
    correct = serializers.BooleanField(allow_null=True)
    confidence = serializers.IntegerField(allow_null=True, help_text="1 to 5, when asked")
    history_needed = serializers.BooleanField(allow_null=True)
    tags = serializers.CharField(help_text="ToM dimensions, ;-separated")
    evidence = serializers.CharField()
    seconds_total = serializers.FloatField(allow_null=True, help_text="first shown to submit")
    seconds_active = serializers.FloatField(allow_null=True, help_text="idle gaps cut")
    total_ms = serializers.IntegerField(allow_null=True)
    active_ms = serializers.IntegerField(allow_null=True)
    first_shown_at = serializers.CharField()
    submitted_at = serializers.CharField()
    item_set_hash = serializers.CharField()
    instructions_version = serializers.CharField()
    assignment_seed = serializers.CharField()
    app_version = serializers.CharField()
    names = serializers.CharField()


class ChoiceResponseRowSerializer(_ParticipantColumns, _RoleColumns):
    """A pick in a CharToM-QA or DynToM study (the columns the choice import reads first)."""

    item = serializers.CharField()
    work = serializers.CharField()
    read = serializers.CharField(help_text="CharToM-QA: had read the book")
    round = serializers.IntegerField(help_text="1, or 2 for a CharToM-QA revision")
    option = serializers.IntegerField()
    shown = serializers.IntegerField()
    kept = serializers.CharField()
    correct = serializers.CharField()
    ms = serializers.IntegerField()
    shown_at = serializers.CharField()
    answered_at = serializers.CharField()
    question = serializers.CharField()
    dimension = serializers.CharField()
    question_type = serializers.CharField()
    mental_state = serializers.CharField()
    directness = serializers.CharField()
    confidence = serializers.IntegerField(allow_null=True)
    seconds = serializers.FloatField(help_text="question shown to this pick")
    seconds_total = serializers.FloatField(allow_null=True, help_text="the whole item")
    seconds_active = serializers.FloatField(allow_null=True)


class GenericChoiceResponseRowSerializer(_ParticipantColumns, _RoleColumns):
    """A pick in a mapped benchmark's study (``studies.choice.exchange.generic_columns``);
    besides these, one ``category_<field>`` column per category field of the benchmark."""

    item = serializers.CharField(help_text="the item's id (the column the import reads)")
    item_id = serializers.CharField()
    work = serializers.CharField(help_text="the benchmark's key, name@version")
    language = serializers.CharField()
    round = serializers.IntegerField(help_text="always 1: an item is answered once")
    option = serializers.IntegerField(help_text="0-based, in the item's own option order")
    option_letter = serializers.CharField(help_text="A, B, C… in the item's own order")
    shown = serializers.IntegerField(help_text="the position it was shown at")
    shown_letter = serializers.CharField(help_text="the key it had on the participant's screen")
    correct = serializers.BooleanField()
    ms = serializers.IntegerField(help_text="item shown to pick, server clock")
    shown_at = serializers.CharField()
    answered_at = serializers.CharField()
    question = serializers.CharField()
    option_seed = serializers.CharField(help_text="orders the options; blank: not shuffled")
    seconds = serializers.FloatField()
    seconds_total = serializers.FloatField(allow_null=True)


class ExitAnswerRowSerializer(serializers.Serializer):
    """One exit question as a participant saw it (that version's wording) and their answer."""

    participant_id = serializers.IntegerField()
    status = serializers.CharField(help_text="the participant ledger's status")
    withdrawn = serializers.BooleanField()
    excluded = serializers.BooleanField()
    exclusion_reason = serializers.CharField()
    version = serializers.IntegerField(help_text="version of the exit questions answered")
    key = serializers.CharField()
    question = serializers.CharField()
    choices = serializers.CharField(help_text="the choices offered, |-separated; none: free text")
    answer = serializers.CharField(help_text="empty: skipped")
    answered_at = serializers.CharField()


class ExitCodebookRowSerializer(serializers.Serializer):
    """One column of the exit answers' wide export (``exit-wide``) and what it holds."""

    column = serializers.CharField(help_text="q1…; q4_1…: a grid's statement or an option")
    version = serializers.CharField(help_text="version of the exit questions; empty: all")
    key = serializers.CharField(help_text="the question's key")
    type = serializers.CharField(help_text="choice, multi, likert, grid, number or text")
    question = serializers.CharField()
    part = serializers.CharField(help_text="the grid's statement or the option; else empty")
    values = serializers.CharField(help_text="the values the column takes")
    required = serializers.CharField()
    shown_if = serializers.CharField(help_text="q2=Yes: shown only on that answer; else empty")


# -- the studies API: input ---------------------------------------------------------------
#
# A create or invite request is bound to the page's own form (``studies.forms``,
# ``studies.choice.forms``), so the API validates exactly as the page does. The input
# serializers below are generated from those forms' fields and exist for the schema and
# for a first check of JSON types (a list where the form takes one value, a number where
# it takes text); every rule (ranges, names taken, one benchmark) is the form's.

LINE_LIST_FIELDS = ("tags",)  # textareas read one value per line: a list of strings in JSON
NON_FIELD = api_settings.NON_FIELD_ERRORS_KEY
SCALARS = (str, int, float)
MAX_ID = 2**63 - 1  # the largest id a (big) integer column holds
MULTIPLE = (forms.MultipleChoiceField, forms.ModelMultipleChoiceField)  # the latter is no subclass


def _initial(name: str, field: forms.Field) -> Any:
    """What the page's form shows in ``field`` before anyone types: what a browser posts
    when it is left alone, and so the API's value when a key is left out."""
    if isinstance(field, forms.BooleanField) or field.initial is None:
        return None
    if name in LINE_LIST_FIELDS:
        return [line for line in str(field.initial).splitlines() if line.strip()]
    return field.initial


def _form_field_for_schema(name: str, field: forms.Field) -> serializers.Field:
    """The serializer field describing a form field (its label and help as help text)."""
    text = ". ".join(str(t) for t in (field.label, field.help_text) if t) or None
    kw: dict[str, Any] = {"required": field.required, "help_text": text}
    if (initial := _initial(name, field)) is not None:
        kw |= {"required": False, "default": initial}
    if name in LINE_LIST_FIELDS:
        return serializers.ListField(child=serializers.CharField(), **kw)
    if isinstance(field, forms.BooleanField):
        return serializers.BooleanField(**kw)
    if isinstance(field, forms.ModelMultipleChoiceField):
        kw["help_text"] = f"{text} (work ids)"
        return serializers.ListField(child=serializers.IntegerField(), **kw)
    if isinstance(field, forms.MultipleChoiceField) and not field.choices:
        # Values known only once the form is bound (a mapped benchmark's category values).
        return serializers.ListField(child=serializers.CharField(), **kw)
    if isinstance(field, forms.MultipleChoiceField):
        return serializers.ListField(child=serializers.ChoiceField(choices=field.choices), **kw)
    if isinstance(field, forms.ChoiceField):
        return serializers.ChoiceField(choices=field.choices, **kw)
    if isinstance(field, forms.IntegerField):
        return serializers.IntegerField(
            min_value=field.min_value, max_value=field.max_value, allow_null=True, **kw
        )
    return serializers.CharField(
        max_length=getattr(field, "max_length", None), allow_blank=not field.required, **kw
    )


def form_input_serializer(
    component: str, form_class: type[forms.Form], extra: dict[str, serializers.Field]
) -> type[serializers.Serializer]:
    """A serializer class with one field per field of ``form_class`` (plus ``extra``)."""
    fields = {
        name: _form_field_for_schema(name, field) for name, field in form_class.base_fields.items()
    }
    doc = f"The fields of the page's {form_class.__name__}, validated by that form."
    return type(
        f"{component}Serializer", (serializers.Serializer,), {**fields, **extra, "__doc__": doc}
    )


SceneStudyCreateSerializer = form_input_serializer(
    "SceneStudyCreate",
    StudyCreateForm,
    {
        # Not a field of the scene form: the API reads it (or the works) to pick the form.
        "benchmark": serializers.ChoiceField(
            choices=STUDY_BENCHMARKS,
            required=False,
            help_text="optional: the works' benchmark (a scene study: tom-in-amc, tvshowguess)",
        )
    },
)
ChoiceStudyCreateSerializer = form_input_serializer("ChoiceStudyCreate", ChoiceStudyForm, {})


def _past_any_id(value: Any) -> bool:
    """Whether ``value`` reads as an integer no database id column can hold."""
    try:
        return abs(int(str(value).strip())) > MAX_ID
    except ValueError:  # not an integer (or over Python's 4,300 digits): the form says so
        return False


def _bad_value(value: Any, *, many: bool) -> str:
    if many:
        return "expected a list of values (text or numbers)"
    if isinstance(value, (list, dict)):
        return "expected a single value, not a list or an object"
    return "expected text or a number, not true or false"


def form_data(
    form_class: type[forms.Form],
    payload: Any,
    *,
    line_lists: tuple[str, ...] = LINE_LIST_FIELDS,
    allowed_extra: tuple[str, ...] = (),
    page_defaults: bool = True,
) -> MultiValueDict:
    """A JSON object turned into form data for ``form_class``, as a browser would post it.

    Raises a 400 (``ValidationError``) naming each field that is not the form's, or whose
    JSON type cannot be a value of it: booleans only for check boxes, lists only for
    multiple choices and line lists, and numbers or text for the rest. ``null`` is a
    field left blank; with ``page_defaults`` a key left out takes the value the page
    shows in the field. ``line_lists``: textareas of one value per line, as lists.
    """
    if not isinstance(payload, dict):
        raise ValidationError({NON_FIELD: ["expected a JSON object of the form's fields"]})
    fields = form_class.base_fields
    errors: dict[str, list[str]] = {}
    data = MultiValueDict()
    for key, value in payload.items():
        if key in allowed_extra:
            continue
        field = fields.get(key)
        if field is None:
            errors[str(key)[:60]] = [f"unknown field; this form takes: {', '.join(fields)}"]
            continue
        if value is None:
            continue
        multiple = isinstance(field, MULTIPLE) or key in line_lists
        if isinstance(field, forms.BooleanField):
            if not isinstance(value, bool):
                errors[key] = ["expected true or false"]
            elif value:
                data[key] = "on"
        elif multiple:
            if not isinstance(value, list) or not all(
                isinstance(v, SCALARS) and not isinstance(v, bool) for v in value
            ):
                errors[key] = [_bad_value(value, many=True)]
            elif (
                isinstance(field, MULTIPLE) and len(value) > settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
            ):
                # The page's limit on posted values (a browser cannot send more): one
                # query with more parameters than SQLite takes would be a 500.
                limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
                errors[key] = [f"at most {limit} values"]
            elif key in line_lists:
                if any("\n" in str(v) or "\r" in str(v) for v in value):
                    errors[key] = ["one line each: no line breaks inside a value"]
                else:
                    data[key] = "\n".join(str(v) for v in value)
            elif isinstance(field, forms.ModelMultipleChoiceField) and (
                past := [v for v in value if _past_any_id(v)]
            ):
                # The form would send it to the database, which cannot hold it (a 500).
                message = field.error_messages["invalid_pk_value"]
                errors[key] = [message % {"pk": str(past[0])[:40]}]
            else:
                data.setlist(key, [str(v) for v in value])
        elif isinstance(value, SCALARS) and not isinstance(value, bool):
            data[key] = str(value)
        else:
            errors[key] = [_bad_value(value, many=False)]
    if errors:
        raise ValidationError(errors)
    for name, field in fields.items():
        # Left out: what the page shows in the field (a browser posts it as it is).
        if not page_defaults or name in payload:
            continue
        if (initial := _initial(name, field)) is not None:
            if isinstance(initial, list) and name not in line_lists:
                data.setlist(name, [str(v) for v in initial])
            else:
                data[name] = "\n".join(initial) if name in line_lists else str(initial)
    return data


def form_errors(form: forms.Form) -> dict[str, list[str]]:
    """A bound form's errors keyed by field name (non-field errors as DRF names them)."""
    return {
        (NON_FIELD if key == forms.forms.NON_FIELD_ERRORS else key): [str(e) for e in errs]
        for key, errs in form.errors.items()
    }


class InviteCreateSerializer(serializers.Serializer):
    """``{"labels": [...]}`` or ``{"count": n}``, validated by the page's invite form."""

    labels = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text=f"one link per label (who it is for), at most {MAX_INVITES}; "
        "labels win over count",
    )
    count = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_INVITES,
        help_text="this many links, labelled rater 1, rater 2, …",
    )


class StudyListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Study.Status.choices, required=False)
    benchmark = serializers.ChoiceField(
        choices=[*STUDY_BENCHMARKS, *CHOICE_BENCHMARKS], required=False
    )


# -- the studies API: output --------------------------------------------------------------


class StudyWorkSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="work.id")
    key = serializers.CharField(source="work.key")
    title = serializers.CharField(source="work.title")


LedgerCountsSerializer = type(
    "LedgerCountsSerializer",
    (serializers.Serializer,),
    {
        key: serializers.IntegerField(help_text=f"participants {label}")
        for key, label in STATUSES.items()
    }
    | {"__doc__": "Participants per ledger status (every status, 0 when none)."},
)


class StudyLinksSerializer(serializers.Serializer):
    detail = serializers.URLField()
    participants = serializers.URLField()
    responses = serializers.URLField()
    exit_answers = serializers.URLField()
    invites = serializers.URLField(help_text="POST: create invite links")
    go_live = serializers.URLField()
    pause = serializers.URLField()
    resume = serializers.URLField()
    close = serializers.URLField()
    page = serializers.URLField(help_text="the study's page in the app")


class StudySerializer(serializers.Serializer):
    """A study as the list shows it (``participants``: the ledger's counts)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    benchmark = serializers.CharField()
    kind = serializers.SerializerMethodField(help_text="scene (masked speakers) or choice")
    status = serializers.ChoiceField(choices=Study.Status.choices)
    works = StudyWorkSerializer(source="study_works.all", many=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    participants = LedgerCountsSerializer(source="participant_counts")
    links = serializers.SerializerMethodField()

    def get_kind(self, study: Study) -> str:
        return "choice" if study.benchmark in CHOICE_BENCHMARKS else "scene"

    @extend_schema_field(StudyLinksSerializer)
    def get_links(self, study: Study) -> dict[str, str]:
        request = self.context["request"]
        names = {
            "detail": "studies-detail",
            "participants": "studies-participants",
            "responses": "studies-responses",
            "exit_answers": "studies-exit-answers",
            "invites": "studies-invites",
            "go_live": "studies-go-live",
            "pause": "studies-pause",
            "resume": "studies-resume",
            "close": "studies-close",
            "page": "studies:detail",
        }
        return {
            key: request.build_absolute_uri(reverse(name, args=[study.pk]))
            for key, name in names.items()
        }


class StudySettingsSerializer(serializers.ModelSerializer):
    """Every setting of the study (the public link's token is never shown: only its cap)."""

    class Meta:
        model = Study
        fields = (
            "instructions",
            "consent",
            "instructions_version",
            "overlap",
            "min_seen",
            "min_unseen",
            "one_to_one",
            "perturb_names",
            "reveal",
            "open_join",
            "tags",
            "sampling",
            "seed",
            "item_set_hash",
            "imported",
            "design_applied_at",
            "param_participant",
            "param_study",
            "param_session",
            "completion_code",
            "completion_url",
            "no_work_url",
            "public_cap",
            "signup_ceiling",
            "minutes_estimate",
            "debrief",
            "exit_questions",
            "exit_questions_version",
            "session_cap",
            "idle_timeout_minutes",
            "allow_cant_tell",
            "ask_confidence",
            "attention_max_failures",
            "fast_exclusion_share",
            "instructed_max_failures",
            "attention_instruction",
            "floor_wpm",
            "floor_max_share",
        )
        read_only_fields = fields


class StudyItemCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField(source="n_items")
    held_back = serializers.IntegerField(source="n_held_back", help_text="never assigned")


class StratumRowSerializer(serializers.Serializer):
    """One row of the study page's per-stratum table (``allocation.stratum_rows``)."""

    stratum = serializers.CharField()
    items = serializers.IntegerField()
    answers = serializers.IntegerField(help_text="counted answers")
    estimate_pct = serializers.FloatField(
        allow_null=True, help_text="mean of item means (widest: human - model), %"
    )
    half_width_points = serializers.FloatField(allow_null=True, help_text="95% half-width")
    answers_to_target = serializers.IntegerField(
        allow_null=True,
        help_text="answers still needed for the target half-width; null: more raters on "
        "these items cannot reach it",
    )


class AllocationSerializer(serializers.Serializer):
    """How a generic study's answers are allocated (issue 50), and its strata now."""

    design = serializers.ChoiceField(choices=list(allocation.DESIGN_LABELS.items()))
    stratum_field = serializers.CharField()
    min_per_item = serializers.IntegerField(help_text="phase one: answers per item first")
    runs = serializers.ListField(child=serializers.IntegerField(), help_text="widest: runs")
    target_points = serializers.FloatField(help_text="the target 95% half-width, points")
    budget = serializers.IntegerField(help_text="answers in all: overlap x test items")
    description = serializers.CharField(help_text="the design in words, as the report says it")
    strata = StratumRowSerializer(many=True)


class StudyDetailSerializer(StudySerializer):
    """A study with its settings and item counts (and a generic study's allocation)."""

    items = StudyItemCountsSerializer(source="*")
    settings = StudySettingsSerializer(source="*")
    allocation = serializers.SerializerMethodField()

    @extend_schema_field(AllocationSerializer(allow_null=True))
    def get_allocation(self, study: Study) -> dict[str, Any] | None:
        if study.benchmark != GENERIC:
            return None
        budget = allocation.study_budget(study)
        data = allocation.study_allocation(study).as_dict() | {
            "budget": budget,
            "description": allocation.design_text(study, answers=budget),
            "strata": allocation.stratum_rows(study),
        }
        return AllocationSerializer(data).data


class LeakReportSerializer(serializers.Serializer):
    scenes = serializers.IntegerField()
    flagged = serializers.IntegerField(help_text="scenes that give a candidate away")
    mentions = serializers.IntegerField(help_text="scenes naming one only in dialogue")
    held_back = serializers.IntegerField()
    shown = serializers.IntegerField(help_text="named where the task shows the text anyway")


class StudyCreationSerializer(serializers.Serializer):
    items = serializers.IntegerField(help_text="items drawn (scenes or questions/stages)")
    skipped = serializers.DictField(
        child=serializers.IntegerField(), help_text="multiple choice: items left out, by why"
    )
    leaks = LeakReportSerializer(allow_null=True, help_text="scene studies: the leak check")
    summary = serializers.CharField(help_text="the page's message")


class StudyCreatedSerializer(StudyDetailSerializer):
    created = StudyCreationSerializer(source="creation")


class GoLiveSerializer(serializers.Serializer):
    """What going live (or resuming) did: the leak check (first time only) and what is
    held back."""

    id = serializers.IntegerField(source="study.pk")
    status = serializers.CharField(source="study.status")
    summary = serializers.CharField(help_text="the page's message")
    leaks = LeakReportSerializer(
        allow_null=True, help_text="null when nothing was checked (a resume, multiple choice)"
    )
    held_back = serializers.ListField(
        child=serializers.CharField(), help_text="source ids of the scenes no rater is given"
    )


class InviteSerializer(serializers.Serializer):
    participant_id = serializers.IntegerField()
    label = serializers.CharField()
    url = serializers.URLField(help_text="the link to send: it holds the participant's token")


class InvitesCreatedSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    invites = InviteSerializer(many=True)


class ParticipantRowSerializer(serializers.Serializer):
    """A participant's ledger status, pseudonymised: ``participant_id`` is the id that
    raters.csv and platform-ids.csv carry; no label, account, platform id or token."""

    participant_id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=list(STATUSES.items()))
    status_label = serializers.CharField()
    status_at = serializers.CharField(help_text="ISO 8601, as in raters.csv; empty: unknown")
    detail = serializers.CharField(help_text="why: the exclusion's source, the no-work reason")
    excluded = serializers.BooleanField()
    exclusion_source = serializers.CharField()
    exclusion_reason = serializers.CharField()
    suggested_action = serializers.CharField(help_text="approve, reject or return on a platform")
    items_given = serializers.IntegerField()
    items_submitted = serializers.IntegerField()


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
