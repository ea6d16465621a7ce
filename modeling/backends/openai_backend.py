"""OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp servers).

The official ``openai`` client does the HTTP (through httpx2). Its own retry loop is
switched off (``max_retries=0``) and replaced by ours, so every backend row decides
its retries, the backoff is capped, ``Retry-After`` is honoured whatever its size up
to a limit, and each attempt is logged without the key. The key comes from the
environment variable ``api_key_env`` names, else from the row; it is never logged.
``options["headers"]`` are sent with every request (a proxy's own auth header).

Before any request the client checks the server's rules (``policy``): the variable
must be one backends may read, the host one they may call. Every error it raises has
the key, the secret options and the header values masked, since servers echo them.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import random
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any

import httpx2
import openai

from common import egress
from common.log_redaction import remember_secrets

from ..credentials import option_secret_values
from .base import BackendConfigError, BackendError, ChatBackend, ChatRequest, ChatResult
from .policy import effective_base_url, host_refusal, key_env_refusal
from .secrets import secret_parts

logger = logging.getLogger(__name__)

# Longest wait between attempts, whatever Retry-After asks for.
MAX_RETRY_WAIT_S = 120.0
BASE_BACKOFF_S = 0.5
# Servers such as a local vLLM accept any key; the client insists on one being set.
PLACEHOLDER_KEY = "no-key"


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _dumps(value: Any) -> bytes:
    """JSON as the client itself encodes a body (``openai._utils._json.openapi_dumps``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _count(value: Any) -> int:
    """A token count from the reply's usage; anything but a whole number counts 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _retryable(exc: Exception) -> bool:
    if isinstance(exc, openai.APIConnectionError):  # includes timeouts
        return True
    if isinstance(exc, openai.APIStatusError):
        if exc.response.headers.get("x-should-retry") == "false":
            return False
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def _describe(exc: Exception) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


class OpenAIChatBackend(ChatBackend):
    """One client per backend object; calls are thread-safe and run concurrently."""

    def __init__(self, config) -> None:
        super().__init__(config)
        # Checked again here, not only when saved: the settings may have changed since,
        # and a row saved before the rules existed must not send DJANGO_SECRET_KEY.
        if reason := key_env_refusal(config.api_key_env):
            raise BackendConfigError(f"backend {config.name}: api_key_env: {reason}")
        base_url = effective_base_url(config.base_url)
        if reason := host_refusal(base_url) or egress.refusal(base_url):
            raise BackendConfigError(f"backend {config.name}: base_url: {reason}")
        key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
        if config.api_key_env and not key and not config.api_key:
            raise BackendConfigError(
                f"backend {config.name}: environment variable {config.api_key_env} is not set"
            )
        key = key or config.get_api_key()
        options = config.get_options()
        headers = options.get("headers") or {}
        if not isinstance(headers, dict):
            raise BackendConfigError(f"backend {config.name}: options.headers must be an object")
        headers = {str(name): str(value) for name, value in headers.items()}
        self.secrets = [
            part for value in [key, *option_secret_values(options)] for part in secret_parts(value)
        ]
        remember_secrets(self.secrets)  # for the log filter (common.log_redaction)
        self._client_options = {
            "api_key": key or PLACEHOLDER_KEY,
            "base_url": base_url,
            "timeout": config.timeout_s,
            "max_retries": 0,
            "default_headers": headers or None,
        }
        # One client per call in flight, each with its own connection, not one client
        # shared by all: httpcore's pool scans every connection and waiting request on
        # each send and each release (O(n) under one lock), a sixth of the engine's CPU
        # at 128 in flight, and past its 100 kept-alive connections it closed some
        # after each burst. The TLS context is the process's one (egress.tls_context).
        self._idle_clients: queue.SimpleQueue[openai.OpenAI] = queue.SimpleQueue()
        self._clients: list[openai.OpenAI] = []
        self.max_retries = config.max_retries
        # Messages encoded ahead (``prepare``), with the count of requests still to send
        # them (a run's samples share one prompt): a 45 KB prompt takes ~0.3 ms of the
        # GIL to encode, which the calls in flight would otherwise wait for.
        self._encoded: dict[tuple, list] = {}
        self._encoded_lock = threading.Lock()

    def warm(self, calls: int) -> None:
        # A client costs ~1-2 ms to make; made here, the first wave's calls do not
        # each make one as they leave.
        for _ in range(calls - len(self._clients)):
            self._idle_clients.put(self._new_client())

    def prepare(self, requests) -> None:
        for request in requests:
            with self._encoded_lock:
                entry = self._encoded.get(request.messages)
                if entry is not None:
                    entry[1] += 1
                    continue
            encoded = _dumps(request.message_dicts)
            with self._encoded_lock:
                self._encoded.setdefault(request.messages, [encoded, 0])[1] += 1

    def _body(self, request: ChatRequest) -> bytes:
        """The body as the API defines it: model, messages, then the sampling parameters,
        the standard ones and any a server understands (vLLM's top_k, for example); the
        bytes the client would make of that dict, the messages encoded ahead if they were."""
        with self._encoded_lock:
            entry = self._encoded.get(request.messages)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._encoded[request.messages]
        if any(key in ("model", "messages") for key, _ in request.params):
            return _dumps(
                {"model": request.model, "messages": request.message_dicts, **request.param_dict}
            )
        parts = [
            b'{"model":',
            _dumps(request.model),
            b',"messages":',
            entry[0] if entry is not None else _dumps(request.message_dicts),
        ]
        for key, value in request.params:
            parts += [b",", _dumps(key), b":", _dumps(value)]
        parts.append(b"}")
        return b"".join(parts)

    def _take_client(self) -> openai.OpenAI:
        try:
            return self._idle_clients.get_nowait()
        except queue.Empty:
            return self._new_client()

    def _new_client(self) -> openai.OpenAI:
        # Every request is checked and sent to the checked address (common.egress),
        # and no redirect is followed: a 3xx is the server's answer, so the key and
        # the secret headers never go to another host or port.
        client = openai.OpenAI(
            **self._client_options,
            http_client=openai.DefaultHttpxClient(
                transport=egress.PinnedTransport(verify=egress.tls_context()),
                follow_redirects=False,
            ),
        )
        self._clients.append(client)  # list.append is atomic under the GIL
        return client

    def complete(self, request: ChatRequest) -> ChatResult:
        # Sent with the client's own ``post`` (its auth, headers, timeout and errors),
        # the SDK's documented way to any body; ``chat.completions.create`` would walk
        # a 45 KB prompt through its type transforms and build models of the reply,
        # about 1 ms of CPU a call, which at 128 calls in flight is the engine's limit.
        body = self._body(request)
        attempt = 0
        while True:
            started = time.monotonic()
            client = self._take_client()
            try:
                response = client.post("/chat/completions", cast_to=httpx2.Response, content=body)
                completion = json.loads(response.content)
            except openai.APIError as exc:
                attempt += 1
                if not _retryable(exc) or attempt > self.max_retries:
                    # Not chained (from None): a logged traceback would print the
                    # client's exception, whose message holds the server's body.
                    raise BackendError(
                        self.mask(f"{self.name}: {_describe(exc)} (after {attempt} attempt(s))")
                    ) from None
                wait = self._wait_for(exc, attempt)
                logger.info(
                    "%s: %s; retry %d/%d in %.1fs",
                    self.name,
                    self.mask(_describe(exc)),
                    attempt,
                    self.max_retries,
                    wait,
                )
                time.sleep(wait)
                continue
            except ValueError as exc:
                # A body that is not the JSON it claims to be: the server is broken,
                # and asking again rarely helps.
                raise BackendError(self.mask(f"{self.name}: malformed response: {exc}")) from None
            finally:
                self._idle_clients.put(client)
            latency_ms = int((time.monotonic() - started) * 1000)
            return self._result(completion, latency_ms)

    @staticmethod
    def _wait_for(exc: openai.APIError, attempt: int) -> float:
        response = getattr(exc, "response", None)
        hinted = retry_after_seconds(response.headers if response is not None else None)
        if hinted is not None:
            return min(hinted, MAX_RETRY_WAIT_S)
        # Exponential backoff with full jitter, so concurrent callers spread out.
        return random.uniform(0, min(MAX_RETRY_WAIT_S, BASE_BACKOFF_S * 2 ** (attempt - 1)))

    def _result(self, completion: Any, latency_ms: int) -> ChatResult:
        choices = completion.get("choices") if isinstance(completion, dict) else None
        if not choices or not isinstance(choices, list):
            raise BackendError(f"{self.name}: the response has no choices")
        choice = choices[0] if isinstance(choices[0], dict) else {}
        message = choice.get("message")
        if not isinstance(message, dict):
            raise BackendError(f"{self.name}: malformed response: choice 0 has no message")
        # Masked before anything stores it (RunCall.raw_output, the response cache, the
        # page, the log): a server may echo the key or a secret header in a reply too.
        text = self.mask(str(message.get("content") or ""))
        refusal = self.mask(str(message.get("refusal"))) if message.get("refusal") else None
        usage = completion.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return ChatResult(
            text=str(text) if text else str(refusal or ""),
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            latency_ms=latency_ms,
            finish_reason=str(choice.get("finish_reason") or ""),
            extra={"refusal": refusal} if refusal else {},
        )

    def close(self) -> None:
        self._encoded.clear()
        for client in self._clients:
            client.close()
