"""The run engine end to end: DynToM over the real stages against the loopback server."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.management import call_command

from benchmarks.models import DynToMQuestion
from modeling.backends import ChatRequest
from modeling.models import CachedResponse, Prediction, Run, RunCall
from modeling.runs.executor import run_execute
from modeling.runs.prompt_templates import prompt_template_revise
from modeling.runs.recording import RequestCodec
from modeling.runs.selectors import run_prediction_summary
from modeling.runs.services import run_cancel, run_create, run_resume, runs_requeue_orphaned

from .conftest import answer_all, gold_responder, prompt_keys

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("dyntom_stages")]


def _run(backend, **kwargs) -> Run:
    kwargs.setdefault("benchmark", "dyntom")
    kwargs.setdefault("method", "vanilla")
    kwargs.setdefault("selection", {})
    return run_create(backend=backend, enqueue=False, **kwargs)


def test_full_dyntom_run_stores_a_prediction_per_question(
    openai_backend, llm_server, dyntom_stages
):
    wrong = {"type_d_how_1", "type_a_what_1"}
    llm_server.responder = gold_responder(list(dyntom_stages), wrong=wrong)
    run = _run(openai_backend)
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED

    run.refresh_from_db()
    assert (run.done_calls, run.total_calls, run.error_calls) == (24, 24, 0)
    assert llm_server.request_count == 24
    assert run.prompt_tokens > 0 and run.completion_tokens > 0
    assert run.params["temperature"] == 0.7 and run.params["top_p"] == 0.9
    assert {r["temperature"] for r in llm_server.requests} == {0.7}

    predictions = Prediction.objects.filter(run=run)
    assert predictions.count() == DynToMQuestion.objects.count() == 1719
    # "z" is not an option letter: those answers are unparseable and wrong.
    bad = predictions.filter(dyntom_question__key__in=wrong)
    assert bad.count() == 48
    assert set(bad.values_list("parse_status", flat=True)) == {"unparseable"}
    summary = run_prediction_summary(run=run)
    assert (summary.total, summary.correct) == (1719, 1719 - 48)
    assert summary.by_status["unparseable"] == 48
    assert summary.accuracy == pytest.approx((1719 - 48) / 1719)

    one = predictions.select_related("dyntom_question").first()
    assert one.template_version == "dyntom-vanilla v1"
    assert one.model == "test-model"
    assert one.params["top_p"] == 0.9
    assert one.raw_output == ""  # stored once, on the call
    assert one.dyntom_question.key in json.loads(one.reply)
    assert one.reply == one.call.raw_output
    assert one.prompt_tokens > 0 and one.latency_ms >= 0


def test_rerun_and_resume_make_zero_requests(openai_backend, llm_server, dyntom_stages):
    llm_server.responder = answer_all("b")
    first = _run(openai_backend, selection={"limit": 5})
    run_execute(run_id=first.pk)
    assert llm_server.request_count == 5

    # The same run again: done calls are skipped.
    assert run_resume(run_id=first.pk).status == Run.Status.SUCCEEDED
    assert run_execute(run_id=first.pk) == "skipped"
    # A new run with the same backend, model, messages and parameters: all from the cache.
    second = _run(openai_backend, selection={"limit": 5})
    assert run_execute(run_id=second.pk) == Run.Status.SUCCEEDED
    assert llm_server.request_count == 5
    calls = RunCall.objects.filter(run=second)
    assert calls.count() == 5 and all(c.from_cache for c in calls)
    second.refresh_from_db()
    assert second.cost == 0
    assert second.prompt_tokens == Run.objects.get(pk=first.pk).prompt_tokens
    assert list(
        Prediction.objects.filter(run=second)
        .order_by("dyntom_question")
        .values_list("dyntom_question", "parsed_answer")
    ) == list(
        Prediction.objects.filter(run=first)
        .order_by("dyntom_question")
        .values_list("dyntom_question", "parsed_answer")
    )

    # Another temperature is another request: it is not served from the cache.
    third = _run(openai_backend, selection={"limit": 5}, params={"temperature": 0.0})
    run_execute(run_id=third.pk)
    assert llm_server.request_count == 10


def test_three_samples_are_three_cached_calls(openai_backend, llm_server, dyntom_stages):
    letters = iter("abcdef")
    llm_server.responder = lambda body: json.dumps(dict.fromkeys(prompt_keys(body), next(letters)))
    run = _run(openai_backend, selection={"limit": 2}, params={"samples": 3, "seed": 7})
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    assert llm_server.request_count == 6
    assert sorted(r["seed"] for r in llm_server.requests) == [7, 7, 8, 8, 9, 9]
    assert CachedResponse.objects.count() == 6
    questions = DynToMQuestion.objects.filter(stage__work__key__in=["trial1113", "trial1191"])
    predictions = Prediction.objects.filter(run=run)
    assert predictions.count() == 3 * questions.count()
    first = questions.first()
    answers = set(predictions.filter(dyntom_question=first).values_list("parsed_answer", flat=True))
    assert len(answers) == 3  # three distinct samples, not one sample three times

    again = _run(openai_backend, selection={"limit": 2}, params={"samples": 3, "seed": 7})
    run_execute(run_id=again.pk)
    assert llm_server.request_count == 6
    # The cache rows hold each request as sent (written by the engine as JSON text).
    stored = CachedResponse.objects.order_by("request__sample_index").first().request
    assert stored["params"]["seed"] in (7, 8, 9) and stored["sample_index"] == 0
    sent = {json.dumps(r["messages"], sort_keys=True) for r in llm_server.requests}
    assert json.dumps(stored["messages"], sort_keys=True) in sent


def test_request_codec_keys_equal_chat_request_cache_keys():
    """The engine's fast cache keys must stay the keys ChatRequest computes."""
    requests = [
        ChatRequest.build(
            [{"role": "system", "content": 'é {x}\n "q"'}, {"role": "user", "content": "hi"}],
            model="org/model-1",
            params={"seed": 3 + i, "temperature": 0.7, "top_p": 0.9, "stop": ["\n\n"]},
            sample_index=i,
        )
        for i in range(3)
    ] + [ChatRequest.build([{"role": "user", "content": "x"}], model="m", params={})]
    codec = RequestCodec('local "ü"')
    for request in requests:
        assert codec.cache_key(request) == request.cache_key('local "ü"')
        assert json.loads(codec.request_json(request)) == request.as_json()
    assert len({codec.cache_key(r) for r in requests}) == 4


def test_token_budget_stops_cleanly_and_resume_finishes(openai_backend, llm_server, dyntom_stages):
    openai_backend.max_concurrency = 1
    openai_backend.save()
    llm_server.responder = answer_all("a")
    probe = _run(openai_backend, selection={"limit": 1})
    run_execute(run_id=probe.pk)
    probe.refresh_from_db()
    per_call = probe.prompt_tokens + probe.completion_tokens

    llm_server.reset()
    llm_server.responder = answer_all("c")
    run = _run(
        openai_backend,
        selection={"limit": 6},
        params={"temperature": 0.5},
        budget_tokens=int(per_call * 3.5),
    )
    assert run_execute(run_id=run.pk) == Run.Status.BUDGET_EXHAUSTED
    run.refresh_from_db()
    assert 1 <= run.done_calls < 6
    assert llm_server.request_count == run.done_calls
    assert run.prompt_tokens + run.completion_tokens <= run.budget_tokens
    assert "budget" in run.error

    Run.objects.filter(pk=run.pk).update(budget_tokens=None)
    run_resume(run_id=run.pk)
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    assert llm_server.request_count == 6  # nothing paid for twice
    assert RunCall.objects.filter(run=run, status="done").count() == 6


def test_cost_budget_uses_the_backend_prices(openai_backend, llm_server, dyntom_stages):
    openai_backend.max_concurrency = 1
    openai_backend.price_input_per_1k = Decimal("1.0")
    openai_backend.save()
    llm_server.responder = answer_all("a")
    run = _run(openai_backend, selection={"limit": 4}, budget_cost=Decimal("25"))
    assert run_execute(run_id=run.pk) == Run.Status.BUDGET_EXHAUSTED
    run.refresh_from_db()
    assert 0 < run.cost <= Decimal("25")
    calls = RunCall.objects.filter(run=run, status="done")
    assert sum(c.cost for c in calls) == run.cost
    assert all(c.cost == Decimal(c.prompt_tokens) / 1000 for c in calls)


def test_failed_calls_fail_the_run_and_only_they_are_retried(
    openai_backend, llm_server, dyntom_stages
):
    openai_backend.max_concurrency = 1
    openai_backend.save()
    llm_server.responder = answer_all("a")
    llm_server.enqueue(status=400)  # the first stage's call fails for good
    run = _run(openai_backend, selection={"limit": 3})
    assert run_execute(run_id=run.pk) == Run.Status.FAILED
    run.refresh_from_db()
    assert (run.done_calls, run.error_calls) == (2, 1)
    assert "1 call(s) failed" in run.error
    failed = RunCall.objects.get(run=run, status="error")
    assert "HTTP 400" in failed.error

    run_resume(run_id=run.pk)
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    assert llm_server.request_count == 4
    assert llm_server.requests[3] == llm_server.requests[0]
    assert Prediction.objects.filter(run=run).values("dyntom_question").distinct().count() == (
        Prediction.objects.filter(run=run).count()
    )


def test_unparseable_and_refused_outputs_count_as_wrong(openai_backend, llm_server, dyntom_stages):
    llm_server.enqueue("I'm sorry, but I can't help with that.")
    llm_server.enqueue("Scenario one is about trust. No idea.")
    run = _run(openai_backend, selection={"limit": 2}, params={"temperature": 0.1})
    openai_backend.max_concurrency = 1
    openai_backend.save()
    run_execute(run_id=run.pk)
    summary = run_prediction_summary(run=run)
    assert summary.correct == 0 and summary.accuracy == 0
    assert summary.by_status["refused"] + summary.by_status["unparseable"] == summary.total > 0
    assert summary.by_status["refused"] > 0 and summary.by_status["unparseable"] > 0


def test_concurrency_limit_holds_during_a_run(openai_backend, llm_server, dyntom_stages):
    llm_server.fixed_latency = 0.15
    llm_server.responder = answer_all("a")
    run = _run(openai_backend, selection={"limit": 12})
    run_execute(run_id=run.pk)
    assert llm_server.request_count == 12
    assert llm_server.max_in_flight == openai_backend.max_concurrency == 4


def test_cancelled_run_is_not_executed_and_orphans_are_requeued(
    openai_backend, llm_server, dyntom_stages, django_capture_on_commit_callbacks
):
    run = _run(openai_backend, selection={"limit": 2})
    stuck = _run(openai_backend, selection={"limit": 1})
    Run.objects.filter(pk=stuck.pk).update(status=Run.Status.RUNNING)
    assert run_cancel(run_id=run.pk).status == Run.Status.CANCELLED
    assert run_execute(run_id=run.pk) == "skipped"
    assert llm_server.request_count == 0
    assert runs_requeue_orphaned() == [stuck.pk]


def test_template_edits_make_new_versions_and_runs_keep_theirs(
    openai_backend, llm_server, dyntom_stages
):
    llm_server.responder = answer_all("a")
    run = _run(openai_backend, selection={"limit": 1})
    old = run.template
    new = prompt_template_revise(template=old, user=old.user.replace("Read", "Study"))
    assert (new.name, new.version, old.version) == ("dyntom-vanilla", 2, 1)
    later = _run(openai_backend, selection={"limit": 1})
    assert later.template == new
    run_execute(run_id=run.pk)
    run_execute(run_id=later.pk)
    contents = [r["messages"][-1]["content"] for r in llm_server.requests]
    assert sorted(c.split()[0] for c in contents) == ["Read", "Study"]
    assert Prediction.objects.filter(run=later).first().template_version == "dyntom-vanilla v2"


def test_run_model_command_dry_run_and_foreground(
    openai_backend, llm_server, dyntom_stages, capsys
):
    call_command(
        "run_model",
        "--benchmark",
        "dyntom",
        "--method",
        "cot",
        "--backend",
        openai_backend.name,
        "--items",
        "trial149",
        "trial210",
        "--dry-run",
    )
    out = capsys.readouterr().out
    assert "would make 2 call(s) (2 prompt(s) x 1 sample(s))" in out
    assert "step by step" in out and "Scott Brennan" in out
    assert llm_server.request_count == 0 and not Run.objects.exists()

    llm_server.responder = answer_all("a")
    call_command(
        "run_model",
        "--benchmark",
        "dyntom",
        "--method",
        "cot",
        "--backend",
        openai_backend.name,
        "--items",
        "trial149",
        "trial210",
    )
    captured = capsys.readouterr()
    assert "succeeded: 2/2 calls, 0 errors" in captured.out
    assert "run " in captured.err  # the progress bar
    assert llm_server.request_count == 2


def test_run_model_command_errors_name_the_problem(openai_backend, dyntom_stages):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no backend named 'nope'"):
        call_command("run_model", "--benchmark", "dyntom", "--method", "cot", "--backend", "nope")
    with pytest.raises(CommandError, match="method 'fancy' is not one of vanilla, cot"):
        call_command(
            "run_model",
            "--benchmark",
            "dyntom",
            "--method",
            "fancy",
            "--backend",
            openai_backend.name,
            "--dry-run",
        )


def test_local_model_runs_go_to_the_gpu_queue(openai_backend, dyntom_stages):
    from modeling.models import Backend
    from modeling.runs.services import run_queue

    local = Backend.objects.create(
        name="local-lm", kind=Backend.Kind.TRANSFORMERS, model_path="/models/tiny"
    )
    assert run_queue(_run(local, selection={"limit": 1})) == "gpu"
    assert run_queue(_run(openai_backend, selection={"limit": 1})) == "default"
