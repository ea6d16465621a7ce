from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from tqdm import tqdm

from benchmarks.importers import ImportDataError, importer_formats
from benchmarks.importers.screenplay import screenplay_import
from benchmarks.models import Split
from benchmarks.services import benchmark_import, import_job_create


class Command(BaseCommand):
    help = "Import a benchmark file or directory into the item bank (atomic, idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("format", choices=importer_formats())
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument(
            "--split",
            choices=[s for s in Split.values if s],
            default="",
            help="split to record on the imported works when the source does not say",
        )
        parser.add_argument(
            "--title", help="screenplay: the movie's title (default: the script's title page)"
        )
        parser.add_argument(
            "--books",
            metavar="DIR",
            help="chartom-qa: a folder of Project Gutenberg books; items without "
            "context_1000/context_2000 get them cut from their book (matched by title and "
            "author), or from a book already imported for construction",
        )
        parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
        parser.add_argument(
            "--background",
            action="store_true",
            help="queue the import for a Celery worker and print the job id",
        )

    def handle(self, *args, **options) -> None:
        fmt = options["format"]
        show_bar = not options["no_progress"] and options["verbosity"] > 0
        screenplay = {k: options[k] for k in ("title",) if options[k] is not None}
        if screenplay and (fmt != "screenplay" or options["background"]):
            raise CommandError("--title applies to a screenplay import in the foreground")
        if "title" in screenplay and len(options["paths"]) > 1:
            raise CommandError("--title names one movie; give one PATH")
        books = Path(options["books"]) if options["books"] else None
        if books is not None and fmt != "chartom-qa":
            raise CommandError("--books applies to chartom-qa imports")
        if books is not None and options["background"]:
            raise CommandError("--books runs in the foreground; leave out --background")
        if options["background"]:
            for path in options["paths"]:
                job = import_job_create(format_name=fmt, path=path, split=options["split"])
                self.stdout.write(f"queued import job {job.pk}: {fmt} {path}")
            return
        reports = []
        # Several PATHs import all or nothing, as the files of one PATH do: a broken
        # second path must not leave the first one imported.
        with transaction.atomic():
            for path in options["paths"]:
                bar = tqdm(desc=f"{fmt} {path}", unit="rec", disable=not show_bar, file=self.stderr)
                try:
                    if screenplay:
                        report = screenplay_import(
                            path=path, split=options["split"], progress=bar.update, **screenplay
                        )
                    else:
                        report = benchmark_import(
                            format_name=fmt,
                            path=path,
                            split=options["split"],
                            progress=bar.update,
                            books=books,
                        )
                except ImportDataError as exc:
                    raise CommandError(f"import failed, nothing was written: {exc}") from None
                finally:
                    bar.close()
                reports.append((path, report))
        for path, report in reports:
            for warning in report.warnings:
                self.stderr.write(self.style.WARNING(f"warning: {warning}"))
            self.stdout.write(f"imported {fmt} from {path}")
            for line in report.summary_lines():
                self.stdout.write(f"  {line}")
