"""Human studies: one mechanism for every study kind.

- scene guessing (ToM-in-AMC / TVShowGuess): who is the masked speaker?
- CharToM-QA multiple choice (paper 6.3): read/not-read, c = 0 then c = 2k;
- DynToM human baseline (paper 4.1): a whole stage, then its questions.

A :class:`Study` picks works and items from the item bank. A participant is a
:class:`Participant` (an unguessable invite token, or a logged-in user). Items are
grouped by work: a participant declares whether they have seen / read it
(:class:`Familiarity`), gets a :class:`WorkSession` on it and answers the items of it
they were given (:class:`Assignment`, one per :class:`StudyItem`): one :class:`Guess`
per masked speaker, or :class:`ChoiceAnswer` rows. Quotas are enforced when items are
assigned, under row locks, so no item ever gets more participants than it needs.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from benchmarks.fields import BulkJSONField
from common.scoping import WorkspaceManager, WorkspaceOwned
from common.secrets import EncryptedSecretField

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


class WebhookSecretField(EncryptedSecretField):
    """The key a study's webhook events are signed with (HMAC-SHA256), stored encrypted
    (``common.secrets``): read it with ``decrypt_secret``.

    It is shown to the researcher once, when made, and never again: ``editable=False``
    keeps it out of model forms and the admin, and ``holds_secrets`` makes
    ``common.admin_input`` refuse any admin or API filter, ordering or search reaching it.
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("blank", True)
        kwargs.setdefault("default", "")
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)


class Study(WorkspaceOwned):
    class Status(models.TextChoices):
        DRAFT = "draft", "draft"
        LIVE = "live", "live"
        PAUSED = "paused", "paused"
        CLOSED = "closed", "closed"

    class Reveal(models.TextChoices):
        AFTER_SCENE = "after_scene", "after each scene"
        AT_END = "at_end", "at the end of the study"

    name = models.CharField(max_length=200)
    benchmark = models.CharField(
        max_length=20, help_text="tom-in-amc, tvshowguess, chartom-qa or dyntom"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    instructions = models.TextField(blank=True, default="")
    consent = models.TextField(blank=True, default="")
    # Bumped on every edit of instructions/consent (and a scene study's attention-check
    # instruction); stamped on each response.
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
    # CharToM-QA: when the researcher applied the read/not-read design (then late joiners
    # and withdrawals rebalance it automatically).
    design_applied_at = models.DateTimeField(null=True, blank=True)
    # -- running it with recruited participants (studies.participation.recruitment) -----
    # Query parameters of the recruiting platform's link (Prolific's names by default).
    param_participant = models.CharField(max_length=40, default="PROLIFIC_PID", blank=True)
    param_study = models.CharField(max_length=40, default="STUDY_ID", blank=True)
    param_session = models.CharField(max_length=40, default="SESSION_ID", blank=True)
    completion_code = models.CharField(max_length=100, blank=True, default="")
    completion_url = models.URLField(max_length=500, blank=True, default="")
    # Where a participant with nothing to answer goes back to (e.g. Prolific's
    # "screened out" URL): never the completion code or URL, which would get them paid.
    no_work_url = models.URLField(max_length=500, blank=True, default="")
    # The public link (/s/p/<public_token>/) creates participants up to the cap.
    public_token = models.CharField(max_length=64, unique=True, null=True, blank=True)
    # The cap counts the link's participants who hold places (not withdrawn, excluded or
    # declined: ``studies.counting``), so places an exclusion frees are offered again;
    # the ceiling bounds every sign-up through the link, counted or not (0: none).
    public_cap = models.PositiveIntegerField(default=0, help_text="0: no public link")
    signup_ceiling = models.PositiveIntegerField(
        default=0, help_text="most sign-ups on the public link in all; 0: no ceiling"
    )
    minutes_estimate = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="shown before consent; blank: estimated per scene"
    )
    debrief = models.TextField(blank=True, default="")
    # [{"key": "age", "label": "Age band", "choices": ["18-24", ...]}]; no choices: free text.
    exit_questions = BulkJSONField(default=list, blank=True)
    # Pacing: a break screen after this many scenes in one sitting (0: none), and open
    # assignments idle this long go back to the pool (0: never).
    session_cap = models.PositiveSmallIntegerField(default=0)
    idle_timeout_minutes = models.PositiveIntegerField(default=0)
    allow_cant_tell = models.BooleanField(default=False, help_text="offer “can't tell”")
    ask_confidence = models.BooleanField(default=False, help_text="confidence rating per scene")
    # The exclusion rule: more failed attention checks than this, or (when above 0) a
    # median time per item below this share of the cohort's median, marks a participant
    # excluded (``Participant.excluded_at``); a researcher may override either way.
    attention_max_failures = models.PositiveSmallIntegerField(default=0)
    fast_exclusion_share = models.FloatField(
        default=0, help_text="exclude below this share of the cohort's median time (0: off)"
    )
    # Absolute floors (``studies.participation.screening``), whatever the cohort does:
    # a page (a work's history, an item answered) read faster than ``floor_wpm`` words a
    # minute by the server's clock is under the floor. More than ``floor_max_share`` of
    # a participant's pages under it, or their whole part under it, excludes (0: off).
    floor_wpm = models.PositiveSmallIntegerField(
        default=0, help_text="reading floor in words a minute, e.g. 600 (0: off)"
    )
    floor_max_share = models.FloatField(
        default=0.5, help_text="exclude above this share of pages under the floor"
    )
    # A mapped benchmark's attention checks are instructed-response items ("choose the
    # option …"), and a scene study's are when it has an ``attention_instruction``: more
    # failed than this excludes, with a reason of their own.
    instructed_max_failures = models.PositiveSmallIntegerField(default=0)
    # A scene study's attention checks as instructed-response items: shown on each
    # masked speaker of a check with ``{name}`` filled in ("" : checks are scored against
    # the gold, nothing said). One of the texts under ``instructions_version``.
    attention_instruction = models.CharField(max_length=300, blank=True, default="")
    # Bumped whenever the exit questions change; each version's text is kept
    # (``StudyTextVersion``) so exports pair every answer with the question it answered.
    exit_questions_version = models.PositiveIntegerField(default=1)
    # Where finishing and withdrawing participants are announced (blank: nowhere), and
    # the key the events are signed with (studies.participation.webhooks).
    webhook_url = models.URLField(max_length=500, blank=True, default="")
    webhook_secret = WebhookSecretField()
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

    objects = WorkspaceManager("study__workspace")

    class Meta:
        ordering = ["study_id", "position"]
        constraints = [models.UniqueConstraint(fields=["study", "work"], name="study_work_unique")]

    str_relations = ("study", "work")

    def __str__(self) -> str:
        return f"{self.study} / {self.work}"


class StudyItem(models.Model):
    """What one assignment covers: a masked scene, a CharToM-QA question, a DynToM stage
    or a mapped benchmark's multiple-choice item.

    Exactly one of ``scene``, ``qa_item``, ``stage`` and ``mc_item`` is set, by the
    study's kind; none for an attention item the researcher wrote (``instructed``).
    Assignment locks these rows to keep quotas exact.
    """

    class Role(models.TextChoices):
        TEST = "test", "test"
        PRACTICE = "practice", "practice"
        ATTENTION = "attention", "attention check"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="study_items")
    study_work = models.ForeignKey(StudyWork, on_delete=models.CASCADE, related_name="items")
    scene = models.ForeignKey(
        "benchmarks.Scene", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    qa_item = models.ForeignKey(
        "benchmarks.QAItem", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    stage = models.ForeignKey(
        "benchmarks.DynToMStage", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    mc_item = models.ForeignKey(
        "benchmarks.MCItem", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # DynToM: the question ids a participant answers, when the researcher chose a subset.
    question_ids = BulkJSONField(default=list, blank=True)
    position = models.PositiveIntegerField(default=0)
    # Practice items come first with feedback and are never scored; attention checks
    # (an item whose answer is given away) go to everyone and flag inattentive raters.
    # Neither counts toward quotas or reports.
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.TEST)
    # Held back scenes are never assigned (the leak check found the answer in them).
    held_back = models.BooleanField(default=False)
    # [{"line": i, "kind": "name"|"alias"|"cue", "match": "...", "text": "..."}]
    leaks = BulkJSONField(default=list, blank=True)
    # An instructed-response item the researcher wrote on a multiple-choice study (no
    # bank item: none of the four kinds is set, and its role is always attention):
    # {"question": str, "options": [str, ...], "answer": index of the option to pick}.
    instructed = BulkJSONField(default=dict, blank=True)

    objects = WorkspaceManager("study__workspace")

    class Meta:
        ordering = ["study_work_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["study", "scene"], name="study_item_unique"),
            models.UniqueConstraint(fields=["study", "qa_item"], name="study_item_qa_unique"),
            models.UniqueConstraint(fields=["study", "stage"], name="study_item_stage_unique"),
            models.UniqueConstraint(fields=["study", "mc_item"], name="study_item_mc_unique"),
            models.CheckConstraint(
                condition=(
                    models.Q(
                        scene__isnull=False,
                        qa_item__isnull=True,
                        stage__isnull=True,
                        mc_item__isnull=True,
                    )
                    | models.Q(
                        scene__isnull=True,
                        qa_item__isnull=False,
                        stage__isnull=True,
                        mc_item__isnull=True,
                    )
                    | models.Q(
                        scene__isnull=True,
                        qa_item__isnull=True,
                        stage__isnull=False,
                        mc_item__isnull=True,
                    )
                    | models.Q(
                        scene__isnull=True,
                        qa_item__isnull=True,
                        stage__isnull=True,
                        mc_item__isnull=False,
                    )
                    | models.Q(
                        scene__isnull=True,
                        qa_item__isnull=True,
                        stage__isnull=True,
                        mc_item__isnull=True,
                        role="attention",
                    )
                ),
                name="study_item_one_kind",
            ),
        ]

    str_relations = ("study", "scene", "qa_item", "stage", "mc_item")

    def __str__(self) -> str:
        what = self.scene or self.qa_item or self.stage or self.mc_item
        return f"{self.study} / {what or 'instructed-response item'}"


class Participant(models.Model):
    class NoWork(models.TextChoices):
        """Why a participant was told there was nothing for them to answer."""

        READ_ALL = "read_all", "has read every book"
        READ_NONE = "read_none", "has read none of the books"
        DESIGN_FULL = "design_full", "no question left in the read/not-read design"
        ALL_TAKEN = "all_taken", "every item already had all its participants"
        CLOSED = "closed", "the study was closed"

    class ExclusionSource(models.TextChoices):
        RULE = "rule", "the study's exclusion rule"
        RESEARCHER = "researcher", "a researcher"

    class ExclusionOverride(models.TextChoices):
        INCLUDE = "include", "keep in, whatever the rule says"
        EXCLUDE = "exclude", "leave out, whatever the rule says"

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
    # The recruiting platform's ids from the link: {"participant", "study", "session"}.
    platform_ids = BulkJSONField(default=dict, blank=True)
    via_public_link = models.BooleanField(default=False)
    refused_at = models.DateTimeField(null=True, blank=True, help_text="did not consent")
    exit_answers = BulkJSONField(default=dict, blank=True)
    exit_done_at = models.DateTimeField(null=True, blank=True)
    # "Withdraw my data": the participant's answers were deleted at their request.
    data_withdrawn_at = models.DateTimeField(null=True, blank=True)
    # The participant's ledger beyond consent and withdrawal. "No work available": told
    # there was nothing for them to answer, so no completion code (first time, and why).
    no_work_at = models.DateTimeField(null=True, blank=True)
    no_work_reason = models.CharField(max_length=20, choices=NoWork.choices, blank=True)
    # After a withdrawal, stored report-job results that could hold their rows were
    # deleted and queued to be built again (reports.hooks): when, and how many jobs.
    report_jobs_rebuilt_at = models.DateTimeField(null=True, blank=True)
    report_jobs_rebuilt = models.PositiveIntegerField(default=0)
    exit_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="version of the exit questions answered"
    )
    # Excluded from reports and exports by default: by the study's rule or by a
    # researcher (who may also keep someone the rule would exclude). ``excluded_at`` is
    # the current state; the override and its reason are the researcher's decision.
    excluded_at = models.DateTimeField(null=True, blank=True)
    exclusion_source = models.CharField(max_length=12, choices=ExclusionSource.choices, blank=True)
    exclusion_reason = models.TextField(blank=True, default="")
    exclusion_override = models.CharField(
        max_length=10, choices=ExclusionOverride.choices, blank=True
    )
    exclusion_override_reason = models.TextField(blank=True, default="")
    # Submitted scenes when the current sitting began (the break screen resets it).
    sitting_start = models.PositiveIntegerField(default=0)
    # Open assignments released after the idle timeout; cleared once the rater is told.
    released_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceManager("study__workspace")

    class Meta:
        ordering = ["study_id", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "user"],
                condition=models.Q(user__isnull=False),
                name="participant_user_once",
            )
        ]

    str_relations = ("user",)

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

    objects = WorkspaceManager("participant__study__workspace")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["participant", "work"], name="familiarity_unique")
        ]
        verbose_name_plural = "familiarities"

    str_relations = ("participant", "work")

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

    objects = WorkspaceManager("participant__study__workspace")

    class Meta:
        ordering = ["participant_id", "started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["participant", "study_work"], name="work_session_unique"
            )
        ]

    str_relations = ("participant", "study_work__work")

    def __str__(self) -> str:
        return f"{self.participant} / {self.study_work.work}"


class HistoryView(models.Model):
    """Each opening of the history reader (full page or side panel), for the audit."""

    session = models.ForeignKey(WorkSession, on_delete=models.CASCADE, related_name="views")
    where = models.CharField(max_length=20, default="reader", help_text="reader or panel")
    assignment = models.ForeignKey(
        "Assignment", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    opened_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceManager("session__participant__study__workspace")

    str_relations = ("session",)

    def __str__(self) -> str:
        return f"{self.session} history ({self.where})"


class Assignment(models.Model):
    class Status(models.TextChoices):
        ASSIGNED = "assigned", "assigned"
        SUBMITTED = "submitted", "submitted"

    participant = models.ForeignKey(
        Participant, on_delete=models.CASCADE, related_name="assignments"
    )
    session = models.ForeignKey(WorkSession, on_delete=models.CASCADE, related_name="assignments")
    study_item = models.ForeignKey(StudyItem, on_delete=models.CASCADE, related_name="assignments")
    position = models.PositiveIntegerField(help_text="order within the participant's work")
    seen = models.BooleanField(help_text="counted toward the seen (or unseen) quota")
    # CharToM-QA: orders the reference answer among the misleading choices for this
    # participant; stored so reports can recover what was shown.
    option_seed = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ASSIGNED)
    history_needed = models.BooleanField(null=True, blank=True)
    confidence = models.PositiveSmallIntegerField(null=True, blank=True, help_text="1 to 5")
    # Server-side timing: total from first display to submit; active cuts idle gaps.
    first_shown_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    active_ms = models.PositiveBigIntegerField(default=0)
    total_ms = models.PositiveBigIntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    # item-set hash, instructions version, assignment seed, app version, names shown.
    version = BulkJSONField(default=dict, blank=True)
    assigned_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceManager("participant__study__workspace")

    class Meta:
        ordering = ["session_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["participant", "study_item"], name="assignment_once")
        ]
        indexes = [models.Index(fields=["study_item", "status"])]

    str_relations = ("participant", "study_item")

    def __str__(self) -> str:
        return f"{self.participant} / {self.study_item}"


class SceneSlot(models.Model):
    """One rater's place on a scene of a speaker-guessing study: its quota as rows.

    A scene has ``overlap`` slots: ``min_seen`` only for raters who have seen the work,
    ``min_unseen`` only for those who have not, the rest for either. A rater claims a
    free slot of their own kind first, then one for either, taking the free row with
    ``SELECT … FOR UPDATE SKIP LOCKED``: raters starting a work together each lock
    different rows instead of queueing on the scene's row (``studies.slots``).
    """

    class Kind(models.TextChoices):
        SEEN = "seen", "seen the work"
        UNSEEN = "unseen", "not seen the work"
        ANY = "any", "either"

    study_item = models.ForeignKey(StudyItem, on_delete=models.CASCADE, related_name="slots")
    number = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=6, choices=Kind.choices)
    # Freed when the assignment goes (idle release, withdrawn data) or stops counting
    # (withdrawal).
    assignment = models.OneToOneField(
        Assignment, on_delete=models.SET_NULL, null=True, blank=True, related_name="slot"
    )

    objects = WorkspaceManager("study_item__study__workspace")

    class Meta:
        ordering = ["study_item_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["study_item", "number"], name="scene_slot_unique")
        ]
        # A claim reads only a scene's free slots.
        indexes = [
            models.Index(
                fields=["study_item", "number"],
                condition=models.Q(assignment__isnull=True),
                name="scene_slot_free",
            )
        ]

    def __str__(self) -> str:
        return f"{self.study_item_id} slot {self.number} ({self.kind})"


class Guess(models.Model):
    """A participant's answer for one masked speaker, saved the moment it is given."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="guesses")
    instance = models.ForeignKey(
        "benchmarks.SpeakerInstance", on_delete=models.PROTECT, related_name="human_guesses"
    )
    answer = models.CharField(max_length=255, blank=True, default="", help_text="candidate name")
    # "Can't tell" (when the study offers it) answers the speaker without a name.
    cant_tell = models.BooleanField(default=False)
    # Set when the scene is submitted, never before: the gold stays on the server.
    correct = models.BooleanField(null=True, blank=True)
    tags = BulkJSONField(default=list, blank=True)
    evidence = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    objects = WorkspaceManager("assignment__participant__study__workspace")

    class Meta:
        ordering = ["assignment_id", "instance_id"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "instance"], name="guess_once")
        ]
        verbose_name_plural = "guesses"

    str_relations = ("assignment", "instance")

    def __str__(self) -> str:
        return f"{self.assignment} {self.instance.code}: {self.answer}"


class ChoiceAnswer(models.Model):
    """A pick in a multiple-choice study (CharToM-QA, DynToM), saved the moment it is given.

    CharToM-QA asks twice: round 1 with the short plot window (c = 0), round 2 after the
    long one (c = 2k) is shown, where the participant keeps or changes the pick. DynToM
    asks once per question. ``option`` is the option's index in the item's own order
    (CharToM-QA: 0 is the reference answer, then the misleading choices), ``shown`` the
    position the participant saw it at.
    """

    class Round(models.IntegerChoices):
        FIRST = 1, "first answer"
        REVISION = 2, "revision"

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="choices")
    qa_item = models.ForeignKey(
        "benchmarks.QAItem", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    question = models.ForeignKey(
        "benchmarks.DynToMQuestion",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="human_choices",
    )
    mc_item = models.ForeignKey(
        "benchmarks.MCItem",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="human_choices",
    )
    round = models.PositiveSmallIntegerField(choices=Round.choices, default=Round.FIRST)
    option = models.PositiveSmallIntegerField()
    shown = models.PositiveSmallIntegerField(help_text="position on the participant's screen")
    kept = models.BooleanField(null=True, blank=True, help_text="revision: kept the first pick")
    # Server clock: from the question (or the longer window) being shown to the pick.
    shown_at = models.DateTimeField()
    answered_at = models.DateTimeField()
    ms = models.PositiveBigIntegerField()
    # Set once the answer is final, never before: the gold stays on the server.
    correct = models.BooleanField(null=True, blank=True)

    objects = WorkspaceManager("assignment__participant__study__workspace")

    class Meta:
        ordering = ["assignment_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["assignment", "qa_item", "round"],
                condition=models.Q(qa_item__isnull=False),
                name="choice_qa_once",
            ),
            models.UniqueConstraint(
                fields=["assignment", "question", "round"],
                condition=models.Q(question__isnull=False),
                name="choice_question_once",
            ),
            models.UniqueConstraint(
                fields=["assignment", "mc_item", "round"],
                condition=models.Q(mc_item__isnull=False),
                name="choice_mc_item_once",
            ),
        ]

    str_relations = ("assignment",)

    def __str__(self) -> str:
        return f"{self.assignment} round {self.round}: option {self.option}"


class StratumTally(models.Model):
    """One stratum of an adaptive generic study, fixed at go-live (issue 50): its test
    items and, per study item, the named runs' accuracy (``model``, the ``widest``
    design's model side). Its tally (``metrics.allocation.Tally``) is not stored: a take
    works it out from the items' counted answers, counted in the statement that counts
    its places (``studies.choice.allocation.TAKE_COUNTS``).
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="stratum_tallies")
    key = models.CharField(max_length=500, help_text="the stratum field's value")
    item_ids = BulkJSONField(default=list, help_text="the stratum's test items (StudyItem ids)")
    model = BulkJSONField(default=dict, blank=True, help_text="study item id -> runs' accuracy")
    updated_at = models.DateTimeField(auto_now=True)

    objects = WorkspaceManager("study__workspace")

    class Meta:
        ordering = ["study_id", "key"]
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="stratum_tally_unique")
        ]

    str_relations = ("study",)

    def __str__(self) -> str:
        return f"{self.study} / {self.key}"


class StudyTextVersion(models.Model):
    """Every version of a text a participant was shown: instructions, consent, the exit
    questions, a scene study's attention-check instruction. Exports and replication
    packages pair each answer with the text it answered; ``content`` is the text, or the
    exit questions' list as stored on the study.
    """

    class Kind(models.TextChoices):
        INSTRUCTIONS = "instructions", "instructions"
        CONSENT = "consent", "consent"
        EXIT_QUESTIONS = "exit_questions", "exit questions"
        ATTENTION_INSTRUCTION = "attention_instruction", "attention-check instruction"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="text_versions")
    kind = models.CharField(max_length=30, choices=Kind.choices)
    version = models.PositiveIntegerField()
    content = BulkJSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceManager("study__workspace")

    class Meta:
        ordering = ["study_id", "kind", "version"]
        constraints = [
            models.UniqueConstraint(fields=["study", "kind", "version"], name="text_version_once")
        ]

    str_relations = ("study",)

    def __str__(self) -> str:
        return f"{self.study} {self.kind} v{self.version}"


class WebhookDelivery(models.Model):
    """One event sent to a study's webhook, and how its delivery went.

    The body is fixed when the event happens, so every try sends the same bytes (signed
    afresh with the time of the try); the receiver tells retries apart from new events by
    ``delivery_id``. A participant's finish or withdrawal is announced once.
    """

    class Event(models.TextChoices):
        FINISHED = "participant.finished", "participant finished"
        WITHDRAWN = "participant.withdrawn", "participant withdrew"
        TEST = "webhook.test", "test event"

    class Status(models.TextChoices):
        PENDING = "pending", "sending"
        DELIVERED = "delivered", "delivered"
        FAILED = "failed", "failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="webhook_deliveries")
    participant = models.ForeignKey(
        Participant, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    event = models.CharField(max_length=40, choices=Event.choices)
    delivery_id = models.UUIDField(unique=True)
    body = models.TextField(help_text="the JSON sent, byte for byte")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=6)
    # The receiver's HTTP status, or why no answer came (never the secret or a header).
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    objects = WorkspaceManager("study__workspace")

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["participant", "event"],
                condition=models.Q(participant__isnull=False),
                name="webhook_event_once_per_participant",
            )
        ]
        indexes = [models.Index(fields=["study", "-created_at"], name="webhook_delivery_recent")]

    def __str__(self) -> str:
        return f"{self.event} {self.delivery_id} ({self.status})"
