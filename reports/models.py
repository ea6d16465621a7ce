"""Report build jobs: a report too big to build inside a request is built by a Celery
worker, which records its progress here and stores the finished report as JSON.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from benchmarks.models import Benchmark
from common.scoping import WorkspaceManager, WorkspaceOwned

from .report_types import SAMPLES_FIRST, SAMPLES_MEAN, Chart, Report, Table


class ReportJob(WorkspaceOwned):
    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"

    FINISHED = (Status.SUCCEEDED, Status.FAILED)

    benchmark = models.CharField(max_length=20, choices=Benchmark.choices)
    # Null: every run of the benchmark (as build_report's run_ids=None); else the ids.
    run_ids = models.JSONField(null=True, blank=True)
    # The studies picked (None: the default selection) and whether excluded
    # participants count, as the page's "What this report compares" asked.
    study_ids = models.JSONField(null=True, blank=True)
    include_excluded = models.BooleanField(default=False)
    # A run's several samples per item: averaged, or its first sample only.
    samples = models.CharField(
        max_length=5,
        choices=[(SAMPLES_MEAN, "mean over samples"), (SAMPLES_FIRST, "first sample only")],
        default=SAMPLES_MEAN,
    )
    # The generic benchmark's report covers one named benchmark, this work; null for
    # the built-in benchmarks (whose report covers every work).
    work = models.ForeignKey(
        "benchmarks.Work",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
    )
    seed = models.PositiveIntegerField(default=0, help_text="bootstrap seed")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    # Report.as_json() once succeeded.
    result = models.JSONField(null=True, blank=True)
    created_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Set when a participant's withdrawal deleted the stored result (which could hold
    # their rows) and queued the job to be built again (``reports.hooks``).
    rebuilt_after_withdrawal_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["benchmark", "-created_at"])]

    def __str__(self) -> str:
        return f"report job {self.pk} {self.benchmark} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def percent(self) -> int:
        return round(100 * self.progress_done / self.progress_total) if self.progress_total else 0

    def report(self) -> Report | None:
        """The stored report as a :class:`Report` again (None until the job succeeded)."""
        if not self.result:
            return None
        return report_from_json(self.result)


def report_from_json(data: dict[str, Any]) -> Report:
    """Inverse of ``Report.as_json()`` (whose table rows are records keyed by column)."""
    tables = [
        Table(
            key=t["key"],
            title=t["title"],
            columns=list(t["columns"]),
            rows=[[record.get(c) for c in t["columns"]] for record in t["rows"]],
            note=t.get("note", ""),
            no_interval=dict(t.get("no_interval", {})),
            alert=t.get("alert", ""),
        )
        for t in data.get("tables", [])
    ]
    charts = [Chart(**c) for c in data.get("charts", [])]
    return Report(
        benchmark=data["benchmark"],
        title=data["title"],
        tables=tables,
        charts=charts,
        facts=dict(data.get("facts", {})),
    )


class PackedRun(models.Model):
    """A run's predictions packed for its report (``reports.run_packs``).

    ``data`` holds everything its benchmark's tables read from the run's predictions,
    one row per run instead of one per prediction: DynToM question outcomes
    (``reports.dyntom_outcomes``), CharToM-QA answers with their scores
    (``reports.chartom_answers``). ``predictions`` and ``last_prediction`` (count and
    highest id of the run's predictions when it was packed) tell a stale copy: any
    insert or delete changes them. Changes in place (a re-import, judge verdicts or
    text scores merged into details) go through ``run_packs.packs_invalidate``, which
    clears ``predictions`` and bumps ``generation``; a build only stores its result
    while the generation it started from is still current.
    """

    run = models.OneToOneField(
        "modeling.Run", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    # Null: invalidated, to be packed again.
    predictions = models.PositiveIntegerField(null=True, blank=True)
    last_prediction = models.BigIntegerField(default=0)
    generation = models.PositiveIntegerField(default=0)
    data = models.BinaryField(default=b"")
    packed_at = models.DateTimeField(auto_now=True)

    objects = WorkspaceManager("run__workspace")

    def __str__(self) -> str:
        return f"packed run {self.run_id} ({self.predictions} predictions)"


class PackedStudy(models.Model):
    """A closed scene study's counted human answers packed for its report
    (``reports.study_packs``), one row per study and counting rule instead of one per
    answer (issue 51: reading 100,000 guesses took most of a TVShowGuess first build).

    ``fingerprint`` names what the answers were when packed:
    ``selectors.scene_study_sizes`` of it (answers' count and latest change,
    withdrawals, exclusions). A copy whose fingerprint differs from the database's is
    packed again; a study that is not closed is never read from its pack.
    """

    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, related_name="+")
    include_excluded = models.BooleanField(default=False)
    fingerprint = models.CharField(max_length=40)
    data = models.BinaryField(default=b"")
    packed_at = models.DateTimeField(auto_now=True)

    objects = WorkspaceManager("study__workspace")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["study", "include_excluded"], name="reports_packedstudy_unique"
            )
        ]

    def __str__(self) -> str:
        return f"packed study {self.study_id} (excluded {'in' if self.include_excluded else 'out'})"


class DynToMQuestionBankSnapshot(models.Model):
    """The DynToM questions' attributes packed as arrays (``dyntom_outcomes.question_bank``).

    Read as one row instead of a join over every question; ``fingerprint`` (the
    questions' count, highest id and latest change, and the stages' latest change)
    names the bank state it was read from, so an edited bank is read afresh. Only the
    current snapshot is kept.
    """

    fingerprint = models.CharField(max_length=40, unique=True)
    # int64 rows: id, question type code, mental state code, scenario from, to, stage,
    # scenario count (-1 for none), zlib-compressed.
    arrays = models.BinaryField()
    labels = models.JSONField(default=list, help_text="mental state strings by code")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"DynToM question bank {self.fingerprint[:12]}"


class ReplicationImport(WorkspaceOwned):
    """A replication package imported here (``reports.replication.importing``).

    The study it became is read-only by convention (closed, never relaunched); this row
    is its source: which package (``package_id``, unique, so a second import of the
    same package creates nothing), from which file, exported when and by which version,
    and what each of the package's runs became here.
    """

    package_id = models.CharField(max_length=64, unique=True)
    source_name = models.CharField(max_length=255, help_text="the package's file name")
    exported_at = models.CharField(max_length=40, blank=True, default="")
    app_version = models.CharField(max_length=40, blank=True, default="")
    study = models.OneToOneField(
        "studies.Study", on_delete=models.CASCADE, related_name="replication_source"
    )
    # Package run id ("R1") -> {"id": run id here, "backend_kind": …}.
    runs = models.JSONField(default=dict, blank=True)
    # Report file -> differences from the packaged JSON found after the import ([]: equal).
    report_differences = models.JSONField(default=dict, blank=True)
    imported_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    imported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-imported_at", "-pk"]

    def __str__(self) -> str:
        return f"replication package {self.package_id} ({self.source_name})"
