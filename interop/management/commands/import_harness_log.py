from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.importers.base import ImportDataError
from interop.importing import INSPECT_ORIGIN, LM_EVAL_ORIGIN, HarnessImportResult
from interop.inspect_import import LOG_SUFFIXES, inspect_logs_import
from interop.lmeval_import import lmeval_import

HARNESSES = (INSPECT_ORIGIN, LM_EVAL_ORIGIN)


class Command(BaseCommand):
    help = (
        "Import what an eval harness wrote for a task exported from ToMLab as imported runs: "
        "Inspect logs (.eval or .json, one run per log) or lm-evaluation-harness "
        "--log_samples output. Correctness is computed against the item bank. Atomic (a bad "
        "file imports nothing); importing the same Inspect log again adds nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH", type=Path)
        parser.add_argument(
            "--harness",
            choices=HARNESSES,
            help="default: inspect when every path is an Inspect log (.eval or .json)",
        )
        parser.add_argument(
            "--name",
            default="",
            help="run name (default: the task and the model; several logs: NAME · model)",
        )
        parser.add_argument(
            "--keep-unknown",
            action="store_true",
            help="set aside samples whose id is no item here instead of refusing the file",
        )
        parser.add_argument("--model", help="lm-eval: the model's name (default: its args)")
        parser.add_argument(
            "--id-field", help="lm-eval: the doc field holding the item key (default id)"
        )
        parser.add_argument(
            "--item-map",
            type=Path,
            metavar="FILE",
            help='lm-eval: JSON {"<doc id>": "<item key>"} for a task ToMLab did not export',
        )

    def handle(self, *args, **options) -> None:
        paths: list[Path] = options["paths"]
        harness = options["harness"] or _default_harness(paths)
        if harness == INSPECT_ORIGIN:
            lm_eval_only = ("model", "id_field", "item_map")
            given = [f"--{key.replace('_', '-')}" for key in lm_eval_only if options[key]]
            if given:
                raise CommandError(f"{', '.join(given)}: only for --harness lm-eval")
        try:
            if harness == INSPECT_ORIGIN:
                result = inspect_logs_import(
                    paths=paths, name=options["name"], keep_unknown=options["keep_unknown"]
                )
            else:
                result = lmeval_import(
                    paths=paths,
                    name=options["name"],
                    model=options["model"] or "",
                    id_field=options["id_field"] or "",
                    item_map=options["item_map"],  # a Path: its errors name the file
                    keep_unknown=options["keep_unknown"],
                )
        except ImportDataError as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self._print(result, paths)

    def _print(self, result: HarnessImportResult, paths: list[Path]) -> None:
        for warning in result.report.warnings:
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
        self.stdout.write(f"imported {', '.join(map(str, paths))}")
        for note in result.notes():
            self.stdout.write(f"  {note}")
        for line in result.report.summary_lines():
            self.stdout.write(f"  {line}")


def _default_harness(paths: list[Path]) -> str:
    """Inspect when every path is one of its logs; lm-eval output must be named."""
    if all(p.suffix.lower() == ".eval" for p in paths):
        return INSPECT_ORIGIN  # no other harness writes .eval files
    if all(p.is_file() and p.name.lower().endswith(LOG_SUFFIXES) for p in paths):
        # Imported here: Inspect takes a second to import.
        from inspect_ai.log import read_eval_log

        try:
            for path in paths:
                read_eval_log(str(path), header_only=True)
        except (OSError, ValueError, KeyError, EOFError) as exc:
            raise CommandError(
                f"{path} is not an Inspect log ({' '.join(str(exc).split())[:200]}); "
                "pass --harness lm-eval for lm-evaluation-harness output"
            ) from None
        return INSPECT_ORIGIN
    raise CommandError("pass --harness (inspect or lm-eval): these paths are not all Inspect logs")
