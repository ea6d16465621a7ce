"""A run's calls in several engine processes, for windows one process cannot keep full.

One process sends, stores and records at most about 1 core of Python (the GIL): some
300-450 calls a second of DynToM stages, whatever the server could answer. With
``MODELING_RUN_PROCESSES`` above 1, the process that holds the run (the parent) splits
the calls still to make into that many interleaved shards and starts an engine process
for each (``python -m modeling.runs.engine_process``). Each child runs the same sliding
window and recorder as a single process does, on its own database connection, with its
share of ``max_concurrency``; so calls sent and not yet stored still never exceed
``max_concurrency`` in all. The parent keeps the lease, reports progress from the run's
counters, and passes a stop, an abandon or a cancel on to the children through their
stdin. The children (``engine_process``) die with the parent (Linux's parent-death
signal) and stop when their stdin closes, so a kill of the parent still repeats at
most one window.

A run with a token or cost budget stays in one process: its budget is kept in memory,
call by call, and shards could not share it exactly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Protocol

from django.conf import settings
from django.db import connection

from ..backends import batches_itself
from ..models import Run, RunCall
from .recording import PROGRESS_INTERVAL_S, _Recorder

if TYPE_CHECKING:
    from .leases import _Lease


class _Interrupt(Protocol):
    """What the pool reads of ``executor.RunInterrupt``."""

    requested: threading.Event
    abandon: threading.Event


logger = logging.getLogger(__name__)

# The commands a parent sends, in rising order of force.
_COMMANDS = ("stop", "abandon", "cancel")


def engine_processes(run: Run, wanted: int | None = None) -> int:
    """How many engine processes make this run's calls (1: this process alone), of the
    ``wanted`` (default ``MODELING_RUN_PROCESSES``)."""
    if wanted is None:
        wanted = int(getattr(settings, "MODELING_RUN_PROCESSES", 1))
    if wanted <= 1 or batches_itself(run.backend):
        return 1
    if run.budget_tokens is not None or run.budget_cost is not None:
        logger.info("run %s has a budget: its calls stay in one process", run.pk)
        return 1
    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        return 1  # other processes cannot open it
    return max(1, min(wanted, run.backend.max_concurrency))


class EnginePool:
    """A run's engine processes, started before its calls are known so that their own
    start (Django, the client, the run's prompts: about a second of CPU each) overlaps
    this process's preparing of the calls. :meth:`close` ends any not given work."""

    def __init__(self, run: Run, processes: int) -> None:
        self.run = run
        self.children = [_Child.start(run) for _ in range(processes)]

    def close(self) -> None:
        for child in self.children:
            child.close()

    def call(
        self,
        *,
        calls: list[RunCall],
        lease: _Lease,
        recorder: _Recorder,
        interrupt: _Interrupt,
    ) -> str:
        """Make ``calls`` in the pool's processes; returns a stop status or ""."""
        run, children = self.run, self.children
        processes, window = len(children), run.backend.max_concurrency
        try:
            for shard, child in enumerate(children):
                limit = window // processes + (1 if shard < window % processes else 0)
                child.give(calls[shard::processes], limit)
            logger.info(
                "run %s: %d calls in %d engine processes (%s)",
                run.pk,
                len(calls),
                processes,
                ", ".join(str(child.proc.pid) for child in children),
            )
            sent = ""
            progress_at = 0.0
            while live := [child for child in children if child.proc.poll() is None]:
                live[0].wait(0.1)
                lease.renew_if_due()
                ended = [child for child in children if child.proc.poll() is not None]
                failed = any(child.failure() for child in ended)
                command = (
                    "cancel"
                    if lease.lost
                    else "abandon"
                    if interrupt.abandon.is_set()
                    else "stop"
                    if interrupt.requested.is_set() or failed
                    else ""
                )
                if command and _COMMANDS.index(command) > (_COMMANDS.index(sent) if sent else -1):
                    sent = command
                    for child in live:
                        child.send(command)
                if time.monotonic() - progress_at >= PROGRESS_INTERVAL_S:
                    progress_at = time.monotonic()
                    _progress(run, recorder)
        except BaseException:
            for child in children:
                child.kill()
            raise
        _progress(run, recorder)
        if failures := [f for f in (child.failure() for child in children) if f]:
            raise RuntimeError("; ".join(failures))
        statuses = {child.stop_status() for child in children}
        for status in (Run.Status.CANCELLED, Run.Status.STOPPED, Run.Status.BUDGET_EXHAUSTED):
            if status in statuses:
                return status
        return ""


def _progress(run: Run, recorder: _Recorder) -> None:
    counts = Run.objects.values("done_calls", "error_calls").get(pk=run.pk)
    recorder.done, recorder.errors = counts["done_calls"], counts["error_calls"]
    recorder.progress()


class _Child:
    """One engine process: its shard goes in on stdin, its stop status comes out on stdout."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.calls = 0
        self._output: str | None = None

    @classmethod
    def start(cls, run: Run) -> _Child:
        return cls(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "modeling.runs.engine_process",
                    str(run.pk),
                    str(os.getpid()),
                    str(connection.settings_dict["NAME"]),
                ],
                cwd=settings.BASE_DIR,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )

    def give(self, calls: list[RunCall], limit: int) -> None:
        self.calls = len(calls)
        self.send(json.dumps({"calls": [c.pk for c in calls], "limit": limit}))

    def close(self) -> None:
        """End of input: a process given no work exits; one at work stops sending."""
        if self.proc.poll() is None and self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=float(getattr(settings, "MODELING_STOP_GRACE_S", 30)) + 10)
        except subprocess.TimeoutExpired:
            self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()  # read already, or nothing was written to it

    def wait(self, timeout: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout)

    def send(self, command: str) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # it has ended meanwhile

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def _read(self) -> str:
        if self._output is None:
            self.proc.wait()
            assert self.proc.stdout is not None
            self._output = self.proc.stdout.read()
            if self.proc.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    self.proc.stdin.close()
        return self._output

    def stop_status(self) -> str:
        lines = self._read().strip().splitlines()
        return json.loads(lines[-1])["stop_status"]

    def failure(self) -> str:
        """Why this process failed (it has ended), or "" when it finished its shard."""
        output = self._read().strip().splitlines()
        if self.proc.returncode == 0 and output:
            try:
                json.loads(output[-1])["stop_status"]
                return ""
            except (ValueError, KeyError, TypeError):
                pass
        return (
            f"engine process {self.proc.pid} ({self.calls} calls) exited with code "
            f"{self.proc.returncode}; its log says why"
        )
