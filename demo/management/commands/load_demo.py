"""Load the original demo data in ``fixtures/demo`` and the three demo logins.

It lives in accounts, not benchmarks: it creates the demo logins, and benchmarks
imports no other app.

Run by ``make run`` after ``migrate`` so a first-time user finds something in every
benchmark. Idempotent: the importers upsert, and existing users are left alone, so a
second run creates nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from accounts.roles import ANNOTATOR, RATER, RESEARCHER
from accounts.services import user_create_with_role
from benchmarks.importers import ImportDataError, ImportReport
from benchmarks.models import Split
from benchmarks.services import benchmark_import

DEMO_DIR = Path(settings.BASE_DIR) / "fixtures" / "demo"


@dataclass(frozen=True)
class DemoSource:
    format_name: str
    path: Path
    split: str


# ToM-in-AMC files carry their split as the top-level key, so none is imposed there.
DEMO_SOURCES = (
    DemoSource("tom-in-amc", DEMO_DIR / "tom_in_amc.json", ""),
    DemoSource("chartom-qa", DEMO_DIR / "chartom_qa.jsonl", Split.TEST),
    DemoSource("dyntom", DEMO_DIR / "dyntom", Split.TEST),
)

DEMO_STUDY = "Demo: who is speaking?"
DEMO_DYNTOM_STUDY = "Demo: DynToM human baseline"
DEMO_VALIDATION_BATCH = "Demo: validate the DynToM stage"

# scripts/run_embedded.py prints these logins; change both together.
DEMO_USERS = (
    ("researcher", "tomlab-researcher", RESEARCHER),
    ("annotator", "tomlab-annotator", ANNOTATOR),
    ("rater", "tomlab-rater", RATER),
)


class Command(BaseCommand):
    help = "Load the demo works (one per benchmark) and the demo users; safe to run again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset-passwords",
            action="store_true",
            help="set the demo users' passwords and roles back even if the users exist",
        )

    def handle(self, *args, **options) -> None:
        # One transaction: a fixture the importers reject leaves no half-loaded demo.
        with transaction.atomic():
            reports = [self._import(source) for source in DEMO_SOURCES]
            user_lines = self._ensure_users(reset=options["reset_passwords"])
            study_lines = self._ensure_study() + self._ensure_dyntom_study()
            annotation_lines = self._ensure_annotation()
        created = sum(sum(r.created.values()) for r in reports)
        unchanged = sum(sum(r.unchanged.values()) for r in reports)
        updated = sum(sum(r.updated.values()) for r in reports)
        self.stdout.write(f"demo data: {created} created, {unchanged} unchanged, {updated} updated")
        self.stdout.write("Demo logins:")
        for line in user_lines:
            self.stdout.write(f"  {line}")
        for line in study_lines:
            self.stdout.write(line)
        for line in annotation_lines:
            self.stdout.write(line)

    def _ensure_study(self) -> list[str]:
        """A live demo study over the demo movie, one invite link per rater it asks for
        (its overlap: three raters per scene, three links), created once."""
        from django.urls import reverse

        from benchmarks.models import Work
        from studies.models import Participant, Study
        from studies.participation.services import participants_invite
        from studies.services import study_create, study_go_live

        study = Study.objects.filter(name=DEMO_STUDY).first()
        if study is None:
            works = list(Work.objects.filter(benchmark="tom-in-amc").order_by("key")[:1])
            if not works:
                return []
            study = study_create(
                name=DEMO_STUDY,
                benchmark="tom-in-amc",
                works=works,
                overlap=3,
                reveal=Study.Reveal.AFTER_SCENE,
                open_join=True,  # its join link is on the demo rater's home page
                instructions=(
                    "Read the first scenes of the film, then guess who each masked "
                    "speaker (P0, P1, ...) is."
                ),
            )
            study = study_go_live(study=study)
            participants_invite(
                study=study, labels=[f"demo invite {n}" for n in range(1, study.overlap + 1)]
            )
        invited = Participant.objects.filter(study=study, user__isnull=True).order_by("pk")
        lines = [f"Demo study: {study.name} ({study.get_status_display()})"]
        for participant in invited:
            lines.append(f"  invite link: {reverse('rater:start', args=[participant.token])}")
        lines.append(f"  logged-in raters: {reverse('rater:join', args=[study.pk])}")
        return lines

    def _ensure_dyntom_study(self) -> list[str]:
        """A live DynToM human-baseline study over the demo stage, one invite per participant."""
        from django.urls import reverse

        from benchmarks.models import Work
        from studies.choice.services import choice_study_create
        from studies.models import Participant, Study
        from studies.participation.services import participants_invite
        from studies.services import study_launch

        study = Study.objects.filter(name=DEMO_DYNTOM_STUDY).first()
        if study is None:
            works = list(Work.objects.filter(benchmark="dyntom").order_by("key")[:1])
            if not works:
                return []
            study = choice_study_create(
                name=DEMO_DYNTOM_STUDY,
                benchmark="dyntom",
                works=works,
                stage_fraction=1,
                overlap=3,
                reveal=Study.Reveal.AFTER_SCENE,
                instructions="Read the story, then answer each question about its characters.",
            ).study
            study = study_launch(study=study).study
            participants_invite(
                study=study, labels=[f"demo invite {n}" for n in range(1, study.overlap + 1)]
            )
        lines = [f"Demo study: {study.name} ({study.get_status_display()})"]
        for participant in Participant.objects.filter(study=study).order_by("pk"):
            lines.append(f"  invite link: {reverse('rater:start', args=[participant.token])}")
        return lines

    def _ensure_annotation(self) -> list[str]:
        """A validation batch over the demo DynToM stage, and the generator's pools.

        The pools are read from the shared data beside the checkout when it is there
        (they are the DynToM authors' files, never copied into the repo).
        """
        from annotation.dyntom.generation.pools import pools_load
        from annotation.dyntom.validation.services import validation_batch_create
        from annotation.models import ValidationBatch
        from benchmarks.models import DynToMStage

        lines = []
        batch = ValidationBatch.objects.filter(name=DEMO_VALIDATION_BATCH).first()
        stages = list(DynToMStage.objects.filter(work__key__startswith="trial_demo"))
        if batch is None and stages:
            batch = validation_batch_create(name=DEMO_VALIDATION_BATCH, stages=stages, k=4)
        if batch is not None:
            lines.append(f"Demo validation batch: {batch.name} (/annotation/validation/)")
        pools = Path(settings.TOMLAB_SHARED_DATA) / "dyntom-pools"
        if pools.is_dir():
            report = pools_load(directory=pools)
            lines.append(f"DynToM generation pools: {pools} ({report.created_count} created)")
        else:
            lines.append(
                f"DynToM generation pools not found at {pools}: "
                "run manage.py load_dyntom_pools DIR before generating stages"
            )
        lines.append(self._ensure_chartom())
        return lines

    def _ensure_chartom(self) -> str:
        """Father Goriot and three reader notes of ours, for CharToM-QA construction."""
        from annotation.chartom.demo import NOVEL, chartom_demo_load

        shared = Path(settings.TOMLAB_SHARED_DATA)
        if not (shared / NOVEL).is_file():
            return f"CharToM-QA demo skipped: {shared / NOVEL} not found"
        batch = chartom_demo_load(shared)
        return (
            f"CharToM-QA demo batch: {batch.name}, {batch.notes.count()} notes "
            "(/annotation/chartom/); its LLM steps wait for a backend: choose one with "
            "'Start LLM steps' on the batch's page"
        )

    def _import(self, source: DemoSource) -> ImportReport:
        try:
            report = benchmark_import(
                format_name=source.format_name, path=source.path, split=source.split
            )
        except ImportDataError as exc:
            raise CommandError(f"demo data rejected, nothing was loaded: {exc}") from None
        for warning in report.warnings:
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
        self.stdout.write(f"{source.format_name}: {source.path.relative_to(settings.BASE_DIR)}")
        for line in report.summary_lines():
            self.stdout.write(f"  {line}")
        return report

    def _ensure_users(self, *, reset: bool) -> list[str]:
        """Create missing demo users (all of them with ``reset``); one line per login."""
        existing = set(
            get_user_model()
            .objects.filter(username__in=[name for name, _, _ in DEMO_USERS])
            .values_list("username", flat=True)
        )
        lines = []
        for username, password, role in DEMO_USERS:
            if username in existing and not reset:
                # Someone may have changed it on purpose; --reset-passwords restores it.
                state = "already exists, password kept (--reset-passwords restores it)"
            else:
                user_create_with_role(username=username, password=password, role=role)
                state = "password reset" if username in existing else "created"
            lines.append(f"{username} / {password} ({role}): {state}")
        return lines
