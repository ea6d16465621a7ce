"""Throughput of LLM calls against the loopback server with a fixed latency (a script).

For each concurrency it measures (1) the OpenAI-compatible backend alone, sending the
same DynToM prompts, and (2) the whole run engine (a DynToM run over the 24 real
stages, several samples each, so every call also parses a reply and stores ~71
predictions), and prints achieved requests/s beside the ideal concurrency / latency
and their ratio. The server runs in a process of its own, as a real one would: in
ours it would compete with the engine for the GIL.

Two sweeps. The first holds the latency (0.2 s), so the ideal rate grows with the
concurrency, up to 640 calls/s at 128: past what one process on a small machine can
send and store, it measures that ceiling. The second holds the ideal rate
(``--rate``, 160 calls/s: latency = concurrency / rate, 0.8 s at 128) and so measures
what the window itself keeps in flight as the concurrency grows. Real replies to
these prompts take seconds, so real runs at 128 in flight are in the second regime.
Each sweep also prints the CPU per call of this process (with the engine processes it
started) and of the server. ``--processes 1 4`` measures the engine in one process and
split across four (``MODELING_RUN_PROCESSES``; lines ``engine/4``).

Last, a short run: 30 calls (15 stages, 2 samples each, none cached) at 8 in flight and
0.2 s latency, several times over. Its whole ``run_execute`` is timed, so what the
engine does before its first wave and after its last reply counts: 30 calls in waves
of 8 take at least 4 latencies, 0.94 of concurrency / latency (``--short-runs``).

    .venv/bin/python tests/benchmarks/bench_llm_throughput.py [--latency 0.2] \\
        [--rate 160] [--concurrency 8 32 128] [--processes 1 4] [--short-runs 5]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tomlab_bench \\
        .venv/bin/python tests/benchmarks/bench_llm_throughput.py

Without DATABASE_URL it uses a throwaway SQLite file with the production SQLite options.
With it, the database must exist; it is migrated and the benchmark's rows are deleted.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BACKEND_NAME = "bench-throughput"


def _bench_backend(server, concurrency: int):
    """The bench's own backend row, made afresh, pointing at the loopback server."""
    from modeling.models import Backend

    Backend.objects.filter(name=BACKEND_NAME).delete()
    return Backend.objects.create(
        name=BACKEND_NAME,
        kind=Backend.Kind.OPENAI,
        base_url=server.base_url,
        default_model="bench-model",
        max_concurrency=concurrency,
        max_retries=0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="server latency, s (0.2)")
    parser.add_argument(
        "--rate",
        type=float,
        default=160.0,
        help="ideal calls/s of the second sweep (160); 0 skips it",
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="ideal duration of each measurement (20)"
    )
    parser.add_argument(
        "--min-calls", type=int, default=1000, help="calls per measurement at least (1000)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        nargs="+",
        default=[1],
        help="engine processes (MODELING_RUN_PROCESSES) to measure the engine with (1)",
    )
    parser.add_argument(
        "--short-runs",
        type=int,
        default=5,
        help="times the 30-call run is measured (5); 0 skips it",
    )
    parser.add_argument("--short-only", action="store_true", help="only the 30-call run, no sweeps")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="llm-bench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir / 'bench.sqlite3'}")
    sys.path.insert(0, str(ROOT))

    import django

    django.setup()

    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from modeling.pipelines import get_pipeline
    from modeling.runs.prompt_templates import active_template

    try:
        call_command("migrate", verbosity=0)
        call_command(
            "import_benchmark",
            "dyntom",
            str(Path(settings.TOMLAB_SHARED_DATA) / "dyntom"),
            verbosity=0,
        )
        print(f"database: {connection.vendor}")
        units = get_pipeline("dyntom").build_units(
            selection={}, template=active_template("dyntom-vanilla")
        )
        sweeps = [(f"fixed latency {args.latency * 1000:.0f} ms", None)]
        if args.rate:
            sweeps.append((f"same ideal rate, {args.rate:.0f} calls/s", args.rate))
        for title, rate in [] if args.short_only else sweeps:
            print(f"\n{title}")
            print(
                f"{'what':<8} {'conc':>4} {'latency':>7} {'calls':>6} {'seconds':>8} "
                f"{'req/s':>8} {'ideal':>8} {'of ideal':>8} {'cpu ms/call':>11} {'server':>6}"
            )
            for concurrency in args.concurrency:
                latency = concurrency / rate if rate else args.latency
                with _server_process(latency) as server:
                    _measure(server, units, concurrency, latency, args, with_backend=rate is None)
        if args.short_runs:
            _measure_short(args.short_runs)
        print(f"load average (1/5/15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _measure(
    server: _Server,
    units: list,
    concurrency: int,
    latency: float,
    args: argparse.Namespace,
    *,
    with_backend: bool,
) -> None:
    """Print the backend alone (when asked) and the engine at one concurrency."""
    from django.test import override_settings

    from modeling.backends import ChatRequest, get_backend
    from modeling.models import CachedResponse, Prediction, Run
    from modeling.runs.executor import run_execute
    from modeling.runs.services import run_create

    backend = _bench_backend(server, concurrency)
    ideal = concurrency / latency
    calls = max(args.min_calls, concurrency * 2, round(ideal * args.seconds))
    line = _Line(concurrency, latency, ideal, server)
    if with_backend:
        client = get_backend(backend)
        requests = [
            ChatRequest.build(
                units[i % len(units)].messages, model="bench-model", params={}, sample_index=i
            )
            for i in range(calls)
        ]
        line.start()
        done = sum(1 for _ in client.complete_many(requests))
        line.report("backend", done)
        client.close()

    # Samples multiply the 24 stages into enough distinct (uncached) calls.
    samples = max(1, -(-calls // len(units)))
    for processes in args.processes:
        run = run_create(
            benchmark="dyntom",
            method="vanilla",
            backend=backend,
            selection={},
            params={"samples": samples, "seed": 1},
            enqueue=False,
        )
        line.start()
        with override_settings(MODELING_RUN_PROCESSES=processes):
            status = run_execute(run_id=run.pk)
        line.stop()
        run.refresh_from_db()
        assert status == Run.Status.SUCCEEDED, run.error
        assert run.done_calls == run.total_calls == samples * len(units)
        predictions = Prediction.objects.filter(run=run).count()
        what = "engine" if processes == 1 else f"engine/{processes}"
        line.report(what, run.done_calls, f"{predictions / run.done_calls:.0f} predictions/call")
        Run.objects.filter(backend=backend).delete()
        CachedResponse.objects.filter(backend_name=BACKEND_NAME).delete()
    backend.delete()


SHORT_CALLS, SHORT_CONCURRENCY, SHORT_LATENCY = 30, 8, 0.2


def _measure_short(runs: int) -> None:
    """Print achieved / ideal concurrency of a 30-call run, each run timed whole."""
    from modeling.models import CachedResponse, Run
    from modeling.runs.executor import run_execute
    from modeling.runs.services import run_create

    samples = 2
    ideal = SHORT_CONCURRENCY / SHORT_LATENCY
    print(
        f"\nshort run: {SHORT_CALLS} calls, {SHORT_CONCURRENCY} in flight, "
        f"{SHORT_LATENCY * 1000:.0f} ms (waves of {SHORT_CONCURRENCY} allow "
        f"{SHORT_CALLS / SHORT_CONCURRENCY / -(-SHORT_CALLS // SHORT_CONCURRENCY):.2f})"
    )
    # What a started Celery worker has done before its first task: imported the task
    # modules (Celery's first send from a process that has not pays about 1.1 s for it,
    # inside the first run's timing) and, on worker_init, the HTTP backend.
    from config.celery import app
    from modeling.backends.base import backends_preload

    app.loader.import_default_modules()
    backends_preload()
    ratios = []
    with _server_process(SHORT_LATENCY) as server:
        backend = _bench_backend(server, SHORT_CONCURRENCY)
        for attempt in range(runs):
            run = run_create(
                benchmark="dyntom",
                method="vanilla",
                backend=backend,
                selection={"limit": SHORT_CALLS // samples},
                # A seed per attempt: every attempt's 30 calls are new to the cache.
                params={"samples": samples, "seed": 1000 + attempt},
                enqueue=False,
            )
            began = time.perf_counter()
            status = run_execute(run_id=run.pk)
            seconds = time.perf_counter() - began
            run.refresh_from_db()
            assert status == Run.Status.SUCCEEDED, run.error
            assert run.done_calls == run.total_calls == SHORT_CALLS, run.total_calls
            ratio = SHORT_CALLS / seconds / ideal
            ratios.append(ratio)
            print(f"  run {attempt + 1}: {seconds:.3f} s, {ratio:.2f} of c/latency", flush=True)
        Run.objects.filter(backend=backend).delete()
        CachedResponse.objects.filter(backend_name=BACKEND_NAME).delete()
        backend.delete()
    ratios.sort()
    print(
        f"short run: achieved / ideal concurrency {ratios[len(ratios) // 2]:.2f} "
        f"(median of {runs}; {ratios[0]:.2f}-{ratios[-1]:.2f})"
    )


class _Server:
    """The loopback server's child process: its URL and the CPU it has used."""

    def __init__(self, proc: subprocess.Popen, port: str) -> None:
        self.proc = proc
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def cpu_seconds(self) -> float | None:
        """User + system CPU of the server so far (Linux's /proc), else None."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    """CPU of this process and of the engine processes it started and has waited for
    (the server, still running, is not among them)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class _Line:
    """One printed line: calls/s against the ideal, and CPU per call on both sides."""

    def __init__(self, concurrency: int, latency: float, ideal: float, server: _Server) -> None:
        self.concurrency, self.latency, self.ideal, self.server = (
            concurrency,
            latency,
            ideal,
            server,
        )

    def start(self) -> None:
        self.ended = None
        self.began = (time.perf_counter(), _own_cpu(), self.server.cpu_seconds())

    def stop(self) -> None:
        self.ended = (time.perf_counter(), _own_cpu(), self.server.cpu_seconds())

    def report(self, what: str, calls: int, note: str = "") -> None:
        if self.ended is None:
            self.stop()
        (wall0, cpu0, server0), (wall1, cpu1, server1) = self.began, self.ended
        seconds = wall1 - wall0
        rate = calls / seconds
        server = (
            f"{(server1 - server0) / calls * 1000:>6.2f}"
            if server0 is not None and server1 is not None
            else f"{'-':>6}"
        )
        print(
            f"{what:<8} {self.concurrency:>4} {self.latency:>7.3f} {calls:>6} {seconds:>8.2f} "
            f"{rate:>8.1f} {self.ideal:>8.1f} {rate / self.ideal:>8.2f} "
            f"{(cpu1 - cpu0) / calls * 1000:>11.2f} {server}  {note}",
            flush=True,
        )


@contextmanager
def _server_process(latency: float) -> Iterator[_Server]:
    """The loopback server in a child process answering DynToM prompts."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.llm_server",
            "--latency",
            str(latency),
            "--dyntom-letter",
            "a",
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().split()
        if line[:1] != ["port"]:
            raise RuntimeError(f"the test server did not start: {line}")
        yield _Server(proc, line[1])
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
