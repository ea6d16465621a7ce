"""Admin for the item bank: browse and fix imported rows.

Works can hold thousands of scenes and characters, so a work's page links to
filtered changelists instead of inlining them; only small children (a stage's
scenarios, a scene's masked speakers) are inlined. Every changelist selects its
related rows in the same query, so its query count does not grow with the page.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, IntegerField, Model, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from common.scoping import current_workspace_id

from .forms import BenchmarkImportForm
from .importers import ImportDataError
from .importers.generic import MappingError, mapping_parse
from .importers.generic_presets import builtin_preset
from .models import (
    Character,
    DynToMQuestion,
    DynToMScenario,
    DynToMStage,
    MappingPreset,
    MCItem,
    QAItem,
    Scene,
    SpeakerAnnotation,
    SpeakerInstance,
    Work,
)
from .services import benchmark_import, benchmark_publish

TIMESTAMPS = ("created_at", "updated_at")


def _count_of(model: type[Model], fk: str) -> Coalesce:
    """Rows of ``model`` pointing at the outer row, as a correlated subquery.

    A subquery per relation, not ``Count()`` over joins: joining scenes and
    characters of a big work would multiply rows before counting.
    """
    counted = (
        model.objects.filter(**{fk: OuterRef("pk")})
        .order_by()
        .values(fk)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def _changelist_link(model: type[Model], lookup: str, pk: int, label: str) -> str:
    url = reverse(f"admin:benchmarks_{model._meta.model_name}_changelist")
    return format_html('<a href="{}?{}={}">{}</a>', url, lookup, pk, label)


class SpeakerInstanceInline(admin.TabularInline):
    model = SpeakerInstance
    fields = ("code", "gold_character", "candidates")
    autocomplete_fields = ("gold_character",)
    extra = 0


class DynToMScenarioInline(admin.StackedInline):
    model = DynToMScenario
    fields = ("number", "key", "background", "dialogue", "dialogue_shape")
    extra = 0


@admin.register(Work)
class WorkAdmin(admin.ModelAdmin):
    list_display = (
        "title",
        "key",
        "benchmark",
        "kind",
        "split",
        "characters_link",
        "scenes_link",
        "qa_items_link",
        "shared",
        "updated_at",
    )
    list_filter = ("benchmark", "kind", "split", "shared")
    actions = ("publish", "unpublish")
    search_fields = ("title", "key")
    readonly_fields = (*TIMESTAMPS, "characters_link", "scenes_link", "qa_items_link")

    def _foreign(self, obj: Work | None) -> bool:
        """A work another workspace published: readable here, never changed."""
        workspace_id = current_workspace_id()
        return obj is not None and workspace_id is not None and obj.workspace_id != workspace_id

    def has_change_permission(self, request: HttpRequest, obj: Work | None = None) -> bool:
        return not self._foreign(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Work | None = None) -> bool:
        return not self._foreign(obj) and super().has_delete_permission(request, obj)

    def _own(self, queryset):
        workspace_id = current_workspace_id()
        return queryset if workspace_id is None else queryset.filter(workspace_id=workspace_id)

    @admin.action(description="Publish to every workspace (read-only to the others)")
    def publish(self, request: HttpRequest, queryset) -> None:
        changed = benchmark_publish(works=self._own(queryset), shared=True)
        self.message_user(request, f"{changed} works published to every workspace.")

    @admin.action(description="Take back from the other workspaces")
    def unpublish(self, request: HttpRequest, queryset) -> None:
        changed = benchmark_publish(works=self._own(queryset), shared=False)
        self.message_user(request, f"{changed} works no longer published.")

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.import_view)
        return [path("import/", view, name="benchmarks_work_import"), *super().get_urls()]

    def import_view(self, request: HttpRequest) -> HttpResponse:
        """Import a benchmark file or folder from the server, as ``import_benchmark`` does.

        Runs in the request (atomic: a refused file imports nothing) and shows the
        report: counts, the plot windows' outcome for CharToM-QA, warnings.
        """
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = BenchmarkImportForm(request.POST or None)
        report = None
        if request.method == "POST" and form.is_valid():
            try:
                report = benchmark_import(**form.service_kwargs())
            except (ImportDataError, ValueError) as exc:
                form.add_error(None, f"Import failed, nothing was written: {exc}")
        context = {
            **self.admin_site.each_context(request),
            "title": "Import a benchmark",
            "opts": self.model._meta,
            "form": form,
            "report": report,
        }
        status = 400 if request.method == "POST" and report is None else 200
        return TemplateResponse(
            request, "admin/benchmarks/work/import.html", context, status=status
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Work]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                n_characters=_count_of(Character, "work"),
                n_scenes=_count_of(Scene, "work"),
                n_qa_items=_count_of(QAItem, "work"),
            )
        )

    @admin.display(description="characters", ordering="n_characters")
    def characters_link(self, obj: Work) -> str:
        return _changelist_link(Character, "work__id__exact", obj.pk, obj.n_characters)

    @admin.display(description="scenes", ordering="n_scenes")
    def scenes_link(self, obj: Work) -> str:
        return _changelist_link(Scene, "work__id__exact", obj.pk, obj.n_scenes)

    @admin.display(description="QA items", ordering="n_qa_items")
    def qa_items_link(self, obj: Work) -> str:
        return _changelist_link(QAItem, "work__id__exact", obj.pk, obj.n_qa_items)


@admin.register(Character)
class CharacterAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "work",
        "position",
        "gender",
        "gender_source",
        "utterance_count",
        "is_main",
    )
    list_filter = ("work__benchmark", "gender", "gender_source", "is_main")
    list_select_related = ("work",)
    search_fields = ("name", "work__title", "work__key")
    autocomplete_fields = ("work",)
    readonly_fields = TIMESTAMPS


@admin.register(Scene)
class SceneAdmin(admin.ModelAdmin):
    list_display = ("source_id", "work", "position", "part", "episode", "short_heading")
    list_filter = ("work__benchmark", "part")
    list_select_related = ("work",)
    search_fields = ("source_id", "episode", "heading", "work__title", "work__key")
    autocomplete_fields = ("work",)
    readonly_fields = TIMESTAMPS
    inlines = (SpeakerInstanceInline,)

    @admin.display(description="heading")
    def short_heading(self, obj: Scene) -> str:
        return Truncator(obj.heading).chars(60)


@admin.register(SpeakerInstance)
class SpeakerInstanceAdmin(admin.ModelAdmin):
    list_display = ("__str__", "code", "gold_character", "candidates")
    list_filter = ("scene__work__benchmark", "scene__part", "code")
    list_select_related = ("scene__work", "gold_character")
    search_fields = ("code", "gold_character__name", "scene__source_id", "scene__work__key")
    raw_id_fields = ("scene",)
    autocomplete_fields = ("gold_character",)
    readonly_fields = TIMESTAMPS


@admin.register(SpeakerAnnotation)
class SpeakerAnnotationAdmin(admin.ModelAdmin):
    list_display = (
        "source",
        "row_number",
        "work",
        "scene_source_id",
        "code",
        "instance",
        "need_history",
        "facts_from_memory",
        "guessed_name",
    )
    list_filter = ("work__benchmark", "source", "need_history", "facts_from_memory")
    list_select_related = ("work", "instance__scene__work")
    search_fields = ("scene_source_id", "code", "guessed_name", "work__key")
    autocomplete_fields = ("work",)
    raw_id_fields = ("instance",)
    readonly_fields = TIMESTAMPS


@admin.register(QAItem)
class QAItemAdmin(admin.ModelAdmin):
    list_display = ("short_question", "work", "character", "dimension", "directness", "position")
    list_filter = ("dimension", "directness", ("work", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("work", "character")
    search_fields = ("question", "answer", "character__name", "work__title")
    autocomplete_fields = ("work", "character")
    readonly_fields = ("natural_key", *TIMESTAMPS)

    @admin.display(description="question", ordering="question")
    def short_question(self, obj: QAItem) -> str:
        return Truncator(obj.question).chars(80)


@admin.register(DynToMStage)
class DynToMStageAdmin(admin.ModelAdmin):
    list_display = (
        "__str__",
        "main_character",
        "scenario_count",
        "location_category",
        "questions_link",
    )
    list_filter = ("scenario_count", "location_category")
    list_select_related = ("work",)
    search_fields = ("work__key", "main_character", "location", "location_category")
    autocomplete_fields = ("work",)
    readonly_fields = (*TIMESTAMPS, "questions_link")
    inlines = (DynToMScenarioInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[DynToMStage]:
        return (
            super().get_queryset(request).annotate(n_questions=_count_of(DynToMQuestion, "stage"))
        )

    @admin.display(description="questions", ordering="n_questions")
    def questions_link(self, obj: DynToMStage) -> str:
        return _changelist_link(DynToMQuestion, "stage__id__exact", obj.pk, obj.n_questions)


@admin.register(DynToMScenario)
class DynToMScenarioAdmin(admin.ModelAdmin):
    list_display = ("key", "stage", "number")
    list_filter = ("number",)
    list_select_related = ("stage__work",)
    search_fields = ("key", "background", "stage__work__key")
    raw_id_fields = ("stage",)
    readonly_fields = TIMESTAMPS


@admin.register(DynToMQuestion)
class DynToMQuestionAdmin(admin.ModelAdmin):
    list_display = (
        "key",
        "stage",
        "position",
        "question_type",
        "mental_state",
        "scenario_from",
        "scenario_to",
        "gold_letter",
    )
    list_filter = ("question_type", "mental_state", "source_type")
    list_select_related = ("stage__work",)
    search_fields = ("key", "text", "stage__work__key", "stage__main_character")
    raw_id_fields = ("stage",)
    readonly_fields = TIMESTAMPS


@admin.register(MCItem)
class MCItemAdmin(admin.ModelAdmin):
    list_display = ("item_id", "work", "position", "short_question", "categories")
    list_filter = (("work", admin.RelatedOnlyFieldListFilter),)
    list_select_related = ("work",)
    search_fields = ("item_id", "work__title", "work__key")
    autocomplete_fields = ("work",)
    readonly_fields = ("content_hash", *TIMESTAMPS)

    @admin.display(description="question")
    def short_question(self, obj: MCItem) -> str:
        return Truncator(obj.text().get("question", "")).chars(80)


class MappingPresetForm(forms.ModelForm):
    """A saved field mapping, checked as the importer reads it (the error names the key)."""

    class Meta:
        model = MappingPreset
        fields = ("name", "description", "mapping")

    def clean_name(self) -> str:
        name = " ".join(self.cleaned_data["name"].split())
        if builtin_preset(name):
            raise forms.ValidationError(f"{name!r} is a built-in preset's name.")
        # The unique constraint includes the workspace, which the form does not show.
        if MappingPreset.objects.filter(name=name).exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError("This workspace has a preset of that name.")
        return name

    def clean_mapping(self) -> dict:
        mapping = self.cleaned_data["mapping"]
        try:
            mapping_parse(mapping)
        except MappingError as exc:
            raise forms.ValidationError(str(exc)) from None
        return mapping


@admin.register(MappingPreset)
class MappingPresetAdmin(admin.ModelAdmin):
    """Field mappings researchers saved from the upload page; edit or remove them here."""

    form = MappingPresetForm
    list_display = ("name", "description", "created_by", "updated_at")
    list_select_related = ("created_by",)
    search_fields = ("name", "description")
    readonly_fields = ("created_by", *TIMESTAMPS)

    def save_model(self, request: HttpRequest, obj: MappingPreset, form, change: bool) -> None:
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)
