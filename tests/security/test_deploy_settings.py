"""Production settings, checked the way an operator starts the app: in a fresh process
with the documented environment (README, "Security").

- ``DJANGO_SECURE=1`` makes ``manage.py check --deploy`` clean;
- with DEBUG off, a weak ``DJANGO_SECRET_KEY`` stops start-up with a clear message;
- every page carries a Content-Security-Policy that allows only our own origin.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
STRONG_KEY = "prod-like-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJ"
# What a WSGI server does at start-up: load the settings and set the apps up.
START_WSGI = ("-c", "import config.wsgi")


def _python(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {
        # Only what an operator sets: nothing from the test run's own settings.
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "TOMLAB_DATA_DIR": str(tmp_path / "var"),
        "DJANGO_ALLOWED_HOSTS": "tomlab.example.org",
        "HF_HUB_OFFLINE": "1",
        **env,
    }
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_check_deploy_is_clean_under_the_documented_production_settings(tmp_path):
    secure = _python(
        tmp_path,
        "manage.py",
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SECURE="1",
        DJANGO_SECRET_KEY=STRONG_KEY,
    )
    # (--tag security: the HTTPS checks only, not the slow API schema check again)
    without_switch = _python(
        tmp_path,
        "manage.py",
        "check",
        "--deploy",
        "--tag",
        "security",
        "--fail-level",
        "WARNING",
        DJANGO_SECRET_KEY=STRONG_KEY,
    )

    assert secure.returncode == 0, secure.stderr
    assert "System check identified no issues (0 silenced)." in secure.stdout
    assert "WARNINGS" not in secure.stderr
    # The switch is what makes it clean: without it, the HTTPS warnings are back.
    assert without_switch.returncode != 0
    for code in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert code in without_switch.stderr, code


@pytest.mark.parametrize(
    "key",
    [
        "short-but-varied-0123456789",
        "a" * 20 + "b" * 20 + "c" * 20,  # long, but only 3 distinct characters
        "django-insecure-" + "0123456789abcdefghijklmnopqrstuvwxyz-ABCDEFGH",
    ],
    ids=["short", "few-distinct", "django-insecure"],
)
def test_a_weak_secret_key_is_refused_at_start_up_when_debug_is_off(tmp_path, key):
    result = _python(tmp_path, *START_WSGI, DJANGO_SECRET_KEY=key)

    assert result.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is too weak" in result.stderr


def test_debug_may_use_any_key_and_a_strong_key_starts(tmp_path):
    debug = _python(tmp_path, *START_WSGI, DJANGO_SECRET_KEY="dev", DJANGO_DEBUG="1")
    strong = _python(tmp_path, *START_WSGI, DJANGO_SECRET_KEY=STRONG_KEY)

    assert debug.returncode == 0, debug.stderr
    assert strong.returncode == 0, strong.stderr


@pytest.mark.django_db
def test_pages_carry_a_policy_that_allows_only_our_own_origin(client, researcher):
    client.force_login(researcher)

    for url in ("/accounts/login/", "/", "/runs/", "/studies/", "/reports/", "/api/docs/"):
        policy = client.get(url)["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["script-src"] == "'self'", url
        assert directives["default-src"] == "'self'", url
        assert "http" not in policy and "eval" not in policy, url
        if url.startswith("/api/"):  # Swagger UI's and DRF's own templates have inline styles
            assert directives["style-src"] == "'self' 'unsafe-inline'"
        else:
            assert directives["style-src"] == "'self'", url
            assert "unsafe" not in policy, url


@pytest.mark.django_db
def test_api_docs_load_swagger_from_our_static_files_with_no_inline_script(client, researcher):
    client.force_login(researcher)

    html = client.get("/api/docs/").content.decode()

    assert "cdn" not in html.lower() and "https://" not in html
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "<script>" not in html  # the start-up script comes from ?script as a file


@pytest.mark.django_db
def test_debug_error_pages_stay_readable_and_ordinary_errors_keep_the_policy(client, settings):
    missing = client.get("/no-such-page/")
    settings.DEBUG = True
    debug_missing = client.get("/no-such-page/")

    assert missing.status_code == debug_missing.status_code == 404
    assert "script-src 'self'" in missing["Content-Security-Policy"]
    assert "Content-Security-Policy" not in debug_missing
