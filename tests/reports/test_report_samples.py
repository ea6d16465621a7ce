"""A run with several samples per item (an Inspect log's epochs, a run asked for
``samples > 1``): the report averages them by default or, with ``samples=first``, reads
the first sample alone; on the page, the API, the ``report`` command, the cache and
background jobs. And a harness run's provenance and every sample of it travel through
a replication package unchanged.

The generic run below answers the twelve Mini ToM items twice, through the JSONL import:
sample 0 is right on mt-01..mt-09 (9 / 12 = 75 %), sample 1 only on mt-01..mt-03
(3 / 12 = 25 %). Item-level accuracy averages each item's samples first: mt-01..03
score 1, mt-04..09 score 0.5, mt-10..12 score 0, so the mean is (3 + 3) / 12 = 50 %.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.db import transaction
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks.importers.base import ImportReport
from benchmarks.models import DynToMQuestion, Work
from modeling.models import Prediction, Run
from modeling.runs.prediction_import import (
    PredictionLine,
    import_lines,
    prediction_values,
    predictions_import,
)
from reports import services
from reports.models import ReportJob
from reports.replication.exporting import package_export
from reports.replication.importing import package_import
from reports.tables import build_report
from tests.generic_items import make_generic_benchmark, mini_tom_records
from tests.modeling.conftest import dyntom_stages  # noqa: F401  (the fixture, registered here)
from tests.reports.test_generic_report import answer, make_run, make_study, predict

pytestmark = pytest.mark.django_db

MEAN, FIRST = 50.0, 75.0
# Which items each sample gets right.
RIGHT = {0: {f"mt-{i:02d}" for i in range(1, 10)}, 1: {f"mt-{i:02d}" for i in range(1, 4)}}


@pytest.fixture(autouse=True)
def _fresh_report_cache():
    # Reports are cached by a data fingerprint; rolled-back tests can reuse row ids.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def client_researcher(client, researcher):
    client.force_login(researcher)
    return client


def _letter(record: dict, right: bool) -> str:
    """The gold letter, or the first other option's."""
    if right:
        return record["answer"]
    return next(letter for letter in "ABCD" if letter != record["answer"])


def _sampled_lines() -> list[tuple[int, str, str]]:
    """(sample, item id, letter) of the two epochs."""
    return [
        (sample, record["id"], _letter(record, record["id"] in right))
        for sample, right in RIGHT.items()
        for record in mini_tom_records()
    ]


@pytest.fixture
def sampled(tmp_path) -> tuple[Work, Run]:
    """The Mini ToM items and one imported run with two disagreeing samples per item."""
    work = make_generic_benchmark()
    path = tmp_path / "epochs.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "benchmark": "generic",
                    "model": "lab-llm",
                    "work": work.key,
                    "item": item,
                    "answer": letter,
                    "sample_index": sample,
                }
            )
            + "\n"
            for sample, item, letter in _sampled_lines()
        ),
        encoding="utf-8",
    )
    with transaction.atomic():
        (summary,) = predictions_import(path=path, name="epochs").runs
    return work, summary.run


def _run_accuracy(report, run: Run) -> dict:
    (row,) = [r for r in report.table("accuracy").records() if r["System"] == f"#{run.pk} epochs"]
    return row


def _page(work: Work, **query: str) -> str:
    extra = "".join(f"&{k}={v}" for k, v in query.items())
    return reverse("reports:report", args=["generic"]) + f"?work={work.pk}{extra}"


# --- the numbers ----------------------------------------------------------------------


def test_mean_averages_the_samples_and_first_reads_sample_zero(sampled):
    work, run = sampled
    mean = build_report("generic", work_id=work.pk)
    first = build_report("generic", work_id=work.pk, samples="first")

    averaged, alone = _run_accuracy(mean, run), _run_accuracy(first, run)
    assert (averaged["Items"], averaged["Answers"], averaged["Accuracy %"]) == (12, 24, MEAN)
    assert (alone["Items"], alone["Answers"], alone["Accuracy %"]) == (12, 12, FIRST)
    # The runs table describes the whole run either way.
    for report in (mean, first):
        (runs,) = report.table("runs").records()
        assert (runs["Samples"], runs["Predictions"]) == (2, 24)
    # Per category too: "Hidden emotions" is mt-04..06, right in sample 0, only in
    # sample 0 (0.5 each averaged); "False belief" (mt-01..03) is right in both.
    column = f"#{run.pk} epochs %"
    for report, hidden in ((mean, 50.0), (first, 100.0)):
        by_ability = {r["ability"]: r for r in report.table("by-ability").records()}
        assert by_ability["Hidden emotions"][column] == hidden
        assert by_ability["False belief"][column] == 100.0
    # The facts and the note say which was used; the default report is as it was.
    assert first.facts["samples"] == "first" and "samples" not in mean.facts
    assert "first sample only (samples=first)" in first.table("accuracy").note
    assert "a run: over its samples" in mean.table("accuracy").note
    assert "first sample" not in mean.table("accuracy").note


def test_an_unknown_samples_value_is_refused_by_the_builder(sampled):
    work, _ = sampled
    with pytest.raises(ValueError, match="samples: expected one of"):
        build_report("generic", work_id=work.pk, samples="median")


# --- every surface --------------------------------------------------------------------


def test_the_page_api_command_and_downloads_honour_samples(
    client_researcher, researcher, sampled, tmp_path
):
    work, run = sampled
    # The mean first: the cache must not answer the first-sample request with it.
    page = client_researcher.get(_page(work))
    assert page.status_code == 200
    assert _run_accuracy(page.context["report"], run)["Accuracy %"] == MEAN
    html = page.content.decode()
    assert 'data-testid="samples-choice"' in html
    assert '<option value="mean" selected>average</option>' in html

    page = client_researcher.get(_page(work, samples="first"))
    assert page.status_code == 200
    assert _run_accuracy(page.context["report"], run)["Accuracy %"] == FIRST
    html = page.content.decode()
    assert '<option value="first" selected>first only</option>' in html
    # "Build in background" posts the same selection.
    assert '<input type="hidden" name="samples" value="first">' in html
    assert page.context["downloads"]["xlsx"].endswith(f"?work={work.pk}&samples=first")
    # The form's GET keeps it in the canonical URL; "mean" is the default, left out.
    picked = client_researcher.get(_page(work, picked="1", samples="first", runs=str(run.pk)))
    assert picked["Location"].endswith(f"?work={work.pk}&runs={run.pk}&samples=first")
    picked = client_researcher.get(_page(work, picked="1", samples="mean", runs=str(run.pk)))
    assert picked["Location"].endswith(f"?work={work.pk}&runs={run.pk}")

    table = client_researcher.get(
        reverse("reports:table-csv", args=["generic", "accuracy"])
        + f"?work={work.pk}&samples=first"
    )
    stem = f"generic-work{work.pk}-report-first-sample"
    assert f"{stem}-accuracy.csv" in table["Content-Disposition"]
    shown = {r["System"]: r for r in csv.DictReader(io.StringIO(table.content.decode()))}
    assert float(shown[f"#{run.pk} epochs"]["Accuracy %"]) == FIRST
    tidy = client_researcher.get(
        reverse("reports:tidy-csv", args=["generic"]) + f"?work={work.pk}&samples=first"
    )
    rows = list(csv.DictReader(io.StringIO(b"".join(tidy.streaming_content).decode())))
    assert len(rows) == 12 and {r["sample_index"] for r in rows} == {"0"}

    api = APIClient()
    api.force_login(researcher)
    for samples, expected in (("mean", MEAN), ("first", FIRST)):
        response = api.get(
            reverse("reports-report-table", args=["generic", "accuracy"]),
            {"work": work.pk, "samples": samples},
        )
        assert response.status_code == 200, response.content
        (row,) = [r for r in response.json()["rows"] if r["System"] == f"#{run.pk} epochs"]
        assert row["Accuracy %"] == expected
    whole = api.get(
        reverse("reports-report", args=["generic"]), {"work": work.pk, "samples": "first"}
    )
    assert whole.json()["facts"]["samples"] == "first"

    for samples, expected in (("mean", MEAN), ("first", FIRST)):
        out = tmp_path / f"{samples}.json"
        call_command(
            "report",
            "generic",
            "--work",
            str(work.pk),
            "--samples",
            samples,
            "--format",
            "json",
            "--out",
            str(out),
            stdout=io.StringIO(),
        )
        data = json.loads(out.read_text())
        (table,) = [t for t in data["tables"] if t["key"] == "accuracy"]
        (row,) = [r for r in table["rows"] if r["System"] == f"#{run.pk} epochs"]
        assert row["Accuracy %"] == expected


def test_a_bad_samples_value_is_400_naming_it(client_researcher, researcher, sampled):
    work, _ = sampled
    page = client_researcher.get(_page(work, samples="median"))
    assert page.status_code == 400
    assert "samples: expected mean or first, got &#x27;median&#x27;" in page.content.decode()
    download = client_researcher.get(
        reverse("reports:table-csv", args=["generic", "accuracy"]) + f"?work={work.pk}&samples=2"
    )
    assert download.status_code == 400 and download.content.startswith(b"samples:")
    api = APIClient()
    api.force_login(researcher)
    response = api.get(
        reverse("reports-report", args=["generic"]), {"work": work.pk, "samples": "x"}
    )
    assert response.status_code == 400
    assert list(response.json()) == ["samples"]
    job = client_researcher.post(
        reverse("reports:job-create", args=["generic"]), {"work": work.pk, "samples": "all"}
    )
    assert job.status_code == 302 and not ReportJob.objects.exists()
    with pytest.raises(CommandError, match="--samples"):
        call_command("report", "generic", "--work", str(work.pk), "--samples", "all")


def test_the_cache_keeps_mean_and_first_apart(sampled):
    work, run = sampled
    kwargs = {"benchmark": "generic", "work_id": work.pk}
    mean = services.report_build_cached(**kwargs)
    first = services.report_build_cached(**kwargs, samples="first")
    assert _run_accuracy(mean, run)["Accuracy %"] == MEAN
    assert _run_accuracy(first, run)["Accuracy %"] == FIRST
    # Both are cached now, each under its own key.
    again = services.report_build_cached(**kwargs)
    assert _run_accuracy(again, run)["Accuracy %"] == MEAN


def test_the_choice_shows_only_where_a_selected_run_has_several_samples(client_researcher, sampled):
    work, _ = sampled
    once = make_run("once")
    predict(once, work, {"mt-01": [True], "mt-02": [False]})
    page = client_researcher.get(_page(work, runs=str(once.pk)))
    assert page.status_code == 200
    assert 'name="samples"' not in page.content.decode()


def test_a_background_job_builds_the_first_sample_report(client_researcher, sampled):
    work, run = sampled
    response = client_researcher.post(
        reverse("reports:job-create", args=["generic"]), {"work": work.pk, "samples": "first"}
    )
    assert response.status_code == 302
    job = ReportJob.objects.get()
    assert (job.work_id, job.samples) == (work.pk, "first")
    assert services.report_job_execute(job_id=job.pk) == ReportJob.Status.SUCCEEDED
    job.refresh_from_db()
    report = job.report()
    assert _run_accuracy(report, run)["Accuracy %"] == FIRST
    assert report.facts["samples"] == "first"
    page = client_researcher.get(reverse("reports:job", args=[job.pk]))
    html = page.content.decode()
    assert '<dd data-testid="job-samples">first sample only</dd>' in html
    # Its long-format links carry the choice too.
    assert page.context["downloads"]["tidy"].endswith("samples=first")
    # The default job keeps averaging.
    default = services.report_job_create(benchmark="generic", work_id=work.pk, enqueue=False)
    assert default.samples == "mean"
    services.report_job_execute(job_id=default.pk)
    default.refresh_from_db()
    assert _run_accuracy(default.report(), run)["Accuracy %"] == MEAN


# --- DynToM -----------------------------------------------------------------------------


def test_dyntom_first_sample_leaves_out_the_second(dyntom_stages, tmp_path):  # noqa: F811
    """Sample 0 right on every question, sample 1 wrong on every one: 50 % averaged
    (sd of 1 and 0: 70.71 %), 100 % on the first sample, which has no sd table."""
    questions = list(DynToMQuestion.objects.values_list("key", "stage__work__key", "gold_letter"))
    path = tmp_path / "dyntom.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "benchmark": "dyntom",
                    "model": "m",
                    "work": work,
                    "question": key,
                    "answer": gold if sample == 0 else ("b" if gold == "a" else "a"),
                    "sample_index": sample,
                }
            )
            + "\n"
            for sample in (0, 1)
            for key, work, gold in questions
        ),
        encoding="utf-8",
    )
    with transaction.atomic():
        (summary,) = predictions_import(path=path, name="epochs").runs
    label = f"#{summary.run.pk} epochs"
    mean = build_report("dyntom")
    first = build_report("dyntom", samples="first")

    def overall(report) -> dict:
        (row,) = [r for r in report.table("accuracy").records() if r["System"] == label]
        return row

    assert (overall(mean)["Samples"], overall(mean)["Overall %"]) == (2, 50.0)
    assert overall(mean)["Overall sd %"] == 70.71
    assert (overall(first)["Samples"], overall(first)["Overall %"]) == (1, 100.0)
    assert "accuracy-sd" in {t.key for t in mean.tables}
    assert "accuracy-sd" not in {t.key for t in first.tables}
    assert first.table("runs").records()[0]["Samples"] == 2
    assert "first sample only (samples=first)" in first.table("accuracy").note
    assert first.table("compositional").note.endswith("First sample only.")
    assert mean.table("compositional").note.endswith("All samples pooled.")
    assert first.facts["samples"] == "first"


# --- the replication package ---------------------------------------------------------------

PROVENANCE = {
    "source": "x.eval",
    "origin": "inspect",
    "origin_id": "abc",
    "task": "tomlab_mini_tom_1",
    "task_version": 1,
    "inspect_version": "0.3.285",
}


def test_harness_run_round_trips_in_the_replication_package(tmp_path):
    """An Inspect run (provenance in its selection, two epochs per item) leaves in a
    study's package and comes back with the same selection and every sample."""
    work = make_generic_benchmark()
    study = make_study(work, "People", [f"mt-0{i}" for i in range(1, 5)])
    answer(study, "P1", {"mt-01": "A", "mt-02": "B", "mt-03": "C", "mt-04": "B"})
    lines = [
        PredictionLine(
            number=n,
            benchmark="generic",
            model="lab-llm",
            method="inspect",
            sample_index=sample,
            ref=(work.key, item),
            values=prediction_values(answer=letter),
        )
        for n, (sample, item, letter) in enumerate(_sampled_lines(), start=1)
    ]
    with transaction.atomic():
        (summary,) = import_lines(
            path=Path("x.eval"),
            name="inspect run",
            lines=lines,
            report=ImportReport(),
            provenance=PROVENANCE,
        )
    run = summary.run
    assert run.selection == PROVENANCE

    def samples_of(run_id: int) -> list[tuple]:
        return sorted(
            Prediction.objects.filter(run_id=run_id).values_list(
                "mc_item__item_id", "sample_index", "parsed_answer", "parse_status", "correct"
            )
        )

    path = tmp_path / "package.zip"
    package_export(study, path, runs=[run.pk])
    with zipfile.ZipFile(path) as archive:
        (row,) = csv.DictReader(io.StringIO(archive.read("data/runs.csv").decode()))
        predictions = list(
            csv.DictReader(io.StringIO(archive.read("data/predictions.csv").decode()))
        )
        packaged = json.loads(archive.read("reports/report.json"))
    assert json.loads(row["selection"]) == PROVENANCE
    assert len(predictions) == 24
    assert sorted(p["sample_index"] for p in predictions) == ["0"] * 12 + ["1"] * 12
    (runs,) = [t for t in packaged["tables"] if t["key"] == "runs"]
    assert runs["rows"][0]["Samples"] == 2

    imported = package_import(path)
    assert imported.created
    assert imported.differences == {"report.json": [], "report-include-excluded.json": []}
    (copy,) = Run.objects.exclude(pk=run.pk)
    assert copy.selection == PROVENANCE and copy.imported
    assert (copy.name, copy.model, copy.method) == ("inspect run", "lab-llm", "inspect")
    assert samples_of(copy.pk) == samples_of(run.pk)
    assert len(samples_of(copy.pk)) == 24
    # The copy reports as the original does, averaged or first sample alone.
    for samples, expected in (("mean", MEAN), ("first", FIRST)):
        report = build_report(
            "generic", work_id=work.pk, run_ids=[copy.pk], study_ids=[], samples=samples
        )
        (row,) = report.table("accuracy").records()
        assert row["Accuracy %"] == expected
