"""``manage.py import_study PACKAGE.zip``: turn a replication package back into a
(closed) study with its responses, runs and predictions, and check that its reports
come out equal to the packaged ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reports.replication.importing import PackageError, package_import


class Command(BaseCommand):
    help = "Import a replication package (zip) made by export_study."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("package", type=Path)
        parser.add_argument(
            "--strict",
            action="store_true",
            help=(
                "refuse the import (write nothing) when a rebuilt report differs from the package's"
            ),
        )
        parser.add_argument(
            "--report-out",
            type=Path,
            help=(
                "write the reports rebuilt after the import as JSON (package ids in place "
                "of database ids)"
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["package"].is_file():
            raise CommandError(f"{options['package']}: no such file")
        try:
            result = package_import(options["package"], strict=options["strict"])
        except PackageError as exc:
            raise CommandError(str(exc)) from None
        for message in result.messages:
            self.stdout.write(message)
        for name, differences in result.differences.items():
            if differences:
                self.stdout.write(f"{name}: differs from the package's:")
                for line in differences:
                    self.stdout.write(f"  {line}")
            else:
                self.stdout.write(f"{name}: equal to the package's")
        if options["report_out"] is not None and result.created:
            options["report_out"].write_text(
                json.dumps(result.reports, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
