"""Test settings: speed knobs, and a data folder of the run's own.

Every test run (and each pytest-xdist worker in it) gets its own TOMLAB_DATA_DIR under
a temporary folder: its own SQLite database, broker folders, checkpoints and uploads,
so a suite run beside `make run` in the same checkout never shares a message with the
demo's worker. The Celery workers the suite starts inherit the folder through the
environment (TOMLAB_TEST_ROOT).
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# Long and varied enough for base.py's weak-key refusal (DEBUG is off in tests too).
os.environ.setdefault(
    "DJANGO_SECRET_KEY", "test-only-secret-key-not-for-production-0123456789-abcdefghij"
)

if not os.environ.get("TOMLAB_TEST_ROOT"):
    os.environ["TOMLAB_TEST_ROOT"] = tempfile.mkdtemp(prefix="tomlab-test-")
    _created = os.environ["TOMLAB_TEST_ROOT"]
    atexit.register(shutil.rmtree, _created, ignore_errors=True)
TEST_ROOT = Path(os.environ["TOMLAB_TEST_ROOT"])
os.environ["TOMLAB_DATA_DIR"] = str(TEST_ROOT / os.environ.get("PYTEST_XDIST_WORKER", "main"))

from .base import *  # noqa: E402, F403

# The suite's flush after a transactional test (tests/suite_flush): first, so that its
# command is the one call_command("flush") finds.
INSTALLED_APPS = ["tests.suite_flush", *INSTALLED_APPS]  # noqa: F405

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not :memory:, so a real Celery worker process can open the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}  # noqa: F405

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":  # noqa: F405
    # DELETE, not TRUNCATE, after each transactional test: tests/pg_flush/base.py.
    DATABASES["default"]["ENGINE"] = "tests.pg_flush"  # noqa: F405
    # A commit does not wait for its WAL to reach the disk (3.6 ms a commit on a 2-core
    # CI machine, about 13,000 of them a run; 0.05 ms without): the suite's databases
    # are thrown away, and its SQLite runs with synchronous=NORMAL, which does not wait
    # either. A client-side option, so it holds on any server CI finds (docs/testing.md).
    _options = DATABASES["default"].setdefault("OPTIONS", {})  # noqa: F405
    _options["options"] = f"{_options.get('options', '')} -c synchronous_commit=off".strip()

if CELERY_BROKER_URL.startswith("redis"):  # noqa: F405
    # Keys of this run and xdist worker only: a demo, another run or another xdist
    # worker on the same Redis sees none of them.
    _prefix = f"{DATA_DIR.parent.name}-{DATA_DIR.name}:"  # noqa: F405
    CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": _prefix}

# The suite's webhook receivers and model servers listen on plain http at 127.0.0.1
# (the egress tests take the allowance away), and webhooks retry quickly.
TOMLAB_EGRESS_ALLOW = ["127.0.0.0/8", "::1", "localhost"]
TOMLAB_WEBHOOK_ALLOW_HTTP = True
TOMLAB_WEBHOOK_BACKOFF_S = 0.5

# Short leases so the kill-the-worker test resumes within seconds.
MODELING_RUN_LEASE_S = int(os.environ.get("MODELING_RUN_LEASE_S", "3"))

# A worker whose pool process is killed waits this long for a result the process may
# have sent before it died, then rejects the job (redelivered: acks late) and frees the
# slot. Celery's 10 s default left the kill-a-pool-process tests idle for 10 s each;
# a killed process's pipe holds whatever it sent, so 2 s is ample on a loaded machine.
CELERY_WORKER_LOST_WAIT = 2.0
