"""The lease a run is executed under, and its holder (host, PID, process start time).

A resume on the same host takes over at once from a holder that is gone; elsewhere it
waits for the lease to expire.

The holder's identity and liveness (:class:`LeaseHolder`, :func:`holder_gone`) and the
claim of a leased row (:func:`lease_claim`, :func:`lease_renew`) serve any model with
the four ``lease_*`` fields of :class:`~modeling.models.Run`: the annotation app's
CharToM-QA steps and DynToM generation jobs hold their rows the same way.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from ..models import Backend, Run
from .signals import run_finished

logger = logging.getLogger(__name__)


def _lease_seconds() -> int:
    return int(getattr(settings, "MODELING_RUN_LEASE_S", 60))


# --- the lease and its holder ------------------------------------------------------------


@dataclass(frozen=True)
class LeaseHolder:
    """A process that may hold runs: its host, PID and start time (against PID reuse)."""

    host: str
    pid: int
    started_at: datetime | None

    @classmethod
    def current(cls) -> LeaseHolder:
        # Computed per call, not cached: a forked worker child has a PID of its own.
        pid = os.getpid()
        return cls(host=socket.gethostname(), pid=pid, started_at=_process_started_at(pid))

    def as_fields(self) -> dict[str, Any]:
        return {
            "lease_holder_host": self.host,
            "lease_holder_pid": self.pid,
            "lease_holder_started_at": self.started_at,
        }


# The lease fields of a row nobody holds.
LEASE_RELEASED: dict[str, Any] = {
    "lease_expires_at": None,
    "lease_holder_host": "",
    "lease_holder_pid": None,
    "lease_holder_started_at": None,
}
_RELEASED = LEASE_RELEASED


def _process_started_at(pid: int) -> datetime | None:
    """When process ``pid`` started (Linux /proc), or None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        # Fields after the command name (which may hold spaces and parentheses);
        # starttime is field 22 of proc(5), in clock ticks since boot.
        ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return datetime.fromtimestamp(boot + ticks / os.sysconf("SC_CLK_TCK"), tz=UTC)


def _process_alive(pid: int, started_at: datetime | None) -> bool:
    """True when ``pid`` runs on this host and is the process that started at ``started_at``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return True  # no /proc (macOS): the signal check is all we have
    if stat[stat.rindex(")") + 2] in "ZX":
        return False  # killed, not yet reaped by its parent
    if started_at is not None:
        actual = _process_started_at(pid)
        if actual is not None and abs((actual - started_at).total_seconds()) > 1:
            return False  # the PID was reused by another process
    return True


def holder_gone(leased: Any) -> bool:
    """True when nobody can be working on ``leased`` (a run, or any row with the four
    ``lease_*`` fields): lease released or expired, or held by a process on this host
    that is no longer alive. A holder on another host counts as alive until its lease
    expires (we cannot see its processes)."""
    if leased.lease_expires_at is None or leased.lease_expires_at <= timezone.now():
        return True
    if not leased.lease_holder_pid or leased.lease_holder_host != socket.gethostname():
        return False
    return not _process_alive(leased.lease_holder_pid, leased.lease_holder_started_at)


_holder_gone = holder_gone


def _utc_clock(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%H:%M:%S UTC")


class RunLeased(ValueError):
    """Another live process holds the run; ``seconds`` until its lease would expire.

    The message is one line a person can act on: who holds the run and when to retry.
    """

    def __init__(self, run: Run) -> None:
        now = timezone.now()
        expires = run.lease_expires_at or now
        self.run_id = run.pk
        self.seconds = max(1.0, (expires - now).total_seconds())
        self.expires_at = expires
        same_host = run.lease_holder_host == socket.gethostname()
        if run.lease_holder_pid and same_host:
            since = (
                f" since {_utc_clock(run.lease_holder_started_at)}"
                if run.lease_holder_started_at
                else ""
            )
            message = (
                f"run {run.pk} is running in process {run.lease_holder_pid} on this host{since}; "
                f"stop it there with Ctrl-C (kill -INT {run.lease_holder_pid}) or let it finish"
            )
        else:
            holder = (
                f"process {run.lease_holder_pid} on host {run.lease_holder_host}"
                if run.lease_holder_pid
                else "another worker"
            )
            message = (
                f"run {run.pk} is held by {holder}, which renews its lease while it runs; "
                f"if that process is gone, retry after {_utc_clock(expires)} "
                f"({self.seconds:.0f} s)"
            )
        super().__init__(message)


def _claim(run_id: int) -> Run | None:
    """Take the run with one conditional UPDATE; a live holder elsewhere raises RunLeased.

    A run whose holder is gone (see :func:`_holder_gone`) is taken over at once, with
    a compare-and-swap on the holder seen, so two resumers cannot both win.
    """
    now = timezone.now()
    holder = LeaseHolder.current()
    claim = {
        "status": Run.Status.RUNNING,
        "lease_expires_at": now + timedelta(seconds=_lease_seconds()),
        "started_at": now,
        **holder.as_fields(),
    }
    claimed = (
        Run.objects.filter(pk=run_id)
        .filter(
            Q(status=Run.Status.QUEUED)
            | Q(status=Run.Status.RUNNING, lease_expires_at__lt=now)
            | Q(status=Run.Status.RUNNING, lease_expires_at__isnull=True)
        )
        .update(**claim)
    )
    run = Run.objects.select_related("backend", "template").get(pk=run_id)
    if claimed:
        return run
    if run.status != Run.Status.RUNNING:
        return None
    if _holder_gone(run):
        taken = Run.objects.filter(
            pk=run_id,
            status=Run.Status.RUNNING,
            lease_expires_at=run.lease_expires_at,
            lease_holder_host=run.lease_holder_host,
            lease_holder_pid=run.lease_holder_pid,
        ).update(**claim)
        if taken:
            logger.info("run %s: took over from dead process %s", run_id, run.lease_holder_pid)
            return Run.objects.select_related("backend", "template").get(pk=run_id)
        run.refresh_from_db()
    raise RunLeased(run)


def _renew_lease(run_id: int, holder: LeaseHolder) -> bool:
    """Extend our lease; False when the run was cancelled or taken over meanwhile."""
    lease = timezone.now() + timedelta(seconds=_lease_seconds())
    return bool(
        Run.objects.filter(
            pk=run_id,
            status=Run.Status.RUNNING,
            lease_holder_host=holder.host,
            lease_holder_pid=holder.pid,
        ).update(lease_expires_at=lease)
    )


class LeaseView(Protocol):
    """What the writer loop needs of a lease: :class:`_Lease`, or in an engine process
    the parent's commands (``engine_process.ParentLink``)."""

    interval: float
    lost: bool

    def renew_if_due(self) -> None: ...


class _Lease:
    """The run's lease, renewed from the writer thread while calls are in flight.

    A call can take longer than the lease (a long chain-of-thought reply), so the
    writer wakes at least every ``interval`` to renew it. Renewing from this thread
    (not a heartbeat thread with its own connection) keeps it on the connection that
    owns the run. A failed renewal means the run is no longer ours (cancelled).
    """

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.holder = LeaseHolder.current()
        self.interval = max(0.5, _lease_seconds() / 3)
        self.lost = False
        self._renewed_at = time.monotonic()

    def renew_if_due(self) -> None:
        now = time.monotonic()
        if self.lost or now - self._renewed_at < self.interval:
            return
        self._renewed_at = now
        self.lost = not _renew_lease(self.run_id, self.holder)


def _release(run_id: int, holder: LeaseHolder, *, status: str, error: str) -> bool:
    """End our hold on the run with ``status``; False when it is no longer ours."""
    released = bool(
        Run.objects.filter(
            pk=run_id,
            status=Run.Status.RUNNING,
            lease_holder_host=holder.host,
            lease_holder_pid=holder.pid,
        ).update(status=status, error=error, finished_at=timezone.now(), **_RELEASED)
    )
    if released:
        run_finished.send(sender=Run, run_id=run_id)
    return released


# --- leases of other rows (CharToM-QA steps, DynToM generation jobs) ----------------------


def call_lease(backend: Backend) -> timedelta:
    """The longest one call to ``backend`` can take: every attempt times out, and the
    client waits the longest it may between attempts. A holder blocked in such a call
    keeps its lease at least this long."""
    from ..backends.openai_backend import MAX_RETRY_WAIT_S  # loaded with the backend, not here

    retries = int(backend.max_retries)
    return timedelta(seconds=(retries + 1) * float(backend.timeout_s) + retries * MAX_RETRY_WAIT_S)


class LeaseHeld(Exception):
    """A process that may be alive holds the row; ``seconds`` until its lease expires.

    ``local`` is True when the holder runs on this host (so it is alive: a dead one
    would have been taken over). The message says who holds ``what`` and until when.
    """

    def __init__(self, leased: Any, what: str) -> None:
        now = timezone.now()
        expires = leased.lease_expires_at or now
        self.seconds = max(1.0, (expires - now).total_seconds())
        self.expires_at = expires
        self.local = bool(leased.lease_holder_pid) and (
            leased.lease_holder_host == socket.gethostname()
        )
        if self.local:
            message = f"{what} is running in process {leased.lease_holder_pid} on this host"
        else:
            holder = (
                f"process {leased.lease_holder_pid} on host {leased.lease_holder_host}"
                if leased.lease_holder_pid
                else "another worker"
            )
            message = (
                f"{what} is held by {holder}, which renews its lease while it works; "
                f"if that process is gone, it is free after {_utc_clock(expires)} "
                f"({self.seconds:.0f} s)"
            )
        super().__init__(message)


def lease_claim(
    rows: QuerySet, *, free: Q, held: Q, lease: timedelta, what: str, **values: Any
) -> bool:
    """Take the one row of ``rows`` for this process, under a lease of ``lease``.

    A row matching ``free`` (queued, failed) is taken with one conditional UPDATE that
    also writes ``values``; a row matching ``held`` (running) is taken over when its
    holder is gone (see :func:`holder_gone`), with a compare-and-swap on the holder
    seen, so two claimants cannot both win. Returns False when the row is in neither
    state (done, moved on); raises :class:`LeaseHeld` when a holder that may be alive
    has it.
    """
    now = timezone.now()
    claim = {
        **values,
        "lease_expires_at": now + lease,
        **LeaseHolder.current().as_fields(),
    }
    expired = Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True)
    if rows.filter(free | (held & expired)).update(**claim):
        return True
    row = rows.filter(held).first()
    if row is None:
        return False
    if holder_gone(row):
        taken = rows.filter(
            held,
            lease_expires_at=row.lease_expires_at,
            lease_holder_host=row.lease_holder_host,
            lease_holder_pid=row.lease_holder_pid,
        ).update(**claim)
        if taken:
            logger.info("%s: took over from dead process %s", what, row.lease_holder_pid)
            return True
        row = rows.filter(held).first()
        if row is None:
            return False
    raise LeaseHeld(row, what)


def lease_renew(rows: QuerySet, *, holder: LeaseHolder, lease: timedelta, **values: Any) -> bool:
    """Extend ``holder``'s lease on the row of ``rows`` to ``lease`` from now (and write
    ``values``); False when the row is no longer this holder's (taken over, moved on)."""
    return bool(
        rows.filter(lease_holder_host=holder.host, lease_holder_pid=holder.pid).update(
            lease_expires_at=timezone.now() + lease, **values
        )
    )
