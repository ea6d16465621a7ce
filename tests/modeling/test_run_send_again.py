"""Issue 49 item 5: "send again, do not use the cache" on a new run, on resume (page, API,
command), the cached count on the run page and in the API, and the explorer's search.

The calls are counted at the loopback OpenAI-compatible server the suite starts.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from modeling.models import CachedResponse, Prediction, Run, RunCall
from modeling.runs import executor, selectors, services
from modeling.runs.recording import NO_CACHE

from .conftest import answer_all

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("dyntom_stages")]

PROSE = "Honestly, I could not say which letter fits."


@pytest.fixture
def client_researcher(client, researcher):
    client.force_login(researcher)
    return client


def _run(backend, *, limit: int = 3, **params) -> Run:
    run = services.run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=backend,
        selection={"limit": limit},
        params=params or None,
        enqueue=False,
    )
    executor.run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _cached_texts(run: Run) -> set[str]:
    keys = RunCall.objects.filter(run=run).values_list("cache_key", flat=True)
    return set(CachedResponse.objects.filter(key__in=keys).values_list("text", flat=True))


def test_a_new_run_that_sends_again_asks_every_call_and_replaces_the_cache(
    openai_backend, llm_server, dyntom_stages
):
    llm_server.responder = answer_all("b")
    first = _run(openai_backend)
    assert llm_server.request_count == 3

    llm_server.responder = answer_all("c")
    again = _run(openai_backend, **{NO_CACHE: True})
    assert again.params[NO_CACHE] is True
    assert again.status == Run.Status.SUCCEEDED
    assert llm_server.request_count == 6  # asked again, though the cache had all three
    assert not RunCall.objects.filter(run=again, from_cache=True).exists()
    assert selectors.run_cached_calls(run=again) == 0
    assert set(Prediction.objects.filter(run=again).values_list("parsed_answer", flat=True)) == {
        "c"
    }
    # The fresh replies replaced the cached ones (one row per request still)...
    assert all('"c"' in text for text in _cached_texts(again))
    assert CachedResponse.objects.count() == 3
    # ...so a later run that uses the cache gets the newest reply, and asks nothing.
    later = _run(openai_backend)
    assert llm_server.request_count == 6
    assert selectors.run_cached_calls(run=later) == 3
    assert set(Prediction.objects.filter(run=later).values_list("parsed_answer", flat=True)) == {
        "c"
    }
    # The first run keeps the reply it got.
    assert set(Prediction.objects.filter(run=first).values_list("parsed_answer", flat=True)) == {
        "b"
    }


def test_a_failed_run_from_the_cache_is_sent_again_from_its_page(
    openai_backend, llm_server, dyntom_stages, client_researcher
):
    # The server answered prose; the run failed, and its replies went to the cache.
    llm_server.responder = lambda body: PROSE
    first = _run(openai_backend)
    assert first.status == Run.Status.FAILED
    # The server is fixed; a run with the same settings silently reuses the prose.
    llm_server.responder = answer_all("a")
    second = _run(openai_backend)
    assert second.status == Run.Status.FAILED
    assert llm_server.request_count == 3
    tokens_before = (second.prompt_tokens, second.completion_tokens)

    url = reverse("modeling:run-detail", args=[second.pk])
    page = client_researcher.get(url).content.decode()
    assert '<dd data-testid="cached-calls">3</dd>' in page
    assert "3 of 3 replies came from the cache" in page
    assert 'data-testid="ask-again"' in page

    response = client_researcher.post(
        reverse("modeling:run-resume", args=[second.pk]), {"send_again": "1"}
    )
    assert response.status_code == 302
    second.refresh_from_db()
    assert second.status == Run.Status.QUEUED and second.params[NO_CACHE] is True
    # The cached calls were reopened: their counts and predictions are gone.
    assert second.done_calls == 0 and second.prompt_tokens == 0
    assert not Prediction.objects.filter(run=second).exists()

    assert executor.run_execute(run_id=second.pk) == Run.Status.SUCCEEDED
    assert llm_server.request_count == 6  # the three calls made again, at the server
    second.refresh_from_db()
    assert (second.done_calls, second.total_calls) == (3, 3)
    calls = RunCall.objects.filter(run=second)
    assert not calls.filter(from_cache=True).exists()
    assert (second.prompt_tokens, second.completion_tokens) == (
        sum(c.prompt_tokens for c in calls),
        sum(c.completion_tokens for c in calls),
    )
    assert second.prompt_tokens == tokens_before[0]
    assert set(Prediction.objects.filter(run=second).values_list("parsed_answer", flat=True)) == {
        "a"
    }
    assert all(PROSE not in text for text in _cached_texts(second))

    page = client_researcher.get(url).content.decode()
    assert '<dd data-testid="cached-calls">0</dd>' in page
    assert "Sent again: this run takes no reply from the cache." in page
    assert "<code>no_cache</code></th><td>true</td>" in page

    # The API says the same, from the same count.
    api = client_researcher.get(f"/api/modeling/runs/{second.pk}/").json()
    assert api["cached_calls"] == 0 and api["params"][NO_CACHE] is True
    listed = client_researcher.get("/api/modeling/runs/").json()["results"]
    assert {r["id"]: r["cached_calls"] for r in listed} == {first.pk: 0, second.pk: 0}


def test_resume_without_send_again_keeps_the_cached_replies(
    openai_backend, llm_server, dyntom_stages, client_researcher
):
    llm_server.responder = answer_all("b")
    _run(openai_backend)
    stopped = _run(openai_backend, limit=4)  # three from the cache, one asked
    assert llm_server.request_count == 4
    assert selectors.run_cached_calls(run=stopped) == 3
    Run.objects.filter(pk=stopped.pk).update(status=Run.Status.STOPPED)

    listed = client_researcher.get("/api/modeling/runs/").json()["results"]
    assert {r["id"]: r["cached_calls"] for r in listed}[stopped.pk] == 3
    page = client_researcher.get(reverse("modeling:run-detail", args=[stopped.pk]))
    assert b'data-testid="send-again"' in page.content

    services.run_resume(run_id=stopped.pk)
    executor.run_execute(run_id=stopped.pk)
    assert llm_server.request_count == 4
    assert selectors.run_cached_calls(run=Run.objects.get(pk=stopped.pk)) == 3


def test_api_resume_sends_again_and_refuses_unknown_keys(
    openai_backend, llm_server, dyntom_stages, client_researcher
):
    llm_server.responder = answer_all("b")
    _run(openai_backend)
    run = _run(openai_backend)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)
    url = f"/api/modeling/runs/{run.pk}/resume/"

    refused = client_researcher.post(url, {"send_agian": True}, content_type="application/json")
    assert refused.status_code == 400 and "send_agian" in refused.json()

    resumed = client_researcher.post(url, {"send_again": True}, content_type="application/json")
    assert resumed.status_code == 200
    body = resumed.json()
    assert body["status"] == "queued" and body["cached_calls"] == 0
    assert body["params"][NO_CACHE] is True
    executor.run_execute(run_id=run.pk)
    assert llm_server.request_count == 6


def test_api_create_takes_no_cache(openai_backend, llm_server, dyntom_stages, client_researcher):
    created = client_researcher.post(
        "/api/modeling/runs/",
        {
            "benchmark": "dyntom",
            "method": "vanilla",
            "backend": openai_backend.name,
            "selection": {"limit": 1},
            "params": {"no_cache": True},
        },
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["params"][NO_CACHE] is True


def test_run_form_send_again_is_stored_in_the_params(
    openai_backend, dyntom_stages, client_researcher
):
    form = client_researcher.get(reverse("modeling:run-new")).content.decode()
    assert "Send again, do not use the cache" in form
    data = {
        "benchmark": "dyntom",
        "method": "vanilla",
        "backend": openai_backend.pk,
        "limit": 1,
        "action": "start",
    }
    client_researcher.post(reverse("modeling:run-new"), {**data, "send_again": "on"})
    client_researcher.post(reverse("modeling:run-new"), data)
    sent_again, plain = Run.objects.order_by("pk")
    assert sent_again.params[NO_CACHE] is True
    assert NO_CACHE not in plain.params


def test_run_model_no_cache_asks_again(openai_backend, llm_server, dyntom_stages, capsys):
    args = ["--benchmark", "dyntom", "--method", "vanilla", "--backend", openai_backend.name]
    args += ["--items", "trial149", "trial210"]
    llm_server.responder = answer_all("a")
    call_command("run_model", *args)
    call_command("run_model", *args)
    out = capsys.readouterr().out
    assert llm_server.request_count == 2
    assert "2 of the replies came from the cache" in out

    call_command("run_model", *args, "--no-cache")
    out = capsys.readouterr().out
    assert llm_server.request_count == 4
    assert "came from the cache" not in out
    assert Run.objects.order_by("-pk").first().params[NO_CACHE] is True

    # --resume --no-cache: the calls the cache answered are asked again.
    cached = Run.objects.order_by("pk")[1]
    Run.objects.filter(pk=cached.pk).update(status=Run.Status.FAILED)
    call_command("run_model", "--resume", str(cached.pk), "--no-cache")
    assert llm_server.request_count == 6
    assert selectors.run_cached_calls(run=cached) == 0


# --- the explorer's search --------------------------------------------------------------


@pytest.fixture
def searched_run(openai_backend, llm_server, dyntom_stages) -> Run:
    """Three calls: the second stage's reply is prose with a quote and an accent."""
    second = dyntom_stages[1].characters_information

    def responder(body: dict) -> str:
        if second in body["messages"][-1]["content"]:
            return 'Je ne sais pas: "aucune idée".'
        return answer_all("a")(body)

    llm_server.responder = responder
    return _run(openai_backend)


def _rows(client, run: Run, **query) -> tuple[int, str]:
    response = client.get(reverse("modeling:prediction-list", args=[run.pk]), query)
    return response.status_code, response.content.decode()


def test_search_finds_replies_case_insensitively(searched_run, client_researcher, dyntom_stages):
    questions = dyntom_stages[1].questions.count()
    # Upper-case ASCII letters: SQLite's LIKE folds the case of ASCII letters only.
    rows = selectors.prediction_rows(run=searched_run, q='"AUCUNE idée"')
    assert rows.count() == questions
    status, page = _rows(client_researcher, searched_run, q='"aucune idée"')
    assert status == 200
    assert f"{questions} prediction" in page
    # The search stays in the URL of every link that keeps the filters.
    assert "q=%22aucune+id%C3%A9e%22" in page
    assert 'value="&quot;aucune idée&quot;"' in page
    counts = selectors.prediction_status_counts(run=searched_run, q="aucune idée")
    assert counts["unparseable"] == questions and sum(counts.values()) == questions

    export = client_researcher.get(
        reverse("modeling:prediction-list", args=[searched_run.pk]),
        {"q": "aucune idée", "format": "csv"},
    )
    exported = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert len(exported) == questions


def test_search_reads_the_prompt_sent(searched_run, client_researcher, dyntom_stages):
    # A line only the third stage's prompt holds: its characters' information.
    third = dyntom_stages[2]
    phrase = third.characters_information.split("\n")[0][:40]
    assert phrase and phrase not in dyntom_stages[0].characters_information
    rows = selectors.prediction_rows(run=searched_run, q=phrase.upper())
    assert set(rows.values_list("work", flat=True)) == {third.work.key}
    assert rows.count() == third.questions.count()


def test_search_pages_and_bad_queries(searched_run, client_researcher):
    status, page = _rows(client_researcher, searched_run, q="a", page=2)
    assert status == 200 and "q=a" in page
    status, page = _rows(client_researcher, searched_run, q="no such words anywhere")
    assert status == 200 and "No predictions match “no such words anywhere”" in page
    status, page = _rows(client_researcher, searched_run, q="x" * 201)
    assert status == 200 and "q: search for at most 200 characters" in page
    status, page = _rows(client_researcher, searched_run, q="a\x00b")
    assert status == 200 and "q: the search text holds a NUL byte" in page


def test_the_predictions_api_searches_too(searched_run, client_researcher, dyntom_stages):
    url = f"/api/modeling/runs/{searched_run.pk}/predictions/"
    found = client_researcher.get(url, {"q": "AUCUNE idée", "page_size": 1}).json()
    assert found["count"] == dyntom_stages[1].questions.count()
    assert "aucune idée" in found["results"][0]["raw_output"]
    refused = client_researcher.get(url, {"q": "x" * 201})
    assert refused.status_code == 400
    assert refused.json() == {"q": ["search for at most 200 characters"]}


def test_search_query_count_does_not_grow_with_the_rows(
    searched_run, client_researcher, django_assert_max_num_queries
):
    with django_assert_max_num_queries(12):
        status, _ = _rows(client_researcher, searched_run, q="a")
    assert status == 200


def test_the_prompt_search_reads_json_escapes_as_text(openai_backend, llm_server, dyntom_stages):
    """The cache row holds the request as JSON; the search matches the text itself."""
    llm_server.responder = answer_all("a")
    run = _run(openai_backend, limit=1)
    call = RunCall.objects.get(run=run)
    row = CachedResponse.objects.get(key=call.cache_key)
    row.request = {
        **row.request,
        "messages": [{"role": "user", "content": 'Ask "Zoë"\nabout it'}],
    }
    row.save(update_fields=["request"])
    assert json.dumps(row.request).count("\\u00eb") == 1  # escaped in the JSON text
    for query in ('"zoë"', "ZOë", 'ask "Zoë"', 'Zoë"\nabout'):
        assert selectors.prediction_rows(run=run, q=query).exists(), query
    assert not selectors.prediction_rows(run=run, q="content").exists()


def test_direct_calls_send_again_and_replace_the_cache(openai_backend, llm_server):
    """Calls a job or a pipeline's preparing makes one by one honour the mark too."""
    from modeling.runs.direct import run_direct_call, run_direct_create

    messages = [{"role": "user", "content": "Say hello."}]
    llm_server.enqueue("hello")
    llm_server.enqueue("hello again")
    plain = run_direct_create(name="a", benchmark="dyntom", method="x", backend=openai_backend)
    assert run_direct_call(run=plain, unit_key="u", messages=messages).raw_output == "hello"
    cached = run_direct_create(name="b", benchmark="dyntom", method="x", backend=openai_backend)
    assert run_direct_call(run=cached, unit_key="u", messages=messages).from_cache
    assert llm_server.request_count == 1

    again = run_direct_create(
        name="c", benchmark="dyntom", method="x", backend=openai_backend, params={NO_CACHE: True}
    )
    call = run_direct_call(run=again, unit_key="u", messages=messages)
    assert (call.raw_output, call.from_cache) == ("hello again", False)
    assert llm_server.request_count == 2
    assert CachedResponse.objects.get(key=call.cache_key).text == "hello again"
