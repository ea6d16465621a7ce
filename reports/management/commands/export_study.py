"""``manage.py export_study STUDY_ID OUT.zip``: a study, its model runs and its report as a
replication package (a Frictionless Data Package in a zip; see docs/researcher.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reports.replication.exporting import ExportRefused, package_export
from studies.models import Study


def run_ids(value: str) -> str | list[int]:
    """``all`` or comma-separated run ids (``3,5``)."""
    if value == "all":
        return value
    try:
        ids = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--runs: {value!r} is neither 'all' nor run ids like 3,5") from None
    if not ids:
        raise CommandError("--runs: give 'all' or run ids like 3,5")
    return ids


class Command(BaseCommand):
    help = "Export a study with its model runs and report as a replication package (zip)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study_id", type=int)
        parser.add_argument("out", type=Path, help="the zip to write")
        parser.add_argument(
            "--with-items",
            action="store_true",
            help="bundle the items of every work named, in their benchmark's own format",
        )
        parser.add_argument(
            "--runs",
            default="all",
            help="'all' (default: every finished run of the benchmark) or ids 3,5",
        )
        parser.add_argument(
            "--with-platform-ids",
            action="store_true",
            help="include recruiting-platform ids (the manifest then carries a warning)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(pk=options["study_id"]).first()
        if study is None:
            raise CommandError(f"no study with id {options['study_id']}")
        try:
            result = package_export(
                study,
                options["out"],
                with_items=options["with_items"],
                runs=run_ids(options["runs"]),
                with_platform_ids=options["with_platform_ids"],
            )
        except ExportRefused as exc:
            raise CommandError(str(exc)) from None
        counts = ", ".join(f"{v} {k}" for k, v in result.counts.items() if v)
        self.stdout.write(f"{result.path}: package {result.package_id} ({counts})")
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
