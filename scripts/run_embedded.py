"""Run the web server and one Celery worker together; Ctrl-C stops both.

The worker uses whatever broker the settings give (kombu's filesystem transport by
default), so this works with no servers; with CELERY_BROKER_URL=redis://… it is one
worker among any others you start.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORT = os.environ.get("PORT", "8000")


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    # SIGTERM (CI's background demo, a service manager) stops both, as Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupted)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            "2",
            "-Q",
            "default,gpu",
        ],
        cwd=ROOT,
        env=env,
    )
    web = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{PORT}"],
        cwd=ROOT,
        env=env,
    )
    print(
        f"\nToMLab is running at http://127.0.0.1:{PORT}/\n"
        "Demo logins: researcher / tomlab-researcher, annotator / tomlab-annotator, "
        "rater / tomlab-rater\nCtrl-C stops the server and the worker.\n",
        flush=True,
    )
    try:
        return web.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        for proc in (web, worker):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in (web, worker):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    sys.exit(main())
