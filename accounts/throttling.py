"""Throttles against guessing: passwords (log-in page, admin log-in, API basic auth,
the old password of the password change) and invite tokens, counted in Django's cache.

Each counter is a fixed window that starts at the first failure: a client past a
limit is refused until the window ends, a correct password included (otherwise a
guesser would still learn when it hit). A password is checked only after the attempt
took a place under the limit (:func:`login_attempt_begin`: one atomic increment per
counter, so 60 simultaneous guesses get 10 places, not 60 reads of "0 so far"); a
wrong password keeps its place, a right one gives it back. Every path through
``authenticate()`` does this in ``accounts.backends.ThrottledModelBackend``; the
pages and the API also answer 429 with ``Retry-After`` before they even try. Limits
and windows are settings (``TOMLAB_THROTTLE_*``). With several web processes the
cache must be shared (``CACHE_URL=redis://…``), or each process counts on its own;
its ``add``/``incr`` must be atomic (locmem, Redis, memcached; see :func:`cache_check`).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.core import checks
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


def _bump(key: str, window_s: int) -> int:
    """Add one to the counter at ``key``, atomically; the count after it."""
    for _ in range(5):
        # add() starts the window (set-if-absent); incr() is one atomic step that keeps
        # the expiry (locmem under its lock, Redis INCR, memcached incr).
        if cache.add(key, 1, timeout=window_s):
            return 1
        try:
            count = cache.incr(key)
        except ValueError:  # expired between the two calls: start a new window
            continue
        if count == 1:
            # Redis: the key expired between Django's EXISTS and INCR, and INCR made a
            # new one without an expiry; give it one, or it would never reset. (A
            # counter given back down to 0 gets a new window too: it counted nothing.)
            cache.touch(key, window_s)
        return count
    raise RuntimeError(f"throttle counter {key} could not be counted")


def _drop(key: str) -> None:
    """Take one off the counter at ``key`` (gone already: nothing to take)."""
    with contextlib.suppress(ValueError):
        cache.decr(key)


def _hit(scope: str, ident: str, window_s: int) -> int:
    return _bump(_key(scope, ident), window_s) if ident else 0


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


# Set on the request whose password check the throttle refused, so the page can answer
# 429 although it only saw a failed form (two requests can pass the page's own check
# at once; only one of them may still get a place).
_REFUSED = "_tomlab_login_throttled"


def login_attempt_begin(request: HttpRequest | None, username: Any) -> bool:
    """Take a place for one password check under both limits; False if there is none.

    The user name's counter is raised first, then the address's; a refusal gives back
    what it took, so the counters hold checked wrong passwords plus checks in flight,
    and never let an 11th check through however many arrive at once. After a check,
    a wrong password keeps its place (the failure counts); call
    :func:`login_attempt_release` after a right one.
    """
    per_user, per_ip, window_s = _login_limits()
    user, ip = _username(username), client_ip(request)
    if _hit("login-user", user, window_s) > per_user:
        _give_back(user, "")
    elif _hit("login-ip", ip, window_s) > per_ip:
        _give_back(user, ip)
    else:
        return True
    if request is not None:
        setattr(request, _REFUSED, True)
    return False


def _give_back(user: str, ip: str) -> None:
    if user:
        _drop(_key("login-user", user))
    if ip:
        _drop(_key("login-ip", ip))


def login_attempt_release(request: HttpRequest | None, username: Any) -> None:
    """Give back the place of a check that did not fail (a right password, an error)."""
    _give_back(_username(username), client_ip(request))


def login_refused(request: HttpRequest | None) -> bool:
    """Whether a password check of this request was refused by the throttle."""
    return bool(getattr(request, _REFUSED, False))


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


# Backends whose add() and incr() are atomic across threads (and, for the shared ones,
# processes). The database and file caches implement incr() as get() then set().
_ATOMIC_CACHES = (
    "django.core.cache.backends.locmem.LocMemCache",
    "django.core.cache.backends.redis.RedisCache",
    "django.core.cache.backends.memcached.PyMemcacheCache",
    "django.core.cache.backends.memcached.PyLibMCCache",
    "django_redis.cache.RedisCache",
)


def cache_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A warning when the default cache cannot count throttle attempts atomically."""
    backend = settings.CACHES.get("default", {}).get("BACKEND", "")
    if backend in _ATOMIC_CACHES:
        return []
    return [
        checks.Warning(
            f"The default cache ({backend}) does not increment atomically: under "
            "concurrent requests the password throttle may let more guesses through.",
            hint="Use CACHE_URL=redis://… (or locmem with a single web process).",
            id="accounts.W001",
        )
    ]
