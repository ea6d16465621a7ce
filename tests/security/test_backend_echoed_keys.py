"""A key echoed by the server is never stored, shown or logged (issue 26, item 3).

OpenAI-style servers answer a bad key with "Incorrect API key provided: sk-…", and
proxies echo request headers in their 5xx bodies; that text landed verbatim in
RunCall.error, on the run page, the admin's RunCall page and the worker's log. Here
the fake server echoes the key (whole and cut short, as OpenAI does) and a secret
header: every place that text goes must hold it masked.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.urls import reverse

from common import log_redaction
from common.log_redaction import RedactSecrets, mask_secrets
from modeling.backends import BackendError
from modeling.backends.secrets import mask_secrets as backend_mask_secrets
from modeling.models import Backend, CachedResponse, Run, RunCall
from modeling.runs.direct import run_direct_call, run_direct_create, run_direct_finish
from modeling.runs.executor import run_execute
from modeling.runs.services import run_create
from tests.celery_worker import purge_queues, start_worker, stop_worker
from tests.factories import DynToMQuestionFactory
from tests.llm_server import Reply

# Not OpenAI-shaped, so only knowing the key masks it (no "sk-" pattern helps).
KEY = "lab-key-" + secrets.token_urlsafe(24)
HEADER_SECRET = "hdr-" + secrets.token_urlsafe(20)
CUT_SHORT = f"{KEY[:10]}{'*' * 20}{KEY[-4:]}"  # how OpenAI's 401 quotes a key


def _echo_500() -> str:
    return json.dumps(
        {"error": {"message": f"proxy: upstream refused X-Api-Key: {HEADER_SECRET}, key {KEY}"}}
    )


def _echo_401() -> str:
    return json.dumps(
        {
            "error": {
                "message": f"Incorrect API key provided: {CUT_SHORT}. You passed {KEY}.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        }
    )


def _script_echoes(llm_server) -> None:
    # A 5xx is retried (and the retry logged), then the 401 fails the call.
    llm_server.enqueue(status=500, body=_echo_500())
    llm_server.enqueue(status=401, body=_echo_401())


def _leaks(text: str) -> list[str]:
    return [s for s in (KEY, KEY[:10], HEADER_SECRET) if s in text]


@pytest.fixture
def echoing_backend(db, llm_server) -> Backend:
    return Backend.objects.create(
        name="echoed",
        kind=Backend.Kind.OPENAI,
        base_url=llm_server.base_url,
        default_model="test-model",
        api_key=KEY,
        options={"headers": {"X-Api-Key": HEADER_SECRET}},
        max_retries=1,
        timeout_s=5.0,
    )


@contextmanager
def _console_log() -> Iterator[io.StringIO]:
    """What the configured console handler (the one LOGGING gives the root) writes."""
    handler = next(
        h
        for h in logging.getLogger().handlers
        if any(isinstance(f, RedactSecrets) for f in h.filters)
    )
    stream = io.StringIO()
    old = handler.setStream(stream)
    try:
        yield stream
    finally:
        handler.setStream(old)


@pytest.mark.django_db
def test_an_echoed_key_is_masked_in_the_call_the_run_the_pages_and_the_log(
    client, researcher, echoing_backend, llm_server, caplog
):
    DynToMQuestionFactory()
    run = run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=echoing_backend,
        selection={"limit": 1},
        enqueue=False,
    )
    _script_echoes(llm_server)

    with _console_log() as console, caplog.at_level(logging.INFO):
        assert run_execute(run_id=run.pk) == Run.Status.FAILED

    call = RunCall.objects.get(run=run)
    run.refresh_from_db()
    client.force_login(researcher)
    pages = {
        "run page": client.get(reverse("modeling:run-detail", args=[run.pk])),
        "admin call": client.get(reverse("admin:modeling_runcall_change", args=[call.pk])),
        "admin calls": client.get(reverse("admin:modeling_runcall_changelist")),
        "admin run": client.get(reverse("admin:modeling_run_change", args=[run.pk])),
        "api run": client.get(reverse("modeling-run-detail", args=[run.pk])),
    }

    # The server did get the key (the test is about what came back).
    assert llm_server.authorizations == [f"Bearer {KEY}"] * 2
    assert call.status == RunCall.Status.ERROR
    assert call.error.startswith("echoed: HTTP 401: ")
    assert "Incorrect API key provided: [redacted]. You passed [redacted]." in call.error
    assert _leaks(call.error) == [] and _leaks(run.error) == []
    for name, response in pages.items():
        assert response.status_code == 200, name
        assert _leaks(response.content.decode()) == [], name
    assert "Incorrect API key provided: [redacted]" in pages["run page"].content.decode()
    logged = console.getvalue()
    assert "retry 1/1" in logged and "call dyntom:" in logged  # both lines were written
    assert _leaks(logged) == [] and _leaks(caplog.text) == []


@pytest.mark.django_db
def test_direct_calls_raise_and_store_masked_errors_for_their_callers(echoing_backend, llm_server):
    """The path generation jobs and CharToM-QA steps (annotation) go through: the error
    they catch, store as a step's reason and pass to run_direct_finish is masked."""
    run = run_direct_create(
        name="steps", benchmark="dyntom", method="generate", backend=echoing_backend
    )
    _script_echoes(llm_server)

    with pytest.raises(BackendError) as raised:
        run_direct_call(run=run, unit_key="step:1", messages=[{"role": "user", "content": "hi"}])
    run_direct_finish(run_id=run.pk, status=Run.Status.FAILED, error=str(raised.value))

    run.refresh_from_db()
    call = RunCall.objects.get(run=run)
    assert "Incorrect API key provided: [redacted]" in str(raised.value)
    assert _leaks(str(raised.value)) == []
    assert raised.value.__cause__ is None  # no chained client error to print the body
    assert _leaks(call.error) == [] and _leaks(run.error) == []
    assert run.error == call.error


def test_mask_secrets_masks_given_and_secret_shaped_values(monkeypatch):
    # Secrets remembered by earlier tests' clients in this process would be masked too.
    monkeypatch.setattr(log_redaction, "_remembered", {})
    monkeypatch.setattr(log_redaction, "_pattern", None)
    text = (
        "key=s3cr3t-value-99 header Bearer abc.DEF-123456 basic Basic dXNlcjpwYXNz "
        "openai sk-proj-Ab12****************wxyz; Bearer tokens expire; Basic information"
    )

    masked = backend_mask_secrets(text, ["s3cr3t-value-99"])

    assert masked == (
        "key=[redacted] header Bearer [redacted] basic Basic [redacted] "
        "openai [redacted]; Bearer tokens expire; Basic information"
    )


@pytest.mark.django_db
def test_the_log_filter_masks_remembered_secrets_in_messages_args_and_tracebacks(
    echoing_backend,
):
    from modeling.backends import get_backend

    get_backend(echoing_backend).close()  # a client remembers what it will send
    logger = logging.getLogger("tomlab.test.secrets")

    with _console_log() as console:
        logger.warning("server said %s", f"bad key {KEY}")
        try:
            raise RuntimeError(f"echo: X-Api-Key: {HEADER_SECRET}")
        except RuntimeError:
            logger.exception("crashed")

    logged = console.getvalue()
    assert "server said bad key [redacted]" in logged
    assert "RuntimeError: echo: X-Api-Key: [redacted]" in logged
    assert _leaks(logged) == []
    assert mask_secrets(f"x {KEY} y") == "x [redacted] y"


# --- a real Celery worker ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_worker_log_holds_no_echoed_key(echoing_backend, llm_server, tmp_path):
    DynToMQuestionFactory()
    # Every attempt echoes: however the worker retries, each answer carries the key.
    llm_server.responder = lambda body: Reply(status=401, body=_echo_401())
    purge_queues()
    log = tmp_path / "worker.log"
    worker = start_worker(log, name="echo")
    try:
        run = run_create(
            benchmark="dyntom", method="vanilla", backend=echoing_backend, selection={"limit": 1}
        )
        deadline = time.monotonic() + 90
        while not Run.objects.get(pk=run.pk).is_finished:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
    finally:
        stop_worker(worker)

    text = log.read_text()
    assert llm_server.request_count >= 1
    assert f"run {run.pk} call dyntom:" in text and "[redacted]" in text
    assert _leaks(text) == []
    assert _leaks(RunCall.objects.get(run=run).error) == []


def test_celery_worker_handlers_get_the_redacting_filters(tmp_path):
    """The worker replaces the root logger's handlers after Django set up LOGGING; its
    own handlers must redact too (a record logged raw, past the backend's masking)."""
    import os
    import subprocess
    import sys

    from django.conf import settings

    script = (
        "import django, logging; django.setup()\n"
        "from config.celery import app\n"
        "app.log.setup_logging_subsystem(loglevel='INFO')\n"
        "from common.log_redaction import remember_secrets\n"
        f"remember_secrets([{KEY!r}])\n"
        f"logging.getLogger('modeling.runs.recording').warning('raw %s', {KEY!r})\n"
        "logging.getLogger('django.request').warning('Not Found: /s/p/AbCdEfGh12345678/')\n"
        "from celery.utils.log import get_task_logger\n"
        "get_task_logger('t').warning('task Bearer abc.DEF-123456')\n"
    )
    # DEBUG on: Django adds a console handler of its own then (it printed the path raw).
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "DJANGO_DEBUG": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "raw [redacted]" in output and KEY not in output
    assert "/s/p/[token]/" in output and "AbCdEfGh12345678" not in output
    assert "task Bearer [redacted]" in output


def _echo_in_a_reply(request_json: dict) -> str:
    """A successful reply that repeats what the server was sent, as a misconfigured
    proxy or a prompt-injected model does: the key as sent, upper-cased and base64-encoded
    (within a longer blob, as an echoed Authorization header is), and the secret header."""
    blob = base64.b64encode(f'{{"authorization": "Bearer {KEY}"}}'.encode()).decode()
    return f"answer a. seen: {KEY} / {KEY.upper()} / {blob} / {HEADER_SECRET.upper()}"


def _reply_leaks(text: str) -> list[str]:
    """The key or the header secret in any case, or a run of the key's base64 (at any of
    the three byte offsets it may start at in a longer blob)."""
    found = _leaks(text) + [s for s in (KEY.upper(), HEADER_SECRET.upper()) if s in text]
    for offset in range(3):
        if base64.b64encode(b"\0" * offset + KEY.encode()).decode()[4:20] in text:
            found.append(f"base64 at offset {offset}")
    return found


@pytest.mark.django_db
def test_a_key_echoed_in_a_successful_reply_is_never_stored_shown_or_reused(
    client, researcher, echoing_backend, llm_server
):
    """Issue 45, finding 3: the reply was stored and shown in clear, and reused from the
    response cache by later runs; upper-cased and base64 forms were masked nowhere."""
    DynToMQuestionFactory()
    llm_server.responder = _echo_in_a_reply
    runs = []
    for _ in range(2):  # the second run takes the reply from the response cache
        run = run_create(
            benchmark="dyntom",
            method="vanilla",
            backend=echoing_backend,
            selection={"limit": 1},
            enqueue=False,
        )
        run_execute(run_id=run.pk)
        runs.append(run)

    client.force_login(researcher)
    calls = list(RunCall.objects.filter(run__in=runs).order_by("pk"))
    stored = [c.raw_output for c in calls] + list(
        CachedResponse.objects.values_list("text", flat=True)
    )
    pages = [
        client.get(reverse("modeling:run-detail", args=[run.pk])).content.decode() for run in runs
    ] + [
        client.get(reverse("admin:modeling_runcall_change", args=[calls[0].pk])).content.decode(),
        client.get(reverse("admin:modeling_cachedresponse_changelist")).content.decode(),
        json.dumps(client.get(reverse("modeling-run-predictions", args=[runs[0].pk])).json()),
    ]

    assert llm_server.request_count == 1 and calls[1].from_cache
    assert all("answer a. seen: [redacted]" in text for text in stored)
    for text in stored + pages:
        assert _reply_leaks(text) == []


def test_upper_case_and_base64_forms_of_a_remembered_secret_are_masked_in_the_log():
    log_redaction.remember_secrets([KEY])
    blob = base64.b64encode(f"user:{KEY}".encode()).decode()
    record = logging.LogRecord("w", logging.INFO, __file__, 1, "%s %s %s", (
        KEY.upper(), KEY.lower(), blob
    ), None)  # fmt: skip

    RedactSecrets().filter(record)

    assert record.getMessage().split()[:2] == ["[redacted]", "[redacted]"]
    assert _reply_leaks(record.getMessage()) == []
