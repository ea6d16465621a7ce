"""Serializers for the model runs API: outputs per resource, and the input of a new run.

A backend's ``api_key`` (and its free-form ``options``, which may hold headers or
tokens) are left out of every output: the API is read by scripts that log what they get.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from benchmarks.models import Split, Work
from common.scoping import scoped
from modeling.models import Backend, Prediction, PromptTemplate, Run
from modeling.pipelines import get_pipeline, pipeline_benchmarks
from modeling.runs.outcome import run_status_label
from modeling.runs.selectors import run_cached_calls, run_origin


class ScopedSlugRelatedField(serializers.SlugRelatedField):
    """A backend of the request's workspace only (the class attribute's queryset was
    built before any request)."""

    def get_queryset(self):
        return scoped(super().get_queryset())


class ScopedPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    def get_queryset(self):
        return scoped(super().get_queryset())


class BackendSerializer(serializers.ModelSerializer):
    has_key = serializers.SerializerMethodField(help_text="an API key is stored")

    class Meta:
        model = Backend
        fields = (
            "id",
            "name",
            "kind",
            "base_url",
            "default_model",
            "model_path",
            "api_key_env",
            "has_key",
            "max_concurrency",
            "max_retries",
            "timeout_s",
            "price_input_per_1k",
            "price_output_per_1k",
            "created_at",
        )
        read_only_fields = fields

    def get_has_key(self, obj: Backend) -> bool:
        return obj.has_api_key


class PromptTemplateSerializer(serializers.ModelSerializer):
    run_count = serializers.IntegerField(read_only=True, help_text="runs using this version")

    class Meta:
        model = PromptTemplate
        fields = (
            "id",
            "name",
            "version",
            "benchmark",
            "method",
            "system",
            "user",
            "fields",
            "output_format",
            "notes",
            "is_active",
            "run_count",
            "created_at",
        )
        read_only_fields = fields


class TemplateReferenceSerializer(serializers.ModelSerializer):
    class Meta:
        model = PromptTemplate
        fields = ("id", "name", "version")
        read_only_fields = fields


class RunProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField(source="done_calls")
    total = serializers.IntegerField(source="total_calls")
    errors = serializers.IntegerField(source="error_calls")
    percent = serializers.SerializerMethodField()

    def get_percent(self, run: Run) -> int:
        return round(100 * run.done_calls / run.total_calls) if run.total_calls else 0


class RunSerializer(serializers.ModelSerializer):
    backend = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    status_display = serializers.SerializerMethodField(
        help_text='the status as the run pages show it: e.g. "succeeded with 3 unparseable", '
        '"failed: no parseable reply"'
    )
    unparseable = serializers.IntegerField(
        read_only=True,
        help_text="predictions whose answer could not be read (any parse status but ok)",
    )
    template = TemplateReferenceSerializer(read_only=True, allow_null=True)
    progress = RunProgressSerializer(source="*", read_only=True)
    created_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    origin = serializers.SerializerMethodField(
        help_text='where the predictions came from: "engine", "trained baseline", '
        '"Inspect", "lm-eval" or "predictions file"'
    )
    cached_calls = serializers.SerializerMethodField(
        help_text="calls answered from the response cache instead of the model; "
        'params.no_cache is true for a run that sends every call again ("send again")'
    )

    class Meta:
        model = Run
        fields = (
            "id",
            "name",
            "kind",
            "benchmark",
            "method",
            "backend",
            "model",
            "template",
            "params",
            "selection",
            "imported",
            "origin",
            "status",
            "status_display",
            "unparseable",
            "is_finished",
            "progress",
            "cached_calls",
            "prompt_tokens",
            "completion_tokens",
            "cost",
            "budget_tokens",
            "budget_cost",
            "error",
            "metrics",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        )
        read_only_fields = fields

    def get_status_display(self, run: Run) -> str:
        return run_status_label(run=run).text

    def get_origin(self, run: Run) -> str:
        return run_origin(run)

    def get_cached_calls(self, run: Run) -> int:
        return run_cached_calls(run=run)


class PredictionSerializer(serializers.ModelSerializer):
    # Annotated by the view's queryset, so a page needs no per-row item queries.
    work_key = serializers.CharField(
        read_only=True, allow_null=True, help_text="the item's work (DynToM: the stage's work)"
    )
    item_key = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text="DynToM: the question key; CharToM-QA: the natural key; "
        "masked speakers: scene and code; generic (mapped) items: the item id",
    )
    raw_output = serializers.CharField(
        source="reply_text", read_only=True, help_text="the model's raw reply (or its call's)"
    )

    class Meta:
        model = Prediction
        fields = (
            "id",
            "call",
            "sample_index",
            "dyntom_question",
            "qa_item",
            "speaker_instance",
            "mc_item",
            "work_key",
            "item_key",
            "parsed_answer",
            "parse_status",
            "correct",
            "raw_output",
            "details",
            "template_version",
            "model",
            "params",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
            "created_at",
        )
        read_only_fields = fields


class StrictSerializer(serializers.Serializer):
    """Rejects keys it does not know, so a typo is a 400 rather than silently ignored."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict) and (unknown := sorted(set(data) - set(self.fields))):
            raise serializers.ValidationError(
                {key: [f"unknown key; expected one of {', '.join(self.fields)}"] for key in unknown}
            )
        return super().to_internal_value(data)


class RunSelectionSerializer(StrictSerializer):
    works = serializers.ListField(
        child=serializers.CharField(max_length=255),
        required=False,
        help_text="work keys (e.g. trial50); all works when left out",
    )
    split = serializers.ChoiceField(choices=[s.value for s in Split if s.value], required=False)
    limit = serializers.IntegerField(min_value=1, required=False, help_text="at most this many")
    context = serializers.ChoiceField(
        choices=[0, 1000, 2000],
        required=False,
        help_text="CharToM-QA: the plot window shown, in tokens (default 0)",
    )
    run = serializers.IntegerField(
        min_value=1,
        required=False,
        help_text="CharToM-QA judge-bonus / judge-defects: the id of the generative run to judge",
    )
    scene_limit = serializers.IntegerField(
        min_value=1, required=False, help_text="speaker guessing: scenes to guess per work"
    )
    language = serializers.CharField(
        max_length=20,
        required=False,
        help_text="generic (mapped) benchmarks: the items' language, e.g. en or zh "
        "(default: the item set's first)",
    )
    categories = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField(max_length=500), min_length=1),
        required=False,
        help_text="generic (mapped) benchmarks: only items with these category values, e.g. "
        '{"ability": ["false belief", "knowledge"]}',
    )


class RunParamsSerializer(StrictSerializer):
    temperature = serializers.FloatField(min_value=0, max_value=2, required=False)
    top_p = serializers.FloatField(min_value=0, max_value=1, required=False)
    max_tokens = serializers.IntegerField(min_value=1, required=False)
    samples = serializers.IntegerField(
        min_value=1, max_value=50, required=False, help_text="samples per prompt, averaged"
    )
    seed = serializers.IntegerField(required=False)
    no_cache = serializers.BooleanField(
        required=False,
        help_text="send again, do not use the cache: ask the model every call; the new "
        "replies replace the cached ones",
    )
    options = serializers.DictField(
        required=False,
        help_text='the method\'s run options, e.g. {"shots": 20, "perturb_names": true}; '
        'generic (mapped) benchmarks: {"shuffle": true, "shuffle_seed": 7}',
    )


class RunResumeInputSerializer(StrictSerializer):
    send_again = serializers.BooleanField(
        default=False,
        help_text="send again, do not use the cache: ask the model for the replies that came "
        "from the cache, and take none from it from now on",
    )


class RunCreateInputSerializer(StrictSerializer):
    """A new run: which items, which backend and model, which template and sampling."""

    # service_kwargs() turns the validated data into services.run_create's arguments.

    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    benchmark = serializers.ChoiceField(choices=pipeline_benchmarks())
    method = serializers.CharField(max_length=50, help_text="e.g. vanilla or cot")
    backend = ScopedSlugRelatedField(
        slug_field="name", queryset=Backend.objects.all(), help_text="the backend's name"
    )
    model = serializers.CharField(
        max_length=255, required=False, allow_blank=True, help_text="default: the backend's"
    )
    template = ScopedPrimaryKeyRelatedField(
        queryset=PromptTemplate.objects.all(),
        required=False,
        allow_null=True,
        help_text="a template version id; default: the method's active template",
    )
    selection = RunSelectionSerializer(required=False)
    params = RunParamsSerializer(required=False)
    budget_tokens = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    budget_cost = serializers.DecimalField(
        max_digits=12, decimal_places=6, min_value=0, required=False, allow_null=True
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        benchmark = data["benchmark"]
        pipeline = get_pipeline(benchmark)
        errors: dict[str, list[str]] = {}
        if data["method"] not in pipeline.methods:
            errors["method"] = [
                f"{data['method']!r} is not a method for {benchmark}; "
                f"choose {', '.join(pipeline.methods)}"
            ]
        template = data.get("template")
        if template and template.benchmark != benchmark:
            errors["template"] = [f"{template} is a {template.benchmark} template"]
        if works := data.get("selection", {}).get("works"):
            known = set(
                Work.objects.filter(benchmark=benchmark, key__in=works).values_list(
                    "key", flat=True
                )
            )
            if unknown := [key for key in works if key not in known]:
                errors["selection"] = [f"unknown {benchmark} work key(s): {', '.join(unknown)}"]
        if "selection" not in errors:
            # The pipeline's own checks (a generic run's item set, language and
            # categories), as a 400 on the selection rather than on the whole request.
            try:
                pipeline.clean_selection(selection=dict(data.get("selection", {})))
            except ValueError as exc:
                errors["selection"] = [str(exc)]
        if errors:
            raise serializers.ValidationError(errors)
        return data

    def service_kwargs(self) -> dict[str, Any]:
        data = self.validated_data
        params = dict(data.get("params", {}))
        if data.get("model"):
            params["model"] = data["model"]
        return {
            "benchmark": data["benchmark"],
            "method": data["method"],
            "backend": data["backend"],
            "selection": dict(data.get("selection", {})),
            "params": params,
            "template": data.get("template"),
            "name": data["name"],
            "budget_tokens": data.get("budget_tokens"),
            "budget_cost": data.get("budget_cost"),
        }
