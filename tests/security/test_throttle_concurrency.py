"""The password throttle holds under concurrency (issue 26, item 8).

60 wrong passwords for one user name are posted at once to a live server (one thread
and one connection each; the server is Django's threaded test server, which answers
each request in its own thread with its own database connection): at
most 10 passwords may be checked, the limit per user name. The old throttle read the
counter before checking and counted the failure afterwards, so every request that
arrived before the first failure was counted got its password checked (20 of 60).

A check is counted where it happens: the password hasher's ``verify()``, through a
subclass of the hasher the test settings use (Django's code, nothing of ours is
replaced). Each test runs on the cache the settings configure (locmem unless
``CACHE_URL`` says otherwise) and, when the suite has Redis (the PostgreSQL + Redis
pass), on a Redis cache as well.
"""

from __future__ import annotations

import http.client
import os
import re
import threading
import uuid
from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.core.servers.basehttp import ThreadedWSGIServer
from django.test.testcases import LiveServerThread

from accounts.services import user_create_with_role

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-res-123!"
ATTEMPTS = 60
REDIS_URL = os.environ.get("CELERY_BROKER_URL", "")


class CountingMD5PasswordHasher(MD5PasswordHasher):
    """The test settings' hasher, counting how many passwords it verified."""

    lock = threading.Lock()
    checks = 0

    def verify(self, password: str, encoded: str) -> bool:
        with CountingMD5PasswordHasher.lock:
            CountingMD5PasswordHasher.checks += 1
        return super().verify(password, encoded)


CACHES = [
    "settings",
    pytest.param(
        "redis",
        marks=pytest.mark.skipif(
            not REDIS_URL.startswith("redis"), reason="no Redis in this run (CELERY_BROKER_URL)"
        ),
    ),
]


@pytest.fixture(params=CACHES)
def throttle_cache(request, settings):
    """The cache the throttle counts in: the configured one, or Redis."""
    if request.param == "redis":
        prefix = f"tomlab-test-{uuid.uuid4().hex}"
        settings.CACHES = {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": REDIS_URL,
                # Keys of this test only; the broker's keys on the same database are
                # never touched (no clear()).
                "KEY_PREFIX": prefix,
            }
        }
    yield request.param
    if request.param == "redis":
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(f"{prefix}:*"))
        if keys:
            client.delete(*keys)


@pytest.fixture
def counting_hasher(settings):
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingMD5PasswordHasher"]
    CountingMD5PasswordHasher.checks = 0
    return CountingMD5PasswordHasher


class _WideServer(ThreadedWSGIServer):
    # Django's server listens with a queue of 10 connections: 60 at once overflow it
    # and the kernel resets the rest before a byte is read.
    request_queue_size = 128


class _ServerThread(LiveServerThread):
    server_class = _WideServer


@pytest.fixture
def live_server_url(transactional_db):
    """pytest-django's ``live_server``, with room for 60 simultaneous connections."""
    thread = _ServerThread("127.0.0.1", StaticFilesHandler)
    thread.daemon = True
    thread.start()
    thread.is_ready.wait()
    if thread.error:
        raise thread.error
    yield f"http://127.0.0.1:{thread.port}"
    thread.terminate()


class Browser:
    """A cookie jar and a CSRF token for plain HTTP requests to the live server."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, data: dict | None = None) -> tuple[int, str]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = None
        if data is not None:
            body = urlencode(data)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode()
            for header in response.headers.get_all("Set-Cookie") or []:
                name, _, rest = header.partition("=")
                self.cookies[name.strip()] = rest.split(";")[0]
            return response.status, text
        finally:
            connection.close()

    def csrf(self, path: str) -> str:
        status, page = self.request("GET", path)
        assert status == 200, (path, status)
        return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def all_at_once(count: int, job: Callable[[], int]) -> list[int]:
    """``job`` in ``count`` threads released together; their results (status codes)."""
    barrier = threading.Barrier(count)
    results: list[int | BaseException] = [0] * count

    def work(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            results[i] = job()
        except BaseException as exc:  # reported below, not lost in the thread
            results[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert not any(thread.is_alive() for thread in threads), "a request hung"
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors[:3]
    return results  # type: ignore[return-value]


def test_sixty_simultaneous_wrong_logins_check_at_most_ten_passwords(
    live_server_url, throttle_cache, counting_hasher
):
    user_create_with_role(username="res", password=PASSWORD, role="researcher")
    browser = Browser(live_server_url)
    token = browser.csrf("/accounts/login/")
    guess = {"username": "res", "csrfmiddlewaretoken": token}

    statuses = all_at_once(
        ATTEMPTS,
        lambda: browser.request("POST", "/accounts/login/", {**guess, "password": "wrong"})[0],
    )

    # Exactly the limit was checked: every password check that was let through failed
    # and counts, and no request past the limit got one.
    assert counting_hasher.checks == 10, statuses
    assert sorted(statuses) == [200] * 10 + [429] * 50  # the form again, or "too many"
    status, page = browser.request("POST", "/accounts/login/", {**guess, "password": PASSWORD})
    assert status == 429 and "Too many failed log-in attempts" in page
    assert counting_hasher.checks == 10  # the right password is refused unchecked


def test_sixty_simultaneous_wrong_old_passwords_check_at_most_ten(
    live_server_url, throttle_cache, counting_hasher
):
    user_create_with_role(username="res", password=PASSWORD, role="researcher")
    browser = Browser(live_server_url)
    token = browser.csrf("/accounts/login/")
    status, _ = browser.request(
        "POST",
        "/accounts/login/",
        {"username": "res", "password": PASSWORD, "csrfmiddlewaretoken": token},
    )
    assert status == 302 and "sessionid" in browser.cookies
    checks_at_login = counting_hasher.checks
    token = browser.csrf("/accounts/password/")
    change = {
        "csrfmiddlewaretoken": token,
        "new_password1": "a-new-pw-456!",
        "new_password2": "a-new-pw-456!",
    }

    statuses = all_at_once(
        ATTEMPTS,
        lambda: browser.request("POST", "/accounts/password/", {**change, "old_password": "wrong"})[
            0
        ],
    )

    assert counting_hasher.checks - checks_at_login == 10, statuses
    assert sorted(statuses) == [200] * 10 + [429] * 50
    status, page = browser.request(
        "POST", "/accounts/password/", {**change, "old_password": PASSWORD}
    )
    assert status == 429 and "Too many failed" in page
    from django.contrib.auth import get_user_model

    assert get_user_model().objects.get(username="res").check_password(PASSWORD)
