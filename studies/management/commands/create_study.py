"""Create a guessing study over works in the item bank, or one from published annotations.

    manage.py create_study --benchmark tvshowguess --work friends --name "Friends" \\
        [--overlap 2] [--min-seen N] [--min-unseen N] [--live] [--invite 5]
    manage.py create_study --from-annotations friends.tsv --work friends
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.models import Benchmark, Work
from studies.errors import StudyError
from studies.models import Assignment, Guess, Study
from studies.participation.services import participants_invite
from studies.scene.annotation_import import annotations_as_study, imported_label
from studies.services import study_create, study_launch

# Where studies/rater_urls.py is mounted (config/urls.py: path("s/", ...)).
INVITE_PATH = "/s/{token}/"


class Command(BaseCommand):
    help = "Create a scene-guessing study (and invite links), or import published annotations."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--benchmark", choices=[b for b in Benchmark.values], default=Benchmark.TVSHOWGUESS
        )
        parser.add_argument(
            "--work", action="append", required=True, metavar="KEY", help="work key; repeatable"
        )
        parser.add_argument("--name", help="study name (required unless --from-annotations)")
        parser.add_argument("--overlap", type=int, default=2, help="raters per scene (2)")
        parser.add_argument("--min-seen", type=int, default=0, help="raters who saw the work")
        parser.add_argument("--min-unseen", type=int, default=0, help="raters who did not")
        parser.add_argument("--live", action="store_true", help="open it to raters now")
        parser.add_argument(
            "--open-join",
            action="store_true",
            help="rater accounts may join from their home page (default: invite links only)",
        )
        parser.add_argument("--invite", type=int, default=0, metavar="N", help="N invite links")
        parser.add_argument(
            "--base-url", default="", help="prefix for the printed links, e.g. https://host"
        )
        parser.add_argument("--created-by", metavar="USERNAME", help="the researcher")
        parser.add_argument(
            "--from-annotations",
            metavar="SOURCE",
            help="make a closed study whose one rater is the imported annotation file "
            "(e.g. friends.tsv, as imported with the benchmark); idempotent",
        )

    def handle(self, *args, **options) -> None:
        works = self._works(options["benchmark"], options["work"])
        try:
            if options["from_annotations"]:
                self._from_annotations(works, options["from_annotations"])
            else:
                self._create(works, options)
        except StudyError as exc:
            raise CommandError(str(exc)) from None

    def _works(self, benchmark: str, keys: list[str]) -> list[Work]:
        found = {w.key: w for w in Work.objects.filter(benchmark=benchmark, key__in=keys)}
        if missing := [k for k in keys if k not in found]:
            raise CommandError(
                f"no {benchmark} work {', '.join(missing)}; "
                f"import it first (manage.py import_benchmark {benchmark} PATH)"
            )
        return [found[k] for k in keys]

    def _create(self, works: list[Work], options: dict) -> None:
        if not options["name"]:
            raise CommandError("--name is required")
        if (
            options["overlap"] < 1
            or options["min_seen"] + options["min_unseen"] > options["overlap"]
        ):
            raise CommandError("need overlap >= 1 and min-seen + min-unseen <= overlap")
        created_by = None
        if username := options["created_by"]:
            try:
                created_by = get_user_model().objects.get(username=username)
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user {username}") from None
        study = study_create(
            name=options["name"],
            benchmark=options["benchmark"],
            works=works,
            created_by=created_by,
            overlap=options["overlap"],
            min_seen=options["min_seen"],
            min_unseen=options["min_unseen"],
            open_join=options["open_join"],
        )
        launched = study_launch(study=study) if options["live"] else None
        if launched is not None:
            study = launched.study
        scenes = study.study_items.count()
        self.stdout.write(
            f"created study {study.pk} {study.name!r} ({study.status}): {scenes} scenes "
            f"from {', '.join(w.key for w in works)}, overlap {study.overlap} "
            f"(seen >= {study.min_seen}, unseen >= {study.min_unseen})"
        )
        if launched is not None:
            # The same leak check (and held-back scenes) as going live in the browser.
            self.stdout.write(launched.summary())
        if options["invite"] > 0:
            labels = [f"invite {i + 1}" for i in range(options["invite"])]
            self.stdout.write("invite links:")
            for participant in participants_invite(study=study, labels=labels):
                url = options["base_url"].rstrip("/") + INVITE_PATH.format(token=participant.token)
                self.stdout.write(f"  {participant.label}: {url}")
            if study.status != Study.Status.LIVE:
                self.stdout.write("the study is a draft: the links work once it goes live")

    def _from_annotations(self, works: list[Work], source: str) -> None:
        if len(works) != 1:
            raise CommandError("--from-annotations takes exactly one --work")
        (work,) = works
        before = Study.objects.filter(
            imported=True, study_works__work=work, participants__label=imported_label(source)
        ).exists()
        study = annotations_as_study(work=work, source=source)
        guesses = Guess.objects.filter(assignment__participant__study=study)
        scenes = Assignment.objects.filter(participant__study=study).count()
        skipped = study.sampling.get("unmatched_rows", [])
        self.stdout.write(
            f"{'already imported' if before else 'imported'}: study {study.pk} {study.name!r} "
            f"({study.status}): {scenes} scenes, {guesses.count()} speakers "
            f"({guesses.exclude(answer='').count()} with a guessed name, "
            f"{guesses.filter(correct=True).count()} correct)"
        )
        if skipped:
            self.stdout.write(
                f"skipped {source} rows {', '.join(map(str, skipped))}: "
                f"their scene is not in {work.source or work.key}"
            )
