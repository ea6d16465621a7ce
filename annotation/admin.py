"""Admin: the generation pools are edited here; jobs and stages can be inspected."""

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from .dyntom.generation.selectors import generation_job_status_label, with_stage_counts
from .dyntom.validation.rubrics import RubricError, criteria_validate, criterion_keys
from .dyntom.validation.rules import RuleError, rule_spec_validate
from .dyntom.validation.services import (
    active_rubrics,
    active_rules,
    decision_rule_revise,
    rubric_revise,
)
from .models import (
    AcceptedSet,
    DecisionRule,
    EducationLevel,
    GeneratedStage,
    GenerationJob,
    GivenName,
    Location,
    LocationCategory,
    Occupation,
    PersonalityType,
    Rubric,
    Surname,
    ValidationBatch,
    ValidationDecision,
)


@admin.register(LocationCategory)
class LocationCategoryAdmin(admin.ModelAdmin):
    search_fields = ("name",)


@admin.register(Location)
class LocationAdmin(admin.ModelAdmin):
    list_display = ("name", "is_active")
    list_filter = ("is_active", "categories")
    list_editable = ("is_active",)
    search_fields = ("name",)
    filter_horizontal = ("categories",)


@admin.register(GivenName)
class GivenNameAdmin(admin.ModelAdmin):
    list_display = ("name", "gender", "rank", "is_active")
    list_filter = ("gender", "is_active")
    list_editable = ("is_active",)
    search_fields = ("name",)


@admin.register(Surname)
class SurnameAdmin(admin.ModelAdmin):
    list_display = ("name", "group", "is_active")
    list_filter = ("group", "is_active")
    list_editable = ("is_active",)
    search_fields = ("name",)


@admin.register(Occupation)
class OccupationAdmin(admin.ModelAdmin):
    list_display = ("name", "gender", "is_active")
    list_filter = ("gender", "is_active")
    list_editable = ("is_active",)
    search_fields = ("name",)


@admin.register(EducationLevel)
class EducationLevelAdmin(admin.ModelAdmin):
    list_display = ("name", "position", "is_active")
    list_editable = ("position", "is_active")


@admin.register(PersonalityType)
class PersonalityTypeAdmin(admin.ModelAdmin):
    list_display = ("code", "label", "is_active")
    list_editable = ("label", "is_active")


class GeneratedStageInline(admin.TabularInline):
    model = GeneratedStage
    fields = ("index", "status", "status_reason", "location", "work_key")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(GenerationJob)
class GenerationJobAdmin(admin.ModelAdmin):
    list_display = ("pk", "model", "stage_count", "scenario_count", "status_label", "created_at")
    list_filter = ("status",)
    readonly_fields = ("status_label", "progress_done", "progress_total", "error", "run")
    exclude = ("status",)
    inlines = [GeneratedStageInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[GenerationJob]:
        return with_stage_counts(super().get_queryset(request))

    @admin.display(description="status", ordering="status")
    def status_label(self, obj: GenerationJob) -> str:
        return generation_job_status_label(job=obj).text


@admin.register(GeneratedStage)
class GeneratedStageAdmin(admin.ModelAdmin):
    list_display = ("__str__", "location", "status", "work_key", "updated_at")
    list_filter = ("status",)
    readonly_fields = ("job", "index", "calls", "template_versions", "model", "work_key")


# --- validation: rubrics and rules are versioned, so "save" writes a new version -------


class RubricForm(forms.ModelForm):
    class Meta:
        model = Rubric
        fields = ("kind", "criteria", "notes")

    def clean(self):
        data = super().clean()
        if data.get("kind") and "criteria" in data:
            try:
                criteria_validate(data["criteria"])
                # The kind's active rule must still name only criteria that exist.
                rule_spec_validate(
                    active_rules()[data["kind"]].spec, criterion_keys(data["criteria"])
                )
            except (RubricError, RuleError) as exc:
                self.add_error("criteria", str(exc))
        return data


@admin.register(Rubric)
class RubricAdmin(admin.ModelAdmin):
    """Saving (a new one or an edit) creates the kind's next version; scores already
    given keep the version they were given on."""

    form = RubricForm
    list_display = ("kind", "version", "notes", "created_by", "created_at")
    list_filter = ("kind",)

    def save_model(self, request: HttpRequest, obj: Rubric, form, change: bool) -> None:
        new = rubric_revise(
            kind=obj.kind, criteria=obj.criteria, notes=obj.notes, created_by=request.user
        )
        obj.pk, obj.version = new.pk, new.version


class DecisionRuleForm(forms.ModelForm):
    class Meta:
        model = DecisionRule
        fields = ("kind", "spec", "notes")

    def clean(self):
        data = super().clean()
        if data.get("kind") and "spec" in data:
            keys = criterion_keys(active_rubrics()[data["kind"]].criteria)
            try:
                rule_spec_validate(data["spec"], keys)
            except RuleError as exc:
                self.add_error("spec", str(exc))
        return data


@admin.register(DecisionRule)
class DecisionRuleAdmin(admin.ModelAdmin):
    """Saving creates the kind's next version and recomputes that kind's decisions."""

    form = DecisionRuleForm
    list_display = ("kind", "version", "notes", "created_by", "created_at")
    list_filter = ("kind",)

    def save_model(self, request: HttpRequest, obj: DecisionRule, form, change: bool) -> None:
        new = decision_rule_revise(
            kind=obj.kind, spec=obj.spec, notes=obj.notes, created_by=request.user
        )
        obj.pk, obj.version = new.pk, new.version


@admin.register(ValidationBatch)
class ValidationBatchAdmin(admin.ModelAdmin):
    list_display = ("name", "k", "created_by", "created_at")
    readonly_fields = ("kinds", "created_by")


@admin.register(ValidationDecision)
class ValidationDecisionAdmin(admin.ModelAdmin):
    """Read-only: decisions are recomputed from scores; override on the batch page."""

    list_display = ("object", "outcome", "override_outcome", "reason", "computed_at")
    list_filter = ("outcome", "override_outcome")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(AcceptedSet)
class AcceptedSetAdmin(admin.ModelAdmin):
    list_display = ("batch", "version", "rule_versions", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
