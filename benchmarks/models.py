"""The item bank: one schema for ToM-in-AMC, TVShowGuess, CharToM-QA and DynToM.

Every other app reads these rows; this app imports none of the others. Each row has
a natural key (the unique constraints below) so importers can upsert idempotently,
and an ``extra`` JSON field that keeps source fields we do not model, so an export
gives back what was imported.
"""

from django.conf import settings
from django.db import models

from common.scoping import WorkspaceManager, WorkspaceOwned

from .fields import BulkJSONField


class Benchmark(models.TextChoices):
    TOM_IN_AMC = "tom-in-amc", "ToM-in-AMC"
    TVSHOWGUESS = "tvshowguess", "TVShowGuess"
    CHARTOM_QA = "chartom-qa", "CharToM-QA"
    DYNTOM = "dyntom", "DynToM"
    # Any multiple-choice benchmark brought in through a field mapping (ToMBench,
    # Hi-ToM…): each one is a Work of kind ITEM_SET named by the researcher.
    GENERIC = "generic", "Other (mapped)"


class Split(models.TextChoices):
    TRAIN = "train", "train"
    DEV = "dev", "dev"
    TEST = "test", "test"
    NONE = "", "none"


class TimestampedModel(models.Model):
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Work(WorkspaceOwned, TimestampedModel):
    """A movie, a TV show, a book or a DynToM social stage."""

    class Kind(models.TextChoices):
        MOVIE = "movie", "movie"
        TV_SHOW = "tv_show", "TV show"
        BOOK = "book", "book"
        SOCIAL_STAGE = "social_stage", "social stage"
        ITEM_SET = "item_set", "item set"

    benchmark = models.CharField(max_length=20, choices=Benchmark.choices)
    # Natural key within the benchmark: movie title, show name, book name, trial id.
    key = models.CharField(max_length=255)
    title = models.CharField(max_length=500)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    genres = BulkJSONField(default=list, blank=True)
    split = models.CharField(max_length=5, choices=Split.choices, blank=True, default="")
    source = models.TextField(blank=True, default="", help_text="file or URL it came from")
    licence_note = models.TextField(blank=True, default="")
    extra = BulkJSONField(default=dict, blank=True)
    # Published to every workspace: read-only to the others (its import belongs to
    # the workspace that made it).
    shared = models.BooleanField(default=False)

    objects = WorkspaceManager(shared="shared")

    class Meta:
        ordering = ["benchmark", "key"]
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "key"], name="work_natural_key")
        ]
        indexes = [models.Index(fields=["benchmark", "split"])]

    def __str__(self) -> str:
        return f"{self.title} ({self.get_benchmark_display()})"


class Character(TimestampedModel):
    class Gender(models.TextChoices):
        UNKNOWN = "unknown", "unknown"
        FEMALE = "female", "female"
        MALE = "male", "male"
        OTHER = "other", "other"

    class GenderSource(models.TextChoices):
        NONE = "", "none"
        GUESSED = "guessed", "guessed"
        MANUAL = "manual", "manual"
        SOURCE = "source", "from the source data"

    work = models.ForeignKey(Work, on_delete=models.CASCADE, related_name="characters")
    name = models.CharField(max_length=255)
    position = models.PositiveIntegerField(default=0, help_text="order in the source")
    gender = models.CharField(max_length=10, choices=Gender.choices, default=Gender.UNKNOWN)
    gender_source = models.CharField(
        max_length=10, choices=GenderSource.choices, blank=True, default=""
    )
    utterance_count = models.PositiveIntegerField(null=True, blank=True)
    is_main = models.BooleanField(default=False)
    aliases = BulkJSONField(default=list, blank=True)
    extra = BulkJSONField(default=dict, blank=True)

    objects = WorkspaceManager("work__workspace", shared="work__shared")

    class Meta:
        ordering = ["work", "position", "name"]
        constraints = [
            models.UniqueConstraint(fields=["work", "name"], name="character_natural_key")
        ]

    def __str__(self) -> str:
        return self.name


class Scene(TimestampedModel):
    """A scene of a movie or TV episode, its lines kept in order.

    ``lines`` follows the ToM-in-AMC layout: ``[{"type": "scene"|"dialog",
    "title": heading-or-speaker-or-"NULL", "text": ...}]``.
    """

    class Part(models.TextChoices):
        TRAINING = "training", "training (history)"
        TESTING = "testing", "test"  # "test scenes" on every page (issue 49)
        NONE = "", "none"

    work = models.ForeignKey(Work, on_delete=models.CASCADE, related_name="scenes")
    source_id = models.CharField(max_length=100, help_text="natural key within the work")
    position = models.PositiveIntegerField()
    part = models.CharField(max_length=10, choices=Part.choices, blank=True, default="")
    episode = models.CharField(max_length=50, blank=True, default="")
    heading = models.TextField(blank=True, default="")
    lines = BulkJSONField(default=list, blank=True)
    participants = BulkJSONField(default=list, blank=True)
    char_counts = BulkJSONField(default=dict, blank=True, help_text="name -> lines in scene")
    char_map = BulkJSONField(default=dict, blank=True, help_text="name -> mask code")
    source_text = models.TextField(
        blank=True, default="", help_text="the scene exactly as in a flat-text source"
    )
    extra = BulkJSONField(default=dict, blank=True)

    objects = WorkspaceManager("work__workspace", shared="work__shared")

    class Meta:
        ordering = ["work", "position"]
        constraints = [
            models.UniqueConstraint(fields=["work", "source_id"], name="scene_natural_key")
        ]
        indexes = [models.Index(fields=["work", "part", "position"])]

    str_relations = ("work",)

    def __str__(self) -> str:
        return f"{self.work.key} scene {self.source_id}"


class SpeakerInstance(TimestampedModel):
    """One masked speaker in a scene: what a rater or a model must identify."""

    scene = models.ForeignKey(Scene, on_delete=models.CASCADE, related_name="instances")
    code = models.CharField(max_length=10, help_text="P0, P1, …")
    gold_character = models.ForeignKey(
        Character, on_delete=models.PROTECT, related_name="gold_instances"
    )
    candidates = BulkJSONField(default=list, help_text="candidate names in display order")
    extra = BulkJSONField(default=dict, blank=True)

    objects = WorkspaceManager("scene__work__workspace", shared="scene__work__shared")

    class Meta:
        ordering = ["scene", "code"]
        constraints = [
            models.UniqueConstraint(fields=["scene", "code"], name="instance_natural_key")
        ]

    str_relations = ("scene",)

    def __str__(self) -> str:
        return f"{self.scene} {self.code}"


class SpeakerAnnotation(TimestampedModel):
    """A published human annotation of a masked speaker (e.g. TVShowGuess ``friends.tsv``).

    Kept as imported so reports can recompute the authors' analysis. ``instance`` is
    null when the annotated scene is not in the imported scenes (it is still kept,
    and the importer reports it).
    """

    work = models.ForeignKey(Work, on_delete=models.CASCADE, related_name="speaker_annotations")
    source = models.CharField(max_length=100, help_text="annotation set, e.g. the file name")
    row_number = models.PositiveIntegerField(help_text="1-based data row in the source file")
    scene_source_id = models.CharField(max_length=100)
    code = models.CharField(max_length=10)
    instance = models.ForeignKey(
        SpeakerInstance,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="annotations",
    )
    need_history = models.CharField(max_length=30, blank=True, default="")
    facts_from_memory = models.CharField(max_length=30, blank=True, default="")
    guessed_name = models.CharField(max_length=255, blank=True, default="")
    # What the sheet wrote after the name, e.g. ["abductive"] for "penny (abductive)":
    # how the annotator arrived at the guess, kept apart so the name matches a candidate.
    guess_qualifiers = BulkJSONField(default=list, blank=True)
    # [{"evidence": [e1, e2, e3], "reasoning": str}, …] — one group per column block.
    evidence_groups = BulkJSONField(default=list, blank=True)
    raw = BulkJSONField(default=list, blank=True, help_text="the source row, cell by cell")

    objects = WorkspaceManager("work__workspace", shared="work__shared")

    class Meta:
        ordering = ["work", "source", "row_number"]
        constraints = [
            models.UniqueConstraint(
                fields=["work", "source", "scene_source_id", "code"],
                name="speaker_annotation_natural_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.source} row {self.row_number}: {self.scene_source_id} {self.code}"


class ToMDimension(models.TextChoices):
    BELIEF = "belief", "belief"
    INTENTION = "intention", "intention"
    EMOTION = "emotion", "emotion"
    DESIRE = "desire", "desire"


class QAItem(TimestampedModel):
    """A CharToM-QA question about a novel character."""

    class Directness(models.TextChoices):
        DIRECT = "direct", "direct"
        INDIRECT = "indirect", "indirect"

    work = models.ForeignKey(Work, on_delete=models.CASCADE, related_name="qa_items")
    # Null when the source names no target character (the HuggingFace JSONL has no
    # such field; the paper's published examples do).
    character = models.ForeignKey(
        Character, on_delete=models.PROTECT, null=True, blank=True, related_name="qa_items"
    )
    # sha1 of book, character and question: stable while answers or contexts are edited.
    natural_key = models.CharField(max_length=40, unique=True)
    position = models.PositiveIntegerField(default=0)
    dimension = models.CharField(max_length=10, choices=ToMDimension.choices)
    context_0 = models.TextField(null=True, blank=True)
    context_1000 = models.TextField(null=True, blank=True)
    context_2000 = models.TextField(null=True, blank=True)
    question = models.TextField()
    answer = models.TextField()
    bonus_points = BulkJSONField(default=list)
    misleading_choices = BulkJSONField(default=list)
    directness = models.CharField(max_length=10, choices=Directness.choices, null=True, blank=True)
    extra = BulkJSONField(default=dict, blank=True)

    objects = WorkspaceManager("work__workspace", shared="work__shared")

    class Meta:
        verbose_name = "QA item"
        verbose_name_plural = "QA items"
        ordering = ["work", "position"]
        indexes = [models.Index(fields=["work", "dimension"])]

    def __str__(self) -> str:
        return self.question[:80]


class DynToMStage(TimestampedModel):
    """A DynToM social stage: setting, two profiles, relationship and trajectory."""

    work = models.OneToOneField(Work, on_delete=models.CASCADE, related_name="stage")
    main_character = models.CharField(max_length=255)
    scenario_count = models.PositiveSmallIntegerField()
    location = models.TextField(blank=True, default="", help_text="social setting")
    location_category = models.CharField(
        max_length=255, blank=True, default="", help_text="social setting type"
    )
    characters_information = models.TextField(blank=True, default="")
    # [{"role": "main"|"supporting", "index": n, "name": str, "description": str}]
    profiles = BulkJSONField(default=list, blank=True)
    relationships = BulkJSONField(default=dict, blank=True)
    # scenario key -> {belief, emotion, intention, action, influence: {...}}
    trajectory = BulkJSONField(default=dict, blank=True)
    # state -> {"Changed": ..., "1": ..., "Reasons": ...}
    change_analysis = BulkJSONField(default=dict, blank=True)
    extra = BulkJSONField(default=dict, blank=True)

    objects = WorkspaceManager("work__workspace", shared="work__shared")

    class Meta:
        verbose_name = "DynToM stage"
        verbose_name_plural = "DynToM stages"

    str_relations = ("work",)

    def __str__(self) -> str:
        return f"{self.work.key}: {self.main_character}"


class DynToMScenario(TimestampedModel):
    class DialogueShape(models.TextChoices):
        # How the source file wrote the dialogue; the exporter writes it back that way.
        ROUNDS = "rounds", "list of rounds (objects speaker -> line)"
        OBJECT = "object", "one object speaker -> line"
        TEXT = "text", "one string of Name: 'line' lines"

    stage = models.ForeignKey(DynToMStage, on_delete=models.CASCADE, related_name="scenarios")
    number = models.PositiveSmallIntegerField(help_text="1-based")
    key = models.CharField(max_length=50, help_text='source key, e.g. "scenario 1"')
    background = models.TextField(blank=True, default="")
    # Ordered turns whatever the source shape: studies, prompts and the generator read
    # this one shape. Round sizes (shape "rounds") and a text that does not re-render
    # exactly (shape "text") are in ``extra``.
    dialogue = BulkJSONField(default=list, blank=True, help_text='[{"speaker": …, "text": …}]')
    dialogue_shape = models.CharField(
        max_length=10, choices=DialogueShape.choices, default=DialogueShape.ROUNDS
    )
    extra = BulkJSONField(default=dict, blank=True)

    objects = WorkspaceManager("stage__work__workspace", shared="stage__work__shared")

    class Meta:
        verbose_name = "DynToM scenario"
        verbose_name_plural = "DynToM scenarios"
        ordering = ["stage", "number"]
        constraints = [
            models.UniqueConstraint(fields=["stage", "number"], name="scenario_natural_key")
        ]

    def __str__(self) -> str:
        return self.key


class DynToMQuestion(TimestampedModel):
    class QuestionType(models.TextChoices):
        UNDERSTANDING = "understanding", "Understanding"
        TRANSFORMATION_1 = "transformation-1", "Transformation-1"
        TRANSFORMATION_2 = "transformation-2", "Transformation-2"
        TRANSFORMATION_3 = "transformation-3", "Transformation-3"

    stage = models.ForeignKey(DynToMStage, on_delete=models.CASCADE, related_name="questions")
    key = models.CharField(max_length=100, help_text="e.g. type_d_why_3")
    position = models.PositiveIntegerField()
    source_type = models.CharField(max_length=50, help_text='"question type" as in the source')
    question_type = models.CharField(max_length=20, choices=QuestionType.choices)
    mental_state = models.CharField(
        max_length=50, blank=True, default="", help_text="belief/emotion/intention/action"
    )
    scenario_from = models.PositiveSmallIntegerField(null=True, blank=True)
    scenario_to = models.PositiveSmallIntegerField(null=True, blank=True)
    text = models.TextField()
    options = BulkJSONField(default=list, help_text="options exactly as in the source")
    gold_letter = models.CharField(max_length=2)
    option_reasons = BulkJSONField(default=list, blank=True)
    extra = BulkJSONField(default=dict, blank=True)

    objects = WorkspaceManager("stage__work__workspace", shared="stage__work__shared")

    class Meta:
        verbose_name = "DynToM question"
        verbose_name_plural = "DynToM questions"
        ordering = ["stage", "position"]
        constraints = [
            models.UniqueConstraint(fields=["stage", "key"], name="dyntom_question_natural_key")
        ]
        indexes = [models.Index(fields=["question_type", "mental_state"])]

    str_relations = ("stage__work",)

    def __str__(self) -> str:
        return f"{self.stage.work.key} {self.key}"


class MCItem(TimestampedModel):
    """A multiple-choice item of a benchmark imported through a field mapping.

    ``texts`` holds one entry per language: ``{"en": {"context": str, "question": str,
    "options": [str, ...], "gold": str}}``; ``gold`` is the optional open-ended reference
    answer. PostgreSQL's jsonb does not keep key order, so the benchmark's languages in
    the mapping's order (the first is the default) are ``work.extra["languages"]``.
    Every language has the same number of options in the same order, so ``answers``
    (0-based option indices; more than one when the source lists several) holds for
    all of them. ``categories`` are the mapped category fields (ability, task, order…)
    and ``metadata`` every source field the mapping does not use.
    """

    work = models.ForeignKey(Work, on_delete=models.CASCADE, related_name="mc_items")
    # From a mapped field, or "h-" and a hash of the content when none is mapped.
    item_id = models.CharField(max_length=255)
    position = models.PositiveIntegerField(default=0)
    texts = BulkJSONField(default=dict)
    answers = BulkJSONField(default=list)
    categories = BulkJSONField(default=dict, blank=True)
    metadata = BulkJSONField(default=dict, blank=True)
    # sha256 of texts, answers and categories: tells a re-import's unchanged item
    # from a changed one, and duplicate ids with the same content from a conflict.
    content_hash = models.CharField(max_length=64)

    objects = WorkspaceManager("work__workspace", shared="work__shared")

    class Meta:
        verbose_name = "multiple-choice item"
        ordering = ["work", "position"]
        constraints = [
            models.UniqueConstraint(fields=["work", "item_id"], name="mc_item_natural_key")
        ]

    str_relations = ("work",)

    def __str__(self) -> str:
        return f"{self.work.key} {self.item_id}"

    @property
    def languages(self) -> list[str]:
        """The item's languages in its benchmark's order (any others after, sorted)."""
        order = list(self.work.extra.get("languages") or [])
        return [lang for lang in order if lang in self.texts] + sorted(
            lang for lang in self.texts if lang not in order
        )

    def text(self, language: str | None = None) -> dict:
        """The item's texts in ``language``, or in its benchmark's first language it has."""
        if language and language in self.texts:
            return self.texts[language]
        languages = self.languages
        return self.texts[languages[0]] if languages else {}


class MappingPreset(WorkspaceOwned, TimestampedModel):
    """A saved field mapping for the generic importer (``benchmarks.importers.generic``).

    Built-in presets (ToMBench) live in code; these are the ones researchers save.
    """

    name = models.CharField(max_length=100)
    description = models.TextField(blank=True, default="")
    mapping = BulkJSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    objects = WorkspaceManager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "name"], name="mapping_preset_name_in_workspace"
            )
        ]

    def __str__(self) -> str:
        return self.name


class ImportJob(WorkspaceOwned, TimestampedModel):
    """One import: a path on the server (``import_benchmark --background``) or an upload.

    An upload (``upload`` set: its folder under ``DATA_DIR/uploads``) starts as a dry
    run (``ready``: ``dry_run`` and ``preview`` hold what Confirm would do), then is
    imported in the request or queued for a Celery worker, or cancelled. Its files are
    deleted when it ends, whichever way.
    """

    class Status(models.TextChoices):
        READY = "ready", "dry run, waiting for confirmation"
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    format_name = models.CharField(max_length=30)
    path = models.TextField()
    split = models.CharField(max_length=5, blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0, help_text="records, from the dry run")
    report = BulkJSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="import_jobs",
    )
    upload = models.CharField(
        max_length=64, blank=True, default="", help_text="folder under DATA_DIR/uploads"
    )
    files = BulkJSONField(default=list, blank=True, help_text="uploaded file names")
    upload_bytes = models.PositiveBigIntegerField(default=0)
    options = BulkJSONField(default=dict, blank=True, help_text="title, books, run name…")
    dry_run = BulkJSONField(default=dict, blank=True, help_text="the dry run's report")
    preview = BulkJSONField(default=list, blank=True, help_text="first records, as shown")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["created_by", "-created_at"])]

    def __str__(self) -> str:
        return f"import {self.format_name} {self.path} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def percent(self) -> int:
        if not self.progress_total:
            return 100 if self.status == self.Status.SUCCEEDED else 0
        return min(100, round(100 * self.progress_done / self.progress_total))
