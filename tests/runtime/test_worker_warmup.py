"""A web worker's one-time work happens before its first request (config.warmup,
called from gunicorn's ``post_worker_init``), and the URLconf no longer imports
matplotlib: fifty raters opening a study at once used to pay 0.5-0.8 s per worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from config import gunicorn_conf
from config.warmup import warm_up

ROOT = Path(__file__).resolve().parents[2]


def in_a_fresh_process(code: str) -> str:
    """What ``code`` prints in a new interpreter with the test settings."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"DJANGO_SETTINGS_MODULE": "config.settings.test", "PATH": "/usr/bin:/bin"},
    ).stdout


def test_warm_up_imports_the_views_and_compiles_the_rater_templates():
    names = warm_up()

    assert "studies/rater_scene.html" in names
    assert "studies/rater_consent.html" in names
    assert "studies/rater_familiarity.html" in names
    assert "studies.scene.views" in sys.modules


def test_gunicorn_workers_warm_up_after_loading_the_app():
    assert callable(gunicorn_conf.post_worker_init)
    assert "warm_up()" in Path(gunicorn_conf.__file__).read_text()


def test_the_urlconf_does_not_import_matplotlib():
    code = (
        "import sys, django; django.setup(); import config.urls; print('matplotlib' in sys.modules)"
    )
    assert in_a_fresh_process(code).strip() == "False"


def test_a_celery_worker_imports_the_http_backend_before_its_pool_forks():
    """Celery sends ``worker_init`` in the main process, after the task modules and before
    the pool's children fork: they inherit the import, and no run's first wave pays for
    it (about 0.9 s of CPU)."""
    code = (
        "import sys, django; django.setup()\n"
        "from celery.signals import worker_init\n"
        "from config.celery import app\n"
        "app.loader.import_default_modules()\n"
        "before = 'openai' in sys.modules\n"
        "worker_init.send(sender=None)\n"
        "print(before, 'openai' in sys.modules, 'torch' in sys.modules)"
    )
    assert in_a_fresh_process(code).split() == ["False", "True", "False"]
