"""Start a real Celery worker process on whatever database and broker the suite uses.

On SQLite this is the embedded default (kombu's filesystem transport); in CI's second
pass DATABASE_URL/CELERY_BROKER_URL point at PostgreSQL + Redis.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(settings.BASE_DIR)


def database_url() -> str:
    """The URL of the test database this process uses, for the worker's environment."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{user}@{host}:{port}/{db['NAME']}"


def purge_queues() -> None:
    """Drop messages left in the broker by earlier sessions (their rows are gone)."""
    from config.celery import app

    app.control.purge()


def start_worker(
    log_path: Path,
    *,
    name: str = "test",
    pool: str = "solo",
    concurrency: int = 1,
    environment: dict[str, str] | None = None,
) -> subprocess.Popen:
    """A worker on the default queue; ``pool="prefork"`` runs tasks in ``concurrency``
    child processes (see :func:`pool_children`), as deployments do. ``environment``
    adds variables (settings read from it) to the worker's."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "PYTHONUNBUFFERED": "1",
        # Celery's Django fix-up runs the system checks as a worker starts: 0.8 s of CPU
        # per start, and these tests start 17 workers; the suite runs the checks itself.
        "CELERY_SKIP_CHECKS": "1",
        **(environment or {}),
    }
    log = log_path.open("a")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool",
            pool,
            "--concurrency",
            str(concurrency),
            "--loglevel",
            "INFO",
            "-Q",
            "default",
            "-n",
            f"{name}@%h",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def pool_children(proc: subprocess.Popen) -> list[int]:
    """PIDs of a prefork worker's pool processes (its children), from /proc (Linux)."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # Fields after the command name (which may hold spaces): state, then the parent.
        state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(parent) == proc.pid and state not in "ZX":
            children.append(int(entry.name))
    return sorted(children)


def stop_worker(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def drain_queue(name: str = "default") -> list[tuple[str, list]]:
    """Take every message off a broker queue: (task name, positional args) each, in order."""
    from config.celery import app

    taken = []
    with app.connection_for_read() as conn:
        queue = conn.SimpleQueue(name)
        try:
            while True:
                try:
                    message = queue.get(block=False)
                except queue.Empty:
                    break
                taken.append((message.headers["task"], list(message.payload[0])))
                message.ack()
        finally:
            queue.close()
    return taken


def wait_for(predicate, *, timeout: float, what: str, log: Path | None = None) -> None:
    """Poll ``predicate`` until true; on timeout fail with the worker log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    detail = log.read_text()[-4000:] if log and log.exists() else ""
    raise AssertionError(f"timed out waiting for {what}\n{detail}")
