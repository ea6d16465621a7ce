"""``python manage.py report BENCHMARK``: the report's tables as text, CSV files or JSON.

The numbers are those of the report page and the API: all three call
``reports.tables.build_report``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reports.exports import table_csv
from reports.report_types import SAMPLES, SAMPLES_MEAN, Cell, Report, Table
from reports.tables import BUILDERS, build_report, report_json


class Command(BaseCommand):
    help = (
        "Print a benchmark's report tables (table/csv/json) over all or some model runs "
        "and human studies."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("benchmark", choices=list(BUILDERS))
        parser.add_argument(
            "--work",
            type=int,
            metavar="ID",
            help="generic only (required there): the named benchmark's work id",
        )
        parser.add_argument(
            "--runs", nargs="+", type=int, metavar="ID", help="run ids (default: every run)"
        )
        parser.add_argument(
            "--study",
            nargs="*",
            type=int,
            metavar="ID",
            dest="studies",
            help=(
                "human study ids (default: every study but drafts and closed studies without "
                "a counted answer; --study with no id: none)"
            ),
        )
        parser.add_argument(
            "--include-excluded",
            action="store_true",
            help="count excluded participants too (default: left out)",
        )
        parser.add_argument(
            "--samples",
            choices=SAMPLES,
            default=SAMPLES_MEAN,
            help=(
                "a run with several samples per item: their mean (default) or its first sample only"
            ),
        )
        parser.add_argument("--format", choices=("table", "csv", "json"), default="table")
        parser.add_argument(
            "--out",
            type=Path,
            help="csv: the directory for one file per table (required); json: a file",
        )
        parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")

    def handle(self, *args: Any, **options: Any) -> None:
        fmt, out = options["format"], options["out"]
        if fmt == "csv" and out is None:
            raise CommandError("--format csv writes one file per table: give --out DIRECTORY")
        try:
            report = build_report(
                options["benchmark"],
                run_ids=options["runs"],
                study_ids=options["studies"],
                seed=options["seed"],
                include_excluded=options["include_excluded"],
                work_id=options["work"],
                samples=options["samples"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if fmt == "csv":
            for path in write_csv(report, out):
                self.stdout.write(str(path))
        elif fmt == "json":
            text = json.dumps(report_json(report), indent=2, ensure_ascii=False)
            if out is None:
                self.stdout.write(text)
            else:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(text + "\n", encoding="utf-8")
                self.stdout.write(str(out))
        else:
            self.stdout.write(render_text(report))


def write_csv(report: Report, directory: Path) -> list[Path]:
    """One ``<benchmark>-<table key>.csv`` per table; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for table in report.tables:
        path = directory / f"{report.benchmark}-{table.key}.csv"
        # The same bytes as the browser's download: one writer for every CSV.
        path.write_bytes(table_csv(table))
        paths.append(path)
    return paths


def _text(cell: Cell) -> str:
    if cell is None:
        return "-"
    if isinstance(cell, float):
        return f"{cell:.2f}"
    return str(cell)


def render_table(table: Table) -> str:
    """A table as aligned plain text: numbers right-aligned, text left-aligned."""
    cells = [[_text(c) for c in row] for row in table.rows]
    widths = [
        max([len(column), *(len(row[i]) for row in cells)])
        for i, column in enumerate(table.columns)
    ]
    numeric = [
        all(isinstance(row[i], int | float) or row[i] is None for row in table.rows)
        and any(row[i] is not None for row in table.rows)
        for i in range(len(table.columns))
    ]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    parts = [f"{table.title} [{table.key}]", line(table.columns)]
    parts.append("  ".join("-" * w for w in widths))
    parts += [line(row) for row in cells]
    if table.note:
        parts.append(f"Note: {table.note}")
    return "\n".join(parts)


def render_text(report: Report) -> str:
    facts = ", ".join(f"{k}: {v}" for k, v in report.facts.items())
    blocks = [report.title, facts, *(render_table(t) for t in report.tables)]
    return "\n\n".join(blocks) + "\n"
