"""Direct calls: runs whose caller makes one prompt at a time (a DynToM generation job,
where each prompt depends on the last reply), recorded like any other run's calls.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from ..backends import BackendError, ChatResult, get_backend
from ..backends.secrets import mask_secrets
from ..models import Backend, CachedResponse, Run, RunCall
from ..pipelines import CallUnit
from .recording import _Budget, _cost, _estimate, _request_for
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
            masked = backend.mask(str(exc))
            RunCall.objects.filter(pk=call.pk).update(
                status=RunCall.Status.ERROR, error=masked[:2000], finished_at=timezone.now()
            )
            if not was_error:
                Run.objects.filter(pk=run.pk).update(error_calls=F("error_calls") + 1)
            if masked != str(exc):  # a backend that did not mask its own error
                raise type(exc)(masked) from None
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
    """End a direct-call run (succeeded, failed, budget_exhausted, …) unless it has ended.

    ``error`` is stored with every secret a backend of this process sent masked.
    """
    if (
        Run.objects.filter(pk=run_id)
        .exclude(status__in=Run.FINISHED)
        .update(status=status, error=mask_secrets(error)[:2000], finished_at=timezone.now())
    ):
        run_finished.send(sender=Run, run_id=run_id)
