"""Model runs: backends, prompt templates, the response cache, runs and predictions.

A run answers benchmark items through one backend with one template version. Each
model call is a :class:`RunCall` (one prompt, possibly covering many items — a whole
DynToM stage), and each item answer a :class:`Prediction`. Paid responses live in
:class:`CachedResponse`, written the moment they arrive, so a killed run resumes
without paying twice and a finished run re-runs for free.
"""

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from benchmarks.fields import BulkJSONField
from common import egress
from common.scoping import WorkspaceManager, WorkspaceOwned

from .backends.policy import effective_base_url, host_refusal, key_env_refusal, origin
from .credentials import (
    CredentialUnreadable,
    EncryptedOptionsField,
    EncryptedSecretField,
    decrypt_option_secrets,
    decrypt_secret,
    drop_carried_secrets,
    encrypt_secret,
    redact_secrets,
)

# The name of a variable, never a value: a key typed here by mistake would be shown
# on every page that lists backends.
_ENV_NAME = RegexValidator(
    r"^[A-Za-z_][A-Za-z0-9_]*$",
    "Give the name of an environment variable (letters, digits, _), not the key itself.",
)


class Backend(WorkspaceOwned):
    """A configured LLM endpoint.

    The API key is read from the environment variable ``api_key_env`` names (preferred:
    the database then holds no secret), else from ``api_key``, which stores ciphertext
    only (see ``modeling.credentials``); :meth:`get_api_key` is the one way to read it.
    Secret option values are stored encrypted too; :meth:`get_options` decrypts them.

    A stored key belongs to the server it was entered for: saving the backend with a
    base URL of another scheme, host or port drops the stored key and secret options
    (``dropped_secrets`` says what went), so nobody can send a key typed for one server
    to another by editing the URL alone. Which variables and hosts are allowed at all is
    the operator's (``modeling.backends.policy``).
    """

    class Kind(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible chat completions"
        TRANSFORMERS = "transformers", "local transformers causal LM"

    # Unique within its workspace (forms check uniqueness through the scoped manager).
    name = models.SlugField(max_length=100)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    base_url = models.URLField(blank=True, default="", help_text="e.g. http://127.0.0.1:8001/v1")
    default_model = models.CharField(max_length=255, blank=True, default="")
    model_path = models.CharField(
        max_length=500, blank=True, default="", help_text="local directory (transformers)"
    )
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        default="",
        validators=[_ENV_NAME],
        help_text="environment variable with the key",
    )
    # Ciphertext only ("fernet:…"); never rendered by the admin, the API or exports,
    # and never filtered or sorted on. Write it with set_api_key, read it with get_api_key.
    api_key = EncryptedSecretField(blank=True, default="", editable=False)
    max_concurrency = models.PositiveSmallIntegerField(default=4)
    max_retries = models.PositiveSmallIntegerField(default=5)
    timeout_s = models.FloatField(default=120.0)
    price_input_per_1k = models.DecimalField(max_digits=10, decimal_places=6, default=0)
    price_output_per_1k = models.DecimalField(max_digits=10, decimal_places=6, default=0)
    # Secret values (headers.Authorization, *_key, *token, *secret…) hold ciphertext.
    options = EncryptedOptionsField(default=dict, blank=True, help_text="backend-specific settings")
    # Who may edit it besides holders of modeling.change_backend (see may_be_changed_by).
    created_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Disabled: not offered to new runs (runs that used it keep it). The last
    # "Test connection" result, already redacted: ok, reply, latency, tokens, error, at.
    disabled_at = models.DateTimeField(null=True, blank=True)
    last_test = models.JSONField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="backend_name_in_workspace")
        ]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<Backend {self.name} {self.kind}>"

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        self.dropped_secrets: list[str] = []
        if update_fields is None or "base_url" in update_fields:
            self.dropped_secrets = self._drop_secrets_if_moved()
        if self.dropped_secrets and update_fields is not None:
            kwargs["update_fields"] = {*update_fields, "api_key", "options"}
        super().save(*args, **kwargs)

    def clean(self) -> None:
        errors = {}
        if _ENV_NAME.regex.match(self.api_key_env or "") and (
            reason := key_env_refusal(self.api_key_env)
        ):
            errors["api_key_env"] = reason
        if self.kind == self.Kind.OPENAI and (
            reason := host_refusal(self.base_url)
            or egress.refusal(effective_base_url(self.base_url))
        ):
            errors["base_url"] = reason
        if errors:
            raise ValidationError(errors)

    def _drop_secrets_if_moved(self) -> list[str]:
        """Drop the stored key and secret options carried over to another origin.

        Compared with the row as stored (one query; backends are seldom saved), so no
        way of loading or editing the instance can skip the check.
        """
        if self.pk is None:
            return []
        stored = Backend.objects.filter(pk=self.pk).values("base_url", "api_key", "options").first()
        if stored is None or origin(stored["base_url"]) == origin(self.base_url):
            return []
        dropped = []
        # Unchanged ciphertext is the old server's key; a key typed with the new URL
        # was encrypted afresh (or is still plaintext) and is kept.
        if self.api_key and self.api_key == stored["api_key"]:
            self.api_key = ""
            dropped.append("the stored API key")
        self.options, count = drop_carried_secrets(self.options, stored["options"])
        if count:
            dropped.append(f"{count} secret option value(s)")
        return dropped

    def may_be_changed_by(self, user: Any) -> bool:
        """Whether ``user`` may edit (or delete) this backend: its creator, a superuser,
        or someone granted ``modeling.change_backend`` explicitly. The researcher role
        holds every modeling permission as a group; that alone does not count here,
        since editing a backend decides where its key is sent."""
        if not user.is_authenticated or not user.is_active:
            return False
        if user.is_superuser or (self.pk is None and user.has_perm("modeling.add_backend")):
            return True
        if self.created_by_id is not None and self.created_by_id == user.pk:
            return True
        return _holds_explicit_change_backend(user)

    @property
    def has_api_key(self) -> bool:
        """Whether a key is stored in the row (an ``api_key_env`` key is not)."""
        return bool(self.api_key)

    def set_api_key(self, plaintext: str) -> None:
        """Store ``plaintext`` encrypted ("" removes the key); the caller saves."""
        self.api_key = encrypt_secret(plaintext)

    def get_api_key(self) -> str:
        """The stored key in plaintext ("" when none): for the LLM client only."""
        from .backends.base import BackendConfigError

        try:
            return decrypt_secret(self.api_key)
        except CredentialUnreadable as exc:
            # A config error fails the run with this message instead of a traceback.
            raise BackendConfigError(f"backend {self.name}: {exc}") from None

    def get_options(self) -> dict[str, Any]:
        """``options`` with secret values in plaintext: for the LLM client only."""
        from .backends.base import BackendConfigError

        try:
            return decrypt_option_secrets(self.options or {})
        except (CredentialUnreadable, ValueError) as exc:
            raise BackendConfigError(f"backend {self.name}: a secret option: {exc}") from None

    def redacted_options(self) -> dict[str, Any]:
        """``options`` as it may be shown or logged: secret-looking values masked."""
        return redact_secrets(self.options or {})


def _holds_explicit_change_backend(user: Any) -> bool:
    from django.contrib.auth.models import Group, Permission

    from accounts.roles import RESEARCHER

    permission = Permission.objects.filter(
        content_type__app_label="modeling", codename="change_backend"
    ).first()
    if permission is None:
        return False
    if user.user_permissions.filter(pk=permission.pk).exists():
        return True
    return Group.objects.filter(user=user, permissions=permission).exclude(name=RESEARCHER).exists()


class PromptTemplate(models.Model):
    """One version of a prompt. Editing makes a new version; old ones stay for old runs.

    ``system`` and ``user`` are Python format strings over ``fields`` (e.g.
    ``{stage_text}``, ``{questions}``); literal braces are doubled.
    """

    name = models.SlugField(max_length=100, help_text="e.g. dyntom-vanilla")
    version = models.PositiveIntegerField(default=1)
    benchmark = models.CharField(max_length=20)
    method = models.CharField(max_length=50, help_text="vanilla, cot, …")
    system = models.TextField(blank=True, default="")
    user = models.TextField()
    fields = models.JSONField(default=list, help_text="named fields the text uses")
    output_format = models.TextField(blank=True, default="", help_text="what the parser expects")
    notes = models.TextField(blank=True, default="")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # None: a built-in default, read by every workspace; a revision belongs to the
    # workspace that made it (modeling.runs.prompt_templates).
    workspace = models.ForeignKey(
        "accounts.Workspace", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    objects = WorkspaceManager(shared="workspace__isnull")

    class Meta:
        ordering = ["name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="prompt_template_version")
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class CachedResponse(models.Model):
    """A paid (or computed) completion, keyed by everything that determines it."""

    key = models.CharField(max_length=64, unique=True, help_text="sha256 of the request")
    backend_name = models.CharField(max_length=100)
    model = models.CharField(max_length=255)
    request = models.JSONField(help_text="messages, sampling parameters and sample index")
    text = models.TextField()
    finish_reason = models.CharField(max_length=30, blank=True, default="")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.backend_name}/{self.model} {self.key[:12]}"


class Run(WorkspaceOwned):
    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"
        BUDGET_EXHAUSTED = "budget_exhausted", "stopped: budget exhausted"
        # Interrupted on purpose (Ctrl-C, SIGTERM): nothing failed; resume to finish.
        STOPPED = "stopped", "stopped"

    # Not running and not queued: the page stops polling, resume may start it again.
    FINISHED = (
        Status.SUCCEEDED,
        Status.FAILED,
        Status.CANCELLED,
        Status.BUDGET_EXHAUSTED,
        Status.STOPPED,
    )

    class Kind(models.TextChoices):
        LLM = "llm", "LLM pipeline"
        # A model trained here (modeling.baselines): no backend, no prompts or calls;
        # progress counts training batches and evaluated instances instead of calls.
        TRAINED = "trained", "trained baseline"

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.LLM)
    benchmark = models.CharField(max_length=20)
    method = models.CharField(max_length=50)
    backend = models.ForeignKey(
        Backend, on_delete=models.PROTECT, null=True, blank=True, related_name="runs"
    )
    template = models.ForeignKey(
        PromptTemplate, on_delete=models.PROTECT, null=True, blank=True, related_name="runs"
    )
    model = models.CharField(max_length=255)
    params = models.JSONField(default=dict, blank=True, help_text="temperature, top_p, samples…")
    selection = models.JSONField(default=dict, blank=True, help_text="which items: works, split…")
    imported = models.BooleanField(default=False, help_text="predictions made elsewhere")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    total_calls = models.PositiveIntegerField(default=0)
    done_calls = models.PositiveIntegerField(default=0)
    error_calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    budget_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    budget_cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # Trained runs: one object per finished epoch ({"epoch", "train_loss", "dev_accuracy",
    # …}), drawn as the training curve on the run page.
    metrics = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A worker holds the run until this time and renews it as it goes; a run still
    # "running" past it was orphaned by a dead worker and may be claimed again.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Who holds the lease: a resume on the same host takes over at once when that
    # process is gone (the start time tells a reused PID from the holder).
    lease_holder_host = models.CharField(max_length=255, blank=True, default="")
    lease_holder_pid = models.PositiveIntegerField(null=True, blank=True)
    lease_holder_started_at = models.DateTimeField(
        null=True, blank=True, help_text="start time of the holding process"
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED


class RunCall(models.Model):
    """One prompt sent (or to send) for a run: a unit of work and of resumption."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        # The reply arrived and is stored on this row (paid for); its predictions are
        # not written yet. A resume records it from here and never asks again.
        RECEIVED = "received", "received"
        DONE = "done", "done"
        ERROR = "error", "error"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="calls")
    unit_key = models.CharField(max_length=200, help_text="e.g. dyntom:trial50")
    sample_index = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    cache_key = models.CharField(max_length=64, blank=True, default="")
    from_cache = models.BooleanField(default=False)
    raw_output = models.TextField(blank=True, default="")
    finish_reason = models.CharField(max_length=30, blank=True, default="")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = WorkspaceManager("run__workspace")

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "unit_key", "sample_index"], name="run_call_unit"
            )
        ]

    def __str__(self) -> str:
        return f"{self.unit_key} #{self.sample_index} ({self.status})"


class Prediction(models.Model):
    """A model's answer to one item, with everything needed to audit it."""

    class ParseStatus(models.TextChoices):
        OK = "ok", "ok"
        UNPARSEABLE = "unparseable", "unparseable"
        REFUSED = "refused", "refused"
        MISSING = "missing", "missing from the output"

    # Indexed by (run, parse_status, id) in Meta, which serves every lookup by run.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="predictions", db_index=False
    )
    call = models.ForeignKey(
        RunCall, on_delete=models.CASCADE, null=True, blank=True, related_name="predictions"
    )
    sample_index = models.PositiveSmallIntegerField(default=0)
    # Exactly one item reference is set, by benchmark. Each is indexed where it is set
    # only (Meta): a full index would take an entry for every NULL, and each prediction
    # row would update three item indexes where one holds anything.
    dyntom_question = models.ForeignKey(
        "benchmarks.DynToMQuestion",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="predictions",
        db_index=False,
    )
    qa_item = models.ForeignKey(
        "benchmarks.QAItem",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="predictions",
        db_index=False,
    )
    speaker_instance = models.ForeignKey(
        "benchmarks.SpeakerInstance",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="predictions",
        db_index=False,
    )
    mc_item = models.ForeignKey(
        "benchmarks.MCItem",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="predictions",
        db_index=False,
    )
    # The model's reply. A call that answers many items (a whole DynToM stage) keeps its
    # reply once, on the call, and this stays blank: 70 copies per stage would make the
    # prediction table mostly duplicated text. ``reply`` reads whichever holds it.
    raw_output = models.TextField(blank=True, default="")
    parsed_answer = models.CharField(max_length=500, blank=True, default="")
    parse_status = models.CharField(max_length=12, choices=ParseStatus.choices)
    # Unparseable answers are wrong (False), never left out of accuracy.
    correct = models.BooleanField(null=True, blank=True)
    details = BulkJSONField(default=dict, blank=True, help_text="judge output, bonus points…")
    template_version = models.CharField(max_length=120, blank=True, default="")
    model = models.CharField(max_length=255, blank=True, default="")
    params = BulkJSONField(default=dict, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceManager("run__workspace")

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "dyntom_question", "sample_index"],
                condition=models.Q(dyntom_question__isnull=False),
                name="prediction_dyntom_unique",
            ),
            models.UniqueConstraint(
                fields=["run", "qa_item", "sample_index"],
                condition=models.Q(qa_item__isnull=False),
                name="prediction_qa_unique",
            ),
            models.UniqueConstraint(
                fields=["run", "speaker_instance", "sample_index"],
                condition=models.Q(speaker_instance__isnull=False),
                name="prediction_instance_unique",
            ),
            models.UniqueConstraint(
                fields=["run", "mc_item", "sample_index"],
                condition=models.Q(mc_item__isnull=False),
                name="prediction_mc_item_unique",
            ),
        ]
        indexes = [
            # Serves every lookup by run and by run and status, and answers the reports'
            # fingerprint (count, unparseable and highest id per run) from the index
            # alone, without reading the rows.
            models.Index(fields=["run", "parse_status", "id"], name="prediction_run_status"),
            *(
                models.Index(
                    fields=[field],
                    condition=models.Q(**{f"{field}__isnull": False}),
                    name=f"prediction_{short}_set",
                )
                for field, short in (
                    ("dyntom_question", "dyntom"),
                    ("qa_item", "qa_item"),
                    ("speaker_instance", "instance"),
                    ("mc_item", "mc_item"),
                )
            ),
        ]

    str_relations = ("run",)

    def __str__(self) -> str:
        return f"{self.run} {self.parsed_answer or self.parse_status}"

    @property
    def reply(self) -> str:
        """The raw model output behind this prediction (its own, or its call's)."""
        if self.raw_output or self.call_id is None:
            return self.raw_output
        return self.call.raw_output


class MentalStateRecord(models.Model):
    """What a run's model wrote about one character after one scene (ToMPro, stage 1).

    ToMPro (ToM-in-AMC section 6, Appendix D) walks a work's scenes in order: after
    each scene a character appears in, the personality description is the updated
    one (recurrent) and the four instant dimensions are read from that scene alone.
    The guessing prompt for a scene uses only records of scenes before it. The
    long-context ablation writes one record per character (at the last training
    scene); the character-memory probe (Appendix H) one with no scene.
    """

    class Source(models.TextChoices):
        SCENE = "scene", "scene by scene"
        LONG_CONTEXT = "long_context", "one long-context pass"
        MEMORY = "memory", "the model's memory of the character"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="mental_states")
    character = models.ForeignKey(
        "benchmarks.Character", on_delete=models.CASCADE, related_name="mental_states"
    )
    scene = models.ForeignKey(
        "benchmarks.Scene",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="mental_states",
    )
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.SCENE)
    # The name the model saw (a perturbed run shows another name than the character's).
    shown_name = models.CharField(max_length=255, blank=True, default="")
    personality = models.TextField(blank=True, default="")
    emotions = models.TextField(blank=True, default="")
    beliefs = models.TextField(blank=True, default="")
    desires = models.TextField(blank=True, default="")
    intentions = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceManager("run__workspace")

    class Meta:
        ordering = ["run", "character", "scene__position"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "character", "scene"],
                condition=models.Q(scene__isnull=False),
                name="mental_state_scene_unique",
            ),
            models.UniqueConstraint(
                fields=["run", "character", "source"],
                condition=models.Q(scene__isnull=True),
                name="mental_state_sceneless_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.shown_name or self.character_id} after {self.scene_id or self.source}"
