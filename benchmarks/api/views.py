"""Read-only API over the item bank, for researchers (the global permission).

Each viewset's queryset selects or prefetches exactly what its serializer reads, so
a page costs the same handful of queries whatever its size.
"""

from __future__ import annotations

from django.db.models import Prefetch
from rest_framework import viewsets

from benchmarks.models import (
    Character,
    DynToMQuestion,
    DynToMStage,
    QAItem,
    Scene,
    SpeakerInstance,
    Work,
)
from common.scoping import ScopedQuerysetMixin

from . import filters, serializers


class WorkViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """Movies, TV shows, books and DynToM social stages."""

    queryset = Work.objects.order_by("benchmark", "key")
    serializer_class = serializers.WorkSerializer
    filterset_class = filters.WorkFilter


class CharacterViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """Characters of a work, in source order."""

    queryset = Character.objects.order_by("work_id", "position", "name")
    serializer_class = serializers.CharacterSerializer
    filterset_class = filters.CharacterFilter


class SceneViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """Scenes with their lines and masked speakers (with the gold character)."""

    queryset = Scene.objects.order_by("work_id", "position").prefetch_related(
        Prefetch(
            "instances",
            queryset=SpeakerInstance.objects.select_related("gold_character").order_by("code"),
        )
    )
    serializer_class = serializers.SceneSerializer
    filterset_class = filters.SceneFilter


class SpeakerInstanceViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """Masked speakers: what a rater or a model must identify, with the gold answer."""

    queryset = SpeakerInstance.objects.select_related("gold_character").order_by("scene_id", "code")
    serializer_class = serializers.SpeakerInstanceSerializer
    filterset_class = filters.SpeakerInstanceFilter


class QAItemViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """CharToM-QA questions with reference answers, bonus points and distractors."""

    queryset = QAItem.objects.select_related("character").order_by("work_id", "position")
    serializer_class = serializers.QAItemSerializer
    filterset_class = filters.QAItemFilter


class DynToMStageViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """DynToM social stages with their scenarios."""

    queryset = (
        DynToMStage.objects.select_related("work")
        .prefetch_related("scenarios")
        .order_by("work__key")
    )
    serializer_class = serializers.DynToMStageSerializer
    filterset_class = filters.DynToMStageFilter


class DynToMQuestionViewSet(ScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    """DynToM multiple-choice questions with the gold letter."""

    queryset = DynToMQuestion.objects.select_related("stage__work").order_by("stage_id", "position")
    serializer_class = serializers.DynToMQuestionSerializer
    filterset_class = filters.DynToMQuestionFilter
