"""manage.py load_dyntom_pools DIR: the DynToM generator's pools as editable rows."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.dyntom.generation.pools import POOL_FILES, pools_load
from benchmarks.importers.base import ImportDataError


class Command(BaseCommand):
    help = (
        "Load the DynToM pools (locations and their categories, given names, surnames, "
        f"occupations, education levels, MBTI types) from DIR ({', '.join(POOL_FILES)}). "
        "Atomic and idempotent: rows already there are kept as they are (admin edits too)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", help="e.g. ../shared/data/dyntom-pools")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = pools_load(directory=options["directory"])
        except ImportDataError as exc:
            raise CommandError(f"nothing loaded: {exc}") from None
        for warning in report.warnings:
            self.stderr.write(f"warning: {warning}")
        for line in report.summary_lines():
            self.stdout.write(line)
        self.stdout.write(f"{report.created_count} created")
