"""Output serializers for the read-only item bank API.

Gold answers (``gold_character``, ``answer``, ``gold_letter``) are included: the API
is for researchers only (``accounts.permissions.IsResearcher``), never for raters.
"""

from __future__ import annotations

from rest_framework import serializers

from benchmarks.models import (
    Character,
    DynToMQuestion,
    DynToMScenario,
    DynToMStage,
    QAItem,
    Scene,
    SpeakerInstance,
    Work,
)


class WorkSerializer(serializers.ModelSerializer):
    class Meta:
        model = Work
        fields = (
            "id",
            "benchmark",
            "key",
            "title",
            "kind",
            "genres",
            "split",
            "source",
            "licence_note",
            "extra",
            "created_at",
            "updated_at",
        )


class CharacterSerializer(serializers.ModelSerializer):
    class Meta:
        model = Character
        fields = (
            "id",
            "work",
            "name",
            "position",
            "gender",
            "gender_source",
            "utterance_count",
            "is_main",
            "aliases",
            "extra",
        )


class SpeakerInstanceSerializer(serializers.ModelSerializer):
    gold_character_name = serializers.CharField(source="gold_character.name", read_only=True)

    class Meta:
        model = SpeakerInstance
        fields = (
            "id",
            "scene",
            "code",
            "gold_character",
            "gold_character_name",
            "candidates",
            "extra",
        )


class SceneInstanceSerializer(SpeakerInstanceSerializer):
    """A masked speaker nested in its scene (the scene id is implied)."""

    class Meta(SpeakerInstanceSerializer.Meta):
        fields = ("id", "code", "gold_character", "gold_character_name", "candidates")


class SceneSerializer(serializers.ModelSerializer):
    instances = SceneInstanceSerializer(many=True, read_only=True)

    class Meta:
        model = Scene
        fields = (
            "id",
            "work",
            "source_id",
            "position",
            "part",
            "episode",
            "heading",
            "lines",
            "participants",
            "char_counts",
            "char_map",
            "source_text",
            "extra",
            "instances",
        )


class QAItemSerializer(serializers.ModelSerializer):
    character_name = serializers.CharField(source="character.name", read_only=True)

    class Meta:
        model = QAItem
        fields = (
            "id",
            "work",
            "character",
            "character_name",
            "natural_key",
            "position",
            "dimension",
            "directness",
            "context_0",
            "context_1000",
            "context_2000",
            "question",
            "answer",
            "bonus_points",
            "misleading_choices",
            "extra",
        )


class DynToMScenarioSerializer(serializers.ModelSerializer):
    class Meta:
        model = DynToMScenario
        fields = ("id", "number", "key", "background", "dialogue", "dialogue_shape", "extra")


class DynToMStageSerializer(serializers.ModelSerializer):
    work_key = serializers.CharField(source="work.key", read_only=True)
    scenarios = DynToMScenarioSerializer(many=True, read_only=True)

    class Meta:
        model = DynToMStage
        fields = (
            "id",
            "work",
            "work_key",
            "main_character",
            "scenario_count",
            "location",
            "location_category",
            "characters_information",
            "profiles",
            "relationships",
            "trajectory",
            "change_analysis",
            "extra",
            "scenarios",
        )


class DynToMQuestionSerializer(serializers.ModelSerializer):
    work_key = serializers.CharField(source="stage.work.key", read_only=True)

    class Meta:
        model = DynToMQuestion
        fields = (
            "id",
            "stage",
            "work_key",
            "key",
            "position",
            "source_type",
            "question_type",
            "mental_state",
            "scenario_from",
            "scenario_to",
            "text",
            "options",
            "gold_letter",
            "option_reasons",
            "extra",
        )
