"""Logging filters that keep credentials out of every log: URL tokens and secrets.

An invite token is a rater's only credential (``/s/<token>/``), a public-link token
(``/s/p/<token>/``) lets anyone join a study, and Django logs request paths on its own:
``django.request`` writes "Not Found: /s/p/<token>/" for a 404 and "Internal Server
Error: …" with the traceback, whose exception text may repeat the path; ``django.server``
writes the request line. LLM servers echo the key they were sent in their error
bodies ("Incorrect API key provided: sk-…"), and a worker logs those errors.

The filters sit on the handlers (``config/settings/base.py`` puts both on every
handler in ``LOGGING``; :func:`install` puts them on the handlers Celery's worker
creates), so every logger's records are redacted however they were formatted: the
message with its arguments, the traceback and the stack. Secrets are the values
:func:`remember_secrets` was given in this process (the backend client registers the
key and option secrets it sends) and anything shaped like an API key or a bearer token.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import quote

MASK = "[redacted]"

# /s/<token>/ and /s/p/<token>/ (a study's public link); join links keep their study id.
_TOKEN_PATH = re.compile(r"(/s/(?:p/)?)(?!join/)[A-Za-z0-9_-]{8,}")
# A token passed in a query string (?token=…, &public_token=…, ?key=…).
_TOKEN_QUERY = re.compile(
    r"([?&](?:[A-Za-z_]*token|key|api_key|apikey|secret|signature)=)[^&#\s\"'<>]+",
    re.IGNORECASE,
)

# Shapes of a secret whatever its value: OpenAI-style keys (also as OpenAI echoes them,
# "sk-abc1****…wxyz"), and the credential after an HTTP auth scheme.
_OPENAI_KEY = re.compile(r"\bsk-[A-Za-z0-9_*\-]{8,}")
_AUTH_CREDENTIAL = re.compile(
    r"\b(Bearer|Basic|Token)(\s+|%20|\+)([A-Za-z0-9._~+/=*\-]{8,})", re.IGNORECASE
)
# What tells a credential from a word ("Bearer tokens expire", "Basic information"):
# a digit or a symbol, or a capital inside the word.
_NOT_A_WORD = re.compile(r"[0-9._~+/=*\-]|[a-z][A-Z]")
# Shorter values are not masked: "abc" would be masked inside every word that holds it.
MIN_SECRET_LENGTH = 6
# A prefix this long of a remembered secret is masked with whatever secret-like
# characters follow it: servers echo keys cut short ("tok_live_Ab12…").
_PREFIX_LENGTH = 8
# The shortest base64 run masked for a secret: shorter runs would mask innocent text.
_BASE64_MIN_CORE = 12
# Far more than a lab's backends send; bounds the memory of a long-lived worker.
_MAX_REMEMBERED = 1000

_lock = threading.Lock()
_remembered: dict[str, None] = {}  # insertion-ordered set
_pattern: re.Pattern[str] | None = None


def redact_tokens(text: str) -> str:
    """``/s/<token>/scenes/3/`` -> ``/s/[token]/scenes/3/``; join links keep their study id."""
    text = _TOKEN_PATH.sub(r"\1[token]", text)
    return _TOKEN_QUERY.sub(r"\1[token]", text)


def _base64_cores(secret: str) -> set[str]:
    """What every base64 text holding ``secret`` contains, wherever the secret starts:
    for each of the three byte offsets, the characters that depend on the secret alone
    (a server that echoes ``Authorization: Basic …`` or a base64 JSON blob)."""
    data = secret.encode()
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode()
        start = -(-offset * 4 // 3)  # the characters the unknown bytes before reach
        end = (offset + len(data)) // 3 * 4  # whole groups only: the next bytes are unknown
        core = encoded[start:end]
        if len(core) >= _BASE64_MIN_CORE:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))  # the URL-safe alphabet
    return cores


def _variants(secret: str) -> set[str]:
    # As the secret may appear in an echoed body: plain, JSON-escaped, URL-quoted,
    # upper- and lower-cased (servers and proxies echo "SK-…"), base64-encoded. Literal
    # copies, not re.IGNORECASE, which made the masking of every reply 7 times slower.
    escaped = secret.replace("\\", "\\\\").replace('"', '\\"').replace("/", "\\/")
    plain = {secret, escaped, quote(secret, safe=""), quote(secret, safe="/")}
    cased = {case(value) for value in plain for case in (str.upper, str.lower)}
    return plain | cased | _base64_cores(secret)


def _compile(secrets: Iterable[str]) -> re.Pattern[str] | None:
    alternatives: set[str] = set()
    for secret in secrets:
        for variant in _variants(secret):
            alternatives.add(re.escape(variant))
        if len(secret) >= _PREFIX_LENGTH + 4:
            # The prefix followed by the characters a key is made of.
            # Dots inside (a JWT) but not a full stop after it.
            for prefix in {secret[:_PREFIX_LENGTH], secret[:_PREFIX_LENGTH].upper()}:
                alternatives.add(re.escape(prefix) + r"(?:[A-Za-z0-9_*\-]|\.(?=[A-Za-z0-9_*\-]))*")
    if not alternatives:
        return None
    # Longest first, so a secret is masked whole rather than one of its parts.
    return re.compile("|".join(sorted(alternatives, key=len, reverse=True)))


@lru_cache(maxsize=64)
def _compile_given(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    # A backend masks every reply with the same few secrets: build their pattern once.
    return _compile(secrets)


def _usable(values: Iterable[str]) -> list[str]:
    return [v for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_LENGTH]


def remember_secrets(values: Iterable[str]) -> None:
    """Mask these values in every later log record of this process (and in
    :func:`mask_secrets`). Called with the key and option secrets a backend sends."""
    global _pattern
    new = [v for v in _usable(values) if v not in _remembered]
    if not new:
        return
    with _lock:
        for value in new:
            _remembered[value] = None
        while len(_remembered) > _MAX_REMEMBERED:
            del _remembered[next(iter(_remembered))]
        _pattern = _compile(_remembered)


def mask_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with ``secrets``, every remembered secret and secret-shaped strings masked."""
    if not text:
        return text
    given = _compile_given(tuple(_usable(secrets)))
    if given is not None:
        text = given.sub(MASK, text)
    remembered = _pattern
    if remembered is not None:
        text = remembered.sub(MASK, text)
    text = _OPENAI_KEY.sub(MASK, text)
    return _AUTH_CREDENTIAL.sub(_mask_credential, text)


def _mask_credential(match: re.Match[str]) -> str:
    scheme, space, credential = match.groups()
    if not _NOT_A_WORD.search(credential):
        return match.group(0)
    return f"{scheme}{space}{MASK}"


def redact_text(text: str) -> str:
    """What a log line may say: URL tokens and secrets masked."""
    return mask_secrets(redact_tokens(text))


def _redact_record(record: logging.LogRecord, redact) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a broken format string: leave it for the handler to report
        message = None
    if message is not None:
        redacted = redact(message)
        if redacted != message:
            # Freeze the redacted text: the handler formats msg % args again otherwise.
            record.msg, record.args = redacted, None
    if record.exc_info and not record.exc_text:
        # The traceback repeats exception messages (a path, an echoed key). Formatted
        # here once and cached where every formatter looks first (Formatter.format).
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


class RedactInviteTokens(logging.Filter):
    """Masks invite and public-link tokens (and other URL tokens) in a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        _redact_record(record, redact_tokens)
        return True


class RedactSecrets(logging.Filter):
    """Masks remembered secrets and secret-shaped strings (API keys, bearer tokens)."""

    def filter(self, record: logging.LogRecord) -> bool:
        _redact_record(record, mask_secrets)
        return True


def install(logger: logging.Logger) -> None:
    """Put both filters on each handler of ``logger`` that lacks them."""
    for handler in logger.handlers:
        for kind in (RedactInviteTokens, RedactSecrets):
            if not any(isinstance(f, kind) for f in handler.filters):
                handler.addFilter(kind())


def _install_on_celery_handlers() -> None:
    # Celery's worker replaces the root logger's handlers with its own (and gives
    # celery.task one) after Django configured LOGGING; those get the filters too.
    # This module is imported by LOGGING itself, before the worker sets up logging.
    try:
        from celery.signals import after_setup_logger, after_setup_task_logger
    except ImportError:  # pragma: no cover - celery is a dependency
        return

    def on_setup(logger: logging.Logger | None = None, **kwargs: object) -> None:
        if logger is not None:
            install(logger)

    after_setup_logger.connect(on_setup, weak=False)
    after_setup_task_logger.connect(on_setup, weak=False)


_install_on_celery_handlers()
