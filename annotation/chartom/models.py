"""CharToM-QA construction (paper section 4, Appendices F-J) and expert judgement (Appendix E).

A researcher imports reader notes (:class:`NoteBatch`, :class:`ReaderNote`) about
characters of books whose texts are imported as :class:`BookText`. Every note is
tried for each of the four ToM dimensions: one :class:`Construction` per note and
dimension walks the stages of :class:`Stage`, alternating LLM steps (run as Celery
jobs through the run engine) and human steps (a :class:`AnnotationTask` in a queue).
Every change of a construction's fields is kept as a :class:`FieldChange` with who or
which model and template version made it, and the value before.

Human work of every kind is handed out the same way: a task has room for ``k``
annotators, each takes a slot (:class:`TaskAssignment`), and a slot not submitted
within ``TOMLAB_ANNOTATION_TASK_TIMEOUT_S`` goes back to the queue.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from benchmarks.models import ToMDimension
from common.scoping import WorkspaceManager, WorkspaceOwned

# Experts score 0 to 1.0 in steps of 0.1: a spread of 0.3 (say 0.4 against 0.7) is the
# first that is more than two neighbouring steps apart, as a Likert spread of 2 is.
DEFAULT_REVIEW_SPREAD = 0.3


class BookText(models.Model):
    """A novel's plain text, Project Gutenberg header and footer stripped."""

    title = models.CharField(
        max_length=255, unique=True, help_text="the CharToM-QA book_name, e.g. 'Father Goriot'"
    )
    text = models.TextField()
    source_name = models.CharField(max_length=255, blank=True, default="")
    sha256 = models.CharField(max_length=64, help_text="of the stored (stripped) text")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title


class NoteBatch(WorkspaceOwned):
    """One import of reader notes, and the LLM settings its constructions run with."""

    name = models.CharField(max_length=200)
    source_name = models.CharField(max_length=255, blank=True, default="")
    backend = models.ForeignKey(
        "modeling.Backend", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    model = models.CharField(max_length=255, blank=True, default="")
    params = models.JSONField(default=dict, blank=True)
    budget_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    # One direct-call run holds every LLM call of the batch (shown at /runs/).
    run = models.OneToOneField(
        "modeling.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    window_tokenizer = models.CharField(
        max_length=255, blank=True, default="", help_text="tokenizer the plot windows were cut with"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "note batches"

    def __str__(self) -> str:
        return self.name


class ReaderNote(models.Model):
    """A reading-app note on an underlined fragment, about one target character."""

    batch = models.ForeignKey(NoteBatch, on_delete=models.CASCADE, related_name="notes")
    position = models.PositiveIntegerField(help_text="1-based row of the import file")
    book = models.ForeignKey(BookText, on_delete=models.PROTECT, related_name="notes")
    target_character = models.CharField(max_length=255)
    underlined_text = models.TextField()
    context = models.TextField(help_text="the plot around the underlined text, as imported")
    note_text = models.TextField()
    author_hash = models.CharField(
        max_length=64, blank=True, default="", help_text="keyed hash of the note author's id"
    )
    # Where the underlined text ends in the book (character offset); null if not found.
    book_offset = models.PositiveIntegerField(null=True, blank=True)
    context_0 = models.TextField(blank=True, default="")
    context_1000 = models.TextField(null=True, blank=True)
    context_2000 = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceManager("batch__workspace")

    class Meta:
        ordering = ["batch", "position"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "position"], name="reader_note_position")
        ]

    str_relations = ("book",)

    def __str__(self) -> str:
        return f"{self.book} / {self.target_character} #{self.position}"


class Stage(models.TextChoices):
    """Where a construction is. LLM stages run as jobs; human stages wait for a task."""

    FILTER = "filter", "note filtering (LLM)"
    EXTRACT = "extract", "key-note extraction"
    PARAPHRASE = "paraphrase", "paraphrasing (LLM)"
    PARAPHRASE_REVIEW = "paraphrase_review", "paraphrase review"
    QUESTIONS = "questions", "question generation and verification (LLM)"
    QUESTION_CHOICE = "question_choice", "question choice"
    BONUS = "bonus", "bonus points (LLM)"
    BONUS_REVIEW = "bonus_review", "bonus point review"
    DISTRACTORS = "distractors", "distractors (LLM)"
    DISTRACTOR_REVIEW = "distractor_review", "distractor review"
    PUBLISHED = "published", "published"
    DROPPED = "dropped", "dropped"


LLM_STAGES = (Stage.FILTER, Stage.PARAPHRASE, Stage.QUESTIONS, Stage.BONUS, Stage.DISTRACTORS)
HUMAN_STAGES = (
    Stage.EXTRACT,
    Stage.PARAPHRASE_REVIEW,
    Stage.QUESTION_CHOICE,
    Stage.BONUS_REVIEW,
    Stage.DISTRACTOR_REVIEW,
)


class Construction(models.Model):
    """One note and one ToM dimension on its way to a CharToM-QA item."""

    class State(models.TextChoices):
        QUEUED = "queued", "LLM step queued"
        RUNNING = "running", "LLM step running"
        NEEDS_RETRY = "needs_retry", "needs retry"
        WAITING_HUMAN = "waiting_human", "waiting for an annotator"
        DONE = "done", "done"

    note = models.ForeignKey(ReaderNote, on_delete=models.CASCADE, related_name="constructions")
    dimension = models.CharField(max_length=10, choices=ToMDimension.choices)
    stage = models.CharField(max_length=20, choices=Stage.choices, default=Stage.FILTER)
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    error = models.TextField(blank=True, default="", help_text="why the last LLM step failed")
    # Stage 2: does the note explicitly describe this dimension of the character?
    filter_verdict = models.CharField(max_length=10, blank=True, default="")  # yes / no
    filter_reason = models.TextField(blank=True, default="")
    # Stage 4: [[start, end], ...] character offsets (Python str indices) into note_text.
    key_spans = models.JSONField(default=list, blank=True)
    key_note = models.TextField(blank=True, default="")
    # Stage 5: the complete ToM description, which becomes the reference answer.
    description = models.TextField(blank=True, default="")
    # Stage 6
    question = models.TextField(blank=True, default="")
    # Stage 7-8
    bonus_points = models.JSONField(default=list, blank=True)
    misleadings = models.JSONField(
        default=list, blank=True, help_text="defects found in model answers (Appendix J)"
    )
    distractors = models.JSONField(default=list, blank=True)
    # Stage 9
    qa_item = models.ForeignKey(
        "benchmarks.QAItem", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The LLM step's lease, as a model run's (modeling.runs.leases): the worker process
    # running the step and until when. A step still "running" whose holder is dead on
    # this host, or whose lease expired, is taken over by the next delivery of its job.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_holder_host = models.CharField(max_length=255, blank=True, default="")
    lease_holder_pid = models.PositiveIntegerField(null=True, blank=True)
    lease_holder_started_at = models.DateTimeField(
        null=True, blank=True, help_text="start time of the holding process"
    )

    objects = WorkspaceManager("note__batch__workspace")

    class Meta:
        ordering = ["note", "dimension"]
        constraints = [
            models.UniqueConstraint(fields=["note", "dimension"], name="construction_note_dim")
        ]
        indexes = [models.Index(fields=["stage", "state"])]

    str_relations = ("note",)

    def __str__(self) -> str:
        return f"{self.note} [{self.dimension}]"


class FieldChange(models.Model):
    """Provenance: one change of one construction field, by a person or a model."""

    construction = models.ForeignKey(Construction, on_delete=models.CASCADE, related_name="changes")
    field = models.CharField(max_length=50)
    old_value = models.JSONField(null=True, blank=True)
    new_value = models.JSONField(null=True, blank=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    model = models.CharField(max_length=255, blank=True, default="")
    template = models.CharField(max_length=120, blank=True, default="", help_text="name vN")
    call = models.ForeignKey(
        "modeling.RunCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=30, blank=True, default="", help_text="accepted, edited…")
    changed_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceManager("construction__note__batch__workspace")

    class Meta:
        ordering = ["construction", "changed_at", "pk"]

    str_relations = ("changed_by",)

    def __str__(self) -> str:
        who = self.changed_by or self.model or "system"
        return f"{self.construction_id}.{self.field} by {who}"


class QuestionCandidate(models.Model):
    """A generated question and the plot-free verification of it (Appendix H)."""

    class Verdict(models.TextChoices):
        PENDING = "", "not verified"
        APPROPRIATE = "appropriate", "appropriate"
        INAPPROPRIATE = "inappropriate", "inappropriate"
        UNPARSEABLE = "unparseable", "unparseable"

    construction = models.ForeignKey(
        Construction, on_delete=models.CASCADE, related_name="candidates"
    )
    position = models.PositiveSmallIntegerField()
    text = models.TextField()
    generation_call = models.ForeignKey(
        "modeling.RunCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verification_call = models.ForeignKey(
        "modeling.RunCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verdict = models.CharField(max_length=15, choices=Verdict.choices, blank=True, default="")
    verdict_reason = models.TextField(blank=True, default="")
    kept = models.BooleanField(default=False, help_text="among the at most 4 shown to annotators")

    objects = WorkspaceManager("construction__note__batch__workspace")

    class Meta:
        ordering = ["construction", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["construction", "position"], name="question_candidate_position"
            )
        ]

    def __str__(self) -> str:
        return self.text[:80]


class QuestionChoice(models.Model):
    """The annotator's pick among the kept candidates, with what they changed and how long."""

    construction = models.OneToOneField(
        Construction, on_delete=models.CASCADE, related_name="question_choice"
    )
    chosen = models.ForeignKey(QuestionCandidate, on_delete=models.PROTECT, related_name="+")
    rejected = models.ManyToManyField(QuestionCandidate, blank=True, related_name="+")
    final_text = models.TextField()
    diff = models.TextField(blank=True, default="", help_text="unified diff chosen → final")
    edit_distance = models.PositiveIntegerField(default=0, help_text="Levenshtein, characters")
    seconds = models.FloatField(help_text="from taking the task to choosing, server clock")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    model = models.CharField(max_length=255, blank=True, default="")
    template_versions = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceManager("construction__note__batch__workspace")

    def __str__(self) -> str:
        return self.final_text[:80]


# --- human task queues ---------------------------------------------------------------


class TaskKind(models.TextChoices):
    NOTE_CHECK = "note_check", "note check"
    EXTRACT = "extract", "key-note extraction"
    PARAPHRASE_REVIEW = "paraphrase_review", "paraphrase review"
    QUESTION_CHOICE = "question_choice", "question choice"
    BONUS_REVIEW = "bonus_review", "bonus point review"
    DISTRACTOR_REVIEW = "distractor_review", "distractor review"
    JUDGEMENT = "judgement", "expert judgement"


class AnnotationTask(models.Model):
    """One unit of human work with room for ``k`` annotators.

    Exactly one target is set, by kind: ``construction`` for the construction steps,
    ``note`` for note checks, ``prediction`` for expert judgement.
    """

    kind = models.CharField(max_length=20, choices=TaskKind.choices)
    batch = models.ForeignKey(
        NoteBatch, null=True, blank=True, on_delete=models.CASCADE, related_name="tasks"
    )
    sample = models.ForeignKey(
        "JudgementSample", null=True, blank=True, on_delete=models.CASCADE, related_name="tasks"
    )
    construction = models.ForeignKey(
        Construction, null=True, blank=True, on_delete=models.CASCADE, related_name="tasks"
    )
    note = models.ForeignKey(
        ReaderNote, null=True, blank=True, on_delete=models.CASCADE, related_name="tasks"
    )
    prediction = models.ForeignKey(
        "modeling.Prediction", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    k = models.PositiveSmallIntegerField(default=1)
    position = models.PositiveIntegerField(default=0)
    closed = models.BooleanField(default=False, help_text="all k slots submitted, or withdrawn")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceManager(("batch__workspace", "sample__workspace"))

    class Meta:
        ordering = ["kind", "position", "pk"]
        indexes = [models.Index(fields=["kind", "closed", "position"])]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk}"


class TaskAssignment(models.Model):
    """An annotator's slot on a task; ``answer`` is what they submitted."""

    task = models.ForeignKey(AnnotationTask, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    taken_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    answer = models.JSONField(default=dict, blank=True)
    seconds = models.FloatField(null=True, blank=True, help_text="taken → submitted, server clock")

    objects = WorkspaceManager(("task__batch__workspace", "task__sample__workspace"))

    class Meta:
        ordering = ["task", "taken_at"]
        constraints = [
            models.UniqueConstraint(fields=["task", "annotator"], name="task_assignment_unique")
        ]
        indexes = [models.Index(fields=["annotator", "submitted_at"])]

    str_relations = ("task",)

    def __str__(self) -> str:
        return f"{self.task} → {self.annotator_id}"


# --- note checks, qualification, expert judgement ---------------------------------------


class NoteCheckLabel(models.TextChoices):
    """Section 4.1's three judgements of a filtered note."""

    ACCURATE = "accurate", "accurate"
    SUBJECTIVE = "subjective", "subjective but consistent"
    INAPPROPRIATE = "inappropriate", "inappropriate"


class QualificationSet(WorkspaceOwned):
    """A gold set of key-note extractions an annotator must match before extracting.

    ``retry_mode`` keeps a failed annotator from passing by memorising the feedback:
    either a retry is on the same items and the feedback never shows the gold text,
    or each attempt draws ``items_per_attempt`` items the annotator has not seen and
    the feedback may show the gold.
    """

    class RetryMode(models.TextChoices):
        HIDE_GOLD = "hide_gold", "same items again; feedback without the gold text"
        NEW_ITEMS = "new_items", "other gold items each attempt; feedback shows the gold"

    name = models.CharField(max_length=200)
    threshold = models.FloatField(default=0.8, help_text="mean span F1 needed to qualify (0-1)")
    is_active = models.BooleanField(default=True)
    retry_mode = models.CharField(
        max_length=10, choices=RetryMode.choices, default=RetryMode.HIDE_GOLD
    )
    items_per_attempt = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="new_items: gold items each attempt draws"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


class QualificationItem(models.Model):
    qset = models.ForeignKey(QualificationSet, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    note = models.ForeignKey(ReaderNote, on_delete=models.PROTECT, related_name="+")
    dimension = models.CharField(max_length=10, choices=ToMDimension.choices)
    gold_spans = models.JSONField(default=list, help_text="[[start, end], ...] into note_text")

    objects = WorkspaceManager("qset__workspace")

    class Meta:
        ordering = ["qset", "position"]
        constraints = [
            models.UniqueConstraint(fields=["qset", "position"], name="qualification_item_pos")
        ]

    str_relations = ("qset",)

    def __str__(self) -> str:
        return f"{self.qset} #{self.position}"


class QualificationAttempt(models.Model):
    qset = models.ForeignKey(QualificationSet, on_delete=models.CASCADE, related_name="attempts")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True)
    passed = models.BooleanField(null=True, blank=True)
    # Which of the set's items this attempt is on: all of them, or those it drew.
    items = models.ManyToManyField(QualificationItem, related_name="drawn_in", blank=True)

    objects = WorkspaceManager("qset__workspace")

    class Meta:
        ordering = ["qset", "annotator", "started_at"]

    str_relations = ("qset",)

    def __str__(self) -> str:
        return f"{self.qset} by {self.annotator_id}"


class QualificationAnswer(models.Model):
    attempt = models.ForeignKey(
        QualificationAttempt, on_delete=models.CASCADE, related_name="answers"
    )
    item = models.ForeignKey(QualificationItem, on_delete=models.CASCADE, related_name="+")
    spans = models.JSONField(default=list)
    f1 = models.FloatField(default=0.0)
    answered_at = models.DateTimeField(auto_now=True)

    objects = WorkspaceManager("attempt__qset__workspace")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["attempt", "item"], name="qualification_answer_unique")
        ]

    str_relations = ("attempt",)

    def __str__(self) -> str:
        return f"{self.attempt} / {self.item_id}"


class JudgementSample(WorkspaceOwned):
    """Sampled generative model answers that experts score 0-1 (Appendix E, Table 7)."""

    name = models.CharField(max_length=200)
    runs = models.ManyToManyField("modeling.Run", related_name="+")
    size = models.PositiveIntegerField()
    seed = models.PositiveIntegerField(default=0)
    k = models.PositiveSmallIntegerField(default=2, help_text="experts per answer")
    # The reviewer queue's threshold (annotation.chartom.check_review): an answer is
    # disputed when its experts' scores differ by this much or more (max - min).
    review_spread = models.FloatField(
        default=DEFAULT_REVIEW_SPREAD,
        validators=[MinValueValidator(0.1), MaxValueValidator(1.0)],
        help_text="disputed when max - min of the experts' scores reaches this (0.1-1.0)",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name
