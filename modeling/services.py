"""The run engine: create runs, execute them resumably, cancel and resume them.

Execution is driven by :class:`RunCall` rows (one per prompt x sample). A call's
response is written to the cache, its predictions and its "done" mark in one
transaction as soon as it arrives, so a run killed at any point resumes by simply
executing again: done calls are skipped, paid responses come from the cache, and
unique constraints stop duplicate predictions.
"""

from __future__ import annotations

import logging
import queue as queue_module
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from .llm import BackendError, ChatBackend, ChatRequest, ChatResult, get_backend
from .models import Backend, CachedResponse, Prediction, PromptTemplate, Run, RunCall
from .pipelines import CallUnit, get_pipeline
from .prompts import DEFAULT_TEMPLATES

logger = logging.getLogger(__name__)

ProgressHook = Callable[[int], None]

# Sampling parameters sent to backends; everything else in Run.params is engine-only.
_SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop")


def _lease_seconds() -> int:
    return int(getattr(settings, "MODELING_RUN_LEASE_S", 60))


@transaction.atomic
def prompt_templates_ensure_defaults() -> int:
    """Create the default templates (name + version) that do not exist yet; returns how many."""
    created = 0
    for spec in DEFAULT_TEMPLATES:
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
    """The Celery queue a run goes to: local models need a GPU worker (SPEC: scale-out)."""
    if run.backend is not None and run.backend.kind == Backend.Kind.TRANSFORMERS:
        return "gpu"
    return "default"


def _enqueue(run: Run) -> None:
    queue = run_queue(run)

    def send() -> None:
        from .tasks import run_model_task

        run_model_task.apply_async((run.pk,), queue=queue)

    transaction.on_commit(send)


@dataclass
class RunPlan:
    calls: int
    units: int
    samples: int
    estimated_prompt_tokens: int
    max_completion_tokens: int
    first_messages: list[dict[str, str]]
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
    units = pipeline.build_units(selection=selection, template=template)
    samples = int(merged["samples"])
    tokens = sum(
        ChatRequest.build(u.messages, model=model, params={}).estimated_prompt_tokens()
        for u in units
    )
    return RunPlan(
        calls=len(units) * samples,
        units=len(units),
        samples=samples,
        estimated_prompt_tokens=tokens * samples,
        max_completion_tokens=int(merged.get("max_tokens") or 0) * len(units) * samples,
        first_messages=units[0].messages if units else [],
        template=template,
        model=model,
    )


def run_cancel(*, run_id: int) -> Run:
    """Stop a run after the calls in flight; finished runs are left as they are."""
    Run.objects.filter(pk=run_id).exclude(status__in=Run.FINISHED).update(
        status=Run.Status.CANCELLED, finished_at=timezone.now()
    )
    return Run.objects.get(pk=run_id)


def run_resume(*, run_id: int) -> Run:
    """Queue a stopped, failed or orphaned run again; done calls are not repeated."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.imported:
            raise ValueError("imported runs have nothing to resume")
        if run.status == Run.Status.SUCCEEDED:
            return run
        if run.status != Run.Status.RUNNING:
            run.status = Run.Status.QUEUED
            run.error = ""
            run.finished_at = None
            run.save(update_fields=["status", "error", "finished_at"])
        _enqueue(run)
    return run


def runs_requeue_orphaned() -> list[int]:
    """Queue every run a dead worker left behind; called when a worker starts.

    A worker killed mid-run loses its task message with brokers that do not redeliver
    (kombu's filesystem transport deletes a message when it is fetched; Redis waits
    for its visibility timeout). Queued runs and runs still marked running are sent
    again: a live worker's lease makes the duplicate wait, then skip.
    """
    runs = list(
        Run.objects.filter(imported=False, status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
        .select_related("backend")
        .order_by("pk")
    )
    for run in runs:
        _enqueue(run)
    return [run.pk for run in runs]


class RunLeased(Exception):
    """Another worker holds the run; retry after ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"run leased for {seconds:.0f}s more")
        self.seconds = seconds


def _claim(run_id: int) -> Run | None:
    """Take the run with one conditional UPDATE; a live lease elsewhere raises RunLeased."""
    now = timezone.now()
    lease = now + timedelta(seconds=_lease_seconds())
    claimed = (
        Run.objects.filter(pk=run_id)
        .filter(
            Q(status=Run.Status.QUEUED)
            | Q(status=Run.Status.RUNNING, lease_expires_at__lt=now)
            | Q(status=Run.Status.RUNNING, lease_expires_at__isnull=True)
        )
        .update(status=Run.Status.RUNNING, lease_expires_at=lease, started_at=now)
    )
    run = Run.objects.select_related("backend", "template").get(pk=run_id)
    if claimed:
        return run
    if run.status == Run.Status.RUNNING and run.lease_expires_at:
        raise RunLeased(max(1.0, (run.lease_expires_at - now).total_seconds()))
    return None


def _renew_lease(run_id: int) -> bool:
    """Extend the lease; False when the run was cancelled meanwhile."""
    lease = timezone.now() + timedelta(seconds=_lease_seconds())
    return bool(
        Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(lease_expires_at=lease)
    )


def _cost(backend: Backend, prompt_tokens: int, completion_tokens: int) -> Decimal:
    return (
        Decimal(prompt_tokens) * backend.price_input_per_1k
        + Decimal(completion_tokens) * backend.price_output_per_1k
    ) / Decimal(1000)


def _request_for(run: Run, unit: CallUnit, sample_index: int) -> ChatRequest:
    params = {k: run.params[k] for k in _SAMPLING_KEYS if k in run.params}
    if params.get("seed") is not None:
        # One seed for every sample would make "3 samples" one sample three times.
        params["seed"] = int(params["seed"]) + sample_index
    return ChatRequest.build(
        unit.messages, model=run.model, params=params, sample_index=sample_index
    )


def _record_result(
    *,
    run: Run,
    pipeline,
    call: RunCall,
    unit: CallUnit,
    request: ChatRequest,
    result: ChatResult,
    from_cache: bool,
) -> None:
    """Cache the response, store the predictions and mark the call done, atomically."""
    cache_key = request.cache_key(run.backend.name)
    cost = (
        Decimal(0)
        if from_cache
        else _cost(run.backend, result.prompt_tokens, result.completion_tokens)
    )
    parsed = pipeline.parse(unit=unit, text=result.text)
    share = max(1, len(parsed))
    template_version = f"{run.template.name} v{run.template.version}" if run.template else ""
    predictions = [
        Prediction(
            run=run,
            call=call,
            sample_index=call.sample_index,
            **{f"{pipeline.item_field}_id": item.item_id},
            # The reply is stored once, on the call (see Prediction.raw_output).
            raw_output="",
            parsed_answer=item.parsed_answer,
            parse_status=item.parse_status,
            correct=item.correct,
            details=item.details or {},
            template_version=template_version,
            model=run.model,
            params=run.params,
            prompt_tokens=result.prompt_tokens // share,
            completion_tokens=result.completion_tokens // share,
            latency_ms=result.latency_ms,
        )
        for item in parsed
    ]
    with transaction.atomic():
        if not from_cache:
            try:
                with transaction.atomic():
                    CachedResponse.objects.create(
                        key=cache_key,
                        backend_name=run.backend.name,
                        model=run.model,
                        request=request.as_json(),
                        text=result.text,
                        finish_reason=result.finish_reason,
                        prompt_tokens=result.prompt_tokens,
                        completion_tokens=result.completion_tokens,
                        latency_ms=result.latency_ms,
                    )
            except IntegrityError:
                pass  # a concurrent run paid for the same request first
        Prediction.objects.bulk_create(predictions, ignore_conflicts=True)
        updated = (
            RunCall.objects.filter(pk=call.pk)
            .exclude(status=RunCall.Status.DONE)
            .update(
                status=RunCall.Status.DONE,
                cache_key=cache_key,
                from_cache=from_cache,
                raw_output=result.text,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                cost=cost,
                latency_ms=result.latency_ms,
                error="",
                finished_at=timezone.now(),
            )
        )
        if updated:
            # Cached calls cost nothing now; tokens still count, as the run used them.
            Run.objects.filter(pk=run.pk).update(
                done_calls=F("done_calls") + 1,
                prompt_tokens=F("prompt_tokens") + result.prompt_tokens,
                completion_tokens=F("completion_tokens") + result.completion_tokens,
                cost=F("cost") + cost,
            )
            run.prompt_tokens += result.prompt_tokens
            run.completion_tokens += result.completion_tokens
            run.cost += cost


def _record_error(*, run: Run, call: RunCall, error: Exception) -> None:
    message = str(error)[:2000]
    with transaction.atomic():
        RunCall.objects.filter(pk=call.pk).update(
            status=RunCall.Status.ERROR, error=message, finished_at=timezone.now()
        )
        Run.objects.filter(pk=run.pk).update(error_calls=F("error_calls") + 1)
    logger.warning("run %s call %s failed: %s", run.pk, call.unit_key, message)


def _ensure_calls(run: Run, units: list[CallUnit]) -> dict[tuple[str, int], RunCall]:
    samples = int(run.params.get("samples", 1))
    wanted = [(u.key, s) for u in units for s in range(samples)]
    RunCall.objects.bulk_create(
        [RunCall(run=run, unit_key=k, sample_index=s) for k, s in wanted],
        ignore_conflicts=True,
    )
    calls = {(c.unit_key, c.sample_index): c for c in RunCall.objects.filter(run=run)}
    Run.objects.filter(pk=run.pk).update(
        total_calls=len(wanted),
        done_calls=sum(1 for c in calls.values() if c.status == RunCall.Status.DONE),
        # Errors from an earlier attempt are retried, so they no longer count.
        error_calls=0,
    )
    return calls


def run_execute(*, run_id: int, on_progress: ProgressHook | None = None) -> str:
    """Execute (or resume) a run. Returns the final status, or "skipped".

    ``on_progress(run_id)`` is called after every finished call (the CLI prints from it).
    Raises :class:`RunLeased` when another live worker holds the run.
    """
    run = _claim(run_id)
    if run is None:
        return "skipped"
    try:
        return _execute(run, on_progress or (lambda run_id: None))
    except Exception as exc:
        logger.exception("run %s crashed", run.pk)
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:2000],
            finished_at=timezone.now(),
            lease_expires_at=None,
        )
        return Run.Status.FAILED


def _execute(run: Run, on_progress: ProgressHook) -> str:
    pipeline = get_pipeline(run.benchmark)
    units = pipeline.build_units(selection=run.selection, template=run.template)
    order = {u.key: i for i, u in enumerate(units)}
    by_key = {u.key: u for u in units}
    calls = _ensure_calls(run, units)
    pending = [
        c for c in calls.values() if c.status != RunCall.Status.DONE and c.unit_key in by_key
    ]
    pending.sort(key=lambda c: (order[c.unit_key], c.sample_index))
    requests = {c.pk: _request_for(run, by_key[c.unit_key], c.sample_index) for c in pending}
    RunCall.objects.filter(pk__in=[c.pk for c in pending]).update(
        status=RunCall.Status.PENDING, error=""
    )

    # Responses already paid for (by this run before a crash, or by any earlier run).
    def record(call: RunCall, outcome: ChatResult | BackendError, from_cache: bool = False) -> None:
        if isinstance(outcome, BackendError):
            _record_error(run=run, call=call, error=outcome)
        else:
            _record_result(
                run=run,
                pipeline=pipeline,
                call=call,
                unit=by_key[call.unit_key],
                request=requests[call.pk],
                result=outcome,
                from_cache=from_cache,
            )
        on_progress(run.pk)

    keys = {pk: r.cache_key(run.backend.name) for pk, r in requests.items()}
    cached = {c.key: c for c in CachedResponse.objects.filter(key__in=set(keys.values()))}
    to_call: list[RunCall] = []
    for call in pending:
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
        record(call, result, from_cache=True)

    stop_status = ""
    if to_call:
        backend = get_backend(run.backend)
        lease = _Lease(run.pk)
        try:
            if type(backend).complete_many is not ChatBackend.complete_many:
                stop_status = _call_in_batches(run, backend, to_call, requests, lease, record)
            else:
                stop_status = _call_sliding(run, backend, to_call, requests, lease, record)
        finally:
            backend.close()
    return _finish(run.pk, stop_status)


def _estimate(run: Run, request: ChatRequest) -> tuple[int, Decimal]:
    """Tokens and cost a call may use: its prompt plus, when capped, the longest reply."""
    prompt = request.estimated_prompt_tokens()
    completion = int(run.params.get("max_tokens") or 0)
    return prompt + completion, _cost(run.backend, prompt, completion)


def _would_exceed(run: Run, tokens: int, cost: Decimal) -> bool:
    """True when spending ``tokens``/``cost`` more would break the run's budget."""
    used = run.prompt_tokens + run.completion_tokens
    if run.budget_tokens is not None and used + tokens > run.budget_tokens:
        return True
    return run.budget_cost is not None and run.cost + cost > run.budget_cost


def _call_sliding(run, backend, to_call, requests, lease, record) -> str:
    """Keep ``max_concurrency`` calls in flight; check budget and cancellation before each.

    A sliding window rather than fixed batches: one slow reply does not hold back the
    others, so throughput stays near concurrency / latency.
    """
    limit = max(1, run.backend.max_concurrency)
    queue = list(reversed(to_call))
    in_flight: dict[Future, tuple[RunCall, int, Decimal]] = {}
    reserved_tokens, reserved_cost = 0, Decimal(0)
    stop_status = ""
    with ThreadPoolExecutor(max_workers=limit, thread_name_prefix=f"run{run.pk}") as pool:
        while queue or in_flight:
            while queue and len(in_flight) < limit and not stop_status:
                if lease.cancelled:
                    stop_status = Run.Status.CANCELLED
                    break
                call = queue[-1]
                tokens, cost = _estimate(run, requests[call.pk])
                if _would_exceed(run, reserved_tokens + tokens, reserved_cost + cost):
                    stop_status = Run.Status.BUDGET_EXHAUSTED
                    break
                queue.pop()
                reserved_tokens += tokens
                reserved_cost += cost
                future = pool.submit(_complete, backend, requests[call.pk])
                in_flight[future] = (call, tokens, cost)
            if stop_status:
                queue.clear()
            if not in_flight:
                break
            # Wake up at least once per renewal interval, even while every call is slow.
            done, _ = wait(in_flight, timeout=lease.interval, return_when=FIRST_COMPLETED)
            lease.renew_if_due()
            for future in done:
                call, tokens, cost = in_flight.pop(future)
                reserved_tokens -= tokens
                reserved_cost -= cost
                record(call, future.result())
    return stop_status


def _complete(backend: ChatBackend, request: ChatRequest) -> ChatResult | BackendError:
    try:
        return backend.complete(request)
    except BackendError as exc:
        return exc
    except Exception as exc:  # a backend bug must fail this call, not the whole run
        logger.exception("backend %s crashed", backend.name)
        return BackendError(f"{type(exc).__name__}: {exc}")


def _call_in_batches(run, backend, to_call, requests, lease, record) -> str:
    """For backends that batch themselves (local transformers): a batch at a time.

    Generation runs in a helper thread so this one can keep renewing the lease while a
    long batch is on the GPU.
    """
    chunk = max(1, run.backend.max_concurrency)
    for start in range(0, len(to_call), chunk):
        batch = to_call[start : start + chunk]
        if lease.cancelled:
            return Run.Status.CANCELLED
        estimates = [_estimate(run, requests[c.pk]) for c in batch]
        if _would_exceed(
            run, sum(t for t, _ in estimates), sum((c for _, c in estimates), Decimal(0))
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
                request, outcome = outcomes.get(timeout=lease.interval)
            except queue_module.Empty:
                lease.renew_if_due()
                if not worker.is_alive() and outcomes.empty():
                    # The backend yielded fewer results than requests: fail the rest.
                    for call in by_request.values():
                        if call.pk not in recorded:
                            record(call, BackendError("the backend returned no result"))
                    break
                continue
            received += 1
            recorded.add(by_request[request].pk)
            record(by_request[request], outcome)
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


class _Lease:
    """The run's lease, renewed from the executing thread while calls are in flight.

    A call can take longer than the lease (a long chain-of-thought reply), so renewing
    only between calls would let a second worker take over a live run and pay twice;
    the waits above therefore time out every ``interval``. Renewing from this thread
    (not a heartbeat thread with its own connection) keeps it on the connection that
    owns the run. A failed renewal means the run was cancelled (no longer running).
    """

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.interval = max(0.5, _lease_seconds() / 3)
        self.cancelled = False
        self._renewed_at = 0.0
        self.renew_if_due()

    def renew_if_due(self) -> None:
        now = time.monotonic()
        if self.cancelled or now - self._renewed_at < self.interval:
            return
        self._renewed_at = now
        self.cancelled = not _renew_lease(self.run_id)


def _finish(run_id: int, stop_status: str) -> str:
    run = Run.objects.get(pk=run_id)
    if run.status == Run.Status.CANCELLED:
        return run.status
    errors = RunCall.objects.filter(run_id=run_id, status=RunCall.Status.ERROR).count()
    if stop_status:
        status = stop_status
        message = (
            "stopped: the budget would be exceeded"
            if stop_status == Run.Status.BUDGET_EXHAUSTED
            else ""
        )
    elif errors:
        status = Run.Status.FAILED
        message = f"{errors} call(s) failed; resume the run to retry them"
    else:
        status = Run.Status.SUCCEEDED
        message = ""
    Run.objects.filter(pk=run_id).update(
        status=status, error=message, finished_at=timezone.now(), lease_expires_at=None
    )
    return status
