from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.models import Benchmark
from modeling.runs.prediction_import import ImportDataError, predictions_import


class Command(BaseCommand):
    help = (
        "Import predictions made elsewhere (a JSONL file, see docs/predictions-jsonl.md, or "
        "CharToM-QA's paper_examples.jsonl) as imported runs. Correctness is computed against "
        "the item bank. Atomic (a bad line imports nothing) and idempotent per --name."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", metavar="FILE")
        parser.add_argument(
            "--name",
            required=True,
            help='run name; CharToM-QA runs get " (generative)" / " (multichoice)" appended',
        )
        parser.add_argument(
            "--benchmark",
            choices=Benchmark.values,
            help="for lines without a benchmark field; lines of other benchmarks are skipped",
        )
        parser.add_argument(
            "--model",
            help="for lines without a model field; lines of other models are skipped",
        )

    def handle(self, *args, **options) -> None:
        try:
            result = predictions_import(
                path=options["path"],
                name=options["name"],
                benchmark=options["benchmark"],
                model=options["model"],
            )
        except ImportDataError as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        for warning in result.report.warnings:
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
        self.stdout.write(f"imported predictions from {options['path']}")
        for summary in result.runs:
            run, counts = summary.run, summary.predictions
            line = (
                f"  run {run.pk} {run.name!r} ({run.benchmark} {run.method}, {run.model}, "
                f"{'created' if summary.created else 'existing'}): "
                f"{counts['created']} created, {counts['unchanged']} unchanged, "
                f"{counts['updated']} updated"
            )
            if summary.scored:
                line += f"; correct {summary.correct}/{summary.scored}"
            if summary.judged:
                line += (
                    f"; bonus points {summary.bonus_included}/{summary.bonus_total} covered, "
                    f"{summary.with_defects}/{summary.judged} responses with defects"
                )
                if summary.judge_unparseable:
                    line += (
                        f", {summary.judge_unparseable} with an unparseable judge reply "
                        "(left out, scoring strict)"
                    )
            problems = {s: n for s, n in summary.by_status.items() if s != "ok"}
            if problems:
                line += " (" + ", ".join(f"{n} {s}" for s, n in sorted(problems.items())) + ")"
            self.stdout.write(line)
        for line in result.report.summary_lines():
            self.stdout.write(f"  {line}")
        if result.skipped:
            self.stdout.write(
                f"  skipped {result.skipped} prediction(s) of other benchmarks/models"
            )
