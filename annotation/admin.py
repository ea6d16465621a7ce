"""Admin: the generation pools are edited here; jobs and stages can be inspected."""

from django.contrib import admin

from .models import (
    EducationLevel,
    GeneratedStage,
    GenerationJob,
    GivenName,
    Location,
    LocationCategory,
    Occupation,
    PersonalityType,
    Surname,
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
    list_display = ("pk", "model", "stage_count", "scenario_count", "status", "created_at")
    list_filter = ("status",)
    readonly_fields = ("status", "progress_done", "progress_total", "error", "run")
    inlines = [GeneratedStageInline]


@admin.register(GeneratedStage)
class GeneratedStageAdmin(admin.ModelAdmin):
    list_display = ("__str__", "location", "status", "work_key", "updated_at")
    list_filter = ("status",)
    readonly_fields = ("job", "index", "calls", "template_versions", "model", "work_key")
