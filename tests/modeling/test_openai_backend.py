"""The OpenAI-compatible backend against the scripted loopback server."""

from __future__ import annotations

import logging
import time
from email.utils import formatdate

import pytest

from modeling.backends import BackendError, ChatRequest, get_backend
from modeling.backends.base import BackendConfigError
from modeling.backends.openai_backend import retry_after_seconds

pytestmark = pytest.mark.django_db


def _request(text: str = "hello", **params) -> ChatRequest:
    return ChatRequest.build([{"role": "user", "content": text}], model="test-model", params=params)


def test_completion_carries_text_tokens_and_sampling_params(openai_backend, llm_server):
    llm_server.enqueue("the answer", prompt_tokens=11, completion_tokens=2)
    result = get_backend(openai_backend).complete(_request(temperature=0.7, top_p=0.9, seed=3))
    assert result.text == "the answer"
    assert (result.prompt_tokens, result.completion_tokens) == (11, 2)
    assert result.finish_reason == "stop"
    sent = llm_server.requests[0]
    assert sent["model"] == "test-model"
    assert (sent["temperature"], sent["top_p"], sent["seed"]) == (0.7, 0.9, 3)
    assert sent["messages"] == [{"role": "user", "content": "hello"}]


def test_prepared_bodies_are_the_bytes_the_client_would_send(openai_backend, llm_server):
    from openai._utils._json import openapi_dumps

    backend = get_backend(openai_backend)
    prompt = [
        {"role": "system", "content": "Réponds: ✓"},
        {"role": "user", "content": "x" * 50_000},
    ]
    samples = [
        ChatRequest.build(prompt, model="test-model", params={"seed": s, "temperature": 0.5})
        for s in (7, 8)
    ]
    other = ChatRequest.build(prompt[1:], model="test-model", params={"top_k": 4}, sample_index=1)
    backend.prepare(samples)  # one prompt, two samples: encoded once
    assert len(backend._encoded) == 1
    for request in [*samples, other]:
        expected = {"model": "test-model", "messages": request.message_dicts, **request.param_dict}
        assert backend._body(request) == openapi_dumps(expected)
    assert backend._encoded == {}  # each prepared request sent once: nothing kept

    backend.prepare(samples)
    for request in samples:
        assert backend.complete(request).text == "ok"
    assert [(r["seed"], r["messages"]) for r in llm_server.requests] == [(7, prompt), (8, prompt)]
    assert llm_server.header_values("Content-Type") == ["application/json"] * 2
    backend.close()


def test_key_from_environment_is_sent_and_never_logged(
    openai_backend, llm_server, monkeypatch, caplog
):
    monkeypatch.setenv("TOMLAB_KEY_TEST", "sk-very-secret-42")
    openai_backend.api_key_env = "TOMLAB_KEY_TEST"
    llm_server.enqueue(status=500)
    llm_server.enqueue("fine")
    with caplog.at_level(logging.DEBUG):
        assert get_backend(openai_backend).complete(_request()).text == "fine"
    assert llm_server.authorizations == ["Bearer sk-very-secret-42"] * 2
    assert "sk-very-secret-42" not in caplog.text
    assert "retry 1/3" in caplog.text  # the retry itself is logged


def test_missing_key_variable_is_a_config_error(openai_backend, monkeypatch):
    monkeypatch.delenv("TOMLAB_KEY_NO_SUCH", raising=False)
    openai_backend.api_key_env = "TOMLAB_KEY_NO_SUCH"
    with pytest.raises(BackendConfigError, match="TOMLAB_KEY_NO_SUCH is not set"):
        get_backend(openai_backend)


def test_429_waits_for_retry_after_then_succeeds(openai_backend, llm_server):
    llm_server.enqueue(status=429, headers={"Retry-After": "1"})
    llm_server.enqueue("after the wait")
    started = time.monotonic()
    result = get_backend(openai_backend).complete(_request())
    assert result.text == "after the wait"
    assert time.monotonic() - started >= 0.95
    assert llm_server.request_count == 2


def test_5xx_retried_with_backoff_until_retries_run_out(openai_backend, llm_server):
    for _ in range(4):  # max_retries=3: one try and three retries
        llm_server.enqueue(status=503)
    llm_server.enqueue("never reached")
    with pytest.raises(BackendError, match=r"HTTP 503.*after 4 attempt"):
        get_backend(openai_backend).complete(_request())
    assert llm_server.request_count == 4
    assert llm_server.pending_replies == 1


def test_timeout_is_retried(openai_backend, llm_server):
    openai_backend.timeout_s = 0.3
    llm_server.enqueue("too slow", delay=1.0)
    llm_server.enqueue("in time")
    assert get_backend(openai_backend).complete(_request()).text == "in time"
    assert llm_server.request_count == 2


def test_client_errors_are_not_retried(openai_backend, llm_server):
    llm_server.enqueue(status=400)
    llm_server.enqueue("never reached")
    with pytest.raises(BackendError, match="HTTP 400"):
        get_backend(openai_backend).complete(_request())
    assert llm_server.request_count == 1


def test_malformed_body_is_an_error_not_a_crash(openai_backend, llm_server):
    llm_server.enqueue(body="{this is not json", content_type="application/json")
    with pytest.raises(BackendError, match="malformed response"):
        get_backend(openai_backend).complete(_request())


def test_complete_many_respects_the_concurrency_limit(openai_backend, llm_server):
    openai_backend.max_concurrency = 3
    llm_server.fixed_latency = 0.2
    requests = [_request(f"q{i}") for i in range(9)]
    results = dict(get_backend(openai_backend).complete_many(requests))
    assert len(results) == 9
    assert all(r.text == "ok" for r in results.values())
    assert llm_server.max_in_flight == 3


def test_calls_in_flight_reuse_their_connections(openai_backend, llm_server):
    # One client per call in flight, each keeping its connection alive: 30 calls at 3
    # in flight open 3 connections, not one per call, and every client sends the
    # backend's own headers.
    openai_backend.max_concurrency = 3
    openai_backend.options = {"headers": {"X-Proxy-Auth": "proxy-token"}}
    llm_server.fixed_latency = 0.05
    backend = get_backend(openai_backend)
    for _ in range(2):
        results = dict(backend.complete_many([_request(f"q{i}") for i in range(15)]))
        assert len(results) == 15
    backend.close()
    assert llm_server.request_count == 30
    assert llm_server.max_in_flight == 3
    assert llm_server.connections_opened == 3
    assert llm_server.header_values("X-Proxy-Auth") == ["proxy-token"] * 30


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_header_forms(headers, expected):
    assert retry_after_seconds(headers) == expected


def test_retry_after_http_date():
    seconds = retry_after_seconds({"retry-after": formatdate(time.time() + 30, usegmt=True)})
    assert 28 <= seconds <= 31
