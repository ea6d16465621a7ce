"""Test settings: only speed knobs differ from base."""

import os

# Long and varied enough for base.py's weak-key refusal (DEBUG is off in tests too).
os.environ.setdefault(
    "DJANGO_SECRET_KEY", "test-only-secret-key-not-for-production-0123456789-abcdefghij"
)

from .base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not :memory:, so a real Celery worker process can open the test
    # database; the pid keeps parallel runs apart.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / f"test-{os.getpid()}.sqlite3")}  # noqa: F405

# Short leases so the kill-the-worker test resumes within seconds.
MODELING_RUN_LEASE_S = int(os.environ.get("MODELING_RUN_LEASE_S", "3"))
