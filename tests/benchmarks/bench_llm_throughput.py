"""Throughput of LLM calls against the loopback server with a fixed latency (a script).

For each concurrency it measures (1) the OpenAI-compatible backend alone and (2) the
whole run engine (a DynToM run over the 24 real stages, several samples each, so every
call also parses a reply and stores ~70 predictions), and prints achieved requests/s
beside the ideal concurrency / latency.

    .venv/bin/python tests/benchmarks/bench_llm_throughput.py [--latency 0.2] [--concurrency 1 8 32]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tomlab_bench \\
        .venv/bin/python tests/benchmarks/bench_llm_throughput.py

Without DATABASE_URL it uses a throwaway SQLite file with the production SQLite options.
With it, the database must exist; it is migrated and the benchmark's rows are deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BACKEND_NAME = "bench-throughput"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="server latency, s (0.2)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument(
        "--seconds", type=float, default=6.0, help="ideal duration of each measurement (6)"
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

    from modeling.llm import ChatRequest, get_backend
    from modeling.models import Backend, CachedResponse, Run
    from modeling.services import run_create, run_execute
    from tests.llm_server import LLMTestServer

    def answer(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        keys = [ln[1 : ln.index("]")] for ln in prompt.splitlines() if ln.startswith("[type_")]
        return json.dumps(dict.fromkeys(keys, "a"))

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
        with LLMTestServer(fixed_latency=args.latency) as server:
            server.responder = answer
            for concurrency in args.concurrency:
                Backend.objects.filter(name=BACKEND_NAME).delete()
                backend = Backend.objects.create(
                    name=BACKEND_NAME,
                    kind=Backend.Kind.OPENAI,
                    base_url=server.base_url,
                    default_model="bench-model",
                    max_concurrency=concurrency,
                    max_retries=0,
                )
                ideal = concurrency / args.latency
                calls = max(concurrency * 2, round(ideal * args.seconds))

                server.reset()
                server.responder = lambda body: "ok"
                client = get_backend(backend)
                requests = [
                    ChatRequest.build(
                        [{"role": "user", "content": f"request {i}"}], model="m", params={}
                    )
                    for i in range(calls)
                ]
                started = time.perf_counter()
                done = sum(1 for _ in client.complete_many(requests))
                _report("backend", concurrency, done, time.perf_counter() - started, ideal)
                client.close()

                server.reset()
                server.responder = answer
                # Samples multiply the 24 stages into enough distinct (uncached) calls.
                samples = max(1, -(-calls // 24))
                run = run_create(
                    benchmark="dyntom",
                    method="vanilla",
                    backend=backend,
                    selection={},
                    params={"samples": samples},
                    enqueue=False,
                )
                started = time.perf_counter()
                status = run_execute(run_id=run.pk)
                seconds = time.perf_counter() - started
                run.refresh_from_db()
                assert status == Run.Status.SUCCEEDED, run.error
                assert server.request_count == run.done_calls
                _report("engine", concurrency, run.done_calls, seconds, ideal)
                Run.objects.filter(backend=backend).delete()
                CachedResponse.objects.filter(backend_name=BACKEND_NAME).delete()
                backend.delete()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _report(what: str, concurrency: int, calls: int, seconds: float, ideal: float) -> None:
    rate = calls / seconds
    print(
        f"{what:<8} {concurrency:>4} {calls:>6} {seconds:>8.2f} {rate:>8.1f} "
        f"{ideal:>8.1f} {rate / ideal:>8.0%}"
    )


if __name__ == "__main__":
    main()
