"""Executing a run: request threads keep ``Backend.max_concurrency`` calls in flight and
never touch the database; this thread is the writer (see ``recording``). A run killed
at any point resumes by executing again: done calls are skipped, received ones are
recorded from their row, paid responses come from the cache.
"""

from __future__ import annotations

import logging
import queue as queue_module
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import islice

from django.conf import settings
from django.db import connection
from django.db.models import Count, Q

from ..backends import (
    BackendError,
    ChatBackend,
    ChatRequest,
    ChatResult,
    batches_itself,
    get_backend,
)
from ..backends.secrets import mask_secrets
from ..credentials import backend_secret_values
from ..models import CachedResponse, Prediction, Run, RunCall
from ..pipelines import CallUnit, Pipeline, Step, get_pipeline
from .direct import DirectRequest, RunBudgetExceeded, run_direct_calls
from .leases import LeaseHolder, LeaseView, _claim, _Lease, _release
from .outcome import NOT_PARSED, ParseCounts, run_outcome
from .processes import EnginePool, engine_processes
from .recording import (
    ProgressHook,
    RunProgress,
    _Budget,
    _cost,
    _estimate,
    _Outcome,
    _Recorder,
    _request_for,
    sends_again,
)

# Predictions written per transaction at most, so a reply that arrives meanwhile
# waits for at most one such write before it is made durable.
RECORD_CHUNK_PREDICTIONS = 2000
# Units prepared at a time once the first wave is out (see _Feed).
UNITS_PAGE = 64
# Calls prepared ahead of the request threads, in windows: at least this many while the
# window is quiet (see _Window.quiet_for), and fed at once below one window.
FEED_AHEAD_WINDOWS = 4
# How often the writer looks for replies while it holds back work for one that is due.
QUIET_POLL_S = 0.002

logger = logging.getLogger(__name__)


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


# --- execution ---------------------------------------------------------------------------


def run_execute(
    *,
    run_id: int,
    on_progress: ProgressHook | None = None,
    interrupt: RunInterrupt | None = None,
    processes: int | None = None,
) -> str:
    """Execute (or resume) a run. Returns the final status, or "skipped".

    ``on_progress`` gets a :class:`RunProgress` a few times a second (the CLI draws its
    bar from it). ``interrupt`` stops the run cleanly (status ``stopped``, lease
    released). ``processes`` engine processes make the calls (default
    ``MODELING_RUN_PROCESSES``; see ``processes``). Raises :class:`RunLeased` when
    another live process holds the run.
    """
    run = _claim(run_id)
    if run is None:
        return "skipped"
    holder = LeaseHolder.current()
    if run.backend_id is not None and run.backend.workspace_id != run.workspace_id:
        # A backend's key is its workspace's: a run of another workspace never uses it,
        # whatever its row says (made through the admin or an old API client).
        _release(
            run.pk,
            holder,
            status=Run.Status.FAILED,
            error="the run's backend belongs to another workspace: its key is not used here",
        )
        return Run.Status.FAILED
    try:
        if run.kind == Run.Kind.TRAINED:
            return _execute_trained(run, on_progress, interrupt or RunInterrupt())
        return _execute(run, on_progress, interrupt or RunInterrupt(), processes)
    except Exception as exc:
        logger.exception("run %s crashed", run.pk)
        _release(
            run.pk,
            holder,
            status=Run.Status.FAILED,
            error=mask_secrets(f"{type(exc).__name__}: {exc}")[:2000],
        )
        return Run.Status.FAILED
    except BaseException:
        # KeyboardInterrupt or SystemExit with no RunInterrupt wired up: whatever was
        # received is durable already; leave the run stopped and free, not leased.
        _release(run.pk, holder, status=Run.Status.STOPPED, error="interrupted; resume to finish")
        raise


def _execute(
    run: Run, on_progress: ProgressHook | None, interrupt: RunInterrupt, processes: int | None
) -> str:
    pipeline = get_pipeline(run.benchmark)
    steps = _PrepareCaller(run, on_progress, interrupt)
    try:
        pipeline.prepare(run=run, steps=steps)
    except RunBudgetExceeded:
        return _finish(run.pk, Run.Status.BUDGET_EXHAUSTED, interrupt)
    except _PrepareStopped as stop:
        return _finish(run.pk, stop.status, interrupt)
    # Engine processes start first: their start-up overlaps the preparing of calls here.
    processes = engine_processes(run, processes)
    pool = EnginePool(run, processes) if processes > 1 else None
    try:
        return _execute_units(run, pipeline, on_progress, interrupt, pool)
    finally:
        if pool is not None:
            pool.close()


def _execute_units(
    run: Run,
    pipeline: Pipeline,
    on_progress: ProgressHook | None,
    interrupt: RunInterrupt,
    pool: EnginePool | None,
) -> str:
    recorder = _Recorder(run=run, pipeline=pipeline, units={}, requests={}, on_progress=on_progress)
    feed = _Feed(run, pipeline.iter_units_for_run(run=run), recorder)
    sliding = pool is None and run.backend is not None and not batches_itself(run.backend)
    # The backend's clients are made (and its host resolved) while the first calls are
    # prepared, so the first wave leaves at once; the rest is prepared while it is out.
    starter = _BackendStart(run) if sliding else None
    to_call = feed.take(run.backend.max_concurrency if sliding else None)

    stop_status = ""
    if to_call and not interrupt.requested.is_set() and pool is not None:
        stop_status = pool.call(
            calls=to_call, lease=_Lease(run.pk), recorder=recorder, interrupt=interrupt
        )
    elif to_call and not interrupt.requested.is_set():
        backend = starter.backend() if starter is not None else get_backend(run.backend)
        starter = None
        lease = _Lease(run.pk)
        try:
            if sliding:
                stop_status = _call_sliding(
                    run, backend, to_call, recorder.requests, lease, recorder, interrupt, feed=feed
                )
            else:
                stop_status = _call_in_batches(
                    run, backend, to_call, recorder.requests, lease, recorder, interrupt
                )
        finally:
            backend.close()
    elif to_call:
        stop_status = Run.Status.STOPPED
    if starter is not None:
        starter.close()
    # A stopped run still gets every call row and its cached replies, as a resume expects.
    feed.take(None)
    # Whatever was recorded, also on a stop: the hook is idempotent (see Pipeline.finish).
    pipeline.finish(run=run)
    recorder.progress(force=True)
    return _finish(run.pk, stop_status, interrupt)


class _Feed:
    """A run's calls prepared from its units a few at a time, in the units' order.

    For each batch of units: the call rows (created once, so a resume finds them), the
    requests, replies received before a crash recorded from their rows, and replies any
    earlier run paid for taken from the cache; what is left is to be sent. When the
    units run out, the run's counters are set from its call rows (calls a pipeline made
    while preparing, ToMPro's stage 1, count too).
    """

    def __init__(self, run: Run, units: Iterator[CallUnit], recorder: _Recorder) -> None:
        self.run = run
        self.units = units
        self.recorder = recorder
        self.samples = int(run.params.get("samples", 1))
        self.exhausted = False
        self._position = 0
        self._cache_secrets: list[str] | None = None
        # Errors from an earlier attempt are retried, so they no longer count.
        Run.objects.filter(pk=run.pk).update(error_calls=0)

    def take(self, calls: int | None) -> list[RunCall]:
        """At least ``calls`` calls to send (all that are left when None), fewer only
        when the units run out; [] once they have."""
        to_call: list[RunCall] = []
        while not self.exhausted and (calls is None or len(to_call) < calls):
            wanted = UNITS_PAGE if calls is None else -(-(calls - len(to_call)) // self.samples)
            units = list(islice(self.units, max(1, wanted)))
            if units:
                to_call += self._prepare(units)
            else:
                self.exhausted = True
                self._count()
        return to_call

    def _prepare(self, units: list[CallUnit]) -> list[RunCall]:
        run, recorder = self.run, self.recorder
        order = {u.key: self._position + i for i, u in enumerate(units)}
        self._position += len(units)
        by_key = {u.key: u for u in units}
        RunCall.objects.bulk_create(
            [
                RunCall(run=run, unit_key=u.key, sample_index=s)
                for u in units
                for s in range(self.samples)
            ],
            ignore_conflicts=True,
        )
        calls = list(RunCall.objects.filter(run=run, unit_key__in=list(by_key)))
        pending = [c for c in calls if c.status != RunCall.Status.DONE]
        pending.sort(key=lambda c: (order[c.unit_key], c.sample_index))
        recorder.add(
            by_key, {c.pk: _request_for(run, by_key[c.unit_key], c.sample_index) for c in pending}
        )
        recorder.total += len(calls)
        recorder.done += len(calls) - len(pending)

        # Replies that arrived before a crash but were not recorded: paid, never asked again.
        received = [c for c in pending if c.status == RunCall.Status.RECEIVED]
        _record_in_chunks(recorder, [_received_outcome(c) for c in received])
        rest = [c for c in pending if c.status != RunCall.Status.RECEIVED]
        if retried := [c.pk for c in rest if c.status != RunCall.Status.PENDING]:
            RunCall.objects.filter(pk__in=retried).update(status=RunCall.Status.PENDING, error="")

        # Responses already paid for by any earlier run; none for a run that sends again.
        keys = {c.pk: recorder.cache_keys[c.pk] for c in rest}
        cached = (
            {}
            if sends_again(run) or not rest
            else {c.key: c for c in CachedResponse.objects.filter(key__in=set(keys.values()))}
        )
        if cached and self._cache_secrets is None:
            self._cache_secrets = backend_secret_values(run.backend) if run.backend else []
        hits: list[_Outcome] = []
        to_call: list[RunCall] = []
        for call in rest:
            hit = cached.get(keys[call.pk])
            if hit is None:
                to_call.append(call)
                continue
            result = ChatResult(
                # Masked again as it is reused: replies cached before replies were masked
                # may hold a key the server echoed.
                text=mask_secrets(hit.text, self._cache_secrets),
                prompt_tokens=hit.prompt_tokens,
                completion_tokens=hit.completion_tokens,
                latency_ms=hit.latency_ms,
                finish_reason=hit.finish_reason,
            )
            hits.append(_Outcome(call=call, result=result, from_cache=True))
        recorder.store_received(hits)
        _record_in_chunks(recorder, hits)
        return to_call

    def _count(self) -> None:
        counts = RunCall.objects.filter(run_id=self.run.pk).aggregate(
            total=Count("id"), done=Count("id", filter=Q(status=RunCall.Status.DONE))
        )
        Run.objects.filter(pk=self.run.pk).update(
            total_calls=counts["total"], done_calls=counts["done"]
        )
        self.recorder.total, self.recorder.done = counts["total"], counts["done"]


def _received_outcome(call: RunCall) -> _Outcome:
    return _Outcome(
        call=call,
        result=ChatResult(
            text=call.raw_output,
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
            latency_ms=call.latency_ms,
            finish_reason=call.finish_reason,
        ),
        from_cache=call.from_cache,
        cost=call.cost,
    )


class _BackendStart:
    """The run's backend object made on a thread of its own, with a client for each
    call of the first wave (``ChatBackend.warm``), while this thread prepares calls."""

    def __init__(self, run: Run) -> None:
        self._config = run.backend  # read here: the thread never touches the database
        self._limit = max(1, run.backend.max_concurrency)
        self._made: ChatBackend | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._start, name=f"run{run.pk}-backend", daemon=True
        )
        self._thread.start()

    def _start(self) -> None:
        try:
            self._made = get_backend(self._config)
            self._made.warm(self._limit)
        except BaseException as exc:  # raised again on the run's thread by backend()
            self._error = exc

    def backend(self) -> ChatBackend:
        """The backend, or the error making it raised (as ``get_backend`` would)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._made is not None
        return self._made

    def close(self) -> None:
        """Not needed after all (every call was cached or the run stopped)."""
        self._thread.join()
        if self._made is not None:
            self._made.close()


def _execute_trained(run: Run, on_progress: ProgressHook | None, interrupt: RunInterrupt) -> str:
    """Train and evaluate a baseline (modeling.baselines) under this run's lease.

    Progress counts training mini-batches and evaluated instances (``total_calls`` /
    ``done_calls``). A stop request or a lost lease (cancelled) checkpoints and stops at
    the next mini-batch; a resume continues from that checkpoint.
    """
    from ..baselines.training import Hooks, baseline_train

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
        status, failure = run_outcome(run_id=run.pk)
        message = failure or outcome.message
    if not _release(run.pk, holder, status=status, error=message):
        return Run.objects.get(pk=run.pk).status
    return status


def _record_in_chunks(recorder: _Recorder, outcomes: list[_Outcome]) -> None:
    for start in range(0, len(outcomes), 25):
        recorder.record(outcomes[start : start + 25])


class _Window:
    """Keeps ``limit`` calls in flight from request threads that never touch the database.

    Each thread takes the next call, checks the budget (in memory, under a lock) and
    asks the backend; the reply goes on :attr:`replies` for the writer. A thread
    refills its slot as soon as the writer has made a reply durable (one short
    transaction per batch of arrivals), whatever recording the predictions costs, so
    the window stays full (a sliding window: one slow reply holds back no other).
    Calls sent and not yet stored never exceed ``limit``: a kill at any moment asks
    again at most one window of calls, even when replies arrive faster than a busy
    process stores them.
    """

    def __init__(
        self,
        *,
        run: Run,
        backend: ChatBackend,
        calls: list[RunCall],
        requests: dict[int, ChatRequest],
        limit: int,
        feeding: bool = False,
    ) -> None:
        """``feeding``: more calls come through :meth:`add` until :meth:`close`."""
        self.run = run
        self.backend = backend
        self.requests = requests
        self.replies: queue_module.Queue[_Outcome] = queue_module.Queue()
        self.stop_status = ""
        self._queue = deque(calls)
        self._budget = _Budget(run)
        self._lock = threading.Lock()
        # Signalled when calls are added or no more will come (see ``add``, ``close``).
        self._fed = threading.Condition(self._lock)
        self._closed = not feeding
        self._threads = [
            threading.Thread(target=self._work, args=(i,), name=f"run{run.pk}-call{i}", daemon=True)
            for i in range(min(max(1, limit), len(calls)))
        ]
        self._running = len(self._threads)
        self._started = 0
        # One permit per call sent and not yet stored (see ``stored``).
        self._slots = threading.Semaphore(len(self._threads))
        # When each thread's call in flight left (None: none), and the shortest call
        # so far: the writer's guess of when replies will arrive (``quiet_for``).
        self._sent_at: list[float | None] = [None] * len(self._threads)
        self._fastest: float | None = None

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, status: str) -> None:
        """Send nothing more; calls in flight still come back on :attr:`replies`."""
        with self._lock:
            self.stop_status = self.stop_status or status
            self._queue.clear()
            self._closed = True
            self._fed.notify_all()

    def add(self, calls: list[RunCall]) -> None:
        """More calls to send, after those queued (dropped once the window has stopped)."""
        with self._lock:
            if not self.stop_status:
                self._queue.extend(calls)
                self._fed.notify_all()

    def close(self) -> None:
        """No more calls will be added: threads end when the queue is empty."""
        with self._lock:
            self._closed = True
            self._fed.notify_all()

    @property
    def all_started(self) -> bool:
        """Every request thread has asked for its first call."""
        return self._started == len(self._threads)

    @property
    def queued(self) -> int:
        """Calls waiting for a request thread."""
        return len(self._queue)

    def quiet_for(self) -> float:
        """Seconds until a reply is expected while calls wait to be sent, else infinity.

        A call in flight is expected back once it has been out as long as the fastest
        call so far, and is waited for until a quarter of that later (a slow one is not
        waited for). Work the writer starts within that time delays the storing of
        the reply, so its thread's next call leaves late; with nothing left to send
        there is no such call, and nothing to protect.
        """
        fastest = self._fastest
        if fastest is None or (self._closed and not self._queue):
            return float("inf")
        now = time.monotonic()
        quiet = float("inf")
        for sent in list(self._sent_at):
            if sent is not None and now < sent + fastest * 1.25:
                quiet = min(quiet, max(0.0, sent + fastest - now))
        return quiet

    def stored(self, replies: int) -> None:
        """The writer made ``replies`` arrived replies durable: their slots are free."""
        for _ in range(replies):
            self._slots.release()

    @property
    def finished(self) -> bool:
        """Every request thread has handed over its last reply and ended."""
        with self._lock:
            return self._running == 0

    def _next(self) -> tuple[RunCall, int, Decimal] | None:
        with self._lock:
            while not self._queue and not self._closed:
                self._fed.wait()
            if not self._queue:
                return None
            call = self._queue[0]
            tokens, cost = _estimate(self.run, self.requests[call.pk])
            if self._budget.would_exceed(tokens, cost):
                self.stop_status = self.stop_status or Run.Status.BUDGET_EXHAUSTED
                self._queue.clear()
                self._closed = True
                self._fed.notify_all()
                return None
            self._queue.popleft()
            self._budget.reserved_tokens += tokens
            self._budget.reserved_cost += cost
            return call, tokens, cost

    def _work(self, index: int) -> None:
        first = True
        try:
            while True:
                self._slots.acquire()
                if first:
                    # Counted before asking: a thread that finds the queue empty
                    # waits for the feed, which waits for every thread to have asked.
                    first = False
                    with self._lock:
                        self._started += 1
                taken = self._next()
                if taken is None:
                    self._slots.release()
                    break
                call, tokens, reserved_cost = taken
                sent = self._sent_at[index] = time.monotonic()
                result = _complete(self.backend, self.requests[call.pk])
                took = time.monotonic() - sent
                self._sent_at[index] = None
                cost = Decimal(0)
                if isinstance(result, ChatResult):
                    cost = _cost(self.run.backend, result.prompt_tokens, result.completion_tokens)
                with self._lock:
                    if self._fastest is None or took < self._fastest:
                        self._fastest = took
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
    lease: LeaseView,
    recorder: _Recorder,
    interrupt: RunInterrupt,
    *,
    limit: int | None = None,
    feed: _Feed | None = None,
) -> str:
    """Drive a :class:`_Window` and write what comes back; returns a stop status or "".

    This thread is the writer: it makes each batch of arrived replies durable first
    (one short transaction), then prepares more calls from ``feed`` while fewer than
    two windows' worth wait, records a bounded chunk of the backlog, renews the lease
    and reports progress, and again. ``limit`` is the calls in flight at most: the
    backend's ``max_concurrency`` unless this process makes one shard of a run.
    """
    limit = run.backend.max_concurrency if limit is None else limit
    feeding = feed is not None and not feed.exhausted
    window = _Window(
        run=run, backend=backend, calls=to_call, requests=requests, limit=limit, feeding=feeding
    )
    window.start()
    backlog: list[_Outcome] = []
    deadline: float | None = None
    window_size = max(1, limit)
    # Seconds per call prepared and per reply recorded, as measured: how much work
    # fits before the next reply is expected (``_Window.quiet_for``).
    per_call, per_reply = _Pace(0.002), _Pace(0.002)
    while True:
        quiet = window.quiet_for()
        hungry = feeding and _hungry(window, window_size, quiet, per_call.seconds)
        # The backlog is recorded while no reply is due, a chunk that fits before it;
        # a window's worth or more is recorded whatever is due.
        deferred = bool(backlog) and len(backlog) < window_size and quiet < per_reply.seconds
        arrived = _drain(
            window.replies,
            timeout=QUIET_POLL_S
            if deferred
            else 0
            if backlog or hungry
            else min(lease.interval, 0.5),
        )
        if arrived:
            recorder.store_received(arrived)
            window.stored(len(arrived))
            backlog.extend(arrived)
            quiet = window.quiet_for()
            hungry = feeding and _hungry(window, window_size, quiet, per_call.seconds)
        recordable = 0
        if backlog:
            recordable = len(backlog)
            if len(backlog) < window_size and quiet != float("inf"):
                recordable = int(quiet / per_reply.seconds)
        if hungry and feed is not None:
            began = time.monotonic()
            added = feed.take(max(1, limit))
            backend.prepare([requests[call.pk] for call in added])
            per_call.add(time.monotonic() - began, len(added))
            window.add(added)
            if feed.exhausted:
                feeding = False
                window.close()
        if recordable:
            chunk, size = 0, 0
            while chunk < min(recordable, len(backlog)) and size < RECORD_CHUNK_PREDICTIONS:
                size += len(recorder.units[backlog[chunk].call.unit_key].item_ids) or 1
                chunk += 1
            began = time.monotonic()
            recorder.record(backlog[:chunk])
            per_reply.add(time.monotonic() - began, chunk)
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


def _hungry(window: _Window, size: int, quiet: float, per_call: float) -> bool:
    """Whether the writer prepares more calls now. Only once every request thread has
    asked for its first call: preparing holds the GIL, and the first wave's requests
    would wait for it. Below a window queued, at once; up to a few windows ahead while
    no reply is due before a window's worth would be prepared."""
    if not window.all_started:
        return False
    return window.queued < size or (
        window.queued < FEED_AHEAD_WINDOWS * size and quiet >= per_call * size
    )


class _Pace:
    """Seconds per item of some work, a moving average of what it took."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def add(self, seconds: float, items: int) -> None:
        if items > 0:
            self.seconds = 0.7 * self.seconds + 0.3 * max(seconds / items, 1e-5)


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
        return BackendError(backend.mask(f"{type(exc).__name__}: {exc}"))


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
            out.put((request, BackendError(backend.mask(f"{type(exc).__name__}: {exc}"))))


def _finish(run_id: int, stop_status: str, interrupt: RunInterrupt) -> str:
    holder = LeaseHolder.current()
    # One query for the run's holder and the counts its ending may need, in plain SQL:
    # the ORM's three subqueries cost ~1.5 ms to compile, the query itself ~0.1 ms.
    with connection.cursor() as cursor:
        cursor.execute(_finish_sql(), _finish_params(run_id))
        status, holder_pid, total, done, errors, predictions, unparseable = cursor.fetchone()
    if status != Run.Status.RUNNING or holder_pid != holder.pid:
        return status  # cancelled, or taken over: no longer ours to finish
    if stop_status == Run.Status.STOPPED:
        message = f"stopped by {interrupt.reason} after {done} of {total} calls"
    elif stop_status == Run.Status.BUDGET_EXHAUSTED:
        message = "stopped: the budget would be exceeded"
    elif stop_status:
        message = ""
    elif errors:
        stop_status = Run.Status.FAILED
        message = f"{errors} call(s) failed; resume the run to retry them"
    else:
        # Every call came back: whether the run succeeded is for its answers to say.
        stop_status, message = run_outcome(
            run_id=run_id, counts=ParseCounts(predictions, unparseable)
        )
    if not _release(run_id, holder, status=stop_status, error=message):
        return Run.objects.get(pk=run_id).status
    return stop_status


def _finish_sql() -> str:
    """The run's status and holder, its done and failed calls, its predictions and
    the unparseable ones (``outcome.NOT_PARSED``); params from :func:`_finish_params`."""
    quote = connection.ops.quote_name
    calls, predictions = quote(RunCall._meta.db_table), quote(Prediction._meta.db_table)
    return (
        "SELECT status, lease_holder_pid, total_calls, "
        f"(SELECT COUNT(*) FROM {calls} WHERE run_id = %s AND status = %s), "
        f"(SELECT COUNT(*) FROM {calls} WHERE run_id = %s AND status = %s), "
        f"(SELECT COUNT(*) FROM {predictions} WHERE run_id = %s), "
        f"(SELECT COUNT(*) FROM {predictions} WHERE run_id = %s "
        f"AND parse_status IN ({', '.join(['%s'] * len(NOT_PARSED))})) "
        f"FROM {quote(Run._meta.db_table)} WHERE id = %s"
    )


def _finish_params(run_id: int) -> list:
    done, error = RunCall.Status.DONE, RunCall.Status.ERROR
    return [run_id, done, run_id, error, run_id, run_id, *NOT_PARSED, run_id]


# --- preparing calls: a pipeline's chained prompts before its units ----------------------


class _PrepareStopped(Exception):
    """The run must stop while a pipeline prepares (interrupt or lost lease)."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


class _PrepareCaller:
    """The engine side of :class:`~modeling.pipelines.base.PrepareSteps`.

    Calls go through :func:`run_direct_calls` (cache, budget, counters; a call done
    before is returned as it is, so a resumed run repeats nothing): one at a time when
    a prompt depends on the previous reply, together (``call_many``, up to the
    backend's ``max_concurrency``) when the pipeline says they do not. Between calls it
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
        return self.call_many([Step(key=key, messages=messages, temperature=temperature)])[0]

    def call_many(self, steps: list[Step]) -> list[str]:
        if not steps:
            return []
        if self._lease is None:
            self._lease = _Lease(self.run.pk)
        self._lease.renew_if_due()
        if self._lease.lost:
            raise _PrepareStopped(Run.Status.CANCELLED)
        if self.interrupt.requested.is_set():
            raise _PrepareStopped(Run.Status.STOPPED)
        calls = run_direct_calls(
            run=self.run,
            requests=[
                DirectRequest(
                    unit_key=step.key,
                    messages=step.messages,
                    params=None if step.temperature is None else {"temperature": step.temperature},
                )
                for step in steps
            ],
        )
        if self.on_progress is not None:
            counts = Run.objects.values("total_calls", "done_calls", "error_calls").get(
                pk=self.run.pk
            )
            self.on_progress(
                RunProgress(
                    self.run.pk, counts["total_calls"], counts["done_calls"], counts["error_calls"]
                )
            )
        return [call.raw_output for call in calls]
