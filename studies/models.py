"""Human studies: the masked-speaker guessing study of ToM-in-AMC / TVShowGuess.

A :class:`Study` picks works and test scenes from the item bank. A rater is a
:class:`Participant` (an unguessable invite token, or a logged-in user). The unit of
assignment is a whole work: a rater declares whether they have seen it
(:class:`Familiarity`), reads its history once (:class:`WorkSession`) and answers the
scenes of it they were given (:class:`SceneAssignment`), one :class:`Guess` per masked
speaker. Quotas (overlap, seen/unseen minimums) are enforced when scenes are assigned,
under row locks, so no scene ever gets more raters than it needs.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from benchmarks.fields import BulkJSONField

# Table 3 of the ToM-in-AMC paper: the ToM dimensions people used.
DEFAULT_TOM_TAGS = [
    "stereotype/trope",
    "intention",
    "personality",
    "attention",
    "emotion",
    "desire",
    "belief",
    "gender",
    "linguistic",
    "other",
]


def default_tags() -> list[str]:
    return list(DEFAULT_TOM_TAGS)


class Study(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "draft"
        LIVE = "live", "live"
        PAUSED = "paused", "paused"
        CLOSED = "closed", "closed"

    class Reveal(models.TextChoices):
        AFTER_SCENE = "after_scene", "after each scene"
        AT_END = "at_end", "at the end of the study"

    name = models.CharField(max_length=200)
    benchmark = models.CharField(max_length=20, help_text="tom-in-amc or tvshowguess")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    instructions = models.TextField(blank=True, default="")
    consent = models.TextField(blank=True, default="")
    # Bumped on every edit of instructions/consent; stamped on each response.
    instructions_version = models.PositiveIntegerField(default=1)
    overlap = models.PositiveSmallIntegerField(default=2, help_text="raters per scene")
    min_seen = models.PositiveSmallIntegerField(
        default=0, help_text="of them, at least this many who have seen the work"
    )
    min_unseen = models.PositiveSmallIntegerField(
        default=0, help_text="and at least this many who have not"
    )
    one_to_one = models.BooleanField(
        default=False, help_text="two masked speakers of a scene cannot be the same character"
    )
    perturb_names = models.BooleanField(default=False, help_text="show gender-matched names")
    reveal = models.CharField(max_length=12, choices=Reveal.choices, default=Reveal.AT_END)
    # Who may join: invite links always; accounts with the rater role only when the
    # researcher opens the study to them (the /s/join/<id>/ link on raters' home page).
    open_join = models.BooleanField(
        default=False,
        help_text="raters with an account may join from their home page, without an invite",
    )
    tags = BulkJSONField(default=default_tags, help_text="ToM-dimension tags offered")
    # How the test scenes were chosen: {"mode": "all"|"stratified", "by": ..., "per_stratum": n}
    sampling = BulkJSONField(default=dict, blank=True)
    seed = models.PositiveIntegerField(default=0, help_text="sampling and assignment seed")
    # sha256 over the study's scenes and masked speakers, fixed when it goes live.
    item_set_hash = models.CharField(max_length=64, blank=True, default="")
    imported = models.BooleanField(default=False, help_text="published annotations")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return self.name


class StudyWork(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="study_works")
    work = models.ForeignKey("benchmarks.Work", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveIntegerField(default=0)
    # Display names when the study perturbs names: {original: shown}, one per work.
    name_map = BulkJSONField(default=dict, blank=True)

    class Meta:
        ordering = ["study_id", "position"]
        constraints = [models.UniqueConstraint(fields=["study", "work"], name="study_work_unique")]

    def __str__(self) -> str:
        return f"{self.study} / {self.work}"


class StudyScene(models.Model):
    """A test scene in a study. Assignment locks these rows to keep quotas exact."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="study_scenes")
    study_work = models.ForeignKey(StudyWork, on_delete=models.CASCADE, related_name="scenes")
    scene = models.ForeignKey("benchmarks.Scene", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveIntegerField(default=0)
    # Held back scenes are never assigned (the leak check found the answer in them).
    held_back = models.BooleanField(default=False)
    # [{"line": i, "kind": "name"|"alias"|"cue", "match": "...", "text": "..."}]
    leaks = BulkJSONField(default=list, blank=True)

    class Meta:
        ordering = ["study_work_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["study", "scene"], name="study_scene_unique")
        ]

    def __str__(self) -> str:
        return f"{self.study} / {self.scene}"


class Participant(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participants")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="study_participations",
    )
    # secrets.token_urlsafe(32): 256 bits, the only credential an invited rater has.
    token = models.CharField(max_length=64, unique=True)
    label = models.CharField(max_length=200, blank=True, default="", help_text="who was invited")
    consented_at = models.DateTimeField(null=True, blank=True)
    consented_version = models.PositiveIntegerField(null=True, blank=True)
    # Withdrawn raters keep their responses, but reports and quotas leave them out.
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study_id", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "user"],
                condition=models.Q(user__isnull=False),
                name="participant_user_once",
            )
        ]

    def __str__(self) -> str:
        return self.label or (self.user.username if self.user_id else f"participant {self.pk}")


class Familiarity(models.Model):
    """Whether a participant has seen / read a work: one model for every study kind."""

    participant = models.ForeignKey(
        Participant, on_delete=models.CASCADE, related_name="familiarities"
    )
    work = models.ForeignKey("benchmarks.Work", on_delete=models.CASCADE, related_name="+")
    seen = models.BooleanField()
    declared_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["participant", "work"], name="familiarity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.participant} {'has' if self.seen else 'has not'} seen {self.work}"


class WorkSession(models.Model):
    """A participant's pass over one work: history read once, then its scenes."""

    participant = models.ForeignKey(
        Participant, on_delete=models.CASCADE, related_name="work_sessions"
    )
    study_work = models.ForeignKey(StudyWork, on_delete=models.CASCADE, related_name="sessions")
    seen = models.BooleanField(help_text="the participant's declared familiarity")
    seed = models.PositiveIntegerField(help_text="orders this participant's scenes")
    history_confirmed_at = models.DateTimeField(null=True, blank=True)
    history_views = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["participant_id", "started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["participant", "study_work"], name="work_session_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.participant} / {self.study_work.work}"


class HistoryView(models.Model):
    """Each opening of the history reader (full page or side panel), for the audit."""

    session = models.ForeignKey(WorkSession, on_delete=models.CASCADE, related_name="views")
    where = models.CharField(max_length=20, default="reader", help_text="reader or panel")
    scene_assignment = models.ForeignKey(
        "SceneAssignment", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    opened_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.session} history ({self.where})"


class SceneAssignment(models.Model):
    class Status(models.TextChoices):
        ASSIGNED = "assigned", "assigned"
        SUBMITTED = "submitted", "submitted"

    participant = models.ForeignKey(
        Participant, on_delete=models.CASCADE, related_name="scene_assignments"
    )
    session = models.ForeignKey(WorkSession, on_delete=models.CASCADE, related_name="assignments")
    study_scene = models.ForeignKey(
        StudyScene, on_delete=models.CASCADE, related_name="assignments"
    )
    position = models.PositiveIntegerField(help_text="order within the participant's work")
    seen = models.BooleanField(help_text="counted toward the seen (or unseen) quota")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ASSIGNED)
    history_needed = models.BooleanField(null=True, blank=True)
    # Server-side timing: total from first display to submit; active cuts idle gaps.
    first_shown_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    active_ms = models.PositiveBigIntegerField(default=0)
    total_ms = models.PositiveBigIntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    # item-set hash, instructions version, assignment seed, app version, names shown.
    version = BulkJSONField(default=dict, blank=True)
    assigned_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["participant", "study_scene"], name="scene_assignment_once"
            )
        ]
        indexes = [models.Index(fields=["study_scene", "status"])]

    def __str__(self) -> str:
        return f"{self.participant} / {self.study_scene}"


class Guess(models.Model):
    """A participant's answer for one masked speaker, saved the moment it is given."""

    assignment = models.ForeignKey(
        SceneAssignment, on_delete=models.CASCADE, related_name="guesses"
    )
    instance = models.ForeignKey(
        "benchmarks.SpeakerInstance", on_delete=models.PROTECT, related_name="human_guesses"
    )
    answer = models.CharField(max_length=255, blank=True, default="", help_text="candidate name")
    # Set when the scene is submitted, never before: the gold stays on the server.
    correct = models.BooleanField(null=True, blank=True)
    tags = BulkJSONField(default=list, blank=True)
    evidence = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["assignment_id", "instance_id"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "instance"], name="guess_once")
        ]

    def __str__(self) -> str:
        return f"{self.assignment} {self.instance.code}: {self.answer}"
