"""The LLM steps of CharToM-QA construction (stages 2, 5, 6, 7 and 8), run as Celery jobs.

:func:`construction_step_run` runs the step of a construction's current LLM stage:

* ``filter``: does the note state this dimension of the character? "No" drops the
  construction, "Yes" sends it to key-note extraction;
* ``paraphrase``: the key note becomes a complete ToM description;
* ``questions``: ``TOMLAB_CHARTOM_QUESTION_CANDIDATES`` candidate questions (samples
  of one prompt), then one plot-free verification per distinct candidate; at most 4
  appropriate ones are kept for the annotator. The samples go out side by side, then
  the verifications, each group inside the backend's ``max_concurrency``;
* ``bonus``: bonus points of the reference answer (the description);
* ``distractors``: three misleading choices, given the construction's misleadings.

Every call of a note batch goes through one direct-call run of the run engine
(:attr:`NoteBatch.run`), under a unit key made of the construction, the step and a
hash of the prompt: a call answered before comes back from its RunCall, so a retry or
a redelivered job never pays twice. An unreadable reply or a refusal is kept as it is
and the next try asks again under the next sample index. Any failure leaves the
construction ``needs_retry`` with the reason in ``error``
(:func:`annotation.chartom.workflow.construction_retry` queues it again).

A running step is held under a lease, as a model run is (:mod:`modeling.runs.leases`):
the worker process (host, PID, start time) and an expiry, pushed forward at every call
and long enough to cover the call in flight. A step whose holder died on this host (a
killed pool process: the envelope sweep sends its job again) or whose lease expired is
taken over by the next delivery of its job; :func:`constructions_requeue_stale` sends
the stale steps no envelope will bring back when a worker starts.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from common.queueing import queued_job_waiting
from modeling.backends.base import BackendError
from modeling.models import PromptTemplate, Run, RunCall
from modeling.runs.direct import (
    DirectRequest,
    RunBudgetExceeded,
    run_direct_calls,
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

from . import prompts, replies
from .models import LLM_STAGES, Construction, FieldChange, NoteBatch, QuestionCandidate, Stage
from .replies import ReplyInvalid
from .workflow import (
    STEP_TASK_NAME,
    construction_advance,
    construction_lock,
    field_set,
    step_enqueue,
)

logger = logging.getLogger(__name__)

RUN_BENCHMARK = "chartom-qa-build"  # not a Benchmark value: reports never list these runs
RUN_METHOD = "construct"
MAX_KEPT_CANDIDATES = 4  # section 4.2: at most 4 candidates per description
# The lease of a running step between calls; every call pushes it forward, and a call
# in flight holds it for as long as that call may take (see Step.call). A holder on
# this host that is dead loses it at once; one on another host when it expires.
STEP_LEASE = timedelta(minutes=5)
ERROR_MAX = 2000

T = TypeVar("T")


class StepFailed(Exception):
    """The step cannot finish now; the message is shown on the construction."""


class StepLost(Exception):
    """Another worker took the step over (this one was taken for dead): stop, write nothing."""


# --- the batch's run -------------------------------------------------------------------


def batch_run(batch_id: int) -> Run:
    """The note batch's direct-call run, created on first use (row-locked: one per batch)."""
    with transaction.atomic():
        batch = (
            NoteBatch.objects.select_for_update(of=("self",))
            .select_related("backend", "run")
            .get(pk=batch_id)
        )
        if batch.run is not None:
            return batch.run
        if batch.backend is None:
            raise StepFailed(f"note batch {batch.name!r} has no LLM backend; set one and retry")
        try:
            batch.run = run_direct_create(
                name=f"CharToM-QA construction: {batch.name}",
                benchmark=RUN_BENCHMARK,
                method=RUN_METHOD,
                backend=batch.backend,
                model=batch.model,
                params=batch.params,
                budget_tokens=batch.budget_tokens,
                created_by=batch.created_by,
            )
        except ValueError as exc:
            raise StepFailed(str(exc)) from None
        batch.save(update_fields=["run"])
        return batch.run


def batch_run_settle(*, batch_id: int) -> bool:
    """Finish the batch's run once every construction is published or dropped."""
    batch = NoteBatch.objects.filter(pk=batch_id).only("run_id").first()
    if batch is None or batch.run_id is None:
        return False
    open_ = Construction.objects.filter(note__batch_id=batch_id).exclude(
        stage__in=[Stage.PUBLISHED, Stage.DROPPED]
    )
    if open_.exists():
        return False
    run_direct_finish(run_id=batch.run_id, status=Run.Status.SUCCEEDED)
    return True


# --- asking ----------------------------------------------------------------------------


def _prompt_hash(messages: list[dict[str, str]]) -> str:
    raw = json.dumps(messages, sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(raw.encode("utf-8")).hexdigest()[:12]


def _reply_text(call: RunCall) -> str:
    """The reply, or :class:`ReplyInvalid` for a refusal (filtered or empty)."""
    if call.finish_reason == "content_filter":
        raise ReplyInvalid("the model refused to answer (finish_reason content_filter)")
    if not call.raw_output.strip():
        raise ReplyInvalid("the model sent an empty reply")
    return call.raw_output


@dataclass
class Step:
    """One claimed construction and what its calls need."""

    construction: Construction
    run: Run
    holder: LeaseHolder = field(default_factory=LeaseHolder.current)

    @property
    def model(self) -> str:
        return self.run.model

    def touch(self, lease: timedelta = STEP_LEASE) -> None:
        """Renew the step's lease for ``lease``; :class:`StepLost` when it is not ours."""
        if not lease_renew(
            Construction.objects.filter(pk=self.construction.pk, state=Construction.State.RUNNING),
            holder=self.holder,
            lease=lease,
            updated_at=timezone.now(),
        ):
            raise StepLost(f"construction {self.construction.pk} was taken over")

    def owns(self, construction: Construction) -> bool:
        """True when the (locked) construction is still this step's to write."""
        return (
            construction.state == Construction.State.RUNNING
            and construction.lease_holder_host == self.holder.host
            and construction.lease_holder_pid == self.holder.pid
        )

    def unit_key(self, step: str, messages: list[dict[str, str]]) -> str:
        return f"chartom:c{self.construction.pk}:{step}:{_prompt_hash(messages)}"

    def call(self, unit_key: str, messages: list[dict[str, str]], sample_index: int) -> RunCall:
        calls, failure = self.call_many([DirectRequest(unit_key, messages, sample_index)])
        if failure is not None:
            raise failure
        return calls[0]

    def call_many(
        self, requests: list[DirectRequest]
    ) -> tuple[dict[int, RunCall], StepFailed | None]:
        """Send prompts that do not depend on each other side by side, inside the
        backend's ``max_concurrency``; the calls that landed (by position) and the
        failure, if any. Every reply is recorded as it comes, so a retry pays for none
        of those again."""
        if not requests:
            return {}, None  # every answer was at hand: no lease to push, nothing to send
        # Hold the step for as long as these calls may take (retries included, the
        # window's waves one after another): a slow reply must not let another worker
        # take the step and pay the calls again.
        waves = -(-len(requests) // max(1, self.run.backend.max_concurrency))
        self.touch(STEP_LEASE + call_lease(self.run.backend) * max(1, waves))
        failure: StepFailed | None = None
        try:
            calls = dict(enumerate(run_direct_calls(run=self.run, requests=requests)))
        except RunBudgetExceeded as exc:
            failure = StepFailed(f"budget: {exc}; raise the run's budget and retry")
        except BackendError as exc:
            failure = StepFailed(f"the LLM backend failed: {exc}")
        if failure is not None:
            calls = self._landed(requests)
        self.touch()
        return calls, failure

    def _landed(self, requests: list[DirectRequest]) -> dict[int, RunCall]:
        """The calls of ``requests`` that are done (after a failure among them)."""
        wanted = Q()
        for request in requests:
            wanted |= Q(unit_key=request.unit_key, sample_index=request.sample_index)
        found = {
            (call.unit_key, call.sample_index): call
            for call in RunCall.objects.filter(wanted, run=self.run, status=RunCall.Status.DONE)
        }
        return {
            position: found[request.unit_key, request.sample_index]
            for position, request in enumerate(requests)
            if (request.unit_key, request.sample_index) in found
        }

    def answer(
        self, unit_key: str, messages: list[dict[str, str]], read: Callable[[str], T]
    ) -> tuple[T | ReplyInvalid, RunCall]:
        """The first readable answer to a prompt, asking only when none is at hand.

        Answered calls come back from their RunCall rows. Replies that could not be read
        are skipped: the prompt is asked again under the next sample index, so a retry
        after a bad reply asks anew but never pays again for a call it has. Returns the
        value, or the :class:`ReplyInvalid` of a new reply that could not be read.
        """
        answers, failure = self.answer_many([(unit_key, messages)], read)
        if failure is not None:
            raise failure
        return answers[0]

    def answer_many(
        self, asks: list[tuple[str, list[dict[str, str]]]], read: Callable[[str], T]
    ) -> tuple[dict[int, tuple[T | ReplyInvalid, RunCall]], StepFailed | None]:
        """:meth:`answer` for independent prompts, the new calls sent side by side; the
        answers that are at hand (by position) and the failure, if any."""
        done: dict[str, dict[int, RunCall]] = {}
        for call in RunCall.objects.filter(
            run=self.run,
            unit_key__in=[unit_key for unit_key, _ in asks],
            status=RunCall.Status.DONE,
        ):
            done.setdefault(call.unit_key, {})[call.sample_index] = call
        answers: dict[int, tuple[T | ReplyInvalid, RunCall]] = {}
        to_ask: list[tuple[int, DirectRequest]] = []
        for position, (unit_key, messages) in enumerate(asks):
            earlier = done.get(unit_key, {})
            index = 0
            while index in earlier:
                try:
                    answers[position] = read(_reply_text(earlier[index])), earlier[index]
                    break
                except ReplyInvalid:
                    index += 1
            else:
                to_ask.append((position, DirectRequest(unit_key, messages, index)))
        calls, failure = self.call_many([request for _, request in to_ask])
        for n, call in calls.items():
            try:
                value: T | ReplyInvalid = read(_reply_text(call))
            except ReplyInvalid as exc:
                value = exc
            answers[to_ask[n][0]] = value, call
        return answers, failure

    def ask(
        self,
        step: str,
        template: PromptTemplate,
        fields: dict[str, Any],
        read: Callable[[str], T],
    ) -> tuple[T, RunCall]:
        """Render a template, get its answer (see :meth:`answer`); an unreadable one fails."""
        messages = _render(template, fields)
        value, call = self.answer(self.unit_key(step, messages), messages, read)
        if isinstance(value, ReplyInvalid):
            raise StepFailed(f"{step}: the reply could not be read ({value}); a retry asks again")
        return value, call


def _render(template: PromptTemplate, fields: dict[str, Any]) -> list[dict[str, str]]:
    try:
        return prompts.template_render(template, fields)
    except ValueError as exc:
        raise StepFailed(str(exc)) from None


def _story_plot(construction: Construction) -> str:
    note = construction.note
    return note.context_0 or note.context_1000 or note.underlined_text


def _misleadings(construction: Construction) -> str:
    """The judge's defects as a list for the prompt; "None" when there are none."""
    lines = []
    for item in construction.misleadings or []:
        if isinstance(item, dict):
            item = item.get("text") or item.get("defect") or json.dumps(item, ensure_ascii=False)
        if str(item).strip():
            lines.append(f"- {str(item).strip()}")
    return "\n".join(lines) or "None"


# --- the steps -------------------------------------------------------------------------


def _finish(
    step: Step,
    stage: str,
    values: dict[str, Any],
    *,
    to_stage: str,
    template: PromptTemplate,
    call: RunCall,
) -> str:
    """Write the step's fields with their provenance and move on, in one transaction."""
    with transaction.atomic():
        construction = construction_lock(step.construction.pk)
        if construction.stage != stage or not step.owns(construction):
            return "skipped"
        for name, value in values.items():
            field_set(
                construction,
                name,
                value,
                model=step.model,
                template=prompts.template_label(template),
                call_id=call.pk,
                action="generated",
            )
        construction_advance(construction, to_stage)
    return f"advanced:{to_stage}"


def _filter(step: Step) -> str:
    construction = step.construction
    note = construction.note
    template = prompts.chartom_template(prompts.FILTER)
    (verdict, reason), call = step.ask(
        "filter",
        template,
        {
            "dimension": construction.dimension,
            "definition": prompts.DEFINITIONS[construction.dimension],
            "user_note": note.note_text,
            "target_character": note.target_character,
        },
        replies.filter_reply,
    )
    outcome = _finish(
        step,
        Stage.FILTER,
        {"filter_verdict": verdict, "filter_reason": reason},
        to_stage=Stage.EXTRACT if verdict == "yes" else Stage.DROPPED,
        template=template,
        call=call,
    )
    if verdict == "no":
        batch_run_settle(batch_id=note.batch_id)
    return outcome


def _paraphrase(step: Step) -> str:
    construction = step.construction
    note = construction.note
    if not construction.key_note.strip():
        raise StepFailed("paraphrase: the construction has no key note")
    template = prompts.chartom_template(prompts.PARAPHRASE)
    description, call = step.ask(
        "paraphrase",
        template,
        {
            "dimension": construction.dimension,
            "underlined_text": note.underlined_text,
            "user_note": note.note_text,
            "key_note": construction.key_note,
            "target_character": note.target_character,
        },
        replies.description_reply,
    )
    return _finish(
        step,
        Stage.PARAPHRASE,
        {"description": description},
        to_stage=Stage.PARAPHRASE_REVIEW,
        template=template,
        call=call,
    )


def _bonus(step: Step) -> str:
    construction = step.construction
    note = construction.note
    template = prompts.chartom_template(prompts.BONUS)
    points, call = step.ask(
        "bonus",
        template,
        {
            "book_name": note.book.title,
            "target_character": note.target_character,
            "story_plot": _story_plot(construction),
            "question": construction.question,
            "reference_answer": construction.description,
        },
        replies.bonus_points_reply,
    )
    return _finish(
        step,
        Stage.BONUS,
        {"bonus_points": points},
        to_stage=Stage.BONUS_REVIEW,
        template=template,
        call=call,
    )


def _distractors(step: Step) -> str:
    construction = step.construction
    note = construction.note
    template = prompts.chartom_template(prompts.DISTRACTORS)
    choices, call = step.ask(
        "distractors",
        template,
        {
            "book_name": note.book.title,
            "story_plot": _story_plot(construction),
            "question": construction.question,
            "reference_answer": construction.description,
            "misleadings": _misleadings(construction),
        },
        replies.distractors_reply,
    )
    return _finish(
        step,
        Stage.DISTRACTORS,
        {"distractors": choices},
        to_stage=Stage.DISTRACTOR_REVIEW,
        template=template,
        call=call,
    )


def candidate_count() -> int:
    return max(1, int(getattr(settings, "TOMLAB_CHARTOM_QUESTION_CANDIDATES", 6)))


def _same_question(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip("?. ")


def _questions(step: Step) -> str:
    """Generate a round of candidates, verify each distinct one without the plot, keep ≤ 4.

    Candidate rows are written as their calls land, so a redelivered job continues the
    round. A round whose candidates all failed leaves the construction for a retry; the
    retry samples a new round (the next sample indices).
    """
    construction = step.construction
    note = construction.note
    n = candidate_count()
    generate = prompts.chartom_template(prompts.QUESTION)
    verify = prompts.chartom_template(prompts.VERIFY)
    base = {
        "book_name": note.book.title,
        "dimension": construction.dimension,
        "target_character": note.target_character,
        "tom_description": construction.description,
    }
    messages = _render(
        generate,
        {**base, "story_plot": _story_plot(construction), "underlined_text": note.underlined_text},
    )
    unit_key = step.unit_key("question", messages)
    existing = {c.position: c for c in QuestionCandidate.objects.filter(construction=construction)}
    first = 0
    if existing:
        last_round = max(existing) // n
        round_positions = range(last_round * n, (last_round + 1) * n)
        finished = all(
            p in existing and existing[p].verdict != QuestionCandidate.Verdict.PENDING
            for p in round_positions
        )
        first = (last_round + 1) * n if finished else last_round * n
    # The round's missing samples are asked side by side; each candidate row is written
    # as soon as its reply is here, the ones that came back before a failure included.
    missing = [p for p in range(first, first + n) if p not in existing]
    calls, failure = step.call_many([DirectRequest(unit_key, messages, p) for p in missing])
    for n_call, call in sorted(calls.items()):
        try:
            text, verdict, reason = replies.question_reply(_reply_text(call)), "", ""
        except ReplyInvalid as exc:
            text = call.raw_output.strip()[:2000] or "(empty reply)"
            verdict, reason = QuestionCandidate.Verdict.UNPARSEABLE, f"question: {exc}"
        existing[missing[n_call]] = QuestionCandidate.objects.create(
            construction=construction,
            position=missing[n_call],
            text=text,
            generation_call=call,
            verdict=verdict,
            verdict_reason=reason,
        )
    if failure is not None:
        raise failure
    candidates = [existing[position] for position in range(first, first + n)]
    seen: dict[str, QuestionCandidate] = {}
    to_verify: list[QuestionCandidate] = []
    repeats: list[QuestionCandidate] = []
    for candidate in candidates:
        if (
            candidate.verdict == QuestionCandidate.Verdict.UNPARSEABLE
            and not candidate.verification_call_id
        ):
            continue
        key = _same_question(candidate.text)
        if key in seen:
            if candidate.verdict == QuestionCandidate.Verdict.PENDING:
                repeats.append(candidate)
            continue
        seen[key] = candidate
        if candidate.verdict == QuestionCandidate.Verdict.PENDING:
            to_verify.append(candidate)
    # One plot-free verification per distinct question, all of them side by side.
    asks = []
    for candidate in to_verify:
        verify_messages = _render(verify, {**base, "candidate_question": candidate.text})
        asks.append((step.unit_key("verify", verify_messages), verify_messages))
    answers, failure = step.answer_many(asks, replies.verification_reply)
    for position, (verdict, call) in sorted(answers.items()):
        candidate = to_verify[position]
        if isinstance(verdict, ReplyInvalid):
            candidate.verdict, reason = (
                QuestionCandidate.Verdict.UNPARSEABLE,
                f"verification: {verdict}",
            )
        else:
            appropriate, reason = verdict
            candidate.verdict = (
                QuestionCandidate.Verdict.APPROPRIATE
                if appropriate
                else QuestionCandidate.Verdict.INAPPROPRIATE
            )
        candidate.verdict_reason = reason
        candidate.verification_call = call
        candidate.save(update_fields=["verdict", "verdict_reason", "verification_call"])
    if failure is not None:
        raise failure
    for candidate in repeats:
        # A repeat shares the first's verification.
        original = seen[_same_question(candidate.text)]
        candidate.verdict = original.verdict
        candidate.verdict_reason = f"same question as candidate {original.position + 1}"
        candidate.verification_call_id = original.verification_call_id
        candidate.save(update_fields=["verdict", "verdict_reason", "verification_call"])
    keep = [
        c
        for c in candidates
        if c.verdict == QuestionCandidate.Verdict.APPROPRIATE
        and seen.get(_same_question(c.text)) is c
    ][:MAX_KEPT_CANDIDATES]
    if not keep:
        raise StepFailed(
            f"questions: no candidate passed verification ({len(candidates)} generated); "
            "a retry samples new ones"
        )
    with transaction.atomic():
        locked = construction_lock(construction.pk)
        if locked.stage != Stage.QUESTIONS or not step.owns(locked):
            return "skipped"
        QuestionCandidate.objects.filter(pk__in=[c.pk for c in keep]).update(kept=True)
        FieldChange.objects.create(
            construction=locked,
            field="candidates",
            old_value=None,
            new_value=[
                {"position": c.position, "text": c.text, "verdict": c.verdict, "kept": c in keep}
                for c in candidates
            ],
            model=step.model,
            template=f"{prompts.template_label(generate)}, {prompts.template_label(verify)}",
            call_id=keep[0].generation_call_id,
            action="generated",
        )
        construction_advance(locked, Stage.QUESTION_CHOICE)
    return f"advanced:{Stage.QUESTION_CHOICE}"


STEPS: dict[str, Callable[[Step], str]] = {
    Stage.FILTER: _filter,
    Stage.PARAPHRASE: _paraphrase,
    Stage.QUESTIONS: _questions,
    Stage.BONUS: _bonus,
    Stage.DISTRACTORS: _distractors,
}


def step_templates(stage: str) -> list[str]:
    """Names of the templates an LLM stage uses (``questions`` uses two)."""
    return {
        Stage.FILTER: [prompts.FILTER],
        Stage.PARAPHRASE: [prompts.PARAPHRASE],
        Stage.QUESTIONS: [prompts.QUESTION, prompts.VERIFY],
        Stage.BONUS: [prompts.BONUS],
        Stage.DISTRACTORS: [prompts.DISTRACTORS],
    }[stage]


# --- running a step --------------------------------------------------------------------


def _steps(construction_id: int) -> QuerySet[Construction]:
    return Construction.objects.filter(pk=construction_id, stage__in=LLM_STAGES)


def construction_claim(construction_id: int) -> bool:
    """Take a queued (or failed, or abandoned) LLM step for this process, under a lease.

    One conditional UPDATE takes a queued or failed step; a running one is taken over
    when its holder is gone: dead on this host, or its lease expired (compare-and-swap
    on the holder seen). False when the construction is not at an LLM step; raises
    :class:`~modeling.runs.leases.LeaseHeld` while a holder that may be alive has it.
    """
    return lease_claim(
        _steps(construction_id),
        free=Q(state__in=[Construction.State.QUEUED, Construction.State.NEEDS_RETRY]),
        held=Q(state=Construction.State.RUNNING),
        lease=STEP_LEASE,
        what=f"the LLM step of construction {construction_id}",
        state=Construction.State.RUNNING,
        error="",
        updated_at=timezone.now(),
    )


def _fail(construction_id: int, holder: LeaseHolder, error: str) -> str:
    failed = Construction.objects.filter(
        pk=construction_id,
        state=Construction.State.RUNNING,
        lease_holder_host=holder.host,
        lease_holder_pid=holder.pid,
    ).update(
        state=Construction.State.NEEDS_RETRY,
        error=error[:ERROR_MAX],
        updated_at=timezone.now(),
        **LEASE_RELEASED,
    )
    return "needs_retry" if failed else "skipped"


def construction_step_run(*, construction_id: int) -> str:
    """Run the step of the construction's current LLM stage; returns what happened.

    ``"skipped"`` when the construction is not waiting for an LLM step (it moved on,
    another process on this host runs it, or another worker took it over from this
    one), ``"advanced:<stage>"`` on success, ``"needs_retry"`` on a failure, whose
    reason is kept in ``Construction.error``. Raises
    :class:`~modeling.runs.leases.LeaseHeld` when a worker on another host holds it
    (the task tries again when that lease would expire).
    """
    try:
        claimed = construction_claim(construction_id)
    except LeaseHeld as exc:
        if not exc.local:
            raise
        logger.info("%s; skipped", exc)
        return "skipped"
    if not claimed:
        return "skipped"
    construction = Construction.objects.select_related("note", "note__book", "note__batch").get(
        pk=construction_id
    )
    holder = LeaseHolder.current()
    try:
        step = Step(
            construction=construction, run=batch_run(construction.note.batch_id), holder=holder
        )
        return STEPS[construction.stage](step)
    except StepLost:
        logger.warning("CharToM-QA step of construction %s was taken over", construction_id)
        return "skipped"
    except StepFailed as exc:
        # The error names the stage, so a list of failed constructions reads on its own.
        message = str(exc)
        if not message.startswith(f"{construction.stage}:"):
            message = f"{construction.stage}: {message}"
        return _fail(construction_id, holder, message)
    except Exception as exc:  # a bug must not leave the construction "running" for good
        logger.exception("CharToM-QA step of construction %s crashed", construction_id)
        return _fail(construction_id, holder, f"{construction.stage}: {type(exc).__name__}: {exc}")


# --- steps left behind by dead workers -------------------------------------------------


def step_is_stale(construction: Construction) -> bool:
    """True when a "running" LLM step has no live holder (dead here, or lease expired)."""
    return (
        construction.state == Construction.State.RUNNING
        and construction.stage in LLM_STAGES
        and holder_gone(construction)
    )


def _stale_reason(construction: Construction) -> str:
    holder = (
        f"process {construction.lease_holder_pid} on host {construction.lease_holder_host}"
        if construction.lease_holder_pid
        else "a worker"
    )
    expires = construction.lease_expires_at
    if expires is None:
        return f"{holder} left it running without a lease"
    if expires <= timezone.now():
        return f"{holder} stopped renewing its lease at {expires:%Y-%m-%d %H:%M:%S} UTC"
    return f"{holder} that ran it is gone"


def stale_steps(**filters: object) -> list[Construction]:
    """Running LLM steps whose holder is gone (``filters`` narrow: ``note__batch=…``),
    each with ``stale_reason``, a line that says why."""
    running = (
        Construction.objects.filter(
            stage__in=LLM_STAGES, state=Construction.State.RUNNING, **filters
        )
        .select_related("note", "note__book")
        .order_by("note__position", "dimension")
    )
    stale = [c for c in running if holder_gone(c)]
    for construction in stale:
        construction.stale_reason = _stale_reason(construction)  # type: ignore[attr-defined]
    return stale


def constructions_requeue_stale() -> list[int]:
    """Send again every stale step no envelope will bring back; called when a worker starts.

    A step whose holder died on this host has its envelope sent again by the sweep
    (which runs first, on the same signal): that envelope waits, and the step is left
    to it. A step whose lease expired (its worker died on another host, or before the
    envelopes) has no one to send it: it is queued here, and its claim takes it over.
    """
    sent = []
    for construction in stale_steps():
        if queued_job_waiting(STEP_TASK_NAME, (construction.pk,)) is None:
            step_enqueue(construction.pk)
            sent.append(construction.pk)
    return sent


def construction_workspace(construction_id: int) -> int | None:
    """The workspace of the batch a construction belongs to (None if it is gone)."""
    return (
        Construction._base_manager.filter(pk=construction_id)
        .values_list("note__batch__workspace_id", flat=True)
        .first()
    )
