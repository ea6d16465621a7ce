"""DynToM generation end to end against the loopback OpenAI-compatible server.

Steps 1-3 are asked of the "model" (tests/llm_server.py, scripted by
:class:`GenerationResponder`), step 4 is dyntom_questions; a kept stage is imported by
the DynToM importer and then answered by ``run_model``. Pools are the real ones.
"""

from __future__ import annotations

import json
import re
import threading
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from annotation.dyntom.generation.prompts import RETRY
from annotation.dyntom.generation.selectors import generation_job_status_label, with_stage_counts
from annotation.dyntom.generation.services import (
    generated_stage_discard,
    generated_stage_keep,
    generated_stage_story,
    generation_job_create,
    generation_job_run,
)
from annotation.dyntom.generation.tasks import generation_job_task
from annotation.models import GeneratedStage, GenerationJob
from benchmarks.models import DynToMQuestion, DynToMStage, Work
from modeling.models import CachedResponse, Prediction, PromptTemplate, Run, RunCall
from modeling.runs.prompt_templates import prompt_template_revise
from modeling.runs.services import run_resume, runs_requeue_orphaned
from tests.llm_server import LLMTestServer, dyntom_letter_responder

pytestmark = pytest.mark.django_db

SHAPE_MARK = "nothing else:\n"
MALFORMED = '{"mental states analysis in every scenario": {"scenario 1": {"belief": "x",}'


def _user_prompt(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def step_of(body: dict[str, Any]) -> str:
    prompt = _user_prompt(body)
    if "Plan a story of" in prompt:
        return "trajectory"
    if "scenarios. For each, a background" in prompt:
        return "scenarios"
    return "relationship"


def _fill(value: Any, path: str = "") -> Any:
    """Sentences in place of the "..." of the shape the prompt shows."""
    if isinstance(value, dict):
        return {k: _fill(v, f"{path}/{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if value == "True or False":
        return "True"
    if "->" in value:  # "1->2: ...; 2->3: ..." keeps its prefixes
        return value.replace("...", f"a reason for {path.strip('/')}")
    return f"Text for {path.strip('/')}."


class GenerationResponder:
    """Valid replies for each step, after the bad replies scripted per step."""

    def __init__(self, bad: dict[str, list[str]] | None = None) -> None:
        self.bad = {step: list(replies) for step, replies in (bad or {}).items()}
        self.lock = threading.Lock()
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, body: dict[str, Any]) -> str:
        step = step_of(body)
        with self.lock:
            self.seen.append((step, body))
            if self.bad.get(step):
                return self.bad[step].pop(0)
        if step == "relationship":
            return "They met at university and have stayed close friends ever since."
        prompt = _user_prompt(body)
        shape = json.loads(prompt[prompt.index(SHAPE_MARK) + len(SHAPE_MARK) :])
        return "```json\n" + json.dumps(_fill(shape), indent=1) + "\n```"

    def bodies(self, step: str) -> list[dict[str, Any]]:
        return [body for s, body in self.seen if s == step]


@pytest.fixture
def backend(db, llm_server: LLMTestServer):
    from modeling.models import Backend

    return Backend.objects.create(
        name="gen-test",
        kind=Backend.Kind.OPENAI,
        base_url=llm_server.base_url,
        default_model="test-model",
        max_retries=1,
        timeout_s=5.0,
        price_input_per_1k=1,
        price_output_per_1k=2,
    )


@pytest.fixture
def pools(db, shared_data: Path) -> None:
    call_command(
        "load_dyntom_pools", str(shared_data / "dyntom-pools"), stdout=StringIO(), stderr=StringIO()
    )


def _job(backend, **kwargs) -> GenerationJob:
    return generation_job_create(backend=backend, enqueue=False, **kwargs)


def test_generation_end_to_end_with_a_malformed_reply_retried_then_kept_and_answered(
    backend, pools, llm_server, researcher
):
    responder = GenerationResponder(bad={"trajectory": [MALFORMED]})
    llm_server.responder = responder
    job = _job(backend, stage_count=2, scenario_count=5, seed=7)
    assert job.progress_total == 8

    assert generation_job_task(job.pk) == GenerationJob.Status.SUCCEEDED

    job.refresh_from_db()
    assert job.status == "succeeded" and job.progress_done == 8 and job.error == ""
    stages = list(job.stages.order_by("index"))
    assert [s.status for s in stages] == ["awaiting_validation"] * 2
    # 2 stages x 3 LLM steps, plus one retry of stage 1's trajectory.
    assert llm_server.request_count == 7

    # The retry went on with the bad reply and the retry prompt carrying the JSON error.
    first, retry = responder.bodies("trajectory")[:2]
    assert retry["messages"][: len(first["messages"])] == first["messages"]
    assert retry["messages"][-2] == {"role": "assistant", "content": MALFORMED}
    feedback = retry["messages"][-1]["content"]
    assert feedback.startswith("That reply could not be used: the reply is not valid JSON")
    assert "line 1, column" in feedback
    stage = stages[0]
    trajectory_calls = [c for c in stage.calls if c["step"] == "trajectory"]
    assert [(c["attempt"], c["valid"]) for c in trajectory_calls] == [(1, False), (2, True)]
    assert "not valid JSON" in trajectory_calls[0]["error"]

    # Every call is a RunCall of the job's direct-call run, counted with tokens and cost.
    run = Run.objects.get(pk=job.run_id)
    assert run.status == "succeeded" and run.benchmark == "dyntom-gen"
    assert run.total_calls == run.done_calls == 7 and run.error_calls == 0
    assert run.prompt_tokens > 0 and run.cost > 0
    assert set(RunCall.objects.filter(run=run).values_list("status", flat=True)) == {"done"}
    assert {c["call_id"] for c in stage.calls} <= set(
        RunCall.objects.filter(run=run).values_list("pk", flat=True)
    )

    # Sampled context and the story in the release's shape.
    main, supporting = stage.characters
    for character in (main, supporting):
        assert set(character) >= {
            "given_name",
            "surname",
            "gender",
            "occupation",
            "education",
            "personality",
        }
    assert stage.location and stage.characters_information.startswith(
        f"**Main Character**: {main['full_name']}, {main['gender']},"
    )
    story = generated_stage_story(stage)
    assert story["scenario numbers"] == 5 and len(story["story"]) == 5
    assert story["sketch"]["relationships among characters"] == {
        "main character with supporting character 1": stage.relationship
    }
    assert all(3 <= len(s["dialogue"]) <= 5 for s in story["story"].values())
    # Step 4: 15N-4 questions by code.
    assert len(stage.questions) == 71
    assert sum(k.startswith("type_a_what") for k in stage.questions) == 20
    assert stage.template_versions["trajectory"] == "dyntom-gen-trajectory v1"

    work = generated_stage_keep(stage=stage, decided_by=researcher, reason="scores >= 4")

    stage.refresh_from_db()
    assert stage.status == "kept" and stage.work_key == work.key == f"generated-{job.pk}-1"
    assert stage.decided_by == researcher and stage.decision_reason == "scores >= 4"
    dyn = DynToMStage.objects.get(work=work)
    assert dyn.scenario_count == 5 and dyn.main_character == main["full_name"]
    assert dyn.location == stage.location
    assert DynToMQuestion.objects.filter(stage=dyn).count() == 71
    # Names and genders read back by the importer from "characters information".
    genders = {"woman": "female", "man": "male"}
    assert set(work.characters.values_list("name", "gender")) == {
        (main["full_name"], genders[main["gender"]]),
        (supporting["full_name"], genders[supporting["gender"]]),
    }
    lineage = work.extra["generation"]
    assert lineage["model"] == "test-model" and lineage["run"] == run.pk
    assert lineage["calls"] == [c["call_id"] for c in stage.calls]
    assert lineage["decision"]["by"] == researcher.username
    assert lineage["template_versions"]["scenarios"] == "dyntom-gen-scenarios v1"
    assert work.source == f"generated: generation job {job.pk}, stage 1"
    # Only the kept stage entered the item bank.
    assert not Work.objects.filter(key=f"generated-{job.pk}-2").exists()

    # run_model answers the new work like any imported stage.
    llm_server.responder = dyntom_letter_responder("a")
    out = StringIO()
    call_command(
        "run_model",
        "--benchmark",
        "dyntom",
        "--method",
        "vanilla",
        "--backend",
        backend.name,
        "--items",
        work.key,
        stdout=out,
        stderr=StringIO(),
    )
    answered = Run.objects.exclude(pk=run.pk).get()
    assert answered.status == "succeeded"
    predictions = Prediction.objects.filter(run=answered)
    assert predictions.count() == 71
    assert set(predictions.values_list("parse_status", flat=True)) == {"ok"}
    assert (
        predictions.filter(correct=True).count()
        == DynToMQuestion.objects.filter(stage=dyn, gold_letter="a").count()
    )


def test_invalid_replies_up_to_the_limit_mark_the_stage_needs_attention(
    backend, pools, llm_server, settings
):
    settings.TOMLAB_GENERATION_MAX_ATTEMPTS = 2
    # Valid JSON, wrong shape: scenario 5 and one influence missing, bad reasons.
    wrong = {
        "mental states analysis in every scenario": {},
        "analysis of mental states across scenarios": {},
    }
    llm_server.responder = GenerationResponder(
        bad={"trajectory": [json.dumps(wrong), "no JSON here at all"]}
    )
    job = _job(backend, stage_count=2, scenario_count=4, seed=1)

    generation_job_run(job_id=job.pk)

    job.refresh_from_db()
    first, second = job.stages.order_by("index")
    assert first.status == "needs_attention"
    assert first.status_reason.startswith("trajectory: 2 replies failed validation; last error:")
    assert "holds no JSON object" in first.status_reason
    calls = [c for c in first.calls if c["step"] == "trajectory"]
    assert "'scenario 1' is a required property" in calls[0]["error"]
    assert first.scenarios == {} and first.questions == {}
    # The job goes on with the next stage, which has 4 scenarios and 15*4-4 questions.
    assert second.status == "awaiting_validation" and len(second.questions) == 56
    assert job.status == "succeeded" and job.progress_done == job.progress_total == 8
    assert Run.objects.get(pk=job.run_id).status == "succeeded"
    with pytest.raises(ValueError, match="only a stage awaiting validation can be kept"):
        generated_stage_keep(stage=first, reason="no")
    generated_stage_discard(stage=first, reason="broken trajectory")
    first.refresh_from_db()
    assert first.status == "discarded" and first.decision_reason == "broken trajectory"


def test_a_job_with_no_usable_stage_needs_attention_and_its_run_fails(
    backend, pools, llm_server, settings
):
    """Issue 25: every reply answered is not success when no stage could be used."""
    settings.TOMLAB_GENERATION_MAX_ATTEMPTS = 2
    llm_server.responder = GenerationResponder(
        bad={"relationship": ["", '{"json": "no"}'], "trajectory": ["no JSON", "none"]}
    )
    job = _job(backend, stage_count=2, scenario_count=4)

    assert generation_job_run(job_id=job.pk) == GenerationJob.Status.NEEDS_ATTENTION

    job.refresh_from_db()
    assert [s.status for s in job.stages.order_by("index")] == ["needs_attention"] * 2
    assert job.is_finished and job.finished_at is not None
    assert job.error == "no usable stage: 2 of 2 stages need attention"
    run = Run.objects.get(pk=job.run_id)
    assert (run.status, run.error) == (Run.Status.FAILED, job.error)
    # Both stages are done with, so the steps all count; the label says what came of them.
    assert job.progress_done == job.progress_total == 8
    labelled = with_stage_counts(GenerationJob.objects.all()).get(pk=job.pk)
    label = generation_job_status_label(job=labelled)
    assert (label.text, label.tone) == ("needs attention: 0 of 2 stages usable", "needs_attention")


def test_schema_errors_are_located_and_sent_back(backend, pools, llm_server):
    responder = GenerationResponder()
    llm_server.responder = responder
    job = _job(backend, stage_count=1, scenario_count=4, seed=3)
    generation_job_run(job_id=job.pk)
    good = json.loads(
        re.sub(r"^```json\n|\n```$", "", responder(responder.bodies("trajectory")[0]))
    )
    scenarios = json.loads(
        re.sub(r"^```json\n|\n```$", "", responder(responder.bodies("scenarios")[0]))
    )

    # A reply with one influence missing and a reason without its "2->3:" prefix.
    broken = json.loads(json.dumps(good))
    del broken["mental states analysis in every scenario"]["scenario 3"]["influence"][
        "intention->action"
    ]
    # A dialogue with two rounds and a stranger speaking.
    bad_scenes = json.loads(json.dumps(scenarios))
    bad_scenes["scenario 2"]["dialogue"] = bad_scenes["scenario 2"]["dialogue"][:2]
    bad_scenes["scenario 4"]["dialogue"][0] = {"Zorro": "Hello."}
    reasons = json.loads(json.dumps(good))
    reasons["analysis of mental states across scenarios"]["Emotion"]["Reasons"] = (
        "1->2: a; because; 3->4: c"
    )
    llm_server.reset()
    responder = GenerationResponder(
        bad={
            "trajectory": [json.dumps(broken), json.dumps(reasons)],
            "scenarios": [json.dumps(bad_scenes)],
        }
    )
    llm_server.responder = responder
    job = _job(backend, stage_count=1, scenario_count=4, seed=4)
    generation_job_run(job_id=job.pk)

    stage = GeneratedStage.objects.get(job=job)
    assert stage.status == "awaiting_validation"
    errors = [c["error"] for c in stage.calls if c["error"]]
    assert errors[0] == (
        "the JSON does not have the shape asked for: at mental states analysis in every "
        "scenario / scenario 3 / influence: 'intention->action' is a required property"
    )
    assert errors[1] == (
        "at analysis of mental states across scenarios / Emotion / Reasons: part 2 must "
        "start with '2->3:'"
    )
    assert "at scenario 2 / dialogue: [" in errors[2] and "is too short" in errors[2]
    retry_prompts = [b["messages"][-1]["content"] for b in responder.bodies("scenarios")[1:]]
    assert "is too short" in retry_prompts[0]


def test_same_seed_same_contexts_and_a_rerun_asks_nothing_again(backend, pools, llm_server):
    llm_server.responder = GenerationResponder()
    first = _job(backend, stage_count=2, seed=11)
    generation_job_run(job_id=first.pk)
    calls = llm_server.request_count
    assert calls == 6

    again = _job(backend, stage_count=2, seed=11)
    generation_job_run(job_id=again.pk)

    contexts = [
        [(s.location, s.characters) for s in job.stages.order_by("index")] for job in (first, again)
    ]
    assert contexts[0] == contexts[1]
    assert contexts[0][0] != contexts[0][1]
    # Same prompts: the second job's replies all come from the response cache.
    assert llm_server.request_count == calls
    second_run = Run.objects.get(pk=GenerationJob.objects.get(pk=again.pk).run_id)
    assert second_run.done_calls == 6
    assert RunCall.objects.filter(run=second_run, from_cache=True).count() == 6
    assert CachedResponse.objects.count() == 6
    # A third seed draws other contexts.
    other = _job(backend, stage_count=1, seed=12)
    generation_job_run(job_id=other.pk)
    assert other.stages.get().characters != first.stages.get(index=1).characters
    # Running a finished job again is a no-op.
    assert generation_job_run(job_id=first.pk) == "skipped"


def test_edited_templates_are_used_and_recorded(backend, pools, llm_server):
    from annotation.dyntom.generation.prompts import active_generation_templates

    responder = GenerationResponder()
    llm_server.responder = responder
    template = active_generation_templates()["relationship"]
    revised = prompt_template_revise(
        template=template, user=template.user + " Mention where they first met."
    )
    job = _job(backend, stage_count=1, seed=2)
    generation_job_run(job_id=job.pk)

    stage = job.stages.get()
    assert stage.template_versions["relationship"] == f"{revised.name} v2"
    assert _user_prompt(responder.bodies("relationship")[0]).endswith(
        "Mention where they first met."
    )
    assert PromptTemplate.objects.filter(name=RETRY).count() == 1


def test_job_fails_with_a_clear_error_when_the_pools_are_empty(backend, llm_server):
    llm_server.responder = GenerationResponder()
    job = _job(backend, stage_count=1)
    generation_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "failed"
    assert "run manage.py load_dyntom_pools DIR" in job.error
    assert Run.objects.get(pk=job.run_id).status == "failed"
    assert llm_server.request_count == 0


def test_scenario_count_outside_4_to_7_is_refused(backend):
    with pytest.raises(ValueError, match="allowed 4 to 7"):
        _job(backend, scenario_count=3)
    with pytest.raises(ValueError, match="allowed 4 to 7"):
        _job(backend, scenario_count=8)


def test_budget_stops_the_job_before_the_call_that_could_break_it(backend, pools, llm_server):
    llm_server.responder = GenerationResponder()
    # max_tokens 4096 per call: a 5000-token budget allows one call, not two.
    job = _job(backend, stage_count=1, budget_tokens=5000)
    generation_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "could exceed the budget" in job.error
    assert Run.objects.get(pk=job.run_id).status == "budget_exhausted"
    assert llm_server.request_count == 1


def test_the_engine_never_executes_a_generation_run(backend, pools, llm_server):
    llm_server.responder = GenerationResponder()
    job = _job(backend, stage_count=1)
    generation_job_run(job_id=job.pk)
    job.refresh_from_db()
    run = Run.objects.get(pk=job.run_id)
    Run.objects.filter(pk=run.pk).update(status="running")  # as if the job were still going

    assert run.pk not in runs_requeue_orphaned()
    with pytest.raises(ValueError, match="resume that job instead"):
        run_resume(run_id=run.pk)


def test_keep_refused_by_the_importer_names_the_stage_and_writes_nothing(
    backend, pools, llm_server
):
    llm_server.responder = GenerationResponder()
    job = _job(backend, stage_count=1, scenario_count=4)
    generation_job_run(job_id=job.pk)
    stage = job.stages.get()
    # A question edited into something the importer refuses.
    del stage.questions["type_a_what_1"]["options"]
    stage.save(update_fields=["questions"])

    with pytest.raises(ValueError) as info:
        generated_stage_keep(stage=stage, reason="looks fine")

    message = str(info.value)
    assert message.startswith(f"generated stage {stage.pk} (job {job.pk}, stage 1): ")
    assert "record type_a_what_1: field 'options'" in message
    assert not Work.objects.filter(key=f"generated-{job.pk}-1").exists()
    stage.refresh_from_db()
    assert stage.status == "awaiting_validation" and stage.decided_at is None


def test_a_backend_error_marks_that_stage_only_and_counts_on_the_run(backend, pools, llm_server):
    llm_server.responder = GenerationResponder()
    llm_server.enqueue(status=400, text="bad request")  # not retryable: fails that call
    job = _job(backend, stage_count=2, scenario_count=4)

    generation_job_run(job_id=job.pk)

    job.refresh_from_db()
    first, second = job.stages.order_by("index")
    assert first.status == "needs_attention"
    assert first.status_reason.startswith("relationship: the backend failed: gen-test: HTTP 400")
    assert first.calls[0]["call_id"] is None and "HTTP 400" in first.calls[0]["error"]
    assert second.status == "awaiting_validation"
    run = Run.objects.get(pk=job.run_id)
    assert (run.total_calls, run.done_calls, run.error_calls) == (4, 3, 1)
    assert RunCall.objects.get(run=run, status="error").unit_key.endswith("stage1:relationship:1")


def test_a_job_taken_up_again_continues_where_it_stopped_and_asks_nothing_twice(
    backend, pools, llm_server
):
    llm_server.responder = GenerationResponder()
    job = _job(backend, stage_count=2, scenario_count=4, seed=5)
    generation_job_run(job_id=job.pk)
    stage = job.stages.get(index=2)
    scenarios, questions = stage.scenarios, stage.questions
    # As if the worker had died after stage 2's trajectory: its task is delivered again.
    GenerationJob.objects.filter(pk=job.pk).update(status="running", finished_at=None)
    GeneratedStage.objects.filter(pk=stage.pk).update(
        status="generating", scenarios={}, questions={}
    )
    asked = llm_server.request_count

    assert generation_job_run(job_id=job.pk) == "succeeded"

    stage.refresh_from_db()
    assert stage.status == "awaiting_validation"
    assert (stage.scenarios, stage.questions) == (scenarios, questions)
    # The scenarios call was answered before: its RunCall holds the reply.
    assert llm_server.request_count == asked
    assert len([c for c in stage.calls if c["step"] == "scenarios"]) == 1
