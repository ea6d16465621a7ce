"""The run engine: create runs, execute them resumably, stop, cancel and resume them.

Execution is driven by :class:`RunCall` rows (one per prompt x sample). Request
threads keep ``Backend.max_concurrency`` calls in flight and never touch the
database; this thread is the writer. The moment a reply arrives it is made durable
as one row (its call turns ``received``, holding the raw reply, tokens and cost);
parsing, predictions (in bulk, several calls per transaction), the cache row and the
"done" mark come after. A run killed at any point therefore resumes by executing
again: done calls are skipped, received ones are recorded from their row, paid
responses come from the cache, and unique constraints stop duplicate predictions.

A run is held under a lease that names its holder (host, PID, process start time),
so a resume on the same host takes over at once from a holder that is gone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue as queue_module
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from .llm import BackendError, ChatBackend, ChatRequest, ChatResult, get_backend
from .llm.token_count import prompt_token_counter
from .models import Backend, CachedResponse, Prediction, PromptTemplate, Run, RunCall
from .pipelines import CallUnit, Pipeline, get_pipeline
from .prompts import DEFAULT_TEMPLATES
from .signals import run_finished

logger = logging.getLogger(__name__)

# Run.params key marking a run whose calls its caller makes one by one with
# run_direct_call (a DynToM generation job: each prompt depends on the last reply), so
# the engine never executes, requeues or resumes it.
DIRECT_CALLS = "direct_calls"

# Sampling parameters sent to backends; everything else in Run.params is engine-only.
_SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop")
# Progress hooks and the run's counters are refreshed at most this often: a query and
# a redraw per reply would cost the request window its refills at high concurrency.
PROGRESS_INTERVAL_S = 0.25
# Predictions written per transaction at most, so a reply that arrives meanwhile
# waits for at most one such write before it is made durable.
RECORD_CHUNK_PREDICTIONS = 2000


@dataclass(frozen=True)
class RunProgress:
    """What a progress hook receives: counts as of the last write."""

    run_id: int
    total: int
    done: int
    errors: int


ProgressHook = Callable[[RunProgress], None]


@dataclass
class RunInterrupt:
    """Set from a signal handler (or any thread) to stop a run this process executes.

    ``requested`` stops sending new calls; the calls in flight are waited for, at most
    ``MODELING_STOP_GRACE_S`` seconds, unless ``abandon`` is set too (a second Ctrl-C).
    Replies already received are written either way; the run ends ``stopped``.
    """

    requested: threading.Event = field(default_factory=threading.Event)
    abandon: threading.Event = field(default_factory=threading.Event)
    reason: str = "interrupted"

    def request(self, reason: str) -> None:
        if self.requested.is_set():
            self.abandon.set()
        else:
            self.reason = reason
            self.requested.set()


def _stop_grace_seconds() -> float:
    return float(getattr(settings, "MODELING_STOP_GRACE_S", 30))


def _lease_seconds() -> int:
    return int(getattr(settings, "MODELING_RUN_LEASE_S", 60))


@transaction.atomic
def prompt_templates_ensure_defaults(*, specs: list[dict[str, Any]] | None = None) -> int:
    """Create the default templates (name + version) that do not exist yet; returns how many.

    ``specs`` defaults to this app's templates; other apps pass their own (annotation's
    generation prompts) so every default template is written the same way.
    """
    created = 0
    for spec in DEFAULT_TEMPLATES if specs is None else specs:
        _, was_created = PromptTemplate.objects.get_or_create(
            name=spec["name"], version=spec["version"], defaults=spec
        )
        created += was_created
    return created


def prompt_template_revise(*, template: PromptTemplate, **changes: Any) -> PromptTemplate:
    """Edit a template by adding a new version; runs keep pointing at the old one."""
    with transaction.atomic():
        latest = (
            PromptTemplate.objects.select_for_update()
            .filter(name=template.name)
            .order_by("-version")
            .first()
        )
        fields = {
            f: getattr(template, f)
            for f in ("benchmark", "method", "system", "user", "fields", "output_format", "notes")
        }
        fields.update(changes)
        PromptTemplate.objects.filter(name=template.name).update(is_active=False)
        return PromptTemplate.objects.create(
            name=template.name, version=latest.version + 1, is_active=True, **fields
        )


def active_template(name: str) -> PromptTemplate:
    """The newest active version of a template, creating the defaults on first use."""
    template = PromptTemplate.objects.filter(name=name, is_active=True).order_by("-version").first()
    if template is None:
        prompt_templates_ensure_defaults()
        template = (
            PromptTemplate.objects.filter(name=name, is_active=True).order_by("-version").first()
        )
    if template is None:
        raise ValueError(f"no prompt template named {name!r}")
    return template


def _resolve(
    *,
    benchmark: str,
    method: str,
    backend: Backend,
    params: dict[str, Any] | None,
    template: PromptTemplate | None,
) -> tuple[Any, PromptTemplate, dict[str, Any], str]:
    pipeline = get_pipeline(benchmark)
    if method not in pipeline.methods:
        raise ValueError(
            f"method {method!r} is not one of {', '.join(pipeline.methods)} for {benchmark}"
        )
    template = template or active_template(pipeline.default_template_name(method))
    merged = {**pipeline.default_params, "samples": 1, **(params or {})}
    # Run options (k shots, name perturbation, ablations) are the pipeline's to check.
    options = pipeline.clean_options(method=method, options=dict(merged.pop("options", None) or {}))
    if options:
        merged["options"] = options
    samples = int(merged["samples"])
    if samples < 1:
        raise ValueError("samples must be at least 1")
    model = merged.pop("model", None) or backend.default_model or backend.model_path
    if not model:
        raise ValueError(f"backend {backend.name} has no default model; pass a model")
    return pipeline, template, merged, model


@transaction.atomic
def run_create(
    *,
    benchmark: str,
    method: str,
    backend: Backend,
    selection: dict[str, Any],
    params: dict[str, Any] | None = None,
    template: PromptTemplate | None = None,
    name: str = "",
    budget_tokens: int | None = None,
    budget_cost: Decimal | None = None,
    created_by=None,
    enqueue: bool = True,
) -> Run:
    """Record a run and, once committed, queue it for a worker."""
    _, template, merged, model = _resolve(
        benchmark=benchmark, method=method, backend=backend, params=params, template=template
    )
    run = Run.objects.create(
        name=name or f"{benchmark} {method} {model}",
        benchmark=benchmark,
        method=method,
        backend=backend,
        template=template,
        model=model,
        params=merged,
        selection=selection,
        budget_tokens=budget_tokens,
        budget_cost=budget_cost,
        created_by=created_by,
    )
    if enqueue:
        _enqueue(run)
    return run


def run_queue(run: Run) -> str:
    """The Celery queue a run goes to: local models and training need a GPU worker
    (SPEC: scale-out)."""
    if run.kind == Run.Kind.TRAINED:
        return "gpu"
    if run.backend is not None and run.backend.kind == Backend.Kind.TRANSFORMERS:
        return "gpu"
    return "default"


def run_enqueue(run: Run) -> None:
    """Send ``run`` to its queue (see :func:`run_queue`) once the transaction commits."""
    _enqueue(run)


def _enqueue(run: Run) -> None:
    queue = run_queue(run)

    def send() -> None:
        from .tasks import run_model_task, train_baseline_task

        task = train_baseline_task if run.kind == Run.Kind.TRAINED else run_model_task
        task.apply_async((run.pk,), queue=queue)

    transaction.on_commit(send)


@dataclass
class RunPlan:
    calls: int
    units: int
    samples: int
    estimated_prompt_tokens: int
    max_completion_tokens: int
    first_messages: list[dict[str, str]]
    token_method: str  # how the prompt tokens were estimated (tokenizer or heuristic)
    template: PromptTemplate
    model: str


def run_plan(
    *,
    benchmark: str,
    method: str,
    backend: Backend,
    selection: dict[str, Any],
    params: dict[str, Any] | None = None,
    template: PromptTemplate | None = None,
) -> RunPlan:
    """What a run would do, without calling anything (``run_model --dry-run``)."""
    pipeline, template, merged, model = _resolve(
        benchmark=benchmark, method=method, backend=backend, params=params, template=template
    )
    # An unsaved run: a pipeline that prepares (ToMPro) shows its prompts as they
    # would look before any of the run's own replies exist.
    draft = Run(
        benchmark=benchmark,
        method=method,
        backend=backend,
        template=template,
        model=model,
        params=merged,
        selection=selection,
    )
    units = pipeline.units_for_run(run=draft)
    samples = int(merged["samples"])
    counter = prompt_token_counter(backend=backend)
    tokens = counter.count([ChatRequest.build(u.messages, model=model, params={}) for u in units])
    return RunPlan(
        calls=len(units) * samples,
        units=len(units),
        samples=samples,
        estimated_prompt_tokens=tokens * samples,
        max_completion_tokens=int(merged.get("max_tokens") or 0) * len(units) * samples,
        first_messages=units[0].messages if units else [],
        token_method=counter.method,
        template=template,
        model=model,
    )


def run_cancel(*, run_id: int) -> Run:
    """Stop a run after the calls in flight; finished runs are left as they are."""
    Run.objects.filter(pk=run_id).exclude(status__in=Run.FINISHED).update(
        status=Run.Status.CANCELLED, finished_at=timezone.now()
    )
    return Run.objects.get(pk=run_id)


def run_resume(*, run_id: int, enqueue: bool = True) -> Run:
    """Make a stopped, failed or orphaned run runnable again; done calls are not repeated.

    A run still marked running is taken over at once when its holder is gone (the
    lease was released, has expired, or names a process on this host that no longer
    runs). While the holder may be alive this raises :class:`RunLeased`, whose message
    says who holds the run and when to retry. ``enqueue=False`` leaves the run queued
    for the caller to execute in this process (``run_model --resume``).
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.imported:
            raise ValueError("imported runs have nothing to resume")
        if run.params.get(DIRECT_CALLS):
            raise ValueError(
                f"run {run.pk} records the calls of a job that makes them itself "
                "(e.g. a DynToM generation job); resume that job instead"
            )
        if run.status == Run.Status.SUCCEEDED:
            return run
        if run.status == Run.Status.RUNNING and not _holder_gone(run):
            raise RunLeased(run)
        if run.status != Run.Status.QUEUED:
            run.status = Run.Status.QUEUED
            run.error = ""
            run.finished_at = None
            for name, value in _RELEASED.items():
                setattr(run, name, value)
            run.save(
                update_fields=[
                    "status",
                    "error",
                    "finished_at",
                    "lease_expires_at",
                    "lease_holder_host",
                    "lease_holder_pid",
                    "lease_holder_started_at",
                ]
            )
        if enqueue:
            _enqueue(run)
    return run


def runs_requeue_orphaned() -> list[int]:
    """Queue every run a dead worker left behind; called when a worker starts.

    A worker killed mid-run loses its task message with brokers that do not redeliver
    (kombu's filesystem transport deletes a message when it is fetched; Redis waits
    for its visibility timeout). Queued runs and runs still marked running are sent
    again: a live holder's lease makes the duplicate wait, then skip.
    """
    runs = [
        run
        for run in Run.objects.filter(
            imported=False, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
        )
        .select_related("backend")
        .order_by("pk")
        # Direct-call runs have no units for the engine to execute (see run_direct_call).
        if not run.params.get(DIRECT_CALLS)
    ]
    for run in runs:
        _enqueue(run)
    return [run.pk for run in runs]


# --- the lease and its holder ------------------------------------------------------------


@dataclass(frozen=True)
class LeaseHolder:
    """A process that may hold runs: its host, PID and start time (against PID reuse)."""

    host: str
    pid: int
    started_at: datetime | None

    @classmethod
    def current(cls) -> LeaseHolder:
        # Computed per call, not cached: a forked worker child has a PID of its own.
        pid = os.getpid()
        return cls(host=socket.gethostname(), pid=pid, started_at=_process_started_at(pid))

    def as_fields(self) -> dict[str, Any]:
        return {
            "lease_holder_host": self.host,
            "lease_holder_pid": self.pid,
            "lease_holder_started_at": self.started_at,
        }


_RELEASED = {
    "lease_expires_at": None,
    "lease_holder_host": "",
    "lease_holder_pid": None,
    "lease_holder_started_at": None,
}


def _process_started_at(pid: int) -> datetime | None:
    """When process ``pid`` started (Linux /proc), or None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        # Fields after the command name (which may hold spaces and parentheses);
        # starttime is field 22 of proc(5), in clock ticks since boot.
        ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return datetime.fromtimestamp(boot + ticks / os.sysconf("SC_CLK_TCK"), tz=UTC)


def _process_alive(pid: int, started_at: datetime | None) -> bool:
    """True when ``pid`` runs on this host and is the process that started at ``started_at``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return True  # no /proc (macOS): the signal check is all we have
    if stat[stat.rindex(")") + 2] in "ZX":
        return False  # killed, not yet reaped by its parent
    if started_at is not None:
        actual = _process_started_at(pid)
        if actual is not None and abs((actual - started_at).total_seconds()) > 1:
            return False  # the PID was reused by another process
    return True


def _holder_gone(run: Run) -> bool:
    """True when nobody can be executing ``run``: lease released or expired, or held by a
    process on this host that is no longer alive. A holder on another host counts as
    alive until its lease expires (we cannot see its processes)."""
    if run.lease_expires_at is None or run.lease_expires_at <= timezone.now():
        return True
    if not run.lease_holder_pid or run.lease_holder_host != socket.gethostname():
        return False
    return not _process_alive(run.lease_holder_pid, run.lease_holder_started_at)


def _utc_clock(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%H:%M:%S UTC")


class RunLeased(ValueError):
    """Another live process holds the run; ``seconds`` until its lease would expire.

    The message is one line a person can act on: who holds the run and when to retry.
    """

    def __init__(self, run: Run) -> None:
        now = timezone.now()
        expires = run.lease_expires_at or now
        self.run_id = run.pk
        self.seconds = max(1.0, (expires - now).total_seconds())
        self.expires_at = expires
        same_host = run.lease_holder_host == socket.gethostname()
        if run.lease_holder_pid and same_host:
            since = (
                f" since {_utc_clock(run.lease_holder_started_at)}"
                if run.lease_holder_started_at
                else ""
            )
            message = (
                f"run {run.pk} is running in process {run.lease_holder_pid} on this host{since}; "
                f"stop it there with Ctrl-C (kill -INT {run.lease_holder_pid}) or let it finish"
            )
        else:
            holder = (
                f"process {run.lease_holder_pid} on host {run.lease_holder_host}"
                if run.lease_holder_pid
                else "another worker"
            )
            message = (
                f"run {run.pk} is held by {holder}, which renews its lease while it runs; "
                f"if that process is gone, retry after {_utc_clock(expires)} "
                f"({self.seconds:.0f} s)"
            )
        super().__init__(message)


def _claim(run_id: int) -> Run | None:
    """Take the run with one conditional UPDATE; a live holder elsewhere raises RunLeased.

    A run whose holder is gone (see :func:`_holder_gone`) is taken over at once, with
    a compare-and-swap on the holder seen, so two resumers cannot both win.
    """
    now = timezone.now()
    holder = LeaseHolder.current()
    claim = {
        "status": Run.Status.RUNNING,
        "lease_expires_at": now + timedelta(seconds=_lease_seconds()),
        "started_at": now,
        **holder.as_fields(),
    }
    claimed = (
        Run.objects.filter(pk=run_id)
        .filter(
            Q(status=Run.Status.QUEUED)
            | Q(status=Run.Status.RUNNING, lease_expires_at__lt=now)
            | Q(status=Run.Status.RUNNING, lease_expires_at__isnull=True)
        )
        .update(**claim)
    )
    run = Run.objects.select_related("backend", "template").get(pk=run_id)
    if claimed:
        return run
    if run.status != Run.Status.RUNNING:
        return None
    if _holder_gone(run):
        taken = Run.objects.filter(
            pk=run_id,
            status=Run.Status.RUNNING,
            lease_expires_at=run.lease_expires_at,
            lease_holder_host=run.lease_holder_host,
            lease_holder_pid=run.lease_holder_pid,
        ).update(**claim)
        if taken:
            logger.info("run %s: took over from dead process %s", run_id, run.lease_holder_pid)
            return Run.objects.select_related("backend", "template").get(pk=run_id)
        run.refresh_from_db()
    raise RunLeased(run)


def _renew_lease(run_id: int, holder: LeaseHolder) -> bool:
    """Extend our lease; False when the run was cancelled or taken over meanwhile."""
    lease = timezone.now() + timedelta(seconds=_lease_seconds())
    return bool(
        Run.objects.filter(
            pk=run_id,
            status=Run.Status.RUNNING,
            lease_holder_host=holder.host,
            lease_holder_pid=holder.pid,
        ).update(lease_expires_at=lease)
    )


class _Lease:
    """The run's lease, renewed from the writer thread while calls are in flight.

    A call can take longer than the lease (a long chain-of-thought reply), so the
    writer wakes at least every ``interval`` to renew it. Renewing from this thread
    (not a heartbeat thread with its own connection) keeps it on the connection that
    owns the run. A failed renewal means the run is no longer ours (cancelled).
    """

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.holder = LeaseHolder.current()
        self.interval = max(0.5, _lease_seconds() / 3)
        self.lost = False
        self._renewed_at = time.monotonic()

    def renew_if_due(self) -> None:
        now = time.monotonic()
        if self.lost or now - self._renewed_at < self.interval:
            return
        self._renewed_at = now
        self.lost = not _renew_lease(self.run_id, self.holder)


# --- recording replies -------------------------------------------------------------------


def _cost(backend: Backend, prompt_tokens: int, completion_tokens: int) -> Decimal:
    return (
        Decimal(prompt_tokens) * backend.price_input_per_1k
        + Decimal(completion_tokens) * backend.price_output_per_1k
    ) / Decimal(1000)


def _request_for(
    run: Run, unit: CallUnit, sample_index: int, overrides: dict[str, Any] | None = None
) -> ChatRequest:
    params = {k: run.params[k] for k in _SAMPLING_KEYS if k in run.params}
    params.update({k: v for k, v in (overrides or {}).items() if k in _SAMPLING_KEYS})
    if params.get("seed") is not None:
        # One seed for every sample would make "3 samples" one sample three times.
        params["seed"] = int(params["seed"]) + sample_index
    return ChatRequest.build(
        unit.messages, model=run.model, params=params, sample_index=sample_index
    )


class RequestCodec:
    """Cache keys and cache-row JSON for requests that share their messages, fast.

    :meth:`ChatRequest.cache_key` serialises and hashes the whole request (~0.2 ms for a
    stage-sized prompt) and the cache row serialises it again; with samples, every
    sample repeats that work on the same messages. Here the messages are serialised
    once per prompt, the hash of everything up to them is computed once, and each
    request adds only its own tail. The bytes are those of ``json.dumps(...,
    sort_keys=True)``: sorted keys put ``backend`` < ``messages`` < ``model`` <
    ``params`` < ``sample_index``, so the keys equal ``ChatRequest.cache_key`` (tested).
    """

    def __init__(self, backend_name: str) -> None:
        self.backend_name = backend_name
        self._prefixes: dict[tuple, tuple[str, Any]] = {}

    def _prefix(self, request: ChatRequest) -> tuple[str, Any]:
        entry = self._prefixes.get(request.messages)
        if entry is None:
            messages = json.dumps(request.message_dicts, sort_keys=True)
            head = f'{{"backend": {json.dumps(self.backend_name)}, "messages": {messages}'
            entry = (messages, hashlib.sha256(head.encode()))
            self._prefixes[request.messages] = entry
        return entry

    @staticmethod
    def _tail(request: ChatRequest) -> str:
        return (
            f', "model": {json.dumps(request.model)}'
            f', "params": {json.dumps(request.param_dict, sort_keys=True)}'
            f', "sample_index": {json.dumps(request.sample_index)}}}'
        )

    def cache_key(self, request: ChatRequest) -> str:
        digest = self._prefix(request)[1].copy()
        digest.update(self._tail(request).encode())
        return digest.hexdigest()

    def request_json(self, request: ChatRequest) -> str:
        """``request.as_json()`` serialised, as the cache row stores it."""
        return f'{{"messages": {self._prefix(request)[0]}{self._tail(request)}'


@dataclass
class _Outcome:
    """A call's reply (or error) on its way from a request thread to the database."""

    call: RunCall
    result: ChatResult | BackendError
    from_cache: bool = False
    cost: Decimal = Decimal(0)


class _Recorder:
    """Writes replies for one run, on the thread that owns the run's connection.

    :meth:`store_received` is the durability step: one row per reply (the call turns
    ``received`` and holds the reply), in one short transaction for all replies that
    arrived together. :meth:`record` then parses, writes the predictions in bulk, the
    cache rows and the "done" marks, and bumps the run's counters once per batch.
    """

    def __init__(
        self,
        *,
        run: Run,
        pipeline: Pipeline,
        units: dict[str, CallUnit],
        requests: dict[int, ChatRequest],
        on_progress: ProgressHook | None,
    ) -> None:
        self.run = run
        self.pipeline = pipeline
        self.units = units
        self.requests = requests
        self.codec = RequestCodec(run.backend.name)
        self.cache_keys = {pk: self.codec.cache_key(r) for pk, r in requests.items()}
        self.on_progress = on_progress
        self.template_version = (
            f"{run.template.name} v{run.template.version}" if run.template else ""
        )
        self.total = 0
        self.done = 0
        self.errors = 0
        self._progress_at = 0.0
        self._sql, self._constant_values = self._statements()

    # -- durability ------------------------------------------------------------------

    def store_received(self, outcomes: list[_Outcome]) -> None:
        """Make replies durable: one UPDATE of each call row, one transaction for all."""
        rows = []
        for outcome in outcomes:
            result = outcome.result
            if isinstance(result, BackendError):
                continue
            rows.append(
                (
                    RunCall.Status.RECEIVED,
                    self.cache_keys[outcome.call.pk],
                    outcome.from_cache,
                    result.text,
                    result.finish_reason[:30],
                    result.prompt_tokens,
                    result.completion_tokens,
                    connection.ops.adapt_decimalfield_value(outcome.cost, 12, 6),
                    result.latency_ms,
                    outcome.call.pk,
                    RunCall.Status.DONE,
                )
            )
        if not rows:
            return
        table = connection.ops.quote_name(RunCall._meta.db_table)
        sql = (
            f"UPDATE {table} SET status = %s, cache_key = %s, from_cache = %s, "
            "raw_output = %s, finish_reason = %s, prompt_tokens = %s, completion_tokens = %s, "
            "cost = %s, latency_ms = %s, error = '' WHERE id = %s AND status <> %s"
        )
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(sql, rows)

    # -- predictions -----------------------------------------------------------------

    def _statements(self) -> tuple[dict[str, str], dict[str, Any]]:
        """The SQL :meth:`record` runs, and the values every prediction row shares.

        Predictions go in through one INSERT, bypassing model instances (they cost
        ~20 us each, a third of the write at 71 predictions a call); duplicates are
        skipped, as unique constraints guard every item of a run.
        """
        quote = connection.ops.quote_name

        def insert(model: type, columns: list[str], casts: dict[str, str] | None = None) -> str:
            values = ", ".join("%s" + (casts or {}).get(c, "") for c in columns)
            return (
                f"INSERT INTO {quote(model._meta.db_table)} "
                f"({', '.join(quote(c) for c in columns)}) "
                f"VALUES ({values}) ON CONFLICT DO NOTHING"
            )

        meta = Prediction._meta
        item_column = meta.get_field(self.pipeline.item_field).column
        prediction_columns = [
            "run_id",
            "call_id",
            "sample_index",
            item_column,
            "raw_output",
            "parsed_answer",
            "parse_status",
            "correct",
            "details",
            "template_version",
            "model",
            "params",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
            "created_at",
        ]
        cache_columns = [
            "key",
            "backend_name",
            "model",
            "request",
            "text",
            "finish_reason",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
            "created_at",
        ]
        calls, runs = quote(RunCall._meta.db_table), quote(Run._meta.db_table)
        sql = {
            "prediction": insert(Prediction, prediction_columns),
            # The request arrives as JSON text (see RequestCodec); PostgreSQL casts it.
            "cache": insert(
                CachedResponse,
                cache_columns,
                {"request": "::jsonb"} if connection.vendor == "postgresql" else None,
            ),
            # %%s: the id list's placeholders are filled in per batch.
            "done": f"UPDATE {calls} SET status = %%s, finished_at = %%s "
            "WHERE status = %%s AND id IN (%s) RETURNING id",
            "counters": f"UPDATE {runs} SET done_calls = done_calls + %s, "
            "error_calls = error_calls + %s, prompt_tokens = prompt_tokens + %s, "
            "completion_tokens = completion_tokens + %s, cost = cost + %s WHERE id = %s",
        }
        if connection.vendor == "postgresql":
            # COPY: several times faster than even a pipelined executemany, whose
            # client-side quoting of ~17 values per row held the GIL the request
            # threads need. COPY has no ON CONFLICT; :meth:`record` only writes the
            # predictions of calls it has just turned done, so none can be there yet.
            sql["prediction"] = (
                f"COPY {quote(meta.db_table)} ({', '.join(quote(c) for c in prediction_columns)}) "
                "FROM STDIN"
            )
        # JSON goes in as text, serialised once where every row shares it (as
        # JSONField would: json.dumps with its default encoder).
        constant = {"params": json.dumps(self.run.params), "empty_details": "{}"}
        return sql, constant

    def _prediction_rows(self, outcome: _Outcome, now: Any) -> list[tuple]:
        call, result = outcome.call, outcome.result
        parsed = self.pipeline.parse(unit=self.units[call.unit_key], text=result.text)
        share = max(1, len(parsed))
        empty = self._constant_values["empty_details"]
        params = self._constant_values["params"]
        prompt_tokens = result.prompt_tokens // share
        completion_tokens = result.completion_tokens // share
        run_id, call_id, sample_index = self.run.pk, call.pk, call.sample_index
        return [
            (
                run_id,
                call_id,
                sample_index,
                item.item_id,
                # The reply is stored once, on the call (see Prediction.raw_output).
                "",
                item.parsed_answer,
                item.parse_status,
                item.correct,
                json.dumps(item.details) if item.details else empty,
                self.template_version,
                self.run.model,
                params,
                prompt_tokens,
                completion_tokens,
                result.latency_ms,
                now,
            )
            for item in parsed
        ]

    def record(self, outcomes: list[_Outcome]) -> None:
        """Parse the replies, write predictions, cache rows and done/error marks at once.

        Plain SQL with statements built once: Django's bulk_create and update compile
        their SQL on every call (~1-4 ms each), which at a hundred replies a second
        would eat the time the request threads need.
        """
        if not outcomes:
            return
        ops = connection.ops
        now = timezone.now()
        now_db = ops.adapt_datetimefield_value(now)
        rows: dict[int, list[tuple]] = {}
        cache_rows: list[tuple] = []
        errors: list[_Outcome] = []
        usage: dict[int, tuple[int, int, Decimal]] = {}
        for outcome in outcomes:
            result = outcome.result
            if isinstance(result, BackendError):
                errors.append(outcome)
                continue
            # Parsed before the transaction, which then holds the write lock briefly.
            rows[outcome.call.pk] = self._prediction_rows(outcome, now_db)
            usage[outcome.call.pk] = (result.prompt_tokens, result.completion_tokens, outcome.cost)
            if not outcome.from_cache:
                request = self.requests[outcome.call.pk]
                cache_rows.append(
                    (
                        self.cache_keys[outcome.call.pk],
                        self.run.backend.name,
                        self.run.model,
                        self.codec.request_json(request),
                        result.text,
                        result.finish_reason[:30],
                        result.prompt_tokens,
                        result.completion_tokens,
                        result.latency_ms,
                        now_db,
                    )
                )
        sql = self._sql
        done = 0
        with transaction.atomic(), connection.cursor() as cursor:
            done_ids: list[int] = []
            if rows:
                # Only calls this transaction turns done get predictions: a call
                # recorded already (by an earlier attempt) is skipped whole.
                cursor.execute(
                    sql["done"] % ", ".join(["%s"] * len(rows)),
                    [RunCall.Status.DONE, now_db, RunCall.Status.RECEIVED, *rows],
                )
                done_ids = [pk for (pk,) in cursor.fetchall()]
                done = len(done_ids)
            new_rows = [row for pk in done_ids for row in rows[pk]]
            if new_rows and connection.vendor == "postgresql":
                with cursor.cursor.copy(sql["prediction"]) as copy:
                    for row in new_rows:
                        copy.write_row(row)
            elif new_rows:
                cursor.executemany(sql["prediction"], new_rows)
            if cache_rows:
                # A concurrent run may have paid for the same request first: keep its row.
                cursor.executemany(sql["cache"], cache_rows)
            for outcome in errors:
                RunCall.objects.filter(pk=outcome.call.pk).exclude(
                    status=RunCall.Status.DONE
                ).update(
                    status=RunCall.Status.ERROR,
                    error=str(outcome.result)[:2000],
                    finished_at=now,
                )
                logger.warning(
                    "run %s call %s failed: %s", self.run.pk, outcome.call.unit_key, outcome.result
                )
            if done or errors:
                # Cached calls cost nothing now; tokens still count, as the run used them.
                cursor.execute(
                    sql["counters"],
                    [
                        done,
                        len(errors),
                        sum(usage[pk][0] for pk in done_ids),
                        sum(usage[pk][1] for pk in done_ids),
                        ops.adapt_decimalfield_value(
                            sum((usage[pk][2] for pk in done_ids), Decimal(0)), 12, 6
                        ),
                        self.run.pk,
                    ],
                )
        self.done += done
        self.errors += len(errors)
        self.progress()

    def progress(self, *, force: bool = False) -> None:
        if self.on_progress is None:
            return
        now = time.monotonic()
        if force or now - self._progress_at >= PROGRESS_INTERVAL_S:
            self._progress_at = now
            self.on_progress(RunProgress(self.run.pk, self.total, self.done, self.errors))


def _ensure_calls(run: Run, units: list[CallUnit]) -> dict[tuple[str, int], RunCall]:
    samples = int(run.params.get("samples", 1))
    wanted = [(u.key, s) for u in units for s in range(samples)]
    RunCall.objects.bulk_create(
        [RunCall(run=run, unit_key=k, sample_index=s) for k, s in wanted],
        ignore_conflicts=True,
    )
    calls = {(c.unit_key, c.sample_index): c for c in RunCall.objects.filter(run=run)}
    # Calls a pipeline made while preparing (ToMPro's stage 1) count too.
    prepared = len(calls.keys() - set(wanted))
    Run.objects.filter(pk=run.pk).update(
        total_calls=len(wanted) + prepared,
        done_calls=sum(1 for c in calls.values() if c.status == RunCall.Status.DONE),
        # Errors from an earlier attempt are retried, so they no longer count.
        error_calls=0,
    )
    return calls


# --- execution ---------------------------------------------------------------------------


def run_execute(
    *,
    run_id: int,
    on_progress: ProgressHook | None = None,
    interrupt: RunInterrupt | None = None,
) -> str:
    """Execute (or resume) a run. Returns the final status, or "skipped".

    ``on_progress`` gets a :class:`RunProgress` a few times a second (the CLI draws its
    bar from it). ``interrupt`` stops the run cleanly (status ``stopped``, lease
    released). Raises :class:`RunLeased` when another live process holds the run.
    """
    run = _claim(run_id)
    if run is None:
        return "skipped"
    holder = LeaseHolder.current()
    try:
        if run.kind == Run.Kind.TRAINED:
            return _execute_trained(run, on_progress, interrupt or RunInterrupt())
        return _execute(run, on_progress, interrupt or RunInterrupt())
    except Exception as exc:
        logger.exception("run %s crashed", run.pk)
        _release(
            run.pk,
            holder,
            status=Run.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:2000],
        )
        return Run.Status.FAILED
    except BaseException:
        # KeyboardInterrupt or SystemExit with no RunInterrupt wired up: whatever was
        # received is durable already; leave the run stopped and free, not leased.
        _release(run.pk, holder, status=Run.Status.STOPPED, error="interrupted; resume to finish")
        raise


def _release(run_id: int, holder: LeaseHolder, *, status: str, error: str) -> bool:
    """End our hold on the run with ``status``; False when it is no longer ours."""
    released = bool(
        Run.objects.filter(
            pk=run_id,
            status=Run.Status.RUNNING,
            lease_holder_host=holder.host,
            lease_holder_pid=holder.pid,
        ).update(status=status, error=error, finished_at=timezone.now(), **_RELEASED)
    )
    if released:
        run_finished.send(sender=Run, run_id=run_id)
    return released


def _execute(run: Run, on_progress: ProgressHook | None, interrupt: RunInterrupt) -> str:
    pipeline = get_pipeline(run.benchmark)
    steps = _PrepareCaller(run, on_progress, interrupt)
    try:
        pipeline.prepare(run=run, steps=steps)
    except RunBudgetExceeded:
        return _finish(run.pk, Run.Status.BUDGET_EXHAUSTED, interrupt)
    except _PrepareStopped as stop:
        return _finish(run.pk, stop.status, interrupt)
    units = pipeline.units_for_run(run=run)
    order = {u.key: i for i, u in enumerate(units)}
    by_key = {u.key: u for u in units}
    calls = _ensure_calls(run, units)
    pending = [
        c for c in calls.values() if c.status != RunCall.Status.DONE and c.unit_key in by_key
    ]
    pending.sort(key=lambda c: (order[c.unit_key], c.sample_index))
    requests = {c.pk: _request_for(run, by_key[c.unit_key], c.sample_index) for c in pending}
    recorder = _Recorder(
        run=run, pipeline=pipeline, units=by_key, requests=requests, on_progress=on_progress
    )
    recorder.total = len(calls)
    recorder.done = len(calls) - len(pending)

    # Replies that arrived before a crash but were not recorded: paid, never asked again.
    received = [c for c in pending if c.status == RunCall.Status.RECEIVED]
    _record_in_chunks(
        recorder,
        [
            _Outcome(
                call=c,
                result=ChatResult(
                    text=c.raw_output,
                    prompt_tokens=c.prompt_tokens,
                    completion_tokens=c.completion_tokens,
                    latency_ms=c.latency_ms,
                    finish_reason=c.finish_reason,
                ),
                from_cache=c.from_cache,
                cost=c.cost,
            )
            for c in received
        ],
    )
    rest = [c for c in pending if c.status != RunCall.Status.RECEIVED]
    if retried := [c.pk for c in rest if c.status != RunCall.Status.PENDING]:
        RunCall.objects.filter(pk__in=retried).update(status=RunCall.Status.PENDING, error="")

    # Responses already paid for by any earlier run.
    keys = {c.pk: recorder.cache_keys[c.pk] for c in rest}
    cached = {c.key: c for c in CachedResponse.objects.filter(key__in=set(keys.values()))}
    hits: list[_Outcome] = []
    to_call: list[RunCall] = []
    for call in rest:
        hit = cached.get(keys[call.pk])
        if hit is None:
            to_call.append(call)
            continue
        result = ChatResult(
            text=hit.text,
            prompt_tokens=hit.prompt_tokens,
            completion_tokens=hit.completion_tokens,
            latency_ms=hit.latency_ms,
            finish_reason=hit.finish_reason,
        )
        hits.append(_Outcome(call=call, result=result, from_cache=True))
    recorder.store_received(hits)
    _record_in_chunks(recorder, hits)

    stop_status = ""
    if to_call and not interrupt.requested.is_set():
        backend = get_backend(run.backend)
        lease = _Lease(run.pk)
        try:
            if type(backend).complete_many is not ChatBackend.complete_many:
                stop_status = _call_in_batches(
                    run, backend, to_call, requests, lease, recorder, interrupt
                )
            else:
                stop_status = _call_sliding(
                    run, backend, to_call, requests, lease, recorder, interrupt
                )
        finally:
            backend.close()
    elif to_call:
        stop_status = Run.Status.STOPPED
    # Whatever was recorded, also on a stop: the hook is idempotent (see Pipeline.finish).
    pipeline.finish(run=run)
    recorder.progress(force=True)
    return _finish(run.pk, stop_status, interrupt)


def _execute_trained(run: Run, on_progress: ProgressHook | None, interrupt: RunInterrupt) -> str:
    """Train and evaluate a baseline (modeling.baselines) under this run's lease.

    Progress counts training mini-batches and evaluated instances (``total_calls`` /
    ``done_calls``). A stop request or a lost lease (cancelled) checkpoints and stops at
    the next mini-batch; a resume continues from that checkpoint.
    """
    from .baselines.training import Hooks, baseline_train

    lease = _Lease(run.pk)
    holder = LeaseHolder.current()

    def keep_going() -> bool:
        lease.renew_if_due()
        return not lease.lost and not interrupt.requested.is_set()

    def progress(done: int, total: int) -> None:
        lease.renew_if_due()
        Run.objects.filter(pk=run.pk).update(total_calls=total, done_calls=done)
        if on_progress is not None:
            on_progress(RunProgress(run.pk, total, done, 0))

    outcome = baseline_train(run=run, hooks=Hooks(keep_going=keep_going, progress=progress))
    if lease.lost:
        return Run.objects.get(pk=run.pk).status  # cancelled meanwhile
    if outcome.stopped:
        reason = interrupt.reason or "request"
        status, message = Run.Status.STOPPED, f"{outcome.message} by {reason}; resume to continue"
    else:
        status, message = Run.Status.SUCCEEDED, outcome.message
    if not _release(run.pk, holder, status=status, error=message):
        return Run.objects.get(pk=run.pk).status
    return status


def _record_in_chunks(recorder: _Recorder, outcomes: list[_Outcome]) -> None:
    for start in range(0, len(outcomes), 25):
        recorder.record(outcomes[start : start + 25])


def _estimate(run: Run, request: ChatRequest) -> tuple[int, Decimal]:
    """Tokens and cost a call may use: its prompt plus, when capped, the longest reply."""
    prompt = request.estimated_prompt_tokens()
    completion = int(run.params.get("max_tokens") or 0)
    return prompt + completion, _cost(run.backend, prompt, completion)


class _Budget:
    """Tokens and cost used and reserved (by calls in flight); shared by request threads."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.used_tokens = run.prompt_tokens + run.completion_tokens
        self.used_cost = run.cost
        self.reserved_tokens = 0
        self.reserved_cost = Decimal(0)

    def would_exceed(self, tokens: int, cost: Decimal) -> bool:
        """True when reserving ``tokens``/``cost`` more could break the run's budget."""
        run = self.run
        if (
            run.budget_tokens is not None
            and self.used_tokens + self.reserved_tokens + tokens > run.budget_tokens
        ):
            return True
        return (
            run.budget_cost is not None
            and self.used_cost + self.reserved_cost + cost > run.budget_cost
        )


class _Window:
    """Keeps ``limit`` calls in flight from request threads that never touch the database.

    Each thread takes the next call, checks the budget (in memory, under a lock) and
    asks the backend; the reply goes on :attr:`replies` for the writer. A thread
    refills its slot the moment its reply is handed over, whatever recording costs,
    so the window stays full (a sliding window: one slow reply holds back no other).
    """

    def __init__(
        self,
        *,
        run: Run,
        backend: ChatBackend,
        calls: list[RunCall],
        requests: dict[int, ChatRequest],
    ) -> None:
        self.run = run
        self.backend = backend
        self.requests = requests
        self.replies: queue_module.Queue[_Outcome] = queue_module.Queue()
        self.stop_status = ""
        self._queue = list(reversed(calls))
        self._budget = _Budget(run)
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"run{run.pk}-call{i}", daemon=True)
            for i in range(min(max(1, run.backend.max_concurrency), len(calls)))
        ]
        self._running = len(self._threads)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, status: str) -> None:
        """Send nothing more; calls in flight still come back on :attr:`replies`."""
        with self._lock:
            self.stop_status = self.stop_status or status
            self._queue.clear()

    @property
    def finished(self) -> bool:
        """Every request thread has handed over its last reply and ended."""
        with self._lock:
            return self._running == 0

    def _next(self) -> tuple[RunCall, int, Decimal] | None:
        with self._lock:
            if not self._queue:
                return None
            call = self._queue[-1]
            tokens, cost = _estimate(self.run, self.requests[call.pk])
            if self._budget.would_exceed(tokens, cost):
                self.stop_status = self.stop_status or Run.Status.BUDGET_EXHAUSTED
                self._queue.clear()
                return None
            self._queue.pop()
            self._budget.reserved_tokens += tokens
            self._budget.reserved_cost += cost
            return call, tokens, cost

    def _work(self) -> None:
        try:
            while (taken := self._next()) is not None:
                call, tokens, reserved_cost = taken
                result = _complete(self.backend, self.requests[call.pk])
                cost = Decimal(0)
                if isinstance(result, ChatResult):
                    cost = _cost(self.run.backend, result.prompt_tokens, result.completion_tokens)
                with self._lock:
                    self._budget.reserved_tokens -= tokens
                    self._budget.reserved_cost -= reserved_cost
                    if isinstance(result, ChatResult):
                        self._budget.used_tokens += result.prompt_tokens + result.completion_tokens
                        self._budget.used_cost += cost
                self.replies.put(_Outcome(call=call, result=result, cost=cost))
        finally:
            with self._lock:
                self._running -= 1
            # Wake the writer so it notices the window has emptied.
            self.replies.put(None)  # type: ignore[arg-type]


def _call_sliding(
    run: Run,
    backend: ChatBackend,
    to_call: list[RunCall],
    requests: dict[int, ChatRequest],
    lease: _Lease,
    recorder: _Recorder,
    interrupt: RunInterrupt,
) -> str:
    """Drive a :class:`_Window` and write what comes back; returns a stop status or "".

    This thread is the writer: it makes each batch of arrived replies durable first
    (one short transaction), then records a bounded chunk of the backlog, renews the
    lease and reports progress, and again.
    """
    window = _Window(run=run, backend=backend, calls=to_call, requests=requests)
    window.start()
    backlog: list[_Outcome] = []
    deadline: float | None = None
    while True:
        arrived = _drain(window.replies, timeout=0 if backlog else min(lease.interval, 0.5))
        if arrived:
            recorder.store_received(arrived)
            backlog.extend(arrived)
        if backlog:
            chunk, size = 0, 0
            while chunk < len(backlog) and size < RECORD_CHUNK_PREDICTIONS:
                size += len(recorder.units[backlog[chunk].call.unit_key].item_ids) or 1
                chunk += 1
            recorder.record(backlog[:chunk])
            del backlog[:chunk]
        lease.renew_if_due()
        if lease.lost:
            window.stop(Run.Status.CANCELLED)
        if interrupt.requested.is_set() and deadline is None:
            window.stop(Run.Status.STOPPED)
            deadline = time.monotonic() + _stop_grace_seconds()
        # Read before looking at the queue: a thread puts its last reply, then ends.
        finished = window.finished
        if backlog or not window.replies.empty():
            continue
        if finished:
            break
        if deadline is not None and (interrupt.abandon.is_set() or time.monotonic() > deadline):
            # Calls still in flight are abandoned: nothing arrived for them, so a
            # resume asks again; their threads die with the process.
            logger.warning("run %s: abandoned the calls in flight", run.pk)
            break
    return window.stop_status


def _drain(replies: queue_module.Queue, *, timeout: float) -> list[_Outcome]:
    """Every reply waiting now; waits up to ``timeout`` for the first when there is none."""
    arrived = []
    try:
        item = replies.get(timeout=timeout) if timeout > 0 else replies.get_nowait()
        while True:
            if item is not None:
                arrived.append(item)
            item = replies.get_nowait()
    except queue_module.Empty:
        pass
    return arrived


def _complete(backend: ChatBackend, request: ChatRequest) -> ChatResult | BackendError:
    try:
        return backend.complete(request)
    except BackendError as exc:
        return exc
    except Exception as exc:  # a backend bug must fail this call, not the whole run
        logger.exception("backend %s crashed", backend.name)
        return BackendError(f"{type(exc).__name__}: {exc}")


def _call_in_batches(
    run: Run,
    backend: ChatBackend,
    to_call: list[RunCall],
    requests: dict[int, ChatRequest],
    lease: _Lease,
    recorder: _Recorder,
    interrupt: RunInterrupt,
) -> str:
    """For backends that batch themselves (local transformers): a batch at a time.

    Generation runs in a helper thread so this one can keep renewing the lease while a
    long batch is on the GPU; each result is made durable as it comes.
    """
    chunk = max(1, run.backend.max_concurrency)
    budget = _Budget(run)
    for start in range(0, len(to_call), chunk):
        batch = to_call[start : start + chunk]
        if lease.lost:
            return Run.Status.CANCELLED
        if interrupt.requested.is_set():
            return Run.Status.STOPPED
        estimates = [_estimate(run, requests[c.pk]) for c in batch]
        if budget.would_exceed(
            sum(t for t, _ in estimates), sum((c for _, c in estimates), Decimal(0))
        ):
            return Run.Status.BUDGET_EXHAUSTED
        by_request = {requests[c.pk]: c for c in batch}
        outcomes: queue_module.Queue = queue_module.Queue()
        worker = threading.Thread(
            target=_generate_into,
            args=(backend, list(by_request), outcomes),
            name=f"run{run.pk}-batch",
            daemon=True,
        )
        worker.start()
        received = 0
        recorded: set[int] = set()
        while received < len(by_request):
            try:
                request, result = outcomes.get(timeout=lease.interval)
            except queue_module.Empty:
                lease.renew_if_due()
                if not worker.is_alive() and outcomes.empty():
                    # The backend yielded fewer results than requests: fail the rest.
                    missing = [
                        _Outcome(call=c, result=BackendError("the backend returned no result"))
                        for c in by_request.values()
                        if c.pk not in recorded
                    ]
                    recorder.record(missing)
                    break
                continue
            received += 1
            call = by_request[request]
            recorded.add(call.pk)
            cost = Decimal(0)
            if isinstance(result, ChatResult):
                cost = _cost(run.backend, result.prompt_tokens, result.completion_tokens)
                budget.used_tokens += result.prompt_tokens + result.completion_tokens
                budget.used_cost += cost
            outcome = _Outcome(call=call, result=result, cost=cost)
            recorder.store_received([outcome])
            recorder.record([outcome])
            lease.renew_if_due()
        worker.join()
    return ""


def _generate_into(
    backend: ChatBackend, requests: list[ChatRequest], out: queue_module.Queue
) -> None:
    """Put (request, result or error) for each request on ``out``; never raises."""
    try:
        for item in backend.complete_many(requests):
            out.put(item)
    except Exception as exc:  # a backend bug fails the batch's calls, not the run
        logger.exception("backend %s crashed", backend.name)
        for request in requests:
            out.put((request, BackendError(f"{type(exc).__name__}: {exc}")))


def _finish(run_id: int, stop_status: str, interrupt: RunInterrupt) -> str:
    holder = LeaseHolder.current()
    run = Run.objects.get(pk=run_id)
    if run.status != Run.Status.RUNNING or run.lease_holder_pid != holder.pid:
        return run.status  # cancelled, or taken over: no longer ours to finish
    calls = RunCall.objects.filter(run_id=run_id)
    errors = calls.filter(status=RunCall.Status.ERROR).count()
    if stop_status == Run.Status.STOPPED:
        done = calls.filter(status=RunCall.Status.DONE).count()
        message = f"stopped by {interrupt.reason} after {done} of {run.total_calls} calls"
    elif stop_status == Run.Status.BUDGET_EXHAUSTED:
        message = "stopped: the budget would be exceeded"
    elif stop_status:
        message = ""
    elif errors:
        stop_status = Run.Status.FAILED
        message = f"{errors} call(s) failed; resume the run to retry them"
    else:
        stop_status = Run.Status.SUCCEEDED
        message = ""
    if not _release(run_id, holder, status=stop_status, error=message):
        return Run.objects.get(pk=run_id).status
    return stop_status


# --- direct calls: one prompt at a time, made by the caller ------------------------------


class RunBudgetExceeded(Exception):
    """The next call could break the run's token or cost budget; it was not sent."""


def run_direct_create(
    *,
    name: str,
    benchmark: str,
    method: str,
    backend: Backend,
    model: str = "",
    params: dict[str, Any] | None = None,
    budget_tokens: int | None = None,
    created_by=None,
) -> Run:
    """A running run whose calls the caller makes with :func:`run_direct_call`.

    It shows at /runs/ with its calls, tokens, cost and cache hits like any other run;
    finish it with :func:`run_direct_finish`.
    """
    model = model or backend.default_model or backend.model_path
    if not model:
        raise ValueError(f"backend {backend.name} has no default model; pass a model")
    return Run.objects.create(
        name=name,
        benchmark=benchmark,
        method=method,
        backend=backend,
        model=model,
        params={**(params or {}), DIRECT_CALLS: True},
        budget_tokens=budget_tokens,
        created_by=created_by,
        status=Run.Status.RUNNING,
        started_at=timezone.now(),
    )


def run_direct_call(
    *,
    run: Run,
    unit_key: str,
    messages: list[dict[str, str]],
    sample_index: int = 0,
    params: dict[str, Any] | None = None,
) -> RunCall:
    """Send one prompt for a direct-call run and record it; returns the done RunCall.

    Goes through what the engine uses: the run's backend client (its retries), the
    response cache (a request paid for by any run is not paid again), the run's budget
    (checked before sending) and its counters. A call already done under ``unit_key``
    is returned as it is, so a job that runs again repeats nothing. Raises
    :class:`RunBudgetExceeded`, or :class:`~modeling.llm.BackendError` after marking
    the call ``error``. ``params`` overrides the run's sampling parameters for this
    call (ToMPro's stage 1 samples at a temperature of its own).
    """
    call, created = RunCall.objects.get_or_create(
        run=run, unit_key=unit_key, sample_index=sample_index
    )
    if call.status == RunCall.Status.DONE:
        return call
    if created:
        Run.objects.filter(pk=run.pk).update(total_calls=F("total_calls") + 1)
    unit = CallUnit(key=unit_key, messages=messages, item_ids=[])
    request = _request_for(run, unit, sample_index, params)
    cache_key = request.cache_key(run.backend.name)
    hit = CachedResponse.objects.filter(key=cache_key).first()
    cost = Decimal(0)
    if hit is not None:
        result = ChatResult(
            text=hit.text,
            prompt_tokens=hit.prompt_tokens,
            completion_tokens=hit.completion_tokens,
            latency_ms=hit.latency_ms,
            finish_reason=hit.finish_reason,
        )
    else:
        run.refresh_from_db(fields=["prompt_tokens", "completion_tokens", "cost"])
        if _Budget(run).would_exceed(*_estimate(run, request)):
            raise RunBudgetExceeded(f"run {run.pk}: the next call could exceed the budget")
        backend = get_backend(run.backend)
        try:
            result = backend.complete(request)
        except BackendError as exc:
            was_error = call.status == RunCall.Status.ERROR
            RunCall.objects.filter(pk=call.pk).update(
                status=RunCall.Status.ERROR, error=str(exc)[:2000], finished_at=timezone.now()
            )
            if not was_error:
                Run.objects.filter(pk=run.pk).update(error_calls=F("error_calls") + 1)
            raise
        finally:
            backend.close()
        cost = _cost(run.backend, result.prompt_tokens, result.completion_tokens)
        CachedResponse.objects.bulk_create(
            [
                CachedResponse(
                    key=cache_key,
                    backend_name=run.backend.name,
                    model=run.model,
                    request=request.as_json(),
                    text=result.text,
                    finish_reason=result.finish_reason[:30],
                    prompt_tokens=result.prompt_tokens,
                    completion_tokens=result.completion_tokens,
                    latency_ms=result.latency_ms,
                )
            ],
            ignore_conflicts=True,
        )
    with transaction.atomic():
        RunCall.objects.filter(pk=call.pk).update(
            status=RunCall.Status.DONE,
            cache_key=cache_key,
            from_cache=hit is not None,
            raw_output=result.text,
            finish_reason=result.finish_reason[:30],
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            cost=cost,
            latency_ms=result.latency_ms,
            error="",
            finished_at=timezone.now(),
        )
        Run.objects.filter(pk=run.pk).update(
            done_calls=F("done_calls") + 1,
            error_calls=F("error_calls") - (1 if call.status == RunCall.Status.ERROR else 0),
            prompt_tokens=F("prompt_tokens") + result.prompt_tokens,
            completion_tokens=F("completion_tokens") + result.completion_tokens,
            cost=F("cost") + cost,
        )
    call.refresh_from_db()
    return call


def run_direct_finish(*, run_id: int, status: str, error: str = "") -> None:
    """End a direct-call run (succeeded, failed, budget_exhausted, …) unless it has ended."""
    if (
        Run.objects.filter(pk=run_id)
        .exclude(status__in=Run.FINISHED)
        .update(status=status, error=error[:2000], finished_at=timezone.now())
    ):
        run_finished.send(sender=Run, run_id=run_id)


# --- preparing calls: a pipeline's chained prompts before its units ----------------------


class _PrepareStopped(Exception):
    """The run must stop while a pipeline prepares (interrupt or lost lease)."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


class _PrepareCaller:
    """The engine side of :class:`~modeling.pipelines.base.PrepareSteps`.

    Each call goes through :func:`run_direct_call` (cache, budget, counters; a call
    done before is returned as it is, so a resumed run repeats nothing), one at a
    time because each prompt may depend on the previous reply. Between calls it
    renews the run's lease, honours an interrupt and reports progress.
    """

    def __init__(self, run: Run, on_progress: ProgressHook | None, interrupt: RunInterrupt) -> None:
        self.run = run
        self.on_progress = on_progress
        self.interrupt = interrupt
        self._lease: _Lease | None = None

    def call(
        self, *, key: str, messages: list[dict[str, str]], temperature: float | None = None
    ) -> str:
        if self._lease is None:
            self._lease = _Lease(self.run.pk)
        self._lease.renew_if_due()
        if self._lease.lost:
            raise _PrepareStopped(Run.Status.CANCELLED)
        if self.interrupt.requested.is_set():
            raise _PrepareStopped(Run.Status.STOPPED)
        overrides = {} if temperature is None else {"temperature": temperature}
        call = run_direct_call(run=self.run, unit_key=key, messages=messages, params=overrides)
        if self.on_progress is not None:
            counts = Run.objects.values("total_calls", "done_calls", "error_calls").get(
                pk=self.run.pk
            )
            self.on_progress(
                RunProgress(
                    self.run.pk, counts["total_calls"], counts["done_calls"], counts["error_calls"]
                )
            )
        return call.raw_output
