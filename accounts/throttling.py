"""Throttles against guessing: passwords (log-in page, admin log-in, API basic auth) and
invite tokens, counted in Django's cache.

Each counter is a fixed window that starts at the first failure: a client past a
limit is refused until the window ends, a correct password included (otherwise a
guesser would still learn when it hit). Failed passwords are counted from Django's
``user_login_failed`` signal, so every path through ``authenticate()`` counts, and
they are refused by ``accounts.backends.ThrottledModelBackend``; the log-in page and
the API answer 429 with ``Retry-After`` before they even try. Limits and windows are
settings (``TOMLAB_THROTTLE_*``). With several web processes the cache must be shared
(``CACHE_URL=redis://…``), or each process counts on its own.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

# Counters hold no user names or addresses in the clear (and memcached rejects keys
# with spaces or control characters, which user names may contain).
_PREFIX = "tomlab:throttle:"
# What secrets.token_urlsafe makes; anything else is unknown without a query (and a
# NUL byte would make PostgreSQL fail the query).
_TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def client_ip(request: HttpRequest | None) -> str:
    """The client's address: ``REMOTE_ADDR``, or the header a trusted proxy sets.

    ``TOMLAB_CLIENT_IP_HEADER`` (e.g. ``HTTP_X_REAL_IP``) must name a header that the
    proxy overwrites; a header the client can set would let it pick its own bucket.
    """
    if request is None:
        return ""
    header = getattr(settings, "TOMLAB_CLIENT_IP_HEADER", "")
    if header and (value := request.META.get(header, "").split(",")[0].strip()):
        return value
    return request.META.get("REMOTE_ADDR", "")


def _key(scope: str, ident: str) -> str:
    return _PREFIX + scope + ":" + hashlib.sha256(ident.encode("utf-8", "replace")).hexdigest()


def _count(scope: str, ident: str) -> int:
    return int(cache.get(_key(scope, ident)) or 0) if ident else 0


def _hit(scope: str, ident: str, window_s: int) -> None:
    if not ident:
        return
    key = _key(scope, ident)
    # add() starts the window; incr() keeps its expiry (locmem, Redis, memcached).
    if not cache.add(key, 1, timeout=window_s):
        try:
            cache.incr(key)
        except ValueError:  # expired between the two calls
            cache.add(key, 1, timeout=window_s)


def _login_limits() -> tuple[int, int, int]:
    return (
        settings.TOMLAB_THROTTLE_LOGIN_FAILURES_PER_USERNAME,
        settings.TOMLAB_THROTTLE_LOGIN_FAILURES_PER_IP,
        settings.TOMLAB_THROTTLE_LOGIN_WINDOW_S,
    )


def _username(username: Any) -> str:
    # Case folded: "Researcher" and "researcher" share a counter.
    return str(username or "").strip().casefold()


def login_blocked(request: HttpRequest | None, username: Any) -> bool:
    """Whether log-in attempts for this user name or from this address are refused."""
    per_user, per_ip, _ = _login_limits()
    return _count("login-user", _username(username)) >= per_user or (
        _count("login-ip", client_ip(request)) >= per_ip
    )


def login_failure_record(request: HttpRequest | None, username: Any) -> None:
    """Count one failed password against the user name and the client's address."""
    _, _, window_s = _login_limits()
    _hit("login-user", _username(username), window_s)
    _hit("login-ip", client_ip(request), window_s)


def login_retry_after_s() -> int:
    return settings.TOMLAB_THROTTLE_LOGIN_WINDOW_S


def login_blocked_message() -> str:
    minutes = max(1, round(login_retry_after_s() / 60))
    return f"Too many failed log-in attempts. Try again in {minutes} minutes."


def throttled_response(request: HttpRequest, message: str, retry_after_s: int) -> HttpResponse:
    """The 429 page: what happened and when to try again."""
    response = render(request, "throttled.html", {"message": message}, status=429)
    response["Retry-After"] = str(retry_after_s)
    return response


def token_misses_throttled(view: Callable[..., HttpResponse], *, known: Callable[[str], bool]):
    """Wrap a view taking ``token``: unknown tokens count against the client's address.

    A 404 for a token that ``known`` does not recognise is a miss; past
    ``TOMLAB_THROTTLE_TOKEN_MISSES_PER_IP`` misses in the window every token page
    answers 429 to that address. Known tokens and their ordinary 404s never count, so
    a rater is only ever slowed down by guessing from the same address.
    """

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        ip = client_ip(request)
        limit = settings.TOMLAB_THROTTLE_TOKEN_MISSES_PER_IP
        window_s = settings.TOMLAB_THROTTLE_TOKEN_WINDOW_S
        if _count("token-ip", ip) >= limit:
            minutes = max(1, round(window_s / 60))
            message = f"Too many unknown links from your address. Try again in {minutes} minutes."
            return throttled_response(request, message, window_s)
        token = str(kwargs.get("token", ""))
        try:
            response = view(request, *args, **kwargs)
        except Http404:
            if not (_TOKEN_SHAPE.match(token) and known(token)):
                _hit("token-ip", ip, window_s)
            raise
        if response.status_code == 404 and not (_TOKEN_SHAPE.match(token) and known(token)):
            _hit("token-ip", ip, window_s)
        return response

    return wrapped


def token_patterns_throttled(patterns: list, *, known: Callable[[str], bool]) -> list:
    """``patterns`` with every view that takes a ``<token>`` wrapped by the throttle."""
    for pattern in patterns:
        if "token" in pattern.pattern.converters:
            pattern.callback = token_misses_throttled(pattern.callback, known=known)
    return patterns
