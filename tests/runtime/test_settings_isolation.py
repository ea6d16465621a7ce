"""The test settings share no path with the defaults `make run` uses.

`make test` beside `make run` in one checkout: the demo's worker must never see the
suite's broker messages, database or files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)

# Prints every absolute path found in the settings, as JSON: {"SETTING.key": path}.
DUMP = r"""
import json, os
from pathlib import Path
import django
django.setup()
from django.conf import settings

def walk(name, value, out):
    if isinstance(value, Path) or (isinstance(value, str) and value.startswith("/")):
        out[name] = str(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            walk(f"{name}.{k}", v, out)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            walk(f"{name}.{i}", v, out)

out = {}
for name in dir(settings):
    if name.isupper():
        walk(name, getattr(settings, name), out)
print(json.dumps(out))
"""


def _paths(module: str, **extra_env: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"TOMLAB_DATA_DIR", "TOMLAB_TEST_ROOT", "PYTEST_XDIST_WORKER"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE=module,
        DJANGO_SECRET_KEY="x" * 20 + "isolation-test-key-0123456789-abcdefghijklmnop",
        **extra_env,
    )
    env.pop("DATABASE_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", DUMP], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _state(paths: dict[str, str], data_dir: str) -> dict[str, str]:
    """The settings that point into the data folder: what a run writes."""
    return {k: v for k, v in paths.items() if Path(v).is_relative_to(data_dir)}


def test_test_settings_share_no_path_with_the_defaults():
    defaults = _paths("config.settings.base")
    test = _paths("config.settings.test")
    default_state = _state(defaults, defaults["DATA_DIR"])
    test_state = _state(test, test["DATA_DIR"])
    # What the demo writes: its database, broker folders, static files, checkpoints.
    assert {"DATA_DIR", "STATIC_ROOT", "CELERY_BROKER_TRANSPORT_OPTIONS.data_folder_in"} <= set(
        default_state
    )
    assert "DATABASES.default.NAME" in default_state
    assert "DATABASES.default.TEST.NAME" in test_state
    for name, path in test.items():
        for default_name, default_path in default_state.items():
            assert not Path(path).is_relative_to(default_path), (name, default_name, path)


def test_each_run_and_each_xdist_worker_gets_its_own_folder():
    one = _paths("config.settings.test", PYTEST_XDIST_WORKER="gw0")
    two = _paths("config.settings.test", PYTEST_XDIST_WORKER="gw1")
    again = _paths("config.settings.test", PYTEST_XDIST_WORKER="gw0")
    assert one["DATA_DIR"] != two["DATA_DIR"]
    assert Path(one["DATA_DIR"]).name == "gw0"
    # A new run (no TOMLAB_TEST_ROOT inherited) is a new temporary folder.
    assert again["DATA_DIR"] != one["DATA_DIR"]
    assert not Path(one["DATA_DIR"]).exists()  # removed when that run ended


def test_this_run_and_its_workers_share_one_folder():
    """The Celery workers the suite starts inherit the folder through the environment."""
    assert os.environ["TOMLAB_TEST_ROOT"]
    assert Path(settings.DATA_DIR).is_relative_to(os.environ["TOMLAB_TEST_ROOT"])
    if settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        test_db = Path(settings.DATABASES["default"]["TEST"]["NAME"])
        assert test_db.is_relative_to(settings.DATA_DIR)
