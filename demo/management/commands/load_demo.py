"""Load the demo: the original data in ``fixtures/demo``, the demo logins, and enough
work in every part of ToMLab to try it without a model or any participants.

What it sets up, each part named "Demo: ..." where the app shows it:

* the demo works of ToM-in-AMC, CharToM-QA (two short stories, both plot windows cut
  from the books) and DynToM, and the three demo logins;
* one finished model run per benchmark from predictions we wrote (``demo.runs``);
* three live human studies with two demo participants' answers in and three invite
  links each (``demo.studies``);
* DynToM validation, and CharToM-QA construction with a task waiting in every
  annotator queue (``annotation.chartom.demo``);
* disagreements in both reviewer queues (DynToM validation, CharToM-QA checks) for
  the researcher to settle, answered by three seeded annotators (``demo.disputes``).

Run by ``make run`` after ``migrate``; ``scripts/run_embedded.py`` then prints the
links in full (``manage.py demo_links``). One transaction: anything refused loads
nothing. Idempotent: the importers upsert, existing users are left alone and a demo
part that exists is kept as it is, so a second run creates nothing and says so.
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
from benchmarks.models import Split, Work
from benchmarks.services import benchmark_import

DEMO_DIR = Path(settings.BASE_DIR) / "fixtures" / "demo"


@dataclass(frozen=True)
class DemoSource:
    format_name: str
    path: Path
    split: str
    books: Path | None = None  # CharToM-QA: the books the plot windows are cut from


# ToM-in-AMC files carry their split as the top-level key, so none is imposed there.
DEMO_SOURCES = (
    DemoSource("tom-in-amc", DEMO_DIR / "tom_in_amc.json", ""),
    DemoSource("chartom-qa", DEMO_DIR / "chartom_qa.jsonl", Split.TEST, DEMO_DIR / "books"),
    DemoSource("dyntom", DEMO_DIR / "dyntom", Split.TEST),
)

# A benchmark of our own brought in the way any other is: a field mapping, saved as a
# preset of the Default workspace so the upload page offers it.
DEMO_GENERIC = DEMO_DIR / "generic" / "mini_tom.jsonl"
DEMO_GENERIC_NAME, DEMO_GENERIC_VERSION = "Mini ToM", "1"
DEMO_GENERIC_PRESET = "Mini ToM (demo)"
DEMO_GENERIC_MAPPING = {
    "_about": "The demo's twelve items: one JSON object a line, options as a list.",
    "id": "id",
    "language": "en",
    "context": "story",
    "question": "question",
    "options": "choices",
    "answer": {"field": "answer", "as": "letter"},
    "categories": {"ability": "ability", "order": "order"},
}

DEMO_VALIDATION_BATCH = "Demo: validate the DynToM stage"

DEMO_SECOND_WORKSPACE = "Second lab"

# demo_links prints these logins too (scripts/run_embedded.py runs it).
DEMO_USERS = (
    ("researcher", "tomlab-researcher", RESEARCHER),
    ("annotator", "tomlab-annotator", ANNOTATOR),
    ("rater", "tomlab-rater", RATER),
)


class Command(BaseCommand):
    help = "Load the demo: works, logins, runs, studies and annotation work; safe to run again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset-passwords",
            action="store_true",
            help="set the demo users' passwords and roles back even if the users exist",
        )
        parser.add_argument(
            "--base-url",
            default="",
            help="print links in full on this server, e.g. http://127.0.0.1:8000",
        )

    def handle(self, *args, **options) -> None:
        from demo.links import demo_links

        # One transaction: a fixture or an answer refused leaves no half-loaded demo.
        with transaction.atomic():
            reports = [self._import(source) for source in DEMO_SOURCES]
            reports.append(self._import_generic())
            user_lines = self._ensure_users(reset=options["reset_passwords"])
            parts = self._ensure_parts()
            extra_lines = [
                *self._ensure_pools(),
                self._ensure_chartom(),
                self._ensure_workspaces(),
            ]
        created = sum(sum(r.created.values()) for r in reports)
        unchanged = sum(sum(r.unchanged.values()) for r in reports)
        updated = sum(sum(r.updated.values()) for r in reports)
        self.stdout.write(f"demo data: {created} created, {unchanged} unchanged, {updated} updated")
        self.stdout.write("Demo logins:")
        for line in user_lines:
            self.stdout.write(f"  {line}")
        new = [name for name, is_new in parts if is_new]
        if new:
            self.stdout.write(f"demo set-up: new this time: {'; '.join(new)}")
        else:
            self.stdout.write("demo set-up: nothing new, every demo part was already there")
        for line in demo_links(base_url=options["base_url"]):
            self.stdout.write(line)
        for line in extra_lines:
            self.stdout.write(line)

    def _ensure_parts(self) -> list[tuple[str, bool]]:
        """Every demo part beyond the works: ``(its name, whether it is new)``.

        Model runs first (the expert-judgement sample takes the generative answers),
        then the studies, then annotation work.
        """
        from annotation.chartom.demo import DemoDataError
        from demo import studies
        from demo.runs import demo_runs_ensure
        from studies.errors import StudyError

        parts = []
        answers = studies.human_answers(DEMO_DIR / "human_answers.json")
        try:
            summaries = demo_runs_ensure(DEMO_DIR / "predictions")
            parts.append(("model runs", any(s.created for s in summaries)))
            for ensure in (
                studies.scene_study_ensure,
                studies.chartom_study_ensure,
                studies.dyntom_study_ensure,
                studies.generic_study_ensure,
                studies.balanced_study_ensure,
            ):
                study, created = ensure(answers=answers)
                if study is not None:
                    parts.append((study.name, created))
            parts.append(self._ensure_validation())
            parts.append(self._ensure_construction())
            parts.extend(self._ensure_disputes())
        except (ImportDataError, studies.DemoStudyError, StudyError, DemoDataError) as exc:
            raise CommandError(f"demo refused, nothing was loaded: {exc}") from None
        return parts

    def _ensure_validation(self) -> tuple[str, bool]:
        """A validation batch over the demo DynToM stage."""
        from annotation.dyntom.validation.services import validation_batch_create
        from annotation.models import ValidationBatch
        from benchmarks.models import DynToMStage

        batch = ValidationBatch.objects.filter(name=DEMO_VALIDATION_BATCH).first()
        stages = list(DynToMStage.objects.filter(work__key__startswith="trial_demo"))
        if batch is None and stages:
            validation_batch_create(name=DEMO_VALIDATION_BATCH, stages=stages, k=4)
            return DEMO_VALIDATION_BATCH, True
        return DEMO_VALIDATION_BATCH, False

    def _ensure_construction(self) -> tuple[str, bool]:
        """A CharToM-QA batch with a task in every annotator queue, replies recorded."""
        from annotation.chartom.demo import chartom_demo_construction_load
        from demo.runs import demo_generative_run_ids

        users = get_user_model().objects.in_bulk(["researcher", "annotator"], field_name="username")
        batch, created = chartom_demo_construction_load(
            fixture=DEMO_DIR / "chartom_construction.json",
            researcher=users["researcher"],
            annotator=users["annotator"],
            generative_run_ids=demo_generative_run_ids(),
        )
        return batch.name, created

    def _ensure_disputes(self) -> list[tuple[str, bool]]:
        """Disagreements in both reviewer queues, after the work they are answers to."""
        from demo.disputes import demo_disputes_ensure

        return demo_disputes_ensure(
            fixture=DEMO_DIR / "disagreements.json",
            construction_fixture=DEMO_DIR / "chartom_construction.json",
            researcher=get_user_model().objects.get(username=DEMO_USERS[0][0]),
        )

    def _ensure_pools(self) -> list[str]:
        """The DynToM generator's pools, from the shared data beside the checkout.

        They are the DynToM authors' files, never copied into the repo.
        """
        from annotation.dyntom.generation.pools import pools_load

        pools = Path(settings.TOMLAB_SHARED_DATA) / "dyntom-pools"
        if not pools.is_dir():
            return [
                f"DynToM generation pools not found at {pools}: "
                "run manage.py load_dyntom_pools DIR before generating stages"
            ]
        report = pools_load(directory=pools)
        return [f"DynToM generation pools: {pools} ({report.created_count} created)"]

    def _ensure_chartom(self) -> str:
        """Father Goriot and three reader notes of ours, waiting for a real backend."""
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
                format_name=source.format_name,
                path=source.path,
                split=source.split,
                books=source.books,
            )
        except ImportDataError as exc:
            raise CommandError(f"demo data rejected, nothing was loaded: {exc}") from None
        for warning in report.warnings:
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
        self.stdout.write(f"{source.format_name}: {source.path.relative_to(settings.BASE_DIR)}")
        for line in report.summary_lines():
            self.stdout.write(f"  {line}")
        return report

    def _import_generic(self) -> ImportReport:
        from benchmarks.models import MappingPreset

        try:
            report = benchmark_import(
                format_name="generic",
                path=DEMO_GENERIC,
                mapping=DEMO_GENERIC_MAPPING,
                name=DEMO_GENERIC_NAME,
                version=DEMO_GENERIC_VERSION,
            )
        except (ImportDataError, ValueError) as exc:
            raise CommandError(f"demo data rejected, nothing was loaded: {exc}") from None
        MappingPreset.objects.get_or_create(
            name=DEMO_GENERIC_PRESET,
            defaults={
                "mapping": DEMO_GENERIC_MAPPING,
                "description": "How the demo's Mini ToM items are read (fixtures/demo/generic).",
            },
        )
        self.stdout.write(f"generic: {DEMO_GENERIC.relative_to(settings.BASE_DIR)}")
        for line in report.summary_lines():
            self.stdout.write(f"  {line}")
        return report

    def _ensure_workspaces(self) -> str:
        """Everything above is in the Default workspace. Its item bank is published to
        every workspace, and a second, empty workspace that the demo researcher also
        manages shows the switch in the navigation's workspace menu."""
        from accounts.models import Membership, Workspace
        from accounts.workspaces import member_set, workspace_create
        from benchmarks.services import benchmark_publish

        published = benchmark_publish(works=Work._base_manager.filter(workspace__slug="default"))
        second = Workspace.objects.filter(name=DEMO_SECOND_WORKSPACE).first()
        if second is None:
            second = workspace_create(name=DEMO_SECOND_WORKSPACE)
        researcher = get_user_model().objects.get(username=DEMO_USERS[0][0])
        if not Membership.objects.filter(workspace=second, user=researcher).exists():
            member_set(workspace=second, user=researcher, role=Membership.Role.MANAGER, by=None)
        return (
            f"workspaces: Default ({published} works published to every workspace) and "
            f"{second.name} (empty; switch in the menu at the top)"
        )

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
