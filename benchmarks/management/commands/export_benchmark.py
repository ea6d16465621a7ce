from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.exporters import exporter_formats
from benchmarks.services import benchmark_export


class Command(BaseCommand):
    help = "Write a benchmark's works back in its source format."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("format", choices=exporter_formats())
        parser.add_argument("out", metavar="OUT", help="file or directory to write")
        parser.add_argument(
            "--work", action="append", dest="works", metavar="KEY", help="only this work (repeat)"
        )

    def handle(self, *args, **options) -> None:
        try:
            count = benchmark_export(
                format_name=options["format"], out=options["out"], work_keys=options["works"]
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"exported {count} record(s) to {options['out']}")
