"""Throttles against guessing: the log-in page, the admin log-in, API basic auth and
invite tokens. Each test sends what the attack sent (30 wrong passwords, 200 random
tokens) under the default limits, and checks that a client past a limit is refused
until the window ends, the right password included.
"""

from __future__ import annotations

import base64
import secrets
import time

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
PASSWORD = "pw-res-123!"  # the researcher fixture's


def _login(client, username: str, password: str, ip: str = "127.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=ip)


def _basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def test_thirty_wrong_passwords_are_throttled_and_the_right_one_then_refused(client, researcher):
    answers = [_login(client, "res", f"guess-{n}").status_code for n in range(30)]

    assert answers[:10] == [200] * 10  # the form again, "enter a correct username…"
    assert set(answers[10:]) == {429}
    locked = _login(client, "res", PASSWORD)
    assert locked.status_code == 429
    assert "Too many failed log-in attempts" in locked.content.decode()
    assert locked["Retry-After"] == "900"
    assert "_auth_user_id" not in client.session


def test_a_correct_login_works_again_after_the_window(client, researcher, settings):
    settings.TOMLAB_THROTTLE_LOGIN_FAILURES_PER_USERNAME = 3
    settings.TOMLAB_THROTTLE_LOGIN_WINDOW_S = 1
    for n in range(3):
        _login(client, "res", f"guess-{n}")
    assert _login(client, "res", PASSWORD).status_code == 429

    time.sleep(1.2)
    response = _login(client, "res", PASSWORD)

    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(researcher.pk)


def test_one_address_guessing_many_user_names_is_throttled(client, researcher, settings):
    settings.TOMLAB_THROTTLE_LOGIN_FAILURES_PER_IP = 5
    for n in range(5):
        assert _login(client, f"user-{n}", "guess", ip="10.0.0.9").status_code == 200

    assert _login(client, "res", PASSWORD, ip="10.0.0.9").status_code == 429
    # Another address is not affected by that one's guessing.
    assert _login(client, "res", PASSWORD, ip="10.0.0.10").status_code == 302


def test_the_admin_login_refuses_a_locked_out_user_even_with_the_right_password(client, researcher):
    for n in range(10):
        client.post(reverse("admin:login"), {"username": "res", "password": f"guess-{n}"})

    locked = client.post(reverse("admin:login"), {"username": "res", "password": PASSWORD})

    assert locked.status_code == 429
    assert "Too many failed log-in attempts" in locked.content.decode()
    assert "_auth_user_id" not in client.session
    # The backend refuses it too, whichever page asks (a script calling authenticate()).
    from django.contrib.auth import authenticate

    assert authenticate(username="res", password=PASSWORD) is None


def test_the_admin_login_still_logs_in_below_the_limit(client, researcher):
    client.post(reverse("admin:login"), {"username": "res", "password": "guess"})

    response = client.post(reverse("admin:login"), {"username": "res", "password": PASSWORD})

    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(researcher.pk)
    assert client.get(reverse("admin:index")).status_code == 200


def test_api_basic_auth_is_throttled(researcher):
    api = APIClient()
    url = reverse("modeling-backend-list")

    answers = [
        api.get(url, HTTP_AUTHORIZATION=_basic("res", f"guess-{n}")).status_code for n in range(30)
    ]
    locked = api.get(url, HTTP_AUTHORIZATION=_basic("res", PASSWORD))

    assert answers[:10] == [403] * 10  # DRF: session auth first, so 403 not 401
    assert set(answers[10:]) == {429}
    assert locked.status_code == 429
    assert int(locked["Retry-After"]) == 900
    assert "Too many failed log-in attempts" in locked.json()["detail"]


def test_api_basic_auth_with_the_right_password_works_below_the_limit(researcher):
    api = APIClient()
    url = reverse("modeling-backend-list")
    for n in range(3):
        api.get(url, HTTP_AUTHORIZATION=_basic("res", f"guess-{n}"))

    assert api.get(url, HTTP_AUTHORIZATION=_basic("res", PASSWORD)).status_code == 200


def _live_study_token(researcher) -> str:
    from studies.models import Participant, Study

    study = Study.objects.create(
        name="throttle", benchmark="tvshowguess", status=Study.Status.LIVE, created_by=researcher
    )
    return Participant.objects.create(study=study, label="p", token=secrets.token_urlsafe(32)).token


def test_two_hundred_random_tokens_are_throttled(client, researcher):
    token = _live_study_token(researcher)
    known_before = client.get(f"/s/{token}/").status_code

    answers = [client.get(f"/s/{secrets.token_urlsafe(32)}/").status_code for _ in range(200)]
    also_posts = client.post(f"/s/{secrets.token_urlsafe(32)}/consent/").status_code
    known_after = client.get(f"/s/{token}/")

    assert known_before != 429
    assert answers[:30] == [404] * 30
    assert set(answers[30:]) == {429}
    assert also_posts == 429
    # The guesser's address is refused everywhere under /s/<token>/, a real token too.
    assert known_after.status_code == 429
    assert "Too many unknown links" in known_after.content.decode()
    assert known_after["Retry-After"] == "600"


def test_a_rater_with_a_real_token_is_never_counted(client, researcher, settings):
    settings.TOMLAB_THROTTLE_TOKEN_MISSES_PER_IP = 3
    token = _live_study_token(researcher)

    # Their own pages, including ordinary 404s (another rater's scene id), 40 times over.
    for n in range(40):
        client.get(f"/s/{token}/scenes/{10**6 + n}/result/")
    answers = [client.get(f"/s/{token}/").status_code for _ in range(5)]

    assert 429 not in answers


def test_malformed_tokens_cause_no_server_error_and_guessing_is_still_throttled(client, settings):
    settings.TOMLAB_THROTTLE_TOKEN_MISSES_PER_IP = 3
    malformed = [client.get(f"/s/{bad}/").status_code for bad in ("%00", "x" * 300, "é", "a%00b")]
    guesses = [client.get(f"/s/{secrets.token_urlsafe(32)}/").status_code for _ in range(4)]

    assert all(400 <= status < 500 for status in malformed), malformed
    assert guesses[-1] == 429, guesses


PASSWORD_CHANGE = "/accounts/password/"


def _change(client, old: str, new: str = "a-new-pw-456!"):
    return client.post(
        PASSWORD_CHANGE, {"old_password": old, "new_password1": new, "new_password2": new}
    )


def test_thirty_wrong_old_passwords_are_throttled_and_the_right_one_then_refused(
    client, researcher
):
    client.force_login(researcher)

    answers = [_change(client, f"guess-{n}").status_code for n in range(30)]
    locked = _change(client, PASSWORD)

    assert answers[:10] == [200] * 10  # the form again, "your old password was entered…"
    assert set(answers[10:]) == {429}
    assert locked.status_code == 429
    assert "Too many failed log-in attempts" in locked.content.decode()
    assert locked["Retry-After"] == "900"
    researcher.refresh_from_db()
    assert researcher.check_password(PASSWORD)  # unchanged
    # The wrong old passwords counted against the user name: the log-in page refuses too.
    assert _login(client, "res", PASSWORD).status_code == 429


def test_a_right_old_password_below_the_limit_changes_it_and_does_not_count(client, researcher):
    client.force_login(researcher)
    for n in range(9):
        assert _change(client, f"guess-{n}").status_code == 200

    assert _change(client, PASSWORD).status_code == 302
    researcher.refresh_from_db()
    assert researcher.check_password("a-new-pw-456!")
    # Nine failures so far, the right password gave its place back: one more is checked.
    assert _login(client, "res", "another-guess").status_code == 200
    assert _login(client, "res", "a-new-pw-456!").status_code == 429


def test_a_right_password_gives_its_place_back(client, researcher, settings):
    settings.TOMLAB_THROTTLE_LOGIN_FAILURES_PER_USERNAME = 3
    for _ in range(5):
        assert _login(client, "res", PASSWORD).status_code == 302
    for n in range(3):
        assert _login(client, "res", f"guess-{n}").status_code == 200
    assert _login(client, "res", PASSWORD).status_code == 429


def test_a_cache_that_cannot_count_atomically_is_warned_about(settings):
    from accounts.throttling import cache_check

    assert cache_check() == []  # locmem (or Redis) in the test settings
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "c"}
    }
    assert [m.id for m in cache_check()] == ["accounts.W001"]
