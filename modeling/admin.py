"""Admin for model runs: configure backends, browse runs, calls, predictions and the cache.

A backend's API key is write-only: the change form shows an empty password input,
a blank submission keeps the stored key, and no list column, search field or page
ever renders it (``has_key`` says whether one is set). It is stored encrypted, and so
are secret values in ``options``, which are shown masked and kept when the mask is
sent back. No changelist may filter, search or sort on either column (the admin site,
``common.admin_input``, refuses any query that reaches a field marked
``holds_secrets``): ``?api_key__gte=sk-M`` and
``?options__headers__Authorization__startswith=…`` each recovered a whole key.

Where a key may go is guarded too. Only a backend's creator, a superuser, or someone
granted ``modeling.change_backend`` explicitly may edit it (others see it read-only);
moving it to another scheme, host or port drops its stored key and secret options;
``api_key_env`` and the host must be allowed by the server (``Backend.clean``).

Runs, calls, predictions and cached responses are written by the run engine only, so
they are read-only here; runs are cancelled or resumed through the same services the
run pages use.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from .models import Backend, CachedResponse, Prediction, PromptTemplate, Run, RunCall
from .runs import backend_services, services
from .runs.backend_forms import BackendForm
from .runs.outcome import run_status_label, unparseable_count


def _changelist_link(model: type[Model], lookup: str, pk: int, label: object) -> str:
    url = reverse(f"admin:modeling_{model._meta.model_name}_changelist")
    return format_html('<a href="{}?{}={}">{}</a>', url, lookup, pk, label)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows the run engine owns: viewable, never added or edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class BackendAdminForm(BackendForm):
    """The backend pages' form (write-only key, masked options, the server's policy)."""


@admin.register(Backend)
class BackendAdmin(admin.ModelAdmin):
    form = BackendAdminForm
    list_display = (
        "name",
        "kind",
        "default_model",
        "base_url",
        "api_key_env",
        "has_key",
        "max_concurrency",
        "price_input_per_1k",
        "price_output_per_1k",
        "created_by",
        "created_at",
    )
    list_filter = ("kind",)
    list_select_related = ("created_by",)
    # Never the key or the options: a search would reveal them one guess at a time.
    search_fields = ("name", "default_model", "base_url", "model_path")
    readonly_fields = ("created_by", "created_at", "has_key", "shown_options")
    fieldsets = (
        (None, {"fields": ("name", "kind", "default_model", "base_url", "model_path")}),
        ("Credentials", {"fields": ("api_key_env", "has_key", "new_api_key", "clear_api_key")}),
        (
            "Limits and prices",
            {
                "fields": (
                    "max_concurrency",
                    "max_retries",
                    "timeout_s",
                    "price_input_per_1k",
                    "price_output_per_1k",
                )
            },
        ),
        (None, {"fields": ("options", "created_by", "created_at")}),
    )
    # Someone else's backend, shown read-only: no write-only inputs, options masked.
    view_fieldsets = (
        (None, {"fields": ("name", "kind", "default_model", "base_url", "model_path")}),
        ("Credentials", {"fields": ("api_key_env", "has_key")}),
        fieldsets[2],
        (None, {"fields": ("shown_options", "created_by", "created_at")}),
    )

    def has_change_permission(self, request: HttpRequest, obj: Backend | None = None) -> bool:
        if obj is None:
            return super().has_change_permission(request)
        return obj.may_be_changed_by(request.user)

    def has_delete_permission(self, request: HttpRequest, obj: Backend | None = None) -> bool:
        allowed = super().has_delete_permission(request, obj)
        return allowed and (obj is None or obj.may_be_changed_by(request.user))

    def get_fieldsets(self, request: HttpRequest, obj: Backend | None = None) -> Any:
        if obj is not None and not self.has_change_permission(request, obj):
            return self.view_fieldsets
        return super().get_fieldsets(request, obj)

    def save_model(self, request: HttpRequest, obj: Backend, form: Any, change: bool) -> None:
        if change:
            backend_services.backend_update(backend=obj)
        else:
            backend_services.backend_create(backend=obj, created_by=request.user)
        if obj.dropped_secrets:
            self.message_user(
                request,
                f"The base URL now points at another server, so "
                f"{' and '.join(obj.dropped_secrets)} of {obj.name} were removed: "
                "enter them again for the new server.",
                messages.WARNING,
            )

    # No ordering=: sorting by this column would sort by the ciphertext's presence only,
    # but a sortable secret-derived column is one review away from sorting by the key.
    @admin.display(description="key stored", boolean=True)
    def has_key(self, obj: Backend) -> bool:
        return obj.has_api_key

    @admin.display(description="options")
    def shown_options(self, obj: Backend) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.redacted_options(), indent=2))


@admin.register(PromptTemplate)
class PromptTemplateAdmin(admin.ModelAdmin):
    """Texts of a saved version are frozen (runs point at it); revise on the run pages."""

    list_display = ("name", "version", "benchmark", "method", "is_active", "created_at")
    list_filter = ("benchmark", "method", "is_active")
    search_fields = ("name", "user", "system", "notes")
    _frozen = (
        "name",
        "version",
        "benchmark",
        "method",
        "system",
        "user",
        "fields",
        "output_format",
    )

    def get_readonly_fields(self, request: HttpRequest, obj: PromptTemplate | None = None):
        if obj is None:
            return ("created_at",)
        return (*self._frozen, "created_at")


@admin.register(CachedResponse)
class CachedResponseAdmin(ReadOnlyAdmin):
    # The reply cache is the server's, shared by every workspace (a reply is keyed by
    # its whole request): only the operator (a superuser) reads it.
    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return request.user.is_superuser

    list_display = (
        "short_key",
        "backend_name",
        "model",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
        "created_at",
    )
    list_filter = ("backend_name", "model", "finish_reason")
    search_fields = ("key", "model", "text")
    date_hierarchy = "created_at"

    @admin.display(description="key", ordering="key")
    def short_key(self, obj: CachedResponse) -> str:
        return obj.key[:12]


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "status_label",
        "benchmark",
        "method",
        "backend",
        "model",
        "template",
        "progress",
        "error_calls",
        "tokens",
        "cost",
        "created_at",
    )
    list_filter = ("status", "kind", "benchmark", "method", "backend", "imported")
    list_select_related = ("backend", "template")
    search_fields = ("name", "model", "backend__name", "template__name")
    date_hierarchy = "created_at"
    actions = ("cancel_runs", "resume_runs")
    fields = (
        ("name", "status_label"),
        ("kind", "benchmark", "method", "imported"),
        ("backend", "model", "template"),
        "params",
        "selection",
        "metrics",
        ("progress", "error_calls", "calls_link", "predictions_link"),
        ("prompt_tokens", "completion_tokens", "cost"),
        ("budget_tokens", "budget_cost"),
        "error",
        ("created_by", "created_at", "started_at", "finished_at", "lease_expires_at"),
    )
    # View-only pages show model fields read-only already; these are computed.
    readonly_fields = ("status_label", "progress", "calls_link", "predictions_link")

    def has_run_permission(self, request: HttpRequest) -> bool:
        """The actions call services, so they need the change permission the page hides."""
        return request.user.has_perm("modeling.change_run")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        # The count the status label reads, one subquery for the page, not one per row.
        return super().get_queryset(request).annotate(unparseable=unparseable_count())

    @admin.display(description="status", ordering="status")
    def status_label(self, obj: Run) -> str:
        return run_status_label(run=obj).text

    @admin.display(description="progress")
    def progress(self, obj: Run) -> str:
        return f"{obj.done_calls}/{obj.total_calls}"

    @admin.display(description="tokens")
    def tokens(self, obj: Run) -> int:
        return obj.prompt_tokens + obj.completion_tokens

    @admin.display(description="calls")
    def calls_link(self, obj: Run) -> str:
        return _changelist_link(RunCall, "run__id__exact", obj.pk, "calls")

    @admin.display(description="predictions")
    def predictions_link(self, obj: Run) -> str:
        return _changelist_link(Prediction, "run__id__exact", obj.pk, "predictions")

    @admin.action(description="Cancel selected runs", permissions=["run"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        for run_id in queryset.values_list("pk", flat=True):
            services.run_cancel(run_id=run_id)
        self.message_user(request, "Cancelled the selected unfinished runs.")

    @admin.action(description="Resume selected runs", permissions=["run"])
    def resume_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        for run_id, name in queryset.values_list("pk", "name"):
            try:
                services.run_resume(run_id=run_id)
            except ValueError as exc:
                self.message_user(request, f"{name}: {exc}", messages.WARNING)
        self.message_user(request, "Queued the selected runs again.")


@admin.register(RunCall)
class RunCallAdmin(ReadOnlyAdmin):
    list_display = (
        "unit_key",
        "sample_index",
        "run",
        "status",
        "from_cache",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "latency_ms",
        "short_error",
        "finished_at",
    )
    list_filter = ("status", "from_cache", "run__benchmark", "run")
    list_select_related = ("run",)
    search_fields = ("unit_key", "run__name", "error")

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    @admin.display(description="error")
    def short_error(self, obj: RunCall) -> str:
        return Truncator(obj.error).chars(60)


@admin.register(Prediction)
class PredictionAdmin(ReadOnlyAdmin):
    list_display = (
        "item",
        "sample_index",
        "run",
        "parsed_answer",
        "parse_status",
        "correct",
        "model",
        "template_version",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
    )
    list_filter = ("parse_status", "correct", "run__benchmark", "run")
    list_select_related = (
        "run",
        "dyntom_question__stage__work",
        "qa_item",
        "speaker_instance__scene__work",
    )
    search_fields = (
        "parsed_answer",
        "run__name",
        "dyntom_question__key",
        "dyntom_question__stage__work__key",
        "qa_item__natural_key",
    )

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    @admin.display(description="item")
    def item(self, obj: Prediction) -> str:
        if obj.dyntom_question_id:
            return str(obj.dyntom_question)  # "<stage work key> <question key>"
        if obj.qa_item_id:
            return obj.qa_item.natural_key
        if obj.speaker_instance_id:
            return str(obj.speaker_instance)
        return "-"
