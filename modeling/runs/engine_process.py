"""``python -m modeling.runs.engine_process RUN PARENT_PID DATABASE``: one engine process
of a run split across several (see ``processes``). Its parent starts it; not for people.

It reads its shard (call ids and its share of the window) as the first line of stdin,
runs the same sliding window and recorder as a single process, and prints its stop
status as one JSON line on stdout. Later lines of stdin are the parent's commands.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
from typing import Any


class ParentLink:
    """What this process has in place of the lease: the parent's commands, from stdin.

    ``stop`` stops sending (the calls in flight are waited for, as in one process),
    ``abandon`` stops waiting too, ``cancel`` is a lost lease. End of input means the
    parent is gone: send nothing more and abandon the calls in flight.
    """

    interval = 0.5

    def __init__(self, interrupt: Any) -> None:
        self.interrupt = interrupt
        self.lost = False
        threading.Thread(target=self._read, name="parent-link", daemon=True).start()

    def renew_if_due(self) -> None:
        """The parent renews the lease."""

    def _read(self) -> None:
        for line in sys.stdin:
            command = line.strip()
            if command == "cancel":
                self.lost = True
            elif command in ("stop", "abandon"):
                self.interrupt.reason = "the parent process"
                self.interrupt.requested.set()
                if command == "abandon":
                    self.interrupt.abandon.set()
        self.interrupt.requested.set()
        self.interrupt.abandon.set()


def _die_with(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies (Linux), as a kill of one process would."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: end of stdin still stops this process
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the signal was set


def main(argv: list[str]) -> int:
    run_id, parent_pid, database = int(argv[0]), int(argv[1]), argv[2]
    _die_with(parent_pid)
    # Ctrl-C reaches the whole process group; the parent decides what a stop means.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out, sys.stdout = sys.stdout, sys.stderr  # stdout carries the status line only
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    import django

    django.setup()
    from django.db import connection

    from modeling.backends import get_backend
    from modeling.models import Run, RunCall
    from modeling.pipelines import get_pipeline
    from modeling.runs.executor import RunInterrupt, _call_sliding
    from modeling.runs.recording import _Recorder, _request_for

    # The parent's database by name: under a test runner, not the one settings name.
    connection.settings_dict["NAME"] = database
    run = Run.objects.select_related("backend", "template").get(pk=run_id)
    pipeline = get_pipeline(run.benchmark)
    units = {u.key: u for u in pipeline.units_for_run(run=run)}
    connection.close()  # not held open while the parent prepares the calls
    line = sys.stdin.readline()
    if not line:
        return 0  # the parent had no calls for this process
    shard = json.loads(line)
    interrupt = RunInterrupt()
    link = ParentLink(interrupt)
    by_pk = {c.pk: c for c in RunCall.objects.filter(run_id=run_id, pk__in=shard["calls"])}
    calls = [by_pk[pk] for pk in shard["calls"]]
    requests = {c.pk: _request_for(run, units[c.unit_key], c.sample_index) for c in calls}
    recorder = _Recorder(
        run=run, pipeline=pipeline, units=units, requests=requests, on_progress=None
    )
    backend = get_backend(run.backend)
    try:
        status = _call_sliding(
            run, backend, calls, requests, link, recorder, interrupt, limit=shard["limit"]
        )
    finally:
        backend.close()
    out.write(json.dumps({"stop_status": status}) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
