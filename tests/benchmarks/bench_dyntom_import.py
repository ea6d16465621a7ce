"""Time the DynToM importer at full-release scale (a script; pytest does not collect it).

Builds N synthetic trial directories (copies of the 24 real ones under new names),
imports them, then imports them again (everything unchanged) and prints stages,
questions, seconds and rows/s for both.

    .venv/bin/python tests/benchmarks/bench_dyntom_import.py [--stages 1100]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tomlab_bench \\
        .venv/bin/python tests/benchmarks/bench_dyntom_import.py

Without DATABASE_URL it uses a throwaway SQLite file (with the production SQLite
options from settings). With it, the database must exist; it is migrated, and the
synthetic works are deleted before and after the run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC_PREFIX = "benchtrial"


def build_trials(source: Path, target: Path, count: int) -> None:
    """Copy the real trials round-robin into ``count`` directories named benchtrialNNNNN."""
    real = sorted(p for p in source.iterdir() if (p / "story.json").is_file())
    for i in range(count):
        directory = target / f"{SYNTHETIC_PREFIX}{i:05d}"
        directory.mkdir(parents=True)
        # copyfile, not copytree: the shared data is read-only and its mode must not follow.
        for name in ("story.json", "question_new.json"):
            shutil.copyfile(real[i % len(real)] / name, directory / name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=1100, help="synthetic stages (1100)")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="dyntom-bench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    # Set before django.setup() so settings build the database from it like in production.
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir / 'bench.sqlite3'}")
    sys.path.insert(0, str(ROOT))

    import django

    django.setup()

    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from benchmarks.models import DynToMQuestion, Work
    from benchmarks.services import benchmark_import

    try:
        call_command("migrate", verbosity=0)
        synthetic = Work.objects.filter(benchmark="dyntom", key__startswith=SYNTHETIC_PREFIX)
        synthetic.delete()
        trials = workdir / "trials"
        build_trials(Path(settings.TOMLAB_SHARED_DATA) / "dyntom", trials, args.stages)
        print(f"database: {connection.vendor}; {args.stages} stages in {trials}")

        for label in ("first import", "re-import"):
            started = time.perf_counter()
            report = benchmark_import(format_name="dyntom", path=trials)
            seconds = time.perf_counter() - started
            counts = (report.created, report.updated, report.unchanged)
            rows = sum(sum(c.values()) for c in counts)
            questions = sum(c["DynToMQuestion"] for c in counts)
            print(
                f"{label}: {args.stages} stages, {questions} questions, {seconds:.2f} s, "
                f"{rows / seconds:,.0f} rows/s ({rows} rows)"
            )
            for line in report.summary_lines():
                print(f"    {line}")
        assert DynToMQuestion.objects.filter(stage__work__in=synthetic).count() == questions
        synthetic.delete()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
