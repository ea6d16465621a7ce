"""Annotation workflows: DynToM generation pools, generation jobs and generated stages.

The pools (locations, names, occupations, …) are editable data loaded from the DynToM
release with ``load_dyntom_pools``. A :class:`GenerationJob` generates stages step by
step through the run engine (``modeling``); each :class:`GeneratedStage` holds what its
steps produced and its lineage, and waits for validation. Only a kept stage becomes an
item-bank work (see ``annotation.dyntom.generation.services.generated_stage_keep``).
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from common.scoping import WorkspaceManager, WorkspaceOwned

# Paper section 3.1: 4 to 7 scenarios per stage, 5 by default.
MIN_SCENARIOS, MAX_SCENARIOS, DEFAULT_SCENARIOS = 4, 7, 5


class Gender(models.TextChoices):
    # The pools' own words (occupations.json is keyed "woman"/"man").
    WOMAN = "woman", "woman"
    MAN = "man", "man"


class LocationCategory(models.Model):
    """One of the 13 categories of ``social_setting.json`` (key ``classfication``)."""

    name = models.CharField(max_length=100, unique=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "location categories"

    def __str__(self) -> str:
        return self.name


class Location(models.Model):
    """A social setting; some belong to several categories, 35 of the release's to none."""

    name = models.CharField(max_length=100, unique=True)
    categories = models.ManyToManyField(LocationCategory, blank=True, related_name="locations")
    is_active = models.BooleanField(default=True, help_text="offered to new generation jobs")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class GivenName(models.Model):
    """A first name by popularity rank (``100_given_name.csv``: rank, boy, girl)."""

    name = models.CharField(max_length=100)
    gender = models.CharField(max_length=10, choices=Gender.choices)
    rank = models.PositiveIntegerField()
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["gender", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["name", "gender"], name="given_name_gender_unique")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.gender})"


class Surname(models.Model):
    """A surname and the census group whose list it comes from (``surname_list.json``)."""

    name = models.CharField(max_length=100)
    group = models.CharField(max_length=100, help_text="e.g. 'Hispanic or Latino'")
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["group", "name"]
        constraints = [
            models.UniqueConstraint(fields=["name", "group"], name="surname_group_unique")
        ]

    def __str__(self) -> str:
        return self.name


class Occupation(models.Model):
    """An occupation, listed per gender as ``occupations.json`` does."""

    name = models.CharField(max_length=200)
    gender = models.CharField(max_length=10, choices=Gender.choices)
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["gender", "name"]
        constraints = [
            models.UniqueConstraint(fields=["name", "gender"], name="occupation_gender_unique")
        ]

    def __str__(self) -> str:
        return self.name


class EducationLevel(models.Model):
    """An education level (``education.json``), in the file's order."""

    name = models.CharField(max_length=100, unique=True)
    position = models.PositiveSmallIntegerField(default=0)
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["position", "name"]

    def __str__(self) -> str:
        return self.name


class PersonalityType(models.Model):
    """An MBTI type (``mbti.json``): code such as ``isfp`` and its label."""

    code = models.CharField(max_length=4, unique=True)
    label = models.CharField(max_length=100, blank=True, default="")
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["code"]

    def __str__(self) -> str:
        return self.code


class GenerationJob(WorkspaceOwned):
    """A request to generate ``stage_count`` DynToM stages; one Celery task runs it.

    Its model calls are made through a modeling :class:`~modeling.models.Run` (``run``),
    so calls, tokens, cost and cache hits show at /runs/. Progress counts steps: four
    per stage (relationship, trajectory, scenarios, questions). A job that runs to the
    end succeeds when at least one stage is usable and needs attention when none is.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        # Ran to the end without one usable stage (each needs attention): nothing
        # crashed, yet nothing was generated.
        NEEDS_ATTENTION = "needs_attention", "needs attention"
        FAILED = "failed", "failed"

    FINISHED = (Status.SUCCEEDED, Status.NEEDS_ATTENTION, Status.FAILED)
    STEPS_PER_STAGE = 4

    backend = models.ForeignKey("modeling.Backend", on_delete=models.PROTECT, related_name="+")
    model = models.CharField(max_length=255)
    params = models.JSONField(default=dict, blank=True, help_text="temperature, max_tokens…")
    relationship_template = models.ForeignKey(
        "modeling.PromptTemplate", on_delete=models.PROTECT, related_name="+"
    )
    trajectory_template = models.ForeignKey(
        "modeling.PromptTemplate", on_delete=models.PROTECT, related_name="+"
    )
    scenarios_template = models.ForeignKey(
        "modeling.PromptTemplate", on_delete=models.PROTECT, related_name="+"
    )
    retry_template = models.ForeignKey(
        "modeling.PromptTemplate", on_delete=models.PROTECT, related_name="+"
    )
    stage_count = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(500)]
    )
    scenario_count = models.PositiveSmallIntegerField(
        default=DEFAULT_SCENARIOS,
        validators=[MinValueValidator(MIN_SCENARIOS), MaxValueValidator(MAX_SCENARIOS)],
        help_text="scenarios per stage (N)",
    )
    seed = models.PositiveIntegerField(default=0)
    budget_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    run = models.OneToOneField(
        "modeling.Run",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="generation_job",
    )
    created_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The job's lease, as a model run's (modeling.runs.leases): the worker process
    # generating it and until when. A job still "running" whose holder is dead on this
    # host, or whose lease expired, is taken over by the next delivery of its task.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_holder_host = models.CharField(max_length=255, blank=True, default="")
    lease_holder_pid = models.PositiveIntegerField(null=True, blank=True)
    lease_holder_started_at = models.DateTimeField(
        null=True, blank=True, help_text="start time of the holding process"
    )

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scenario_count__gte=MIN_SCENARIOS)
                & models.Q(scenario_count__lte=MAX_SCENARIOS),
                name="generation_job_scenario_count_4_to_7",
            )
        ]

    def __str__(self) -> str:
        return f"generation job {self.pk}"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def percent(self) -> int:
        return round(100 * self.progress_done / self.progress_total) if self.progress_total else 0

    def template_versions(self) -> dict[str, str]:
        """Step -> "name vN" of the template versions this job used."""
        return {
            step: f"{template.name} v{template.version}"
            for step, template in (
                ("relationship", self.relationship_template),
                ("trajectory", self.trajectory_template),
                ("scenarios", self.scenarios_template),
                ("retry", self.retry_template),
            )
        }


class GeneratedStage(models.Model):
    """One generated social stage: sampled context, the LLM's texts, questions, lineage.

    Each step's output is saved the moment it is valid, so a job that is run again
    continues from the step a stage reached. ``calls`` lists the modeling RunCalls
    used, attempt by attempt, including replies that failed validation.
    """

    class Status(models.TextChoices):
        GENERATING = "generating", "generating"
        NEEDS_ATTENTION = "needs_attention", "needs attention"
        AWAITING_VALIDATION = "awaiting_validation", "awaiting validation"
        KEPT = "kept", "kept"
        DISCARDED = "discarded", "discarded"

    # What a job generated that can be used: stages waiting for validation or kept.
    USABLE = (Status.AWAITING_VALIDATION, Status.KEPT)

    job = models.ForeignKey(GenerationJob, on_delete=models.CASCADE, related_name="stages")
    index = models.PositiveSmallIntegerField(help_text="1-based, within the job")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.GENERATING)
    status_reason = models.TextField(blank=True, default="")
    scenario_count = models.PositiveSmallIntegerField()
    # Step 1: sampled from the pools with the job's seed, then the LLM's relationship.
    location = models.CharField(max_length=100, blank=True, default="")
    location_category = models.CharField(max_length=100, blank=True, default="")
    characters = models.JSONField(
        default=list, blank=True, help_text="main first: name, surname, gender, occupation…"
    )
    characters_information = models.TextField(blank=True, default="")
    relationship = models.TextField(blank=True, default="")
    # Step 2: the two trajectory parts of the story's "sketch".
    trajectory = models.JSONField(default=dict, blank=True)
    # Step 3: {"scenario 1": {"background": …, "dialogue": [{speaker: line}, …]}, …}
    scenarios = models.JSONField(default=dict, blank=True)
    # Step 4: question_new.json content, from annotation.dyntom.questions.
    questions = models.JSONField(default=dict, blank=True)
    # Lineage.
    model = models.CharField(max_length=255, blank=True, default="")
    template_versions = models.JSONField(default=dict, blank=True)
    calls = models.JSONField(default=list, blank=True)
    work_key = models.CharField(max_length=255, blank=True, default="")
    decided_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = WorkspaceManager("job__workspace")

    class Meta:
        ordering = ["job", "index"]
        constraints = [
            models.UniqueConstraint(fields=["job", "index"], name="generated_stage_job_index")
        ]
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"job {self.job_id} stage {self.index} ({self.status})"

    @property
    def main_character(self) -> str:
        return self.characters[0]["full_name"] if self.characters else ""


# --- DynToM validation scoring --------------------------------------------------------
# Rubrics and decision rules are versioned records: a new version is a new row, and
# every assignment keeps the rubric version it was scored on, every decision the rule
# version it was computed with. See rubrics.py and rules.py in annotation/dyntom/validation/.


class ValidationKind(models.TextChoices):
    CONTEXT = "context", "profiles and relationship"
    TRAJECTORY = "trajectory", "mental-state trajectory"
    SCENARIO = "scenario", "scenario"
    QUESTION = "question", "question"


class KindVersioned(models.Model):
    """A record edited by saving a new version per kind; old versions stay for old work."""

    kind = models.CharField(max_length=20, choices=ValidationKind.choices)
    version = models.PositiveIntegerField()
    notes = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["kind", "-version"]


class Rubric(KindVersioned):
    """What annotators score one kind of object on: criteria with scale and labels."""

    # [{"key", "label", "help", "scale": "yes_no"|"likert5", "labels": {"1": …}}]
    criteria = models.JSONField()

    class Meta(KindVersioned.Meta):
        constraints = [
            models.UniqueConstraint(fields=["kind", "version"], name="rubric_kind_version")
        ]

    def __str__(self) -> str:
        return f"{self.kind} rubric v{self.version}"


class DecisionRule(KindVersioned):
    """The keep/discard rule set of one kind, in the JSON language of
    ``annotation.dyntom.validation.rules``."""

    spec = models.JSONField()

    class Meta(KindVersioned.Meta):
        constraints = [
            models.UniqueConstraint(fields=["kind", "version"], name="decision_rule_kind_version")
        ]

    def __str__(self) -> str:
        return f"{self.kind} rule v{self.version}"


class ValidationBatch(WorkspaceOwned):
    """A set of stages to validate, each object by ``k`` different annotators."""

    name = models.CharField(max_length=200)
    k = models.PositiveSmallIntegerField(
        default=4, validators=[MinValueValidator(1), MaxValueValidator(20)]
    )
    kinds = models.JSONField(default=list, help_text="object kinds scored in this batch")
    # The reviewer queue's threshold (annotation.dyntom.validation.review): an object is
    # disputed when its annotators' scores on one criterion differ by this much or more,
    # or (review_split) when their scores alone would keep it for some, not for others.
    review_spread = models.PositiveSmallIntegerField(
        default=2,
        validators=[MinValueValidator(1), MaxValueValidator(4)],
        help_text="disputed when max - min of the scores on a criterion reaches this",
    )
    review_split = models.BooleanField(
        default=True, help_text="disputed when the annotators' own keep/discard differ"
    )
    created_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "validation batches"

    def __str__(self) -> str:
        return self.name


class ValidationStage(models.Model):
    """One stage of a batch: an imported item-bank stage or a generated one."""

    batch = models.ForeignKey(ValidationBatch, on_delete=models.CASCADE, related_name="stages")
    position = models.PositiveIntegerField()
    stage = models.ForeignKey(
        "benchmarks.DynToMStage",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
    )
    generated = models.ForeignKey(
        GeneratedStage, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    label = models.CharField(max_length=255)
    outcome = models.CharField(max_length=20, default="pending")
    outcome_reason = models.TextField(blank=True, default="")

    objects = WorkspaceManager("batch__workspace")

    class Meta:
        ordering = ["batch", "position"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(stage__isnull=True, generated__isnull=False)
                | models.Q(stage__isnull=False, generated__isnull=True),
                name="validation_stage_one_source",
            ),
            models.UniqueConstraint(fields=["batch", "stage"], name="validation_stage_unique"),
            models.UniqueConstraint(
                fields=["batch", "generated"], name="validation_generated_unique"
            ),
            models.UniqueConstraint(fields=["batch", "position"], name="validation_stage_pos"),
        ]

    def __str__(self) -> str:
        return self.label


class ValidationObject(models.Model):
    """One thing to score: a stage's profiles+relationship, trajectory, a scenario or a
    question. ``k`` starts at the batch's and grows when a rule says "undecided"."""

    batch = models.ForeignKey(
        ValidationBatch, on_delete=models.CASCADE, related_name="validation_objects"
    )
    vstage = models.ForeignKey(
        ValidationStage, on_delete=models.CASCADE, related_name="validation_objects"
    )
    kind = models.CharField(max_length=20, choices=ValidationKind.choices)
    ref = models.CharField(max_length=100, blank=True, default="", help_text="scenario/question")
    position = models.PositiveIntegerField()
    label = models.CharField(max_length=255)
    k = models.PositiveSmallIntegerField()

    objects = WorkspaceManager("batch__workspace")

    class Meta:
        ordering = ["vstage", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["vstage", "kind", "ref"], name="validation_object_unique"
            )
        ]

    str_relations = ("vstage",)

    def __str__(self) -> str:
        return f"{self.vstage.label}: {self.label}"


class ValidationAssignment(models.Model):
    """One annotator's slot on one object, scored on the rubric version in force when
    it was assigned. Submitted once every criterion is scored; then frozen."""

    object = models.ForeignKey(
        ValidationObject, on_delete=models.CASCADE, related_name="assignments"
    )
    vstage = models.ForeignKey(ValidationStage, on_delete=models.CASCADE, related_name="+")
    annotator = models.ForeignKey(
        "auth.User", on_delete=models.CASCADE, related_name="validation_assignments"
    )
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="+")
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)

    objects = WorkspaceManager("vstage__batch__workspace")

    class Meta:
        ordering = ["vstage", "object__position"]
        constraints = [
            # The database itself refuses a second slot for the same annotator.
            models.UniqueConstraint(
                fields=["object", "annotator"], name="validation_assignment_once"
            )
        ]
        indexes = [models.Index(fields=["annotator", "vstage"])]

    def __str__(self) -> str:
        return f"{self.annotator_id} on object {self.object_id}"


class ValidationScore(models.Model):
    assignment = models.ForeignKey(
        ValidationAssignment, on_delete=models.CASCADE, related_name="scores"
    )
    criterion = models.CharField(max_length=50)
    value = models.SmallIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    objects = WorkspaceManager("assignment__vstage__batch__workspace")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["assignment", "criterion"], name="validation_score_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.criterion}={self.value}"


class ValidationDecision(models.Model):
    """The rules' outcome for one object, recomputed from scores, never edited by hand.

    A researcher's override lives beside it (``override_*``) with its reason; the
    recomputation leaves the override alone, and the effective outcome is the override
    when there is one.
    """

    object = models.OneToOneField(
        ValidationObject, on_delete=models.CASCADE, related_name="decision"
    )
    outcome = models.CharField(max_length=20)
    reason = models.TextField()
    rule = models.ForeignKey(
        DecisionRule, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    submitted = models.PositiveSmallIntegerField(default=0)
    computed_at = models.DateTimeField(auto_now=True)
    override_outcome = models.CharField(max_length=20, blank=True, default="")
    override_reason = models.TextField(blank=True, default="")
    overridden_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    overridden_at = models.DateTimeField(null=True, blank=True)

    objects = WorkspaceManager("object__batch__workspace")

    def __str__(self) -> str:
        return f"{self.object_id}: {self.effective_outcome}"

    @property
    def effective_outcome(self) -> str:
        return self.override_outcome or self.outcome


class Adjudication(models.Model):
    """A reviewer's decision on one disputed target, with its provenance; never edited.

    The target is a DynToM validation ``object`` or a CharToM-QA check ``task`` (a note
    check or an expert judgement), exactly one. Changing or undoing a decision adds a
    row, so the history stays: the newest row of a target is in force, and one with an
    empty ``outcome`` withdrew the decision (the annotators' answers count again).

    - An object's row in force is mirrored into its :class:`ValidationDecision`
      ``override_*`` fields, which everything downstream (stage, accepted set, reports)
      already reads.
    - A check's row in force is read directly (``annotation.chartom.check_decisions``):
      ``outcome`` is the settled label, or the settled score as text with the number in
      ``settled_scores["score"]``; ``rule_outcome`` is what the answers gave before (the
      most frequent label or "split", the experts' mean score).
    """

    object = models.ForeignKey(
        ValidationObject,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="adjudications",
    )
    task = models.ForeignKey(
        "annotation.AnnotationTask",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="adjudications",
        help_text="a CharToM-QA note check or expert judgement",
    )
    reviewer = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    outcome = models.CharField(max_length=20, blank=True, default="", help_text="'': withdrawn")
    settled_scores = models.JSONField(
        default=dict, blank=True, help_text="criterion -> the reviewer's settled score"
    )
    reason = models.TextField(blank=True, default="")
    answers = models.JSONField(
        default=list, help_text="the annotators' submitted answers it settled, as they stood"
    )
    rule_outcome = models.CharField(max_length=20, help_text="the rules' outcome before")
    rule_reason = models.TextField(blank=True, default="")

    objects = WorkspaceManager(
        ("object__batch__workspace", "task__batch__workspace", "task__sample__workspace")
    )

    class Meta:
        ordering = ["object", "task", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(object__isnull=True, task__isnull=False)
                | models.Q(object__isnull=False, task__isnull=True),
                name="adjudication_one_target",
            )
        ]
        # "annotation.adjudicate": researchers hold every permission of the app
        # (accounts.services.roles_ensure); a manager may give it to an annotator.
        permissions = [("adjudicate", "Can review and settle annotators' disagreements")]

    def __str__(self) -> str:
        target = f"task {self.task_id}" if self.task_id else self.object_id
        return f"{target}: {self.outcome or 'withdrawn'} by {self.reviewer_id}"


class AcceptedSet(models.Model):
    """A numbered snapshot of what a batch accepted, and under which rule versions."""

    batch = models.ForeignKey(
        ValidationBatch, on_delete=models.CASCADE, related_name="accepted_sets"
    )
    version = models.PositiveIntegerField()
    object_ids = models.JSONField(default=list)
    stage_ids = models.JSONField(default=list, help_text="ValidationStage ids kept")
    rule_versions = models.JSONField(default=dict, help_text="kind -> rule version")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceManager("batch__workspace")

    class Meta:
        ordering = ["batch", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "version"], name="accepted_set_version")
        ]

    str_relations = ("batch",)

    def __str__(self) -> str:
        return f"{self.batch} accepted set v{self.version}"


# CharToM-QA construction and expert judgement live in their own module.
from .chartom.models import (  # noqa: E402, F401
    AnnotationTask,
    BookText,
    Construction,
    FieldChange,
    JudgementSample,
    NoteBatch,
    NoteCheckLabel,
    QualificationAnswer,
    QualificationAttempt,
    QualificationItem,
    QualificationSet,
    QuestionCandidate,
    QuestionChoice,
    ReaderNote,
    Stage,
    TaskAssignment,
    TaskKind,
)
