"""Throughput of LLM calls against the loopback server with a fixed latency (a script).

For each concurrency it measures (1) the OpenAI-compatible backend alone, sending the
same DynToM prompts, and (2) the whole run engine (a DynToM run over the 24 real
stages, several samples each, so every call also parses a reply and stores ~71
predictions), and prints achieved requests/s beside the ideal concurrency / latency
and their ratio. The server runs in a process of its own, as a real one would: in
ours it would compete with the engine for the GIL.

    .venv/bin/python tests/benchmarks/bench_llm_throughput.py [--latency 0.2] \\
        [--concurrency 8 32 128]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tomlab_bench \\
        .venv/bin/python tests/benchmarks/bench_llm_throughput.py

Without DATABASE_URL it uses a throwaway SQLite file with the production SQLite options.
With it, the database must exist; it is migrated and the benchmark's rows are deleted.
"""

from __future__ import annotations

import argparse
import os
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="server latency, s (0.2)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="ideal duration of each measurement (10)"
    )
    parser.add_argument(
        "--min-calls", type=int, default=1000, help="calls per measurement at least (1000)"
    )
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

    from modeling.backends import ChatRequest, get_backend
    from modeling.models import Backend, CachedResponse, Prediction, Run
    from modeling.pipelines import get_pipeline
    from modeling.runs.executor import run_execute
    from modeling.runs.prompt_templates import active_template
    from modeling.runs.services import run_create

    try:
        call_command("migrate", verbosity=0)
        call_command(
            "import_benchmark",
            "dyntom",
            str(Path(settings.TOMLAB_SHARED_DATA) / "dyntom"),
            verbosity=0,
        )
        print(f"database: {connection.vendor}; server latency {args.latency * 1000:.0f} ms")
        print(
            f"{'what':<8} {'conc':>4} {'calls':>6} {'seconds':>8} {'req/s':>8} "
            f"{'ideal':>8} {'of ideal':>8}"
        )
        units = get_pipeline("dyntom").build_units(
            selection={}, template=active_template("dyntom-vanilla")
        )
        with _server_process(args.latency) as base_url:
            for concurrency in args.concurrency:
                Backend.objects.filter(name=BACKEND_NAME).delete()
                backend = Backend.objects.create(
                    name=BACKEND_NAME,
                    kind=Backend.Kind.OPENAI,
                    base_url=base_url,
                    default_model="bench-model",
                    max_concurrency=concurrency,
                    max_retries=0,
                )
                ideal = concurrency / args.latency
                calls = max(args.min_calls, concurrency * 2, round(ideal * args.seconds))

                client = get_backend(backend)
                requests = [
                    ChatRequest.build(
                        units[i % len(units)].messages,
                        model="bench-model",
                        params={},
                        sample_index=i,
                    )
                    for i in range(calls)
                ]
                started = time.perf_counter()
                done = sum(1 for _ in client.complete_many(requests))
                _report("backend", concurrency, done, time.perf_counter() - started, ideal)
                client.close()

                # Samples multiply the 24 stages into enough distinct (uncached) calls.
                samples = max(1, -(-calls // len(units)))
                run = run_create(
                    benchmark="dyntom",
                    method="vanilla",
                    backend=backend,
                    selection={},
                    params={"samples": samples, "seed": 1},
                    enqueue=False,
                )
                started = time.perf_counter()
                status = run_execute(run_id=run.pk)
                seconds = time.perf_counter() - started
                run.refresh_from_db()
                assert status == Run.Status.SUCCEEDED, run.error
                assert run.done_calls == run.total_calls == samples * len(units)
                predictions = Prediction.objects.filter(run=run).count()
                _report(
                    "engine",
                    concurrency,
                    run.done_calls,
                    seconds,
                    ideal,
                    f"{predictions / run.done_calls:.0f} predictions/call",
                )
                Run.objects.filter(backend=backend).delete()
                CachedResponse.objects.filter(backend_name=BACKEND_NAME).delete()
                backend.delete()
        print(f"load average (1/5/15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def _server_process(latency: float) -> Iterator[str]:
    """The loopback server in a child process answering DynToM prompts; yields its URL."""
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
        yield f"http://127.0.0.1:{line[1]}/v1"
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _report(
    what: str, concurrency: int, calls: int, seconds: float, ideal: float, note: str = ""
) -> None:
    rate = calls / seconds
    print(
        f"{what:<8} {concurrency:>4} {calls:>6} {seconds:>8.2f} {rate:>8.1f} "
        f"{ideal:>8.1f} {rate / ideal:>8.2f}  {note}"
    )


if __name__ == "__main__":
    main()
