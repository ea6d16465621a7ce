"""Read-only serializers of the annotation API: DynToM validation batches, their objects
(each with its annotators' slots) and decisions; DynToM generation jobs and their
stages; CharToM-QA construction batches and their tasks with the annotators' answers,
and the reviewers' decisions on CharToM-QA checks.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..chartom.board import batch_stage_progress
from ..chartom.models import AnnotationTask, NoteBatch, TaskAssignment
from ..dyntom.generation.selectors import generation_job_status_label
from ..dyntom.validation.selectors import batch_progress
from ..models import (
    AcceptedSet,
    GeneratedStage,
    GenerationJob,
    ValidationAssignment,
    ValidationBatch,
    ValidationDecision,
    ValidationObject,
)


class _Username(serializers.SlugRelatedField):
    def __init__(self, **kwargs) -> None:
        super().__init__(slug_field="username", read_only=True, allow_null=True, **kwargs)


# --- DynToM validation ------------------------------------------------------------------


class AcceptedSetSerializer(serializers.ModelSerializer):
    class Meta:
        model = AcceptedSet
        fields = ("version", "object_ids", "stage_ids", "rule_versions", "created_at")
        read_only_fields = fields


class ValidationBatchSerializer(serializers.ModelSerializer):
    created_by = _Username()
    stage_count = serializers.IntegerField(read_only=True, help_text="stages in the batch")
    object_count = serializers.IntegerField(read_only=True, help_text="objects to score")
    decided_count = serializers.IntegerField(
        read_only=True, help_text="objects with a decision (the rules' or an override)"
    )

    class Meta:
        model = ValidationBatch
        fields = (
            "id",
            "name",
            "k",
            "kinds",
            "stage_count",
            "object_count",
            "decided_count",
            "created_by",
            "created_at",
        )
        read_only_fields = fields


class AnnotatorProgressSerializer(serializers.Serializer):
    annotator = serializers.CharField()
    submitted = serializers.IntegerField(help_text="objects submitted")
    assigned = serializers.IntegerField(help_text="objects assigned")


class ValidationBatchDetailSerializer(ValidationBatchSerializer):
    progress = serializers.SerializerMethodField(
        help_text="per annotator, as the batch page shows it"
    )
    accepted_sets = AcceptedSetSerializer(many=True, read_only=True)

    class Meta(ValidationBatchSerializer.Meta):
        fields = (*ValidationBatchSerializer.Meta.fields, "progress", "accepted_sets")
        read_only_fields = fields

    @extend_schema_field(AnnotatorProgressSerializer(many=True))
    def get_progress(self, batch: ValidationBatch) -> list[dict]:
        rows = [
            {"annotator": name, "submitted": done, "assigned": total}
            for name, (done, total) in batch_progress(batch).items()
        ]
        return AnnotatorProgressSerializer(rows, many=True).data


class ValidationSlotSerializer(serializers.ModelSerializer):
    annotator = _Username()
    rubric_version = serializers.IntegerField(source="rubric.version", read_only=True)
    scores = serializers.SerializerMethodField(help_text="criterion -> value")

    class Meta:
        model = ValidationAssignment
        fields = (
            "id",
            "annotator",
            "rubric_version",
            "scores",
            "comment",
            "created_at",
            "submitted_at",
        )
        read_only_fields = fields

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_scores(self, slot: ValidationAssignment) -> dict[str, int]:
        return {score.criterion: score.value for score in slot.scores.all()}


class ValidationDecisionSerializer(serializers.ModelSerializer):
    object = serializers.PrimaryKeyRelatedField(read_only=True)
    effective_outcome = serializers.CharField(
        read_only=True, help_text="the override when there is one, else the rules' outcome"
    )
    rule_version = serializers.IntegerField(
        source="rule.version", read_only=True, allow_null=True, default=None
    )
    overridden_by = _Username()

    class Meta:
        model = ValidationDecision
        fields = (
            "id",
            "object",
            "effective_outcome",
            "outcome",
            "reason",
            "rule_version",
            "submitted",
            "computed_at",
            "override_outcome",
            "override_reason",
            "overridden_by",
            "overridden_at",
        )
        read_only_fields = fields


class ValidationObjectSerializer(serializers.ModelSerializer):
    stage = serializers.CharField(source="vstage.label", read_only=True)
    stage_position = serializers.IntegerField(source="vstage.position", read_only=True)
    slots = ValidationSlotSerializer(
        source="assignments", many=True, read_only=True, help_text="one per annotator"
    )
    decision = serializers.SerializerMethodField()

    class Meta:
        model = ValidationObject
        fields = (
            "id",
            "stage",
            "stage_position",
            "kind",
            "ref",
            "position",
            "label",
            "k",
            "slots",
            "decision",
        )
        read_only_fields = fields

    @extend_schema_field(ValidationDecisionSerializer(allow_null=True))
    def get_decision(self, obj: ValidationObject) -> dict | None:
        decision = getattr(obj, "decision", None)
        return None if decision is None else ValidationDecisionSerializer(decision).data


# --- DynToM generation ------------------------------------------------------------------


class GenerationJobSerializer(serializers.ModelSerializer):
    backend = serializers.SlugRelatedField(slug_field="name", read_only=True)
    run = serializers.PrimaryKeyRelatedField(read_only=True, help_text="its model run's id")
    status_display = serializers.SerializerMethodField(
        help_text='as the pages say it, e.g. "succeeded: 2 of 3 stages usable"'
    )
    stage_total = serializers.IntegerField(read_only=True)
    usable_stages = serializers.IntegerField(
        read_only=True, help_text="awaiting validation or kept"
    )
    created_by = _Username()

    class Meta:
        model = GenerationJob
        fields = (
            "id",
            "backend",
            "model",
            "params",
            "stage_count",
            "scenario_count",
            "seed",
            "budget_tokens",
            "status",
            "status_display",
            "stage_total",
            "usable_stages",
            "progress_done",
            "progress_total",
            "error",
            "run",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        )
        read_only_fields = fields

    def get_status_display(self, job: GenerationJob) -> str:
        return generation_job_status_label(job=job).text


class GeneratedStageSerializer(serializers.ModelSerializer):
    decided_by = _Username()

    class Meta:
        model = GeneratedStage
        fields = (
            "id",
            "index",
            "status",
            "status_reason",
            "scenario_count",
            "location",
            "location_category",
            "characters",
            "characters_information",
            "relationship",
            "trajectory",
            "scenarios",
            "questions",
            "model",
            "template_versions",
            "calls",
            "work_key",
            "decided_by",
            "decided_at",
            "decision_reason",
            "created_at",
            "updated_at",
        )
        read_only_fields = fields


# --- CharToM-QA construction ------------------------------------------------------------


class NoteBatchSerializer(serializers.ModelSerializer):
    backend = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    run = serializers.PrimaryKeyRelatedField(read_only=True, help_text="its model run's id")
    created_by = _Username()
    note_count = serializers.IntegerField(read_only=True)
    construction_count = serializers.IntegerField(read_only=True)
    published_count = serializers.IntegerField(read_only=True)
    retry_count = serializers.IntegerField(
        read_only=True, help_text="constructions whose LLM step needs a retry"
    )

    class Meta:
        model = NoteBatch
        fields = (
            "id",
            "name",
            "source_name",
            "backend",
            "model",
            "params",
            "budget_tokens",
            "run",
            "window_tokenizer",
            "note_count",
            "construction_count",
            "published_count",
            "retry_count",
            "created_by",
            "created_at",
        )
        read_only_fields = fields


class StageProgressSerializer(serializers.Serializer):
    stage = serializers.CharField()
    label = serializers.CharField()
    total = serializers.IntegerField()
    states = serializers.DictField(child=serializers.IntegerField(), help_text="state -> count")


class NoteBatchDetailSerializer(NoteBatchSerializer):
    stages = serializers.SerializerMethodField(
        help_text="constructions per stage and state, as the batch page counts them"
    )

    class Meta(NoteBatchSerializer.Meta):
        fields = (*NoteBatchSerializer.Meta.fields, "stages")
        read_only_fields = fields

    @extend_schema_field(StageProgressSerializer(many=True))
    def get_stages(self, batch: NoteBatch) -> list[dict]:
        rows = [
            {"stage": r.stage, "label": r.label, "total": r.total, "states": r.states}
            for r in batch_stage_progress(batch)
        ]
        return StageProgressSerializer(rows, many=True).data


class TaskAssignmentSerializer(serializers.ModelSerializer):
    annotator = _Username()

    class Meta:
        model = TaskAssignment
        fields = ("id", "annotator", "taken_at", "submitted_at", "seconds", "answer")
        read_only_fields = fields


class AnnotationTaskSerializer(serializers.ModelSerializer):
    construction = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    note = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    assignments = TaskAssignmentSerializer(
        many=True, read_only=True, help_text="the annotators' slots and their answers"
    )

    class Meta:
        model = AnnotationTask
        fields = (
            "id",
            "kind",
            "construction",
            "note",
            "k",
            "position",
            "closed",
            "created_at",
            "assignments",
        )
        read_only_fields = fields


class CheckDecisionSerializer(serializers.Serializer):
    """A reviewer's decision on a CharToM-QA check, with its provenance (read-only)."""

    id = serializers.IntegerField()
    task = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=["note_check", "judgement"])
    batch = serializers.CharField(help_text="note checks: the note batch")
    sample = serializers.CharField(help_text="expert judgement: the sample")
    note = serializers.IntegerField(allow_null=True)
    prediction = serializers.IntegerField(allow_null=True)
    reviewer = serializers.CharField()
    created_at = serializers.DateTimeField()
    outcome = serializers.CharField(help_text="the settled label or score; '' withdrew it")
    settled_score = serializers.FloatField(allow_null=True)
    reason = serializers.CharField()
    rule_outcome = serializers.CharField(
        help_text="what the answers gave before: the most frequent label or 'split', the mean"
    )
    rule_reason = serializers.CharField()
    answers = serializers.JSONField(help_text="the annotators' answers it settled, as they stood")
    in_force = serializers.BooleanField(help_text="the task's newest decision, not withdrawn")
    changed = serializers.BooleanField(help_text="differs from what the answers gave")
