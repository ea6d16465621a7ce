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

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from common.queueing import job_tasks_register
from common.tasks import task_send_on_commit

from ..backends import ChatRequest
from ..backends.token_count import prompt_token_counter
from ..models import Backend, Prediction, PromptTemplate, Run, RunCall
from ..pipelines import get_pipeline
from .leases import _RELEASED, RunLeased, _holder_gone
from .prompt_templates import active_template
from .recording import NO_CACHE

logger = logging.getLogger(__name__)

# Run.params key marking a run whose calls its caller makes one by one with
# run_direct_call (a DynToM generation job: each prompt depends on the last reply), so
# the engine never executes, requeues or resumes it.
DIRECT_CALLS = "direct_calls"

RUN_TASK_NAME = "modeling.run_model"
# CELERY_TASK_ROUTES sends "modeling.tasks.train_*" to the "gpu" queue.
TRAIN_TASK_NAME = "modeling.tasks.train_baseline"
job_tasks_register("modeling.run", RUN_TASK_NAME, TRAIN_TASK_NAME, page="modeling:run-detail")


def _resolve(
    *,
    benchmark: str,
    method: str,
    backend: Backend,
    selection: dict[str, Any],
    params: dict[str, Any] | None,
    template: PromptTemplate | None,
) -> tuple[Any, PromptTemplate, dict[str, Any], dict[str, Any], str]:
    pipeline = get_pipeline(benchmark)
    if method not in pipeline.methods:
        raise ValueError(
            f"method {method!r} is not one of {', '.join(pipeline.methods)} for {benchmark}"
        )
    # Checked first: the default template may depend on it (a generic run's language).
    selection = pipeline.clean_selection(selection=dict(selection or {}))
    template = template or active_template(
        pipeline.template_name(method=method, selection=selection)
    )
    merged = {**pipeline.default_params, "samples": 1, **(params or {})}
    # Run options (k shots, name perturbation, ablations) are the pipeline's to check.
    options = pipeline.clean_options(method=method, options=dict(merged.pop("options", None) or {}))
    if options:
        merged["options"] = options
    samples = int(merged["samples"])
    if samples < 1:
        raise ValueError("samples must be at least 1")
    # Stored only when set, so the parameters of an ordinary run read as before.
    if merged.pop(NO_CACHE, False):
        merged[NO_CACHE] = True
    model = merged.pop("model", None) or backend.default_model or backend.model_path
    if not model:
        raise ValueError(f"backend {backend.name} has no default model; pass a model")
    return pipeline, template, merged, selection, model


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
    _, template, merged, selection, model = _resolve(
        benchmark=benchmark,
        method=method,
        backend=backend,
        selection=selection,
        params=params,
        template=template,
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
    name = TRAIN_TASK_NAME if run.kind == Run.Kind.TRAINED else RUN_TASK_NAME
    task_send_on_commit(name, (run.pk,), queue=run_queue(run))


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
    pipeline, template, merged, selection, model = _resolve(
        benchmark=benchmark,
        method=method,
        backend=backend,
        selection=selection,
        params=params,
        template=template,
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


def run_resume(*, run_id: int, enqueue: bool = True, send_again: bool = False) -> Run:
    """Make a stopped, failed or orphaned run runnable again; done calls are not repeated.

    ``send_again`` ("send again, do not use the cache") marks the run so that it takes
    no reply from the cache from now on (``Run.params["no_cache"]``) and reopens the
    calls whose replies came from the cache, so they are asked again; the replies the
    run got from the model itself stay. A succeeded run is left as it is.

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
        if send_again:
            _run_send_again(run)
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


def _run_send_again(run: Run) -> None:
    """Mark ``run`` as sending again and reopen its calls answered from the cache.

    Their predictions go (the fresh replies make new ones) and the run's counters drop
    what those calls had added, so the totals count each call once. Called under the
    run's row lock, by :func:`run_resume` only: a run is never executing here.
    """
    if run.kind == Run.Kind.TRAINED:
        raise ValueError("a trained baseline makes no model calls to send again")
    run.params = {**run.params, NO_CACHE: True}
    run.save(update_fields=["params"])
    cached = RunCall.objects.filter(
        run=run,
        from_cache=True,
        status__in=[RunCall.Status.RECEIVED, RunCall.Status.DONE],
    )
    used = cached.aggregate(
        prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"), cost=Sum("cost")
    )
    done = cached.filter(status=RunCall.Status.DONE).count()
    Prediction.objects.filter(call__in=cached).delete()
    reopened = cached.update(
        status=RunCall.Status.PENDING,
        from_cache=False,
        raw_output="",
        finish_reason="",
        prompt_tokens=0,
        completion_tokens=0,
        cost=Decimal(0),
        latency_ms=0,
        error="",
        finished_at=None,
    )
    if reopened:
        Run.objects.filter(pk=run.pk).update(
            done_calls=F("done_calls") - done,
            prompt_tokens=F("prompt_tokens") - (used["prompt"] or 0),
            completion_tokens=F("completion_tokens") - (used["completion"] or 0),
            cost=F("cost") - (used["cost"] or Decimal(0)),
        )
        run.refresh_from_db(fields=["done_calls", "prompt_tokens", "completion_tokens", "cost"])


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
