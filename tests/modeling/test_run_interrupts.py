"""Interrupted runs: killed, stopped with a signal, or held by a live process elsewhere.

``run_model`` runs as a real subprocess against the loopback server (in this process),
on the suite's database (SQLite or PostgreSQL), with a 120 s lease: a resume that
finishes at once has taken the run over, not waited for the lease to expire.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.utils import timezone

from benchmarks.models import DynToMQuestion
from modeling.models import CachedResponse, Prediction, Run, RunCall
from modeling.runs.executor import RunInterrupt, run_execute
from modeling.runs.leases import RunLeased, _process_started_at
from modeling.runs.services import run_create, run_resume
from tests.celery_worker import database_url
from tests.llm_server import LLMTestServer

from .conftest import answer_all

pytestmark = pytest.mark.django_db(transaction=True)

LEASE_S = 120
# A reply the server finished writing this long before a kill must not be asked again:
# it reached the engine, which made it durable (one row) before anything else.
DURABLE_WITHIN_S = 0.4
ROOT = Path(settings.BASE_DIR)


def _command(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), "run_model", *args]


def _env(processes: int = 1) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "MODELING_RUN_LEASE_S": str(LEASE_S),
        "MODELING_RUN_PROCESSES": str(processes),
        "PYTHONUNBUFFERED": "1",
    }


def _start(*args: str, processes: int = 1) -> subprocess.Popen:
    return subprocess.Popen(
        _command(*args),
        cwd=ROOT,
        env=_env(processes),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        _command(*args), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout
    )


def _wait_for(predicate, *, timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"run_model exited ({proc.returncode}) before {what}:\n{err}")
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _new_run_args(backend, seed: int, samples: int = 3) -> list[str]:
    return [
        "--benchmark",
        "dyntom",
        "--method",
        "vanilla",
        "--backend",
        backend.name,
        "--samples",
        str(samples),
        "--seed",
        str(seed),
    ]


def _kill_at_random_point(server: LLMTestServer, proc: subprocess.Popen, rng: random.Random):
    """SIGKILL run_model after a random number of answers plus a random pause."""
    answers = rng.randint(2, 50)
    _wait_for(
        lambda: len(server.answered_log) >= answers,
        timeout=90,
        what=f"{answers} answers",
        proc=proc,
    )
    time.sleep(rng.uniform(0, 0.2))
    if proc.poll() is not None:
        raise AssertionError("run_model finished before the kill")
    proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    proc.wait(timeout=10)
    proc.communicate()
    return killed_at


def _answered_before(server: LLMTestServer, moment: float) -> set[str]:
    return {server.body_key(body) for at, body in server.answered_log if at <= moment}


def _assert_complete(run: Run, calls: int) -> None:
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert (run.done_calls, run.total_calls, run.error_calls) == (calls, calls, 0)
    questions = DynToMQuestion.objects.count()
    predictions = Prediction.objects.filter(run=run)
    assert predictions.count() == questions * (calls // 24)
    assert predictions.values("dyntom_question", "sample_index").distinct().count() == (
        predictions.count()
    )


@pytest.mark.slow
def test_sigkilled_run_resumes_at_once_on_this_host_without_repeating_answered_calls(
    openai_backend, llm_server, dyntom_stages
):
    llm_server.fixed_latency = 0.2
    llm_server.responder = answer_all("a")
    proc = _start(*_new_run_args(openai_backend, seed=11))
    killed_at = _kill_at_random_point(llm_server, proc, random.Random(11))

    run = Run.objects.get()
    # The dead holder is on record: this host, its PID and its start time.
    assert run.status == Run.Status.RUNNING
    assert run.lease_holder_host == socket.gethostname()
    assert run.lease_holder_pid == proc.pid
    assert run.lease_holder_started_at is not None
    assert run.lease_expires_at > timezone.now() + timedelta(seconds=LEASE_S / 2)
    sent_before_resume = llm_server.request_count
    durable = _answered_before(llm_server, killed_at - DURABLE_WITHIN_S)

    started = time.monotonic()
    resumed = _run_cli("--resume", str(run.pk))
    took = time.monotonic() - started
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert f"run {run.pk} succeeded: 72/72 calls, 0 errors" in resumed.stdout
    assert took < LEASE_S / 2  # taken over at once, not after the lease ran out

    resent = [llm_server.body_key(b) for b in llm_server.requests[sent_before_resume:]]
    assert not durable & set(resent), "answered calls were sent again"
    assert len({llm_server.body_key(b) for _, b in llm_server.answered_log}) == 72
    _assert_complete(run, 72)
    run.refresh_from_db()
    assert run.lease_expires_at is None and run.lease_holder_pid is None


@pytest.mark.slow
def test_kills_at_random_points_never_repeat_an_answered_call(
    openai_backend, llm_server, dyntom_stages
):
    """Many kills: after each, only calls whose reply had not arrived are sent again.

    TOMLAB_KILL_TRIALS sets the number of trials (default 6); the seed is printed.
    """
    trials = int(os.environ.get("TOMLAB_KILL_TRIALS", "6"))
    seed = int(os.environ.get("TOMLAB_KILL_SEED", str(random.randrange(10**6))))
    print(f"kill trials: {trials}, seed {seed}")
    rng = random.Random(seed)
    openai_backend.max_concurrency = 8
    openai_backend.save()
    repeated_in_flight = 0
    for trial in range(trials):
        llm_server.reset()
        llm_server.responder = answer_all("b")
        # Slow replies while run_model runs, so the kill lands with calls in flight.
        llm_server.fixed_latency = 0.2
        proc = _start(*_new_run_args(openai_backend, seed=1000 * (trial + 1)))
        killed_at = _kill_at_random_point(llm_server, proc, rng)
        run = Run.objects.order_by("-pk").first()
        sent_before = llm_server.request_count
        durable = _answered_before(llm_server, killed_at - DURABLE_WITHIN_S)
        # The resume's own replies need no delay: what it sends again is decided by
        # what was stored before the kill, not by how fast the server answers now.
        llm_server.fixed_latency = 0

        # Resumed here, in this process: the dead subprocess's lease is taken over.
        with override_settings(MODELING_RUN_LEASE_S=LEASE_S):
            run_resume(run_id=run.pk, enqueue=False)
            assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED

        requests = [llm_server.body_key(b) for b in llm_server.requests]
        resent = set(requests[sent_before:]) & set(requests[:sent_before])
        assert not durable & resent, f"trial {trial} (seed {seed}): answered calls sent again"
        repeated_in_flight += len(resent)
        assert len({llm_server.body_key(b) for _, b in llm_server.answered_log}) == 72
        _assert_complete(run, 72)
    # Only calls in flight at each kill (or answered in its last instant) were asked
    # again: about the window, 8, each time.
    print(f"asked again after the kills: {repeated_in_flight} calls in {trials} trials")
    assert repeated_in_flight <= trials * (8 + 8)


def engine_children(parent_pid: int) -> list[int]:
    """Live engine processes (modeling.runs.engine_process) that ``parent_pid`` started.

    A process whose parent is one of them is not one: an engine process that starts a
    program (the OpenAI client runs ``uname -p`` once, in ``platform.platform()``, for
    its headers) has a child that carries the engine's command line until it execs, and
    it was once counted as a fifth engine process of four. Matched by the command line,
    not the parent pid, so an engine process that outlives its killed parent (and so
    has a new parent) still counts."""
    candidates: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state, ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue
        mine = b"modeling.runs.engine_process" in argv and str(parent_pid).encode() in argv
        if mine and state not in "ZX":
            candidates[int(entry.name)] = int(ppid)
    return sorted(pid for pid, ppid in candidates.items() if ppid not in candidates)


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 4])
def test_a_kill_at_128_in_flight_repeats_at_most_one_window(
    openai_backend, llm_server, dyntom_stages, processes
):
    """Issue 31: with 128 calls in flight, a SIGKILL loses no stored reply, and the
    resume asks again at most the window that was in flight.

    At this width on 2 busy cores a reply can wait in the client longer than the 0.4 s
    the tests at 8 allow (request threads queue for the GIL before reading it), so the
    check here is the durability rule itself: no call stored before the kill is sent
    again, and the resume sends exactly the calls that were not stored.

    In 4 engine processes (32 calls in flight each) the kill of the process that
    holds the run takes its engine processes with it: none sends a call afterwards."""
    window = 128
    openai_backend.max_concurrency = window
    openai_backend.save()
    llm_server.fixed_latency = 0.2
    llm_server.responder = answer_all("d")
    calls = 24 * 12
    proc = _start(*_new_run_args(openai_backend, seed=31, samples=12), processes=processes)
    # Every engine process seen alive while the run went: one that started early on a busy
    # machine can finish its shard and exit before the kill, so counting only at the kill
    # would be a race.
    seen: set[int] = set()

    def answered_150() -> bool:
        seen.update(engine_children(proc.pid))
        return len(llm_server.answered_log) >= 150

    _wait_for(answered_150, timeout=120, what="150 answers", proc=proc)
    if proc.poll() is not None:
        raise AssertionError("run_model finished before the kill")
    if processes > 1:
        assert len(seen) == processes
        assert engine_children(proc.pid)  # some still at work when the parent dies
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    proc.communicate()
    _wait_for(lambda: not engine_children(proc.pid), timeout=5, what="the engine processes' end")
    run = Run.objects.get()
    sent_before = llm_server.request_count
    assert sent_before > window  # the window was full and moving when it died
    stored = RunCall.objects.filter(
        run=run, status__in=[RunCall.Status.RECEIVED, RunCall.Status.DONE]
    ).count()
    assert 0 < stored < calls

    with override_settings(MODELING_RUN_LEASE_S=LEASE_S):
        run_resume(run_id=run.pk, enqueue=False)
        assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED

    requests = [llm_server.body_key(b) for b in llm_server.requests]
    resent = set(requests[sent_before:]) & set(requests[:sent_before])
    print(f"kill at {window} in flight: {stored} stored, {len(resent)} asked again")
    # No stored call asked again: the resume sends exactly the calls not stored (counted
    # distinct, since a request the dead process had sent can reach the server late).
    assert len(set(requests[sent_before:])) == calls - stored
    assert len(resent) <= window
    assert len({llm_server.body_key(b) for _, b in llm_server.answered_log}) == calls
    _assert_complete(run, calls)


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_sigint_stops_the_run_releases_the_lease_and_resume_finishes_it(
    openai_backend, llm_server, dyntom_stages, processes
):
    """In two engine processes too: the stop reaches both, each waits for its calls."""
    llm_server.fixed_latency = 0.2
    llm_server.responder = answer_all("c")
    proc = _start(*_new_run_args(openai_backend, seed=21, samples=2), processes=processes)
    _wait_for(lambda: len(llm_server.answered_log) >= 8, timeout=90, what="8 answers", proc=proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "SIGINT: stopping run" in err

    run = Run.objects.get()
    assert run.status == Run.Status.STOPPED
    assert run.lease_expires_at is None and run.lease_holder_pid is None
    assert run.error.startswith("stopped by SIGINT after ")
    assert f"run {run.pk} stopped: " in out
    assert f"resume with: python manage.py run_model --resume {run.pk}" in out
    # The calls in flight were waited for and recorded: every answer is stored.
    assert run.done_calls == len(llm_server.answered_log) == llm_server.request_count
    assert 8 <= run.done_calls < 48
    page = Run.objects.get(pk=run.pk)
    assert page.is_finished and page.get_status_display() == "stopped"

    resumed = _run_cli("--resume", str(run.pk))
    assert resumed.returncode == 0, resumed.stderr
    assert f"run {run.pk} succeeded: 48/48 calls" in resumed.stdout
    assert llm_server.repeats() == {}  # a clean stop repeats nothing at all
    assert llm_server.request_count == 48
    _assert_complete(run, 48)


def test_interrupt_in_process_stops_after_the_calls_in_flight(
    openai_backend, llm_server, dyntom_stages
):
    """The same stop without a subprocess: requested from another thread mid-run."""
    interrupt = RunInterrupt()
    seen = []

    def responder(body: dict) -> str:
        seen.append(1)
        if len(seen) == 6:
            interrupt.request("SIGTERM")
        return answer_all("a")(body)

    llm_server.responder = responder
    llm_server.fixed_latency = 0.05
    run = run_create(
        benchmark="dyntom", method="vanilla", backend=openai_backend, selection={}, enqueue=False
    )
    assert run_execute(run_id=run.pk, interrupt=interrupt) == Run.Status.STOPPED
    run.refresh_from_db()
    assert run.status == Run.Status.STOPPED and run.lease_holder_pid is None
    assert run.error.startswith("stopped by SIGTERM after ")
    # Nothing new was sent after the stop; what was in flight was recorded.
    assert run.done_calls == llm_server.request_count < 24
    assert not RunCall.objects.filter(run=run, status=RunCall.Status.RECEIVED).exists()

    run_resume(run_id=run.pk, enqueue=False)
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    assert llm_server.request_count == 24 and llm_server.repeats() == {}


def test_received_replies_are_recorded_on_resume_without_asking_again(
    openai_backend, llm_server, dyntom_stages
):
    """A kill between a reply's durable row and its predictions loses nothing paid."""
    openai_backend.price_input_per_1k = 1
    openai_backend.save()
    llm_server.responder = answer_all("d")
    run = run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=openai_backend,
        selection={"limit": 3},
        enqueue=False,
    )
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    paid = run.cost
    # The state a kill leaves right after the durable step: calls hold their replies,
    # nothing else was written (no predictions, no cache rows, counters not bumped).
    Prediction.objects.filter(run=run).delete()
    CachedResponse.objects.all().delete()
    RunCall.objects.filter(run=run).update(status=RunCall.Status.RECEIVED, finished_at=None)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        done_calls=0,
        prompt_tokens=0,
        completion_tokens=0,
        cost=0,
        lease_expires_at=timezone.now() + timedelta(seconds=60),
        lease_holder_host=socket.gethostname(),
        lease_holder_pid=_a_dead_pid(),
    )

    run_resume(run_id=run.pk, enqueue=False)
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    assert llm_server.request_count == 3  # the first execution's, none since
    run.refresh_from_db()
    assert run.done_calls == 3 and run.cost == paid
    assert not any(c.from_cache for c in RunCall.objects.filter(run=run))
    works = [c.unit_key.split(":", 1)[1] for c in RunCall.objects.filter(run=run)]
    assert Prediction.objects.filter(run=run, parsed_answer="d").count() == (
        DynToMQuestion.objects.filter(stage__work__key__in=works).count()
    )
    assert CachedResponse.objects.count() == 3


def _a_dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _hold(run: Run, *, host: str, pid: int, started_at, seconds: float = 60) -> None:
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        lease_expires_at=timezone.now() + timedelta(seconds=seconds),
        lease_holder_host=host,
        lease_holder_pid=pid,
        lease_holder_started_at=started_at,
    )


def _stopped_run(backend) -> Run:
    return run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=backend,
        selection={"limit": 2},
        enqueue=False,
    )


def test_resume_of_a_run_held_on_another_host_refuses_with_one_line(
    openai_backend, llm_server, dyntom_stages
):
    llm_server.responder = answer_all("a")
    run = _stopped_run(openai_backend)
    _hold(run, host="gpu-node-7", pid=4242, started_at=None)
    with pytest.raises(CommandError) as refused:
        call_command("run_model", "--resume", str(run.pk))
    message = str(refused.value)
    assert message.startswith(f"run {run.pk} is held by process 4242 on host gpu-node-7")
    assert "retry after " in message and " UTC" in message and "\n" not in message
    assert llm_server.request_count == 0
    assert Run.objects.get(pk=run.pk).lease_holder_pid == 4242  # untouched

    # As a user sees it: one line on stderr, exit status 1, no traceback.
    result = _run_cli("--resume", str(run.pk), timeout=60)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"CommandError: run {run.pk} is held by")


def test_resume_of_a_run_live_in_another_process_here_names_it(
    openai_backend, llm_server, dyntom_stages
):
    run = _stopped_run(openai_backend)
    me = os.getpid()  # a live process on this host: this one
    _hold(run, host=socket.gethostname(), pid=me, started_at=_process_started_at(me))
    with pytest.raises(RunLeased, match=f"is running in process {me} on this host"):
        run_resume(run_id=run.pk)
    with pytest.raises(CommandError, match=f"kill -INT {me}"):
        call_command("run_model", "--resume", str(run.pk))
    assert llm_server.request_count == 0


def test_a_dead_or_reused_pid_on_this_host_is_taken_over_at_once(
    openai_backend, llm_server, dyntom_stages, capsys
):
    llm_server.responder = answer_all("a")
    run = _stopped_run(openai_backend)
    _hold(run, host=socket.gethostname(), pid=_a_dead_pid(), started_at=None)
    call_command("run_model", "--resume", str(run.pk))
    assert f"run {run.pk} succeeded: 2/2 calls" in capsys.readouterr().out

    # A live PID that started at another time is another process (the PID was reused).
    other = _stopped_run(openai_backend)
    _hold(
        other,
        host=socket.gethostname(),
        pid=os.getpid(),
        started_at=datetime(2000, 1, 1, tzinfo=UTC),
    )
    assert run_resume(run_id=other.pk, enqueue=False).status == Run.Status.QUEUED
    assert run_execute(run_id=other.pk) == Run.Status.SUCCEEDED


def test_resume_wait_counts_down_then_takes_over(openai_backend, llm_server, dyntom_stages, capsys):
    llm_server.responder = answer_all("a")
    run = _stopped_run(openai_backend)
    _hold(run, host="gpu-node-7", pid=4242, started_at=None, seconds=1.5)
    started = time.monotonic()
    call_command("run_model", "--resume", str(run.pk), "--wait")
    captured = capsys.readouterr()
    assert time.monotonic() - started >= 1.0
    assert f"waiting: run {run.pk} is held by process 4242 on host gpu-node-7" in captured.err
    assert "s until run" in captured.err
    assert f"run {run.pk} succeeded: 2/2 calls" in captured.out


def test_seed_makes_each_sample_its_own_request(openai_backend, llm_server, dyntom_stages, capsys):
    llm_server.responder = answer_all("a")
    call_command(
        "run_model",
        "--benchmark",
        "dyntom",
        "--method",
        "vanilla",
        "--backend",
        openai_backend.name,
        "--items",
        "trial149",
        "--samples",
        "3",
        "--seed",
        "40",
    )
    assert "succeeded: 3/3 calls" in capsys.readouterr().out
    assert sorted(r["seed"] for r in llm_server.requests) == [40, 41, 42]
    assert len({json.dumps(r, sort_keys=True) for r in llm_server.requests}) == 3
    assert Run.objects.get().params["seed"] == 40
