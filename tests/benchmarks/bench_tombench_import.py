"""Time the mapped import of the whole ToMBench release (a script; pytest does not
collect it).

Imports ``../shared/data/tombench`` with the built-in ToMBench preset twice from its 20
JSONL task files (first import, then a re-import that finds everything unchanged) and
twice from the spreadsheet, each into a benchmark of its own, and prints items,
seconds and items/s for each. Issue 47 aims at under 10 s on 2 cores.

    .venv/bin/python tests/benchmarks/bench_tombench_import.py
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tomlab_bench \\
        .venv/bin/python tests/benchmarks/bench_tombench_import.py

Without DATABASE_URL it uses a throwaway SQLite file (with the production SQLite
options from settings). With it, the database must exist; it is migrated, and the
benchmarks it makes are deleted before and after the run.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "ToMBench bench"


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="tombench-bench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    # Set before django.setup() so settings build the database from it like in production.
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir / 'bench.sqlite3'}")
    sys.path.insert(0, str(ROOT))

    import django

    django.setup()

    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from benchmarks.importers.generic_presets import builtin_preset
    from benchmarks.models import MCItem, Work
    from benchmarks.services import benchmark_import

    try:
        call_command("migrate", verbosity=0)
        ours = Work.objects.filter(benchmark="generic", title=NAME)
        ours.delete()
        shared = Path(settings.TOMLAB_SHARED_DATA) / "tombench"
        mapping = builtin_preset("ToMBench").mapping
        sources = (
            ("jsonl", shared, "jsonl"),
            ("xlsx", shared / "ToMBench_release_v1_0618.xlsx", "xlsx"),
        )
        print(f"database: {connection.vendor}; {shared}")
        for label, path, version in sources:
            for attempt in ("first import", "re-import"):
                started, cpu_started = time.perf_counter(), time.process_time()
                report = benchmark_import(
                    format_name="generic", path=path, mapping=mapping, name=NAME, version=version
                )
                seconds = time.perf_counter() - started
                cpu = time.process_time() - cpu_started
                items = MCItem.objects.filter(work__title=NAME, work__key__endswith=version)
                n = items.count()
                # Wall time is the figure that counts; this process's CPU time and the
                # load average tell how much of it other work on the machine took.
                print(
                    f"{label} {attempt}: {n} items, {seconds:.2f} s, {n / seconds:,.0f} items/s; "
                    f"importer CPU {cpu:.2f} s, load average {os.getloadavg()[0]:.1f} on "
                    f"{os.cpu_count()} cores; created {sum(report.created.values())}, "
                    f"unchanged {sum(report.unchanged.values())}"
                )
        ours.delete()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
