"""Run the web server and one Celery worker together; Ctrl-C stops both.

It prints the demo's logins, pages and invite links with this server's address
(``manage.py demo_links``).

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
    # Local development: backends and webhooks may call servers on this machine (a local
    # vLLM, a webhook receiver). A shared server leaves loopback refused (docs/configuration.md).
    env.setdefault("TOMLAB_EGRESS_ALLOW", "127.0.0.0/8,::1,localhost")
    base_url = f"http://127.0.0.1:{PORT}"
    # The demo's logins, pages and invite links, in full now that the port is known.
    subprocess.run(
        [sys.executable, "manage.py", "demo_links", "--base-url", base_url],
        cwd=ROOT,
        env=env,
        check=False,
    )
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
        f"\nToMLab is running at {base_url}/\nCtrl-C stops the server and the worker.\n",
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
