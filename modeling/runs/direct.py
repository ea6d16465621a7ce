"""Direct calls: runs whose caller makes one prompt at a time (a DynToM generation job,
where each prompt depends on the last reply), recorded like any other run's calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from ..backends import BackendError, ChatRequest, ChatResult, get_backend
from ..backends.secrets import mask_secrets
from ..models import Backend, CachedResponse, Run, RunCall
from ..pipelines import CallUnit
from .recording import _Budget, _cost, _estimate, _request_for, sends_again
from .services import DIRECT_CALLS
from .signals import run_finished

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


@dataclass(frozen=True)
class DirectRequest:
    """One prompt of :func:`run_direct_calls`."""

    unit_key: str
    messages: list[dict[str, str]]
    sample_index: int = 0
    params: dict[str, Any] | None = None


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
    :class:`RunBudgetExceeded`, or :class:`~modeling.backends.BackendError` after marking
    the call ``error``; its text has the backend's secrets masked (servers echo the key
    they were sent), so callers may store and show it. ``params`` overrides the run's
    sampling parameters for this call (ToMPro's stage 1 samples at a temperature of its own).
    """
    request = DirectRequest(unit_key, messages, sample_index, params)
    return run_direct_calls(run=run, requests=[request])[0]


@dataclass
class _Direct:
    call: RunCall
    request: ChatRequest
    cache_key: str
    hit: CachedResponse | None


def run_direct_calls(*, run: Run, requests: list[DirectRequest]) -> list[RunCall]:
    """:func:`run_direct_call` for prompts that do not depend on each other's replies,
    up to the backend's ``max_concurrency`` in flight at once; the done RunCalls in the
    order asked.

    The database work (the call rows, the cache, the budget, recording) stays on this
    thread; request threads only wait on the backend. Each reply is recorded as it
    arrives, before any other counts, so a crash loses none that came back. Calls that
    would break the budget are not sent: those that fit are, then
    :class:`RunBudgetExceeded` is raised. A failed call is marked ``error`` and, once
    every other call is back and recorded, the first failure is raised.
    """
    done: dict[int, RunCall] = {}
    todo: list[tuple[int, _Direct]] = []
    for position, asked in enumerate(requests):
        call, created = RunCall.objects.get_or_create(
            run=run, unit_key=asked.unit_key, sample_index=asked.sample_index
        )
        if call.status == RunCall.Status.DONE:
            done[position] = call
            continue
        if created:
            Run.objects.filter(pk=run.pk).update(total_calls=F("total_calls") + 1)
        unit = CallUnit(key=asked.unit_key, messages=asked.messages, item_ids=[])
        request = _request_for(run, unit, asked.sample_index, asked.params)
        cache_key = request.cache_key(run.backend.name)
        hit = None if sends_again(run) else CachedResponse.objects.filter(key=cache_key).first()
        todo.append((position, _Direct(call, request, cache_key, hit)))
    for position, item in todo:
        if item.hit is not None:
            done[position] = _direct_record(run, item, _cached_result(item.hit), Decimal(0))
    to_send = [(position, item) for position, item in todo if item.hit is None]
    over_budget = False
    if to_send:
        run.refresh_from_db(fields=["prompt_tokens", "completion_tokens", "cost"])
        budget = _Budget(run)
        fits = []
        for position, item in to_send:
            tokens, cost = _estimate(run, item.request)
            if budget.would_exceed(tokens, cost):
                over_budget = True
                break
            budget.reserved_tokens += tokens
            budget.reserved_cost += cost
            fits.append((position, item))
        failure = _direct_send(run, fits, done)
        if failure is not None:
            raise failure
    if over_budget:
        raise RunBudgetExceeded(f"run {run.pk}: the next call could exceed the budget")
    return [done[position] for position in range(len(requests))]


def _cached_result(hit: CachedResponse) -> ChatResult:
    return ChatResult(
        text=hit.text,
        prompt_tokens=hit.prompt_tokens,
        completion_tokens=hit.completion_tokens,
        latency_ms=hit.latency_ms,
        finish_reason=hit.finish_reason,
    )


def _direct_send(
    run: Run, items: list[tuple[int, _Direct]], done: dict[int, RunCall]
) -> BackendError | None:
    """Send ``items`` through one backend client, ``max_concurrency`` at a time, and
    record each reply as it comes; the first failure, masked, or None."""
    if not items:
        return None
    backend = get_backend(run.backend)
    failure: BackendError | None = None
    width = min(max(1, run.backend.max_concurrency), len(items))

    def replies() -> Iterator[tuple[int, _Direct, ChatResult | BackendError]]:
        if width == 1:  # one at a time, on this thread, as a single direct call always was
            for position, item in items:
                try:
                    yield position, item, backend.complete(item.request)
                except BackendError as exc:
                    yield position, item, exc
            return
        prefix = f"run{run.pk}-direct"
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix=prefix) as pool:
            futures = {
                pool.submit(backend.complete, item.request): (position, item)
                for position, item in items
            }
            for future in as_completed(futures):
                position, item = futures[future]
                try:
                    yield position, item, future.result()
                except BackendError as exc:
                    yield position, item, exc

    try:
        for position, item, result in replies():
            if isinstance(result, BackendError):
                masked = backend.mask(str(result))
                _direct_error(run, item.call, masked)
                if failure is None:
                    # A backend that did not mask its own error gets a masked copy.
                    failure = result if masked == str(result) else type(result)(masked)
                continue
            cost = _cost(run.backend, result.prompt_tokens, result.completion_tokens)
            # A run that sends again replaces the cached reply (see recording.NO_CACHE).
            replace = sends_again(run)
            CachedResponse.objects.bulk_create(
                [
                    CachedResponse(
                        key=item.cache_key,
                        backend_name=run.backend.name,
                        model=run.model,
                        request=item.request.as_json(),
                        text=result.text,
                        finish_reason=result.finish_reason[:30],
                        prompt_tokens=result.prompt_tokens,
                        completion_tokens=result.completion_tokens,
                        latency_ms=result.latency_ms,
                    )
                ],
                ignore_conflicts=not replace,
                update_conflicts=replace,
                unique_fields=["key"] if replace else None,
                update_fields=_CACHE_REPLACED if replace else None,
            )
            done[position] = _direct_record(run, item, result, cost)
    finally:
        backend.close()
    return failure


# What a fresh reply replaces in the cache row of its request.
_CACHE_REPLACED = [
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


def _direct_error(run: Run, call: RunCall, masked: str) -> None:
    was_error = call.status == RunCall.Status.ERROR
    RunCall.objects.filter(pk=call.pk).update(
        status=RunCall.Status.ERROR, error=masked[:2000], finished_at=timezone.now()
    )
    if not was_error:
        Run.objects.filter(pk=run.pk).update(error_calls=F("error_calls") + 1)


def _direct_record(run: Run, item: _Direct, result: ChatResult, cost: Decimal) -> RunCall:
    call = item.call
    with transaction.atomic():
        RunCall.objects.filter(pk=call.pk).update(
            status=RunCall.Status.DONE,
            cache_key=item.cache_key,
            from_cache=item.hit is not None,
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
    """End a direct-call run (succeeded, failed, budget_exhausted, …) unless it has ended.

    ``error`` is stored with every secret a backend of this process sent masked.
    """
    if (
        Run.objects.filter(pk=run_id)
        .exclude(status__in=Run.FINISHED)
        .update(status=status, error=mask_secrets(error)[:2000], finished_at=timezone.now())
    ):
        run_finished.send(sender=Run, run_id=run_id)
