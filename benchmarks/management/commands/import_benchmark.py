import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from tqdm import tqdm

from benchmarks.importers import ImportDataError, importer_formats
from benchmarks.importers.generic import MappingError, mapping_parse
from benchmarks.importers.screenplay import screenplay_import
from benchmarks.models import Benchmark, Split
from benchmarks.selectors import mapping_preset_get
from benchmarks.services import benchmark_import, import_job_create

GENERIC_OPTIONS = ("mapping", "name", "version")


class Command(BaseCommand):
    help = (
        "Import a benchmark file or directory into the item bank (atomic, idempotent). "
        "Give the format first (import_benchmark dyntom PATH) or as --format; a benchmark "
        "read through a field mapping: --format generic --mapping FILE.json|PRESET "
        "--name NAME --version V PATH."
    )
    # --version names a generic benchmark's version here, not Django's: ours replaces it.
    suppressed_base_arguments = {"--version"}

    def create_parser(self, prog_name: str, subcommand: str, **kwargs):
        kwargs.setdefault("conflict_handler", "resolve")
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--format",
            dest="format_option",
            choices=importer_formats(),
            help="the format (instead of giving it before the paths)",
        )
        parser.add_argument("items", nargs="+", metavar="[FORMAT] PATH")
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
        parser.add_argument(
            "--mapping",
            metavar="FILE.json|PRESET",
            help="generic: the field mapping, a JSON file or a preset's name (ToMBench, or "
            "one saved from the upload page)",
        )
        parser.add_argument("--name", help="generic: the benchmark's name, e.g. ToMBench")
        parser.add_argument(
            "--version", help="generic: the benchmark's version (default 1), e.g. 1.0"
        )
        parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
        parser.add_argument(
            "--background",
            action="store_true",
            help="queue the import for a Celery worker and print the job id",
        )

    def _format_and_paths(self, options) -> tuple[str, list[str]]:
        items = list(options["items"])
        if options["format_option"]:
            return options["format_option"], items
        fmt = items.pop(0)
        if fmt not in importer_formats():
            raise CommandError(
                f"argument format: invalid choice: {fmt!r} "
                f"(choose from {', '.join(importer_formats())})"
            )
        if not items:
            raise CommandError("give at least one PATH after the format")
        return fmt, items

    def _generic(self, fmt: str, paths: list[str], options) -> dict:
        given = [f"--{name}" for name in GENERIC_OPTIONS if options[name] is not None]
        if fmt != Benchmark.GENERIC:
            if given:
                raise CommandError(f"{', '.join(given)} apply to --format generic")
            return {}
        if not options["mapping"] or not options["name"]:
            raise CommandError("a generic import needs --mapping FILE.json|PRESET and --name")
        if len(paths) > 1:
            raise CommandError("a generic import takes one PATH: a file, a folder or a .zip")
        return {
            "mapping": self._mapping(options["mapping"]),
            "name": options["name"],
            "version": options["version"] or "1",
        }

    def _mapping(self, value: str) -> dict:
        path = Path(value)
        if path.suffix.lower() == ".json" or path.is_file():
            try:
                text = path.read_text(encoding="utf-8-sig")
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"--mapping {value}: cannot read: {exc}") from None
            try:
                mapping = json.loads(text)
            except json.JSONDecodeError as exc:
                raise CommandError(
                    f"--mapping {value}: not JSON: {exc.msg} (line {exc.lineno}, "
                    f"column {exc.colno})"
                ) from None
        else:
            try:
                mapping = mapping_preset_get(value)
            except LookupError as exc:
                raise CommandError(f"--mapping: {exc.args[0]}") from None
        try:
            mapping_parse(mapping)
        except MappingError as exc:
            raise CommandError(f"--mapping {value}: {exc}") from None
        return mapping

    def handle(self, *args, **options) -> None:
        fmt, paths = self._format_and_paths(options)
        show_bar = not options["no_progress"] and options["verbosity"] > 0
        screenplay = {k: options[k] for k in ("title",) if options[k] is not None}
        if screenplay and (fmt != "screenplay" or options["background"]):
            raise CommandError("--title applies to a screenplay import in the foreground")
        if "title" in screenplay and len(paths) > 1:
            raise CommandError("--title names one movie; give one PATH")
        books = Path(options["books"]) if options["books"] else None
        if books is not None and fmt != "chartom-qa":
            raise CommandError("--books applies to chartom-qa imports")
        if books is not None and options["background"]:
            raise CommandError("--books runs in the foreground; leave out --background")
        generic = self._generic(fmt, paths, options)
        if options["background"]:
            for path in paths:
                job = import_job_create(
                    format_name=fmt, path=path, split=options["split"], options=generic
                )
                self.stdout.write(f"queued import job {job.pk}: {fmt} {path}")
            return
        reports = []
        # Several PATHs import all or nothing, as the files of one PATH do: a broken
        # second path must not leave the first one imported.
        with transaction.atomic():
            for path in paths:
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
                            **generic,
                        )
                except ImportDataError as exc:
                    # A mapped import names every failing record (the first 200).
                    for error in getattr(exc, "errors", [])[1:]:
                        self.stderr.write(f"  also: {error}")
                    raise CommandError(f"import failed, nothing was written: {exc}") from None
                except ValueError as exc:
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
