"""numpy's OpenBLAS runs one thread per process unless the operator says otherwise
(config/settings/base.py): the server's workers and Celery's pool already fill the
cores, and a report's bootstrap products slowed several-fold when each process also
started a thread per core.

Each case starts a fresh Python (about a second): OpenBLAS reads its thread count once,
when numpy first loads, so only a new process shows what the settings decide."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import django; django.setup(); import numpy; "
    "from threadpoolctl import threadpool_info; "
    "print(sorted({p['num_threads'] for p in threadpool_info() "
    "if p['internal_api'] == 'openblas'}))"
)


@pytest.mark.parametrize(("environment", "threads"), [(None, "[1]"), ("2", "[2]")])
def test_openblas_runs_one_thread_unless_the_environment_says_otherwise(environment, threads):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    if environment is not None:
        env["OPENBLAS_NUM_THREADS"] = environment
    probe = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == threads
