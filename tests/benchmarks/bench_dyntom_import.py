"""Time the DynToM importer at full-release scale (a script; pytest does not collect it).

Builds N synthetic trial directories from the 34 real ones (``dyntom/`` and
``dyntom-variants/``) in every story shape the release uses, cycling through them:
scenario keys ``scenario 1`` / ``1`` / ``scenario_1`` / ``scenario1`` / ``Scenario 1``;
dialogues as rounds of one to three speakers, as one object, or as one
``Name: 'line'`` string; every seventh stage without ``social setting``. It imports
them, then imports them again (everything unchanged) and prints stages, questions,
seconds and rows/s for both.

    .venv/bin/python tests/benchmarks/bench_dyntom_import.py [--stages 1161]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tomlab_bench \\
        .venv/bin/python tests/benchmarks/bench_dyntom_import.py

Without DATABASE_URL it uses a throwaway SQLite file (with the production SQLite
options from settings). With it, the database must exist; it is migrated, and the
synthetic works are deleted before and after the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC_PREFIX = "benchtrial"


KEY_STYLES = ("scenario {}", "{}", "scenario_{}", "scenario{}", "Scenario {}")
DIALOGUE_SHAPES = ("rounds", "object", "text")


def build_trials(sources: list[Path], target: Path, count: int) -> Counter:
    """Write ``count`` stages named benchtrialNNNNN, each in one mix of shapes.

    Real stages are taken round-robin; stage ``i`` gets key style ``i % 5``, dialogue
    shape ``(i // 5) % 3`` and rounds of ``1 + i % 3`` speakers. Returns how many
    scenarios got each key style and dialogue shape.
    """
    from benchmarks.importers.dyntom import parse_dialogue, render_dialogue_text, scenario_number

    real = sorted(p for source in sources for p in source.iterdir() if (p / "story.json").is_file())
    mix: Counter = Counter()
    for i in range(count):
        origin = real[i % len(real)]
        story = json.loads((origin / "story.json").read_text(encoding="utf-8"))
        key_style = KEY_STYLES[i % len(KEY_STYLES)]
        shape = DIALOGUE_SHAPES[(i // len(KEY_STYLES)) % len(DIALOGUE_SHAPES)]
        scenarios = {}
        for key, scenario in story["story"].items():
            turns, _, _ = parse_dialogue(scenario["dialogue"])
            if shape == "object":
                dialogue: Any = {t["speaker"]: t["text"] for t in turns}
            elif shape == "text":
                dialogue = render_dialogue_text(turns)
            else:
                dialogue = _rounds(turns, 1 + i % 3)
            scenarios[key_style.format(scenario_number(key))] = {**scenario, "dialogue": dialogue}
            mix[f"key {key_style.format('N')!r}"] += 1
            mix[f"dialogue {shape}"] += 1
        story["story"] = scenarios
        if i % 7 == 0:
            story.pop("social setting", None)
            story.pop("social setting type", None)
            mix["stages without social setting"] += 1
        directory = target / f"{SYNTHETIC_PREFIX}{i:05d}"
        directory.mkdir(parents=True)
        (directory / "story.json").write_text(
            json.dumps(story, ensure_ascii=False, indent=4), encoding="utf-8"
        )
        # copyfile, not copytree: the shared data is read-only and its mode must not follow.
        shutil.copyfile(origin / "question_new.json", directory / "question_new.json")
    return mix


def _rounds(turns: list[dict[str, str]], size: int) -> list[dict[str, str]]:
    """Turns grouped in rounds of up to ``size`` speakers (a speaker once per round)."""
    rounds: list[dict[str, str]] = []
    for turn in turns:
        if not rounds or len(rounds[-1]) >= size or turn["speaker"] in rounds[-1]:
            rounds.append({})
        rounds[-1][turn["speaker"]] = turn["text"]
    return rounds


def server_cpu_seconds(connection: Any) -> float | None:
    """CPU time of this connection's PostgreSQL backend so far, when it runs here.

    Read from /proc (utime + stime): with the machine shared, client CPU plus server
    CPU is the figure that does not depend on the neighbours. None on SQLite or when
    the server is elsewhere.
    """
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # Fields 14 and 15 of proc(5) (utime, stime), counted after "pid (comm)".
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=1161, help="synthetic stages (1161)")
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
        shared = Path(settings.TOMLAB_SHARED_DATA)
        mix = build_trials([shared / "dyntom", shared / "dyntom-variants"], trials, args.stages)
        print(f"database: {connection.vendor}; {args.stages} stages in {trials}")
        print("scenarios: " + ", ".join(f"{n} {label}" for label, n in sorted(mix.items())))

        for label in ("first import", "re-import"):
            server_started = server_cpu_seconds(connection)
            started, cpu_started = time.perf_counter(), time.process_time()
            report = benchmark_import(format_name="dyntom", path=trials)
            seconds = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
            server = server_cpu_seconds(connection)
            server_note = (
                f", database server CPU {server - server_started:.2f} s"
                if server is not None and server_started is not None
                else ""
            )
            counts = (report.created, report.updated, report.unchanged)
            rows = sum(sum(c.values()) for c in counts)
            questions = sum(c["DynToMQuestion"] for c in counts)
            # Wall time is the figure that counts; this process's CPU time and the load
            # average tell how much of it other work on the machine took.
            print(
                f"{label}: {args.stages} stages, {questions} questions, {seconds:.2f} s, "
                f"{rows / seconds:,.0f} rows/s ({rows} rows); importer CPU {cpu:.2f} s"
                f"{server_note}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
            )
            for line in report.summary_lines():
                print(f"    {line}")
        # The re-import found every row unchanged.
        assert not sum(report.created.values()) and not sum(report.updated.values())
        assert DynToMQuestion.objects.filter(stage__work__in=synthetic).count() == questions
        synthetic.delete()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
