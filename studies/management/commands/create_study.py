"""Create a guessing study over works in the item bank, a study of a mapped benchmark's
multiple-choice items, or one from published annotations.

    manage.py create_study --benchmark tvshowguess --work friends --name "Friends" \\
        [--overlap 2] [--min-seen N] [--min-unseen N] [--live] [--invite 5]
    manage.py create_study --benchmark generic --work tombench@1.0 --name "ToMBench EN" \\
        --language en --category-field ability --category-value "False belief" \\
        --category-value "Emotion" --per-category 20 --items-per-participant 10 \\
        [--overlap 2] [--practice 1] [--attention 1] [--fixed-options] [--seed 7] [--live]
    manage.py create_study --from-annotations friends.tsv --work friends
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.models import Benchmark, Work
from studies.choice.generic import DEFAULT_ATTENTION_INSTRUCTION, GENERIC, GenericSpec
from studies.choice.services import choice_study_create
from studies.errors import StudyError
from studies.models import Assignment, Guess, Study
from studies.participation.services import participants_invite
from studies.scene.annotation_import import annotations_as_study, imported_label
from studies.services import study_create, study_launch

# Where studies/rater_urls.py is mounted (config/urls.py: path("s/", ...)).
INVITE_PATH = "/s/{token}/"


class Command(BaseCommand):
    help = (
        "Create a scene-guessing study or a mapped benchmark's multiple-choice study (and "
        "invite links), or import published annotations."
    )

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
        generic = parser.add_argument_group("a mapped benchmark (--benchmark generic)")
        generic.add_argument("--language", default="", help="items' language (the first)")
        generic.add_argument("--category-field", default="", help="draw by this category field")
        generic.add_argument(
            "--category-value",
            action="append",
            default=[],
            metavar="VALUE",
            help="a value of the field to include; repeatable (none: every value)",
        )
        generic.add_argument("--per-category", type=int, help="items per value")
        generic.add_argument("--items", type=int, help="or items in all, shared among values")
        generic.add_argument(
            "--items-per-participant", type=int, default=0, help="batch size (0: every item)"
        )
        generic.add_argument(
            "--fixed-options", action="store_true", help="do not shuffle the options"
        )
        generic.add_argument("--practice", type=int, default=0, help="practice items to draw")
        generic.add_argument("--attention", type=int, default=0, help="attention checks to draw")
        generic.add_argument(
            "--practice-id", action="append", default=[], metavar="ID", help="repeatable"
        )
        generic.add_argument(
            "--attention-id", action="append", default=[], metavar="ID", help="repeatable"
        )
        generic.add_argument(
            "--attention-instruction",
            default=DEFAULT_ATTENTION_INSTRUCTION,
            help="what a check says; {option} is the option to choose",
        )
        generic.add_argument("--seed", type=int, default=0, help="sampling seed (0)")
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
            elif options["benchmark"] == GENERIC:
                self._create_generic(works, options)
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
        created_by = self._created_by(options)
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
        self._invites(study, options)

    def _created_by(self, options: dict):
        if username := options["created_by"]:
            try:
                return get_user_model().objects.get(username=username)
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user {username}") from None
        return None

    def _create_generic(self, works: list[Work], options: dict) -> None:
        """A draft (or live) study of a mapped benchmark's items, as the page makes it."""
        if not options["name"]:
            raise CommandError("--name is required")
        if options["overlap"] < 1:
            raise CommandError("need overlap >= 1")
        spec = GenericSpec(
            language=options["language"],
            category_field=options["category_field"],
            category_values=tuple(options["category_value"]),
            per_category=options["per_category"],
            items=options["items"],
            items_per_participant=options["items_per_participant"] or None,
            shuffle_options=not options["fixed_options"],
            practice=options["practice"],
            attention=options["attention"],
            practice_ids=tuple(options["practice_id"]),
            attention_ids=tuple(options["attention_id"]),
            attention_instruction=options["attention_instruction"],
        )
        created = choice_study_create(
            name=options["name"],
            benchmark=GENERIC,
            works=works,
            generic=spec,
            seed=options["seed"],
            created_by=self._created_by(options),
            overlap=options["overlap"],
            open_join=options["open_join"],
        )
        study = created.study
        if options["live"]:
            study = study_launch(study=study).study
        sampling = study.sampling
        strata = ", ".join(f"{v} {n}" for v, n in (sampling.get("strata") or {}).items())
        self.stdout.write(
            f"created study {study.pk} {study.name!r} ({study.status}): {created.items} items "
            f"from {works[0].key} in {sampling['language']}"
            + (f", by {sampling['category_field']}: {strata}" if strata else "")
            + f"; overlap {study.overlap}, "
            + (
                f"{sampling['items_per_participant']} items per participant"
                if sampling.get("items_per_participant")
                else "every item per participant"
            )
        )
        self._invites(study, options)

    def _invites(self, study: Study, options: dict) -> None:
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
