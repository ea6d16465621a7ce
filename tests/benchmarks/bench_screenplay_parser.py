"""How the screenplay importer's cost grows with the script (a script; pytest does not collect it).

Builds scripts of 1, 4 and 16 MB by repeating a real IMSDb screenplay from the shared
data, and for each one, in a fresh process (so peak memory is that size's own):
parses it and builds the masked movie (``parse``), then runs the whole import into a
throwaway SQLite database (``import``, parse included). Prints wall seconds, CPU
seconds and CPU seconds per MB (the CPU figure is the one to read on a shared machine:
other processes stretch wall time, not CPU time), and the process's peak resident
memory. Linear growth shows as a flat cpu/MB column.

    .venv/bin/python tests/benchmarks/bench_screenplay_parser.py [--sizes 1 4 16] [--no-import]
    make bench-parser
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "screenplays/star_wars_a_new_hope.txt"
MB = 1024 * 1024


def build_script(source: Path, target: Path, megabytes: float) -> None:
    """``megabytes`` of ``source`` repeated, cut at a line end so the last copy stays whole."""
    data = source.read_bytes()
    size = int(megabytes * MB)
    body = data * (size // len(data) + 1)
    cut = body.rfind(b"\n", 0, size) + 1 or size
    target.write_bytes(body[:cut])


def _peak_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_one(path: Path, *, with_import: bool) -> dict[str, float]:
    """Run in the child process: time the parse, then the import; peak memory after each."""
    workdir = path.parent
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / f'{path.stem}.sqlite3'}"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from benchmarks.importers.screenplay import build_movie, screenplay_import
    from benchmarks.importers.screenplay_parser import parse_screenplay

    call_command("migrate", verbosity=0)
    result = {"mb": path.stat().st_size / MB, "baseline_mb": _peak_mb()}
    started, cpu = time.perf_counter(), time.process_time()
    play = parse_screenplay(path.read_bytes())
    movie = build_movie(play, title="bench", source=path.name)
    result["parse_s"] = time.perf_counter() - started
    result["parse_cpu"] = time.process_time() - cpu
    result["scenes"] = len(movie.scenes)
    result["parse_peak_mb"] = _peak_mb()
    del play, movie
    if with_import:
        started, cpu = time.perf_counter(), time.process_time()
        screenplay_import(path=path, title=f"bench {path.stem}")
        result["import_s"] = time.perf_counter() - started
        result["import_cpu"] = time.process_time() - cpu
        result["import_peak_mb"] = _peak_mb()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 4, 16], help="MB")
    parser.add_argument("--no-import", action="store_true", help="parse only, no database")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # the child's job
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(args.one, with_import=not args.no_import)))
        return

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    sys.path.insert(0, str(ROOT))
    from django.conf import settings

    source = Path(settings.TOMLAB_SHARED_DATA) / SOURCE
    print(f"source: {source.name} ({source.stat().st_size / 1024:.0f} KB), repeated")
    print(
        f"{'MB':>5} {'scenes':>7} | {'parse s':>7} {'cpu s':>6} {'cpu/MB':>6} | "
        f"{'import s':>8} {'cpu s':>6} {'cpu/MB':>6} | {'peak MB':>7} {'(base)':>6}"
    )
    with tempfile.TemporaryDirectory(prefix="screenplay-bench-") as tmp:
        for size in args.sizes:
            script = Path(tmp) / f"script_{size:g}mb.txt"
            build_script(source, script, size)
            command = [sys.executable, __file__, "--one", str(script)]
            if args.no_import:
                command.append("--no-import")
            out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
            if out.returncode:
                sys.exit(f"{script.name}: the measuring process failed:\n{out.stderr}")
            r = json.loads(out.stdout.strip().splitlines()[-1])
            imported = (
                f"{r['import_s']:>8.1f} {r['import_cpu']:>6.1f} {r['import_cpu'] / r['mb']:>6.2f}"
                if "import_s" in r
                else f"{'-':>8} {'-':>6} {'-':>6}"
            )
            peak = max(r["parse_peak_mb"], r.get("import_peak_mb", 0))
            print(
                f"{r['mb']:>5.1f} {r['scenes']:>7} | {r['parse_s']:>7.1f} {r['parse_cpu']:>6.1f} "
                f"{r['parse_cpu'] / r['mb']:>6.2f} | {imported} | {peak:>7.0f} "
                f"{r['baseline_mb']:>6.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
