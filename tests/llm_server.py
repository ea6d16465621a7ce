"""A scripted OpenAI-compatible chat server on 127.0.0.1 for tests and benchmarks.

It speaks just enough of the API for the ``openai`` client: ``POST
/v1/chat/completions`` and ``GET /v1/models``. Each test scripts it: replies queued
with :meth:`LLMTestServer.enqueue` are served first, in order; when the queue is
empty, :attr:`LLMTestServer.responder` computes the reply from the request body.
Because it is a real socket, a Celery worker in another process can call it too.

    with LLMTestServer() as server:
        server.enqueue(status=429, headers={"Retry-After": "1"})
        server.enqueue(text='{"q1": "a"}')
        server.responder = lambda body: "fallback answer"
        ...  # point a backend at server.base_url
        assert server.request_count == 2
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer. ``body`` (raw text) overrides the completion JSON entirely."""

    text: str = "ok"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: str | bytes | None = None
    content_type: str = "application/json"
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


Responder = Callable[[dict[str, Any]], "str | Reply"]


def crude_token_count(text: str) -> int:
    """Whitespace-separated words: predictable enough for budget tests to reason about."""
    return len(text.split())


def default_responder(request_json: dict[str, Any]) -> str:
    return "ok"


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keeps connections alive, as real servers do; the benchmark would
    # otherwise mostly measure TCP handshakes.
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle's algorithm the second waits
    # for the client's delayed ACK (~40 ms), which would dwarf a scripted latency.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        # The default writes every request to stderr; tests read server.requests instead.
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            owner = self.server.owner
            self._send(200, {"object": "list", "data": [{"id": owner.model, "object": "model"}]})
        else:
            self._send(404, _error_body(f"no route {self.path}", "not_found"))

    def do_POST(self) -> None:
        # The latency counts from the moment the request's headers were read, as a real
        # server's time to answer does: reading the body, the responder and the reply's
        # encoding happen inside it, not on top of it (on a small machine they would
        # add the stand-in's own CPU to every call the engine is timed on).
        arrived = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, _error_body(f"no route {self.path}", "not_found"))
            return
        try:
            request_json = json.loads(raw)
        except ValueError:
            self._send(400, _error_body("request body is not JSON", "invalid_request_error"))
            return
        owner = self.server.owner
        reply = owner._next_reply(request_json, dict(self.headers.items()))
        try:
            status, body, content_type, headers = self._encode_reply(reply, request_json)
            owner._wait(arrived + owner.fixed_latency + reply.delay - time.monotonic())
        finally:
            # Leave before answering: the client may send its next request the moment
            # the answer arrives, and that must not count as one more in flight.
            owner._leave()
        try:
            self._send_raw(status, body, content_type, headers)
            owner._answered(request_json)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); nothing to answer

    def _encode_reply(
        self, reply: Reply, request_json: dict[str, Any]
    ) -> tuple[int, bytes, str, dict[str, str]]:
        """(status, body, content type, headers) of a scripted or computed reply."""
        if reply.body is not None:
            body = reply.body.encode() if isinstance(reply.body, str) else reply.body
            return reply.status, body, reply.content_type, reply.headers
        if reply.status >= 400:
            payload: Any = _error_body(f"scripted {reply.status}")
        else:
            payload = self.server.owner._completion(reply, request_json)
        return reply.status, json.dumps(payload).encode(), "application/json", reply.headers

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), "application/json", headers or {})

    def _send_raw(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str]
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def _error_body(message: str, kind: str = "server_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": None}}


class _HTTPServer(ThreadingHTTPServer):
    # The default backlog of 5 drops connections when 32 clients connect at once.
    request_queue_size = 256
    owner: LLMTestServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client killed mid-request (the kill tests do it on purpose) resets its
        # connection; that is not a server error worth a traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def process_request(self, request: socket.socket, client_address: Any) -> None:
        self.owner._track(request, add=True)
        super().process_request(request, client_address)

    def shutdown_request(self, request: socket.socket) -> None:
        self.owner._track(request, add=False)
        super().shutdown_request(request)


class LLMTestServer:
    """The server; thread-safe. Use as a context manager or call start()/stop()."""

    def __init__(self, *, fixed_latency: float = 0.0, model: str = "test-model") -> None:
        self.fixed_latency = fixed_latency
        self.model = model
        self.responder: Responder = default_responder
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._script: deque[Reply] = deque()
        self._requests: list[dict[str, Any]] = []
        self._answered_requests: list[dict[str, Any]] = []
        self._answered_at: list[float] = []
        self._request_headers: list[dict[str, str]] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._sockets: set[socket.socket] = set()
        self._connections_opened = 0
        self._http: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> LLMTestServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        self._http = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._http.owner = self
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="llm-test-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake delayed handlers and drop kept-alive connections."""
        if self._http is None:
            return
        self._stopping.set()
        self._http.shutdown()
        self._http.server_close()
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed by the client
                sock.shutdown(socket.SHUT_RDWR)
        self._http = None

    def __enter__(self) -> LLMTestServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._http is not None, "server not started"
        return self._http.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting ---------------------------------------------------------------

    def enqueue(
        self,
        text: str = "ok",
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        body: str | bytes | None = None,
        content_type: str = "application/json",
        finish_reason: str = "stop",
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> None:
        """Queue one reply; queued replies are served in order before the responder."""
        reply = Reply(
            text=text,
            status=status,
            headers=dict(headers or {}),
            delay=delay,
            body=body,
            content_type=content_type,
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )
        with self._lock:
            self._script.append(reply)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until no request is being answered (a slow reply a client gave up on)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._in_flight == 0:
                    return True
            time.sleep(0.02)
        return False

    def reset(self) -> None:
        """Forget the script, the recorded requests and the responder."""
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self._answered_requests.clear()
            self._answered_at.clear()
            self._request_headers.clear()
            self._max_in_flight = self._in_flight
            self._connections_opened = 0
            self.responder = default_responder

    # -- what was received -------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Parsed JSON bodies of the chat requests, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def answered(self) -> list[dict[str, Any]]:
        """Bodies of the requests whose answer was written to the client in full."""
        with self._lock:
            return list(self._answered_requests)

    @property
    def answered_log(self) -> list[tuple[float, dict[str, Any]]]:
        """(``time.monotonic()`` when its answer was written in full, body) per answer."""
        with self._lock:
            return list(zip(self._answered_at, self._answered_requests, strict=True))

    @staticmethod
    def body_key(request_json: dict[str, Any]) -> str:
        """A request body as a comparable string (to count repeats of the same request)."""
        return json.dumps(request_json, sort_keys=True)

    def repeats(self) -> dict[str, int]:
        """Bodies received more than once -> how many times."""
        counts: dict[str, int] = {}
        for body in self.requests:
            key = self.body_key(body)
            counts[key] = counts.get(key, 0) + 1
        return {key: n for key, n in counts.items() if n > 1}

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def authorizations(self) -> list[str]:
        """The Authorization header of each chat request."""
        return self.header_values("Authorization")

    def header_values(self, name: str) -> list[str]:
        """One header of each chat request, in order ("" where it was not sent)."""
        with self._lock:
            return [headers.get(name.lower(), "") for headers in self._request_headers]

    @property
    def max_in_flight(self) -> int:
        """The most chat requests that were being answered at the same moment."""
        with self._lock:
            return self._max_in_flight

    @property
    def connections_opened(self) -> int:
        """TCP connections accepted since the start or reset (each kept-alive one once)."""
        with self._lock:
            return self._connections_opened

    @property
    def pending_replies(self) -> int:
        with self._lock:
            return len(self._script)

    # -- used by the handler -----------------------------------------------------

    def _next_reply(self, request_json: dict[str, Any], headers: dict[str, str]) -> Reply:
        with self._lock:
            self._requests.append(request_json)
            self._request_headers.append({k.lower(): v for k, v in headers.items()})
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            scripted = self._script.popleft() if self._script else None
            responder = self.responder
        if scripted is not None:
            return scripted
        # Outside the lock: a responder may be slow, and requests run in parallel.
        try:
            answer = responder(request_json)
        except Exception as exc:
            traceback.print_exc()
            # A bug in a test's responder must fail that test at once, not be retried.
            return Reply(
                status=500,
                body=json.dumps(_error_body(f"responder failed: {exc!r}")),
                headers={"x-should-retry": "false"},
            )
        return answer if isinstance(answer, Reply) else Reply(text=answer)

    def _answered(self, request_json: dict[str, Any]) -> None:
        with self._lock:
            self._answered_requests.append(request_json)
            self._answered_at.append(time.monotonic())

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            # An Event, not time.sleep, so stop() does not wait for slow replies.
            self._stopping.wait(seconds)

    def _track(self, sock: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._sockets.add(sock)
                self._connections_opened += 1
            else:
                self._sockets.discard(sock)

    def _completion(self, reply: Reply, request_json: dict[str, Any]) -> dict[str, Any]:
        prompt = " ".join(str(m.get("content") or "") for m in request_json.get("messages", []))
        prompt_tokens = (
            reply.prompt_tokens if reply.prompt_tokens is not None else crude_token_count(prompt)
        )
        completion_tokens = (
            reply.completion_tokens
            if reply.completion_tokens is not None
            else crude_token_count(reply.text)
        )
        return {
            "id": f"chatcmpl-test-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request_json.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.text},
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def dyntom_letter_responder(letter: str = "a") -> Responder:
    """Answer every question of a DynToM prompt (its ``[type_…]`` lines) with ``letter``."""

    def responder(request_json: dict[str, Any]) -> str:
        prompt = str(request_json["messages"][-1]["content"])
        keys = [ln[1 : ln.index("]")] for ln in prompt.splitlines() if ln.startswith("[type_")]
        return json.dumps(dict.fromkeys(keys, letter))

    return responder


def main(argv: list[str] | None = None) -> None:
    """Serve from a process of its own (benchmarks: the server must not share our GIL).

    Prints ``port N`` on stdout once listening; serves until stdin closes or SIGTERM.
    """
    import argparse
    import signal

    parser = argparse.ArgumentParser(description="loopback OpenAI-compatible test server")
    parser.add_argument("--latency", type=float, default=0.0, help="fixed latency, s")
    parser.add_argument(
        "--dyntom-letter", default="", help="answer DynToM prompts with this letter"
    )
    args = parser.parse_args(argv)
    server = LLMTestServer(fixed_latency=args.latency)
    if args.dyntom_letter:
        server.responder = dyntom_letter_responder(args.dyntom_letter)
    server.start()
    signal.signal(signal.SIGTERM, lambda *_: server._stopping.set())
    print(f"port {server.port}", flush=True)
    # Wait for the parent to close our stdin (or die), or for SIGTERM.
    reader = threading.Thread(target=sys.stdin.read, daemon=True)
    reader.start()
    while reader.is_alive() and not server._stopping.is_set():
        reader.join(0.2)
    server.stop()


if __name__ == "__main__":
    main()
