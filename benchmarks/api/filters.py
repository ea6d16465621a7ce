"""Query-string filters for the item bank API.

Foreign keys are filtered by id with plain integer filters: a model choice filter
would spend a query validating the id, and an unknown id should just match nothing.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db.models import Q, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from benchmarks.models import (
    Character,
    DynToMQuestion,
    DynToMStage,
    QAItem,
    Scene,
    SpeakerInstance,
    Work,
)


class IdField(forms.IntegerField):
    """A primary key: 64 bits at most, since a larger one raises OverflowError in the
    SQLite driver (a 500) instead of matching nothing."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", -(2**63))
        kwargs.setdefault("max_value", 2**63 - 1)
        super().__init__(**kwargs)


@extend_schema_field(OpenApiTypes.INT)
class IdFilter(django_filters.Filter):
    """A related row's primary key."""

    field_class = IdField


class WorkFilter(django_filters.FilterSet):
    search = django_filters.CharFilter(
        method="filter_search", label="Title or key contains (case-insensitive)"
    )

    class Meta:
        model = Work
        fields = ("benchmark", "kind", "split")

    def filter_search(self, queryset: QuerySet[Work], name: str, value: str) -> QuerySet[Work]:
        return queryset.filter(Q(title__icontains=value) | Q(key__icontains=value))


class CharacterFilter(django_filters.FilterSet):
    work = IdFilter(field_name="work_id")

    class Meta:
        model = Character
        fields = ("work", "gender", "is_main")


class SceneFilter(django_filters.FilterSet):
    work = IdFilter(field_name="work_id")

    class Meta:
        model = Scene
        fields = ("work", "part", "episode")


class SpeakerInstanceFilter(django_filters.FilterSet):
    scene = IdFilter(field_name="scene_id")
    work = IdFilter(field_name="scene__work_id")
    gold_character = IdFilter(field_name="gold_character_id")

    class Meta:
        model = SpeakerInstance
        fields = ("scene", "work", "gold_character", "code")


class QAItemFilter(django_filters.FilterSet):
    work = IdFilter(field_name="work_id")
    character = IdFilter(field_name="character_id")

    class Meta:
        model = QAItem
        fields = ("work", "character", "dimension", "directness")


class DynToMStageFilter(django_filters.FilterSet):
    work = IdFilter(field_name="work_id")

    class Meta:
        model = DynToMStage
        fields = ("work", "scenario_count", "location_category")


class DynToMQuestionFilter(django_filters.FilterSet):
    stage = IdFilter(field_name="stage_id")

    class Meta:
        model = DynToMQuestion
        fields = ("stage", "question_type", "mental_state", "source_type")
