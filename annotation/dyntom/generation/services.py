"""Write operations of the annotation app: DynToM generation jobs and their stages.

A job's model calls go through the run engine (``modeling``): the job owns one
direct-call :class:`~modeling.models.Run` ("DynToM generation job N", method
``generate``), and every prompt is sent with :func:`modeling.runs.direct.run_direct_call`,
so the backend client and its retries, the response cache, the token budget and the
call records are the engine's, and the calls show at /runs/.

Each stage goes through four steps: (1) context sampled from the pools, relationship
by the LLM; (2) trajectory as JSON; (3) scenarios as JSON; (4) questions by code
(:mod:`annotation.dyntom.questions`). A reply that fails validation is answered with
the retry prompt carrying the error, up to ``TOMLAB_GENERATION_MAX_ATTEMPTS`` replies
per step; then the stage is marked ``needs_attention`` with the reason. A finished
stage waits for validation (``awaiting_validation``); :func:`generated_stage_keep`
publishes it into the item bank through the DynToM importer.

A running job is held under a lease, as a model run is (:mod:`modeling.runs.leases`):
the worker process (host, PID, start time) and an expiry, pushed forward at every call
and long enough to cover the call in flight. A job whose holder died on this host (the
envelope sweep sends its task again) or whose lease expired is taken over by the next
delivery of its task; :func:`generation_jobs_requeue_stale` sends the stale jobs no
envelope will bring back when a worker starts.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from benchmarks.importers.base import ImportDataError
from benchmarks.models import Benchmark, Work
from benchmarks.services import benchmark_import
from common.queueing import job_tasks_register, queued_job_waiting
from common.tasks import task_send_on_commit
from modeling.backends import BackendError
from modeling.models import Backend, PromptTemplate, Run
from modeling.runs.direct import (
    RunBudgetExceeded,
    run_direct_call,
    run_direct_create,
    run_direct_finish,
)
from modeling.runs.leases import (
    LEASE_RELEASED,
    LeaseHeld,
    LeaseHolder,
    call_lease,
    holder_gone,
    lease_claim,
    lease_renew,
)

from ...models import MAX_SCENARIOS, MIN_SCENARIOS, GeneratedStage, GenerationJob
from ..questions import questions_from_trajectory, read_trajectory, stage_rng
from .context import characters_information, context_sample
from .prompts import active_generation_templates
from .replies import (
    MAX_ROUNDS,
    MIN_ROUNDS,
    ReplyInvalid,
    relationship_from_reply,
    scenarios_from_reply,
    scenarios_shape,
    trajectory_from_reply,
    trajectory_shape,
)
from .story import stage_story

logger = logging.getLogger(__name__)

RUN_BENCHMARK = "dyntom-gen"  # not a Benchmark value: reports never list these runs
RUN_METHOD = "generate"
# Paper Appendix A: the authors generated at temperature 0 with up to 4,096 tokens.
DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 4096}

GENERATION_TASK_NAME = "annotation.generation_job"
job_tasks_register(
    "annotation.generationjob", GENERATION_TASK_NAME, page="annotation:generation-job"
)
# The lease of a running job between calls; every call pushes it forward, and a call
# in flight holds it for as long as that call may take (see _ask).
JOB_LEASE = timedelta(minutes=5)


def _max_attempts() -> int:
    return max(1, int(getattr(settings, "TOMLAB_GENERATION_MAX_ATTEMPTS", 3)))


class StepFailed(Exception):
    """A step that could not produce a valid value; the stage needs attention."""


class JobLost(Exception):
    """Another worker took the job over (this one was taken for dead): stop, finish nothing."""


def _jobs(job_id: int):
    return GenerationJob.objects.filter(pk=job_id, status=GenerationJob.Status.RUNNING)


def _job_hold(job: GenerationJob, lease: timedelta = JOB_LEASE) -> None:
    """Renew this process's lease on the job for ``lease``; :class:`JobLost` if not ours."""
    if not lease_renew(_jobs(job.pk), holder=LeaseHolder.current(), lease=lease):
        raise JobLost(f"generation job {job.pk} was taken over")


# --- creating and running jobs --------------------------------------------------------


@transaction.atomic
def generation_job_create(
    *,
    backend: Backend,
    stage_count: int = 1,
    scenario_count: int = 5,
    seed: int = 0,
    model: str = "",
    params: dict[str, Any] | None = None,
    budget_tokens: int | None = None,
    created_by=None,
    enqueue: bool = True,
) -> GenerationJob:
    """Record a job with the active template versions and, once committed, queue it."""
    if not MIN_SCENARIOS <= scenario_count <= MAX_SCENARIOS:
        raise ValueError(
            f"scenario_count is {scenario_count}; allowed {MIN_SCENARIOS} to {MAX_SCENARIOS}"
        )
    if stage_count < 1:
        raise ValueError(f"stage_count is {stage_count}; at least 1")
    model = model or backend.default_model or backend.model_path
    if not model:
        raise ValueError(f"backend {backend.name} has no default model; pass a model")
    templates = active_generation_templates()
    job = GenerationJob.objects.create(
        backend=backend,
        model=model,
        params={**DEFAULT_PARAMS, **(params or {})},
        relationship_template=templates["relationship"],
        trajectory_template=templates["trajectory"],
        scenarios_template=templates["scenarios"],
        retry_template=templates["retry"],
        stage_count=stage_count,
        scenario_count=scenario_count,
        seed=seed,
        budget_tokens=budget_tokens,
        progress_total=stage_count * GenerationJob.STEPS_PER_STAGE,
        created_by=created_by,
    )
    if enqueue:
        task_send_on_commit(GENERATION_TASK_NAME, (job.pk,), queue="default")
    return job


def generation_job_run(*, job_id: int) -> str:
    """Claim a job under a lease and generate its stages; returns its status.

    A job left running by a worker that is gone (dead on this host, or its lease
    expired) is taken over when its task is delivered again; stages and steps already
    done are kept, and calls already answered come back from their RunCall rows, so
    nothing is asked twice. ``"skipped"`` when the job is finished, or another process
    on this host runs it; raises :class:`~modeling.runs.leases.LeaseHeld` when a worker
    on another host holds it (the task tries again when that lease would expire).
    """
    try:
        claimed = lease_claim(
            GenerationJob.objects.filter(pk=job_id),
            free=Q(status=GenerationJob.Status.QUEUED),
            held=Q(status=GenerationJob.Status.RUNNING),
            lease=JOB_LEASE,
            what=f"generation job {job_id}",
            status=GenerationJob.Status.RUNNING,
            started_at=timezone.now(),
        )
    except LeaseHeld as exc:
        if not exc.local:
            raise
        logger.info("%s; skipped", exc)
        return "skipped"
    if not claimed:
        return "skipped"
    job = GenerationJob.objects.select_related(
        "backend",
        "run",
        "relationship_template",
        "trajectory_template",
        "scenarios_template",
        "retry_template",
    ).get(pk=job_id)
    try:
        if job.run is None:
            job.run = run_direct_create(
                name=f"DynToM generation job {job.pk}",
                benchmark=RUN_BENCHMARK,
                method=RUN_METHOD,
                backend=job.backend,
                model=job.model,
                params=job.params,
                budget_tokens=job.budget_tokens,
                created_by=job.created_by,
            )
            job.save(update_fields=["run"])
        for index in range(1, job.stage_count + 1):
            stage, _ = GeneratedStage.objects.get_or_create(
                job=job,
                index=index,
                defaults={
                    "scenario_count": job.scenario_count,
                    "model": job.model,
                    "template_versions": job.template_versions(),
                },
            )
            if stage.status == GeneratedStage.Status.GENERATING:
                _generate_stage(job, stage)
    except JobLost:
        logger.warning("generation job %s was taken over by another worker", job.pk)
        return "skipped"
    except RunBudgetExceeded as exc:
        return _job_finish(
            job, GenerationJob.Status.FAILED, f"stopped: {exc}", Run.Status.BUDGET_EXHAUSTED
        )
    except Exception as exc:
        logger.exception("generation job %s crashed", job.pk)
        return _job_finish(
            job, GenerationJob.Status.FAILED, f"{type(exc).__name__}: {exc}", Run.Status.FAILED
        )
    return _job_finish(job, *_job_outcome(job))


def _job_outcome(job: GenerationJob) -> tuple[str, str, str]:
    """How a job that ran to the end ended: (job status, error, run status).

    Every reply answered is not success: a job none of whose stages passed validation
    generated nothing, and says so; its run, whose replies were all unusable, fails.
    """
    stages = GeneratedStage.objects.filter(job=job)
    usable = stages.filter(status__in=GeneratedStage.USABLE).count()
    if usable:
        return GenerationJob.Status.SUCCEEDED, "", Run.Status.SUCCEEDED
    total = stages.count()
    attention = stages.filter(status=GeneratedStage.Status.NEEDS_ATTENTION).count()
    error = (
        f"no usable stage: {attention} of {total} "
        f"{'stage needs' if attention == 1 else 'stages need'} attention"
    )
    return GenerationJob.Status.NEEDS_ATTENTION, error, Run.Status.FAILED


def _job_finish(job: GenerationJob, status: str, error: str, run_status: str) -> str:
    _progress(job)
    holder = LeaseHolder.current()
    finished = (
        _jobs(job.pk)
        .filter(lease_holder_host=holder.host, lease_holder_pid=holder.pid)
        .update(status=status, error=error[:4000], finished_at=timezone.now(), **LEASE_RELEASED)
    )
    if not finished:
        logger.warning("generation job %s was taken over; this worker leaves it", job.pk)
        return "skipped"
    if job.run_id:
        run_direct_finish(run_id=job.run_id, status=run_status, error=error)
    return status


def _progress(job: GenerationJob) -> None:
    """Write the job's progress: steps done over all stages (a stopped stage counts 4)."""
    done = 0
    for stage in GeneratedStage.objects.filter(job=job).only(
        "status", "relationship", "trajectory", "scenarios", "questions"
    ):
        if stage.status != GeneratedStage.Status.GENERATING:
            done += GenerationJob.STEPS_PER_STAGE
        else:
            done += sum(
                bool(v)
                for v in (stage.relationship, stage.trajectory, stage.scenarios, stage.questions)
            )
    GenerationJob.objects.filter(pk=job.pk).update(progress_done=done)


def generation_jobs_requeue_stale() -> list[int]:
    """Send again every running job whose holder is gone and whose envelope will not bring
    it back; called when a worker starts.

    A job whose holder died on this host has its envelope sent again by the sweep (which
    runs first, on the same signal): that envelope waits, and the job is left to it. A
    job whose lease expired (its worker died on another host, or before the envelopes)
    has no one to send it: it is queued here, and its claim takes it over.
    """
    sent = []
    running = GenerationJob.objects.filter(status=GenerationJob.Status.RUNNING).order_by("pk")
    for job in running:
        if holder_gone(job) and queued_job_waiting(GENERATION_TASK_NAME, (job.pk,)) is None:
            task_send_on_commit(GENERATION_TASK_NAME, (job.pk,), queue="default")
            sent.append(job.pk)
    return sent


# --- one stage ------------------------------------------------------------------------


def _render(template: PromptTemplate, fields: dict[str, Any]) -> list[dict[str, str]]:
    try:
        messages = []
        if template.system:
            messages.append({"role": "system", "content": template.system.format(**fields)})
        messages.append({"role": "user", "content": template.user.format(**fields)})
    except (KeyError, IndexError, ValueError) as exc:
        # An edited template naming a field we do not fill (or a stray brace).
        raise StepFailed(
            f"prompt template {template.name} v{template.version} cannot be filled: "
            f"{type(exc).__name__}: {exc} (fields available: {', '.join(sorted(fields))})"
        ) from None
    return messages


def _ask(
    job: GenerationJob,
    stage: GeneratedStage,
    step: str,
    template: PromptTemplate,
    fields: dict[str, Any],
    read: Callable[[str], Any],
) -> Any:
    """Ask until ``read`` accepts a reply, at most the configured number of replies.

    After an invalid reply the conversation goes on with that reply and the retry
    prompt carrying the validation error. Every call is recorded on the stage.
    """
    base = _render(template, fields)
    messages = base
    last_error = ""
    attempts = _max_attempts()
    for attempt in range(1, attempts + 1):
        unit_key = f"generation:job{job.pk}:stage{stage.index}:{step}:{attempt}"
        # Hold the job for as long as this call may take (its retries included): a
        # slow reply must not let another worker take the job and pay the call again.
        _job_hold(job, JOB_LEASE + call_lease(job.backend))
        try:
            call = run_direct_call(run=job.run, unit_key=unit_key, messages=messages)
        except BackendError as exc:
            _record_call(stage, step, attempt, unit_key, None, error=str(exc))
            raise StepFailed(f"{step}: the backend failed: {exc}") from None
        finally:
            _job_hold(job)
        try:
            value = read(call.raw_output)
        except ReplyInvalid as exc:
            last_error = str(exc)
            _record_call(stage, step, attempt, unit_key, call, error=last_error)
            retry = _render(job.retry_template, {"error": last_error})
            messages = [*base, {"role": "assistant", "content": call.raw_output}, *retry[-1:]]
            continue
        _record_call(stage, step, attempt, unit_key, call)
        return value
    raise StepFailed(
        f"{step}: {attempts} repl{'y' if attempts == 1 else 'ies'} failed validation; "
        f"last error: {last_error}"
    )


def _record_call(
    stage: GeneratedStage, step: str, attempt: int, unit_key: str, call, *, error: str = ""
) -> None:
    entry = {
        "step": step,
        "attempt": attempt,
        "unit_key": unit_key,
        "call_id": call.pk if call is not None else None,
        "from_cache": bool(call and call.from_cache),
        "valid": not error,
        "error": error,
    }
    # A job run again meets the same calls again: keep one entry per call.
    stage.calls = [c for c in stage.calls if c["unit_key"] != unit_key] + [entry]
    stage.save(update_fields=["calls", "updated_at"])


def _generate_stage(job: GenerationJob, stage: GeneratedStage) -> None:
    """Run the steps the stage has not done yet, saving each result as it lands."""
    try:
        if not stage.characters:
            context = context_sample(seed=job.seed, index=stage.index)
            stage.location = context.location
            stage.location_category = context.location_category
            stage.characters = context.characters
            stage.characters_information = characters_information(context.characters)
            stage.save(
                update_fields=[
                    "location",
                    "location_category",
                    "characters",
                    "characters_information",
                    "updated_at",
                ]
            )
        main, supporting = stage.characters[0], stage.characters[1]
        fields: dict[str, Any] = {
            "location": stage.location,
            "location_category": stage.location_category or "no category",
            "characters_information": stage.characters_information,
            "main_character": main["full_name"],
            "supporting_character": supporting["full_name"],
            "scenario_count": stage.scenario_count,
        }
        if not stage.relationship:
            stage.relationship = _ask(
                job,
                stage,
                "relationship",
                job.relationship_template,
                fields,
                relationship_from_reply,
            )
            stage.save(update_fields=["relationship", "updated_at"])
            _progress(job)
        fields["relationship"] = stage.relationship
        count = stage.scenario_count
        if not stage.trajectory:
            stage.trajectory = _ask(
                job,
                stage,
                "trajectory",
                job.trajectory_template,
                {**fields, "json_shape": trajectory_shape(count)},
                lambda text: trajectory_from_reply(text, count=count),
            )
            stage.save(update_fields=["trajectory", "updated_at"])
            _progress(job)
        if not stage.scenarios:
            speakers = {c["full_name"]: {c["given_name"], c["full_name"]} for c in stage.characters}
            stage.scenarios = _ask(
                job,
                stage,
                "scenarios",
                job.scenarios_template,
                {
                    **fields,
                    "trajectory": json.dumps(stage.trajectory, indent=2, ensure_ascii=False),
                    "min_rounds": MIN_ROUNDS,
                    "max_rounds": MAX_ROUNDS,
                    "json_shape": scenarios_shape(
                        count, (main["given_name"], supporting["given_name"])
                    ),
                },
                lambda text: scenarios_from_reply(text, count=count, speakers=speakers),
            )
            stage.save(update_fields=["scenarios", "updated_at"])
            _progress(job)
        story = generated_stage_story(stage)
        where = f"generation job {job.pk} stage {stage.index} story"
        try:
            trajectory = read_trajectory(story, path=where)
        except ImportDataError as exc:
            raise StepFailed(f"questions: the trajectory cannot be read: {exc}") from None
        stage.questions = questions_from_trajectory(
            trajectory, stage_rng(job.seed, f"job{job.pk}-stage{stage.index}")
        )
        stage.status = GeneratedStage.Status.AWAITING_VALIDATION
        stage.status_reason = "generated; waiting for validation"
        stage.save(update_fields=["questions", "status", "status_reason", "updated_at"])
    except StepFailed as exc:
        stage.status = GeneratedStage.Status.NEEDS_ATTENTION
        stage.status_reason = str(exc)[:4000]
        stage.save(update_fields=["status", "status_reason", "updated_at"])
        logger.warning("generation job %s stage %s: %s", job.pk, stage.index, exc)
    _progress(job)


def generated_stage_story(stage: GeneratedStage) -> dict[str, Any]:
    """The stage's ``story.json`` content (steps 1-3 must be done)."""
    return stage_story(
        characters=stage.characters,
        characters_information=stage.characters_information,
        location=stage.location,
        location_category=stage.location_category,
        relationship=stage.relationship,
        scenario_count=stage.scenario_count,
        trajectory=stage.trajectory,
        scenarios=stage.scenarios,
    )


# --- decisions and the hand-off to the item bank --------------------------------------


def generated_stage_work_key(stage: GeneratedStage) -> str:
    return f"generated-{stage.job_id}-{stage.index}"


def _lineage(stage: GeneratedStage) -> dict[str, Any]:
    job = stage.job
    return {
        "generation_job": job.pk,
        "stage_index": stage.index,
        "run": job.run_id,
        "backend": job.backend.name,
        "model": stage.model,
        "params": job.params,
        "seed": job.seed,
        "template_versions": stage.template_versions,
        "calls": [c["call_id"] for c in stage.calls if c["call_id"] is not None],
        "decision": {
            "status": stage.status,
            "by": stage.decided_by.get_username() if stage.decided_by else "",
            "at": stage.decided_at.isoformat() if stage.decided_at else "",
            "reason": stage.decision_reason,
        },
    }


@transaction.atomic
def generated_stage_keep(*, stage: GeneratedStage, decided_by=None, reason: str = "") -> Work:
    """Keep a stage that waits for validation: it becomes a DynToM work in the item bank.

    The stage's ``story.json`` and ``question_new.json`` are written to a temporary
    trial directory and imported by the DynToM importer (its own validation and
    upsert), all in this transaction. The lineage (model, template versions, calls,
    decision) is stored on the stage and in the work's ``extra["generation"]``.
    """
    stage = (
        GeneratedStage.objects.select_for_update().select_related("job__backend").get(pk=stage.pk)
    )
    if stage.status != GeneratedStage.Status.AWAITING_VALIDATION:
        raise ValueError(
            f"generated stage {stage.pk} (job {stage.job_id}, stage {stage.index}) is "
            f"{stage.get_status_display()}; only a stage awaiting validation can be kept"
        )
    key = generated_stage_work_key(stage)
    with tempfile.TemporaryDirectory(prefix="tomlab-generated-") as tmp:
        trial = Path(tmp) / key
        trial.mkdir()
        (trial / "story.json").write_text(
            json.dumps(generated_stage_story(stage), indent=4, ensure_ascii=False),
            encoding="utf-8",
        )
        (trial / "question_new.json").write_text(
            json.dumps(stage.questions, indent=4, ensure_ascii=False), encoding="utf-8"
        )
        try:
            benchmark_import(format_name=Benchmark.DYNTOM, path=trial)
        except ImportDataError as exc:
            # The temporary files are gone by the time anyone reads this: name the stage.
            raise ValueError(
                f"generated stage {stage.pk} (job {stage.job_id}, stage {stage.index}): "
                f"the DynToM importer refused it: {exc}"
            ) from None
    stage.status = GeneratedStage.Status.KEPT
    stage.status_reason = "kept" + (f": {reason}" if reason else "")
    stage.decided_by = decided_by
    stage.decided_at = timezone.now()
    stage.decision_reason = reason
    stage.work_key = key
    stage.save(
        update_fields=[
            "status",
            "status_reason",
            "decided_by",
            "decided_at",
            "decision_reason",
            "work_key",
            "updated_at",
        ]
    )
    work = Work.objects.get(benchmark=Benchmark.DYNTOM, key=key)
    # The importer records the temporary directory as the source; say where it came from.
    work.source = f"generated: generation job {stage.job_id}, stage {stage.index}"
    work.extra = {**work.extra, "generation": _lineage(stage)}
    work.save(update_fields=["source", "extra"])
    return work


@transaction.atomic
def generated_stage_discard(*, stage: GeneratedStage, decided_by=None, reason: str = "") -> None:
    """Discard a stage that waits for validation or needs attention; nothing is published."""
    stage = GeneratedStage.objects.select_for_update().get(pk=stage.pk)
    if stage.status not in (
        GeneratedStage.Status.AWAITING_VALIDATION,
        GeneratedStage.Status.NEEDS_ATTENTION,
    ):
        raise ValueError(
            f"generated stage {stage.pk} is {stage.get_status_display()}; it cannot be discarded"
        )
    stage.status = GeneratedStage.Status.DISCARDED
    stage.status_reason = "discarded" + (f": {reason}" if reason else "")
    stage.decided_by = decided_by
    stage.decided_at = timezone.now()
    stage.decision_reason = reason
    stage.save(
        update_fields=[
            "status",
            "status_reason",
            "decided_by",
            "decided_at",
            "decision_reason",
            "updated_at",
        ]
    )
