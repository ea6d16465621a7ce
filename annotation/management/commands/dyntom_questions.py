"""``manage.py dyntom_questions STAGES_DIR OUT_DIR [--seed N]``: DynToM questions by code.

Needs no database: it reads ``trialN/story.json`` files and writes
``OUT_DIR/trialN/question_new.json``; see :mod:`annotation.dyntom.questions`.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.dyntom.questions.reproduction import summarise
from annotation.dyntom.questions.stage_files import find_stages, write_stage_questions
from benchmarks.importers.base import ImportDataError


class Command(BaseCommand):
    help = (
        "Write DynToM questions (question_new.json) for every trialN/story.json under "
        "STAGES_DIR into OUT_DIR/trialN/, and print the share of the question_new.json "
        "files found beside the stories that is reproduced (key, text, gold option text)."
    )
    # No database and no system checks: this runs on files alone.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("stages_dir", metavar="STAGES_DIR", type=Path)
        parser.add_argument("out_dir", metavar="OUT_DIR", type=Path)
        parser.add_argument(
            "--seed",
            type=int,
            default=0,
            help="seed of the option order and the T-3 (type_d_how) distractors (default 0)",
        )

    def handle(self, *args, **options) -> None:
        stages_dir: Path = options["stages_dir"]
        out_dir: Path = options["out_dir"]
        if out_dir.resolve() == stages_dir.resolve():
            # Writing there would overwrite the release files we compare against.
            raise CommandError(f"OUT_DIR must differ from STAGES_DIR ({stages_dir})")
        try:
            stages = find_stages(stages_dir)
            comparisons = []
            for result in write_stage_questions(stages, out_dir, seed=options["seed"]):
                line = (
                    f"{result.key}: {result.scenario_count} scenarios, {result.questions} questions"
                )
                if result.reproduction is not None:
                    comparisons.append(result.reproduction)
                    r = result.reproduction
                    line += f", {r.reproduced}/{r.original} reproduced"
                    if r.missed:
                        line += f" (not: {', '.join(r.missed)})"
                if options["verbosity"] > 1:
                    self.stdout.write(line)
        except ImportDataError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"wrote {len(stages)} stage(s) to {out_dir} (seed {options['seed']})")
        if comparisons:
            for line in summarise(comparisons).lines():
                self.stdout.write(line)
        else:
            self.stdout.write("no question_new.json beside the stories: nothing to compare")
