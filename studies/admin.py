"""Admin for studies. Invite tokens are credentials: shown truncated, never editable.
A study's webhook signing key is never shown at all (the study page makes a new one)."""

from __future__ import annotations

import secrets

from django.contrib import admin
from django.db import models

from .models import (
    Assignment,
    ChoiceAnswer,
    Familiarity,
    Guess,
    HistoryView,
    Participant,
    Study,
    StudyItem,
    StudyWork,
    WebhookDelivery,
    WorkSession,
)


def short_token(token: str) -> str:
    return f"{token[:6]}…" if token else ""


class StudyWorkInline(admin.TabularInline):
    model = StudyWork
    extra = 0
    fields = ("work", "position", "name_map")
    raw_id_fields = ("work",)
    show_change_link = True


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "benchmark",
        "status",
        "overlap",
        "perturb_names",
        "imported",
        "created_at",
    )
    list_filter = ("status", "benchmark", "perturb_names", "one_to_one", "reveal", "imported")
    search_fields = ("name", "instructions")
    readonly_fields = (
        "item_set_hash",
        "instructions_version",
        "exit_questions_version",
        # Edited from the study page, which keeps every version a participant saw.
        "instructions",
        "consent",
        "exit_questions",
        "attention_instruction",
        "created_at",
        "updated_at",
    )
    # The completion and no-work URLs: https when typed without a scheme, as the study
    # page's form does (and Django 6's default).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    raw_id_fields = ("created_by",)
    # Shown once to the researcher on the study page, never here (the field is also
    # ``editable=False`` and ``holds_secrets``: no form, filter or ordering reaches it).
    exclude = ("webhook_secret",)
    inlines = [StudyWorkInline]
    date_hierarchy = "created_at"


@admin.register(StudyWork)
class StudyWorkAdmin(admin.ModelAdmin):
    list_display = ("study", "work", "position")
    list_filter = ("study__benchmark", "study__status")
    search_fields = ("study__name", "work__title", "work__key")
    list_select_related = ("study", "work")
    raw_id_fields = ("study", "work")


@admin.register(StudyItem)
class StudyItemAdmin(admin.ModelAdmin):
    list_display = ("study", "__str__", "position", "held_back", "leak_count")
    list_filter = ("held_back", "study__status", "study")
    search_fields = ("study__name", "scene__source_id", "scene__work__title", "qa_item__question")
    list_select_related = ("study", "scene__work", "qa_item", "stage__work")
    raw_id_fields = ("study", "study_work", "scene", "qa_item", "stage")

    @admin.display(description="findings")
    def leak_count(self, obj: StudyItem) -> int:
        return len(obj.leaks or [])


@admin.register(Participant)
class ParticipantAdmin(admin.ModelAdmin):
    list_display = ("__str__", "study", "user", "token_prefix", "consented_at", "withdrawn_at")
    list_filter = (
        "study__status",
        "study",
        ("withdrawn_at", admin.EmptyFieldListFilter),
        "no_work_reason",
    )
    search_fields = ("label", "user__username", "study__name")
    list_select_related = ("study", "user")
    raw_id_fields = ("study", "user")
    # The token itself never appears in a form or a list: only its first characters.
    exclude = ("token",)
    # The ledger's records of what happened are read here, never edited.
    readonly_fields = (
        "token_prefix",
        "created_at",
        "no_work_at",
        "no_work_reason",
        "report_jobs_rebuilt_at",
        "report_jobs_rebuilt",
    )

    @admin.display(description="token")
    def token_prefix(self, obj: Participant) -> str:
        return short_token(obj.token)

    def save_model(self, request, obj: Participant, form, change: bool) -> None:
        if not obj.token:  # a participant added here gets a fresh unguessable token
            obj.token = secrets.token_urlsafe(32)
        super().save_model(request, obj, form, change)


@admin.register(Familiarity)
class FamiliarityAdmin(admin.ModelAdmin):
    list_display = ("participant", "work", "seen", "declared_at")
    list_filter = ("seen",)
    search_fields = ("participant__label", "work__title")
    list_select_related = ("participant", "work")
    raw_id_fields = ("participant", "work")


@admin.register(WorkSession)
class WorkSessionAdmin(admin.ModelAdmin):
    list_display = ("participant", "study_work", "seen", "history_confirmed_at", "finished_at")
    list_filter = ("seen", "study_work__study")
    search_fields = ("participant__label", "study_work__work__title")
    list_select_related = ("participant", "study_work__work", "study_work__study")
    raw_id_fields = ("participant", "study_work")


@admin.register(HistoryView)
class HistoryViewAdmin(admin.ModelAdmin):
    list_display = ("session", "where", "opened_at")
    list_filter = ("where",)
    search_fields = ("session__participant__label",)
    raw_id_fields = ("session", "assignment")


class GuessInline(admin.TabularInline):
    model = Guess
    extra = 0
    fields = ("instance", "answer", "correct", "tags", "evidence")
    raw_id_fields = ("instance",)


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ("participant", "study_item", "status", "seen", "history_needed", "total_ms")
    list_filter = ("status", "seen", "history_needed", "participant__study")
    search_fields = ("participant__label", "study_item__scene__source_id")
    list_select_related = ("participant", "study_item__study", "study_item__scene__work")
    raw_id_fields = ("participant", "session", "study_item")
    inlines = [GuessInline]


@admin.register(ChoiceAnswer)
class ChoiceAnswerAdmin(admin.ModelAdmin):
    list_display = ("assignment", "round", "option", "shown", "kept", "ms", "correct")
    list_filter = ("round", "correct", "assignment__participant__study")
    search_fields = ("assignment__participant__label",)
    list_select_related = ("assignment__participant", "assignment__study_item")
    raw_id_fields = ("assignment", "qa_item", "question")


@admin.register(Guess)
class GuessAdmin(admin.ModelAdmin):
    list_display = ("assignment", "instance", "answer", "correct", "updated_at")
    list_filter = ("correct", "assignment__participant__study")
    search_fields = ("answer", "evidence", "assignment__participant__label")
    list_select_related = ("assignment__participant", "instance__scene__work")
    raw_id_fields = ("assignment", "instance")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    """Read only: the record of what was sent and how the receiver answered."""

    list_display = (
        "delivery_id",
        "study",
        "event",
        "status",
        "attempts",
        "last_status_code",
        "created_at",
        "delivered_at",
    )
    list_filter = ("status", "event")
    search_fields = ("delivery_id", "study__name")
    list_select_related = ("study",)
    raw_id_fields = ("study", "participant")
    date_hierarchy = "created_at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
