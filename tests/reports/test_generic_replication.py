"""A generic benchmark's study in a replication package: its items (by natural key and
hashes), picks, runs on the same work and report travel, and an import rebuilds the
same report; the items themselves are not bundled (no exporter writes a mapped
benchmark back), and the manifest says so."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import pytest

from benchmarks.models import MCItem
from reports.replication.exporting import ExportRefused, package_export
from reports.replication.importing import PackageError, package_import
from reports.tables import build_report
from studies.models import Assignment, ChoiceAnswer, Participant, Study, StudyItem
from tests.reports.test_generic_report import build_generic_rows

pytestmark = pytest.mark.django_db


def _table(archive: zipfile.ZipFile, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(archive.read(f"data/{name}.csv").decode())))


def test_a_generic_study_round_trips_with_its_works_runs_and_report(tmp_path):
    rows = build_generic_rows()
    path = tmp_path / "generic.zip"
    package_export(rows.s1, path, with_items=True)

    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        items = _table(archive, "items")
        study_items = _table(archive, "study_items")
        choices = _table(archive, "choices")
        runs = _table(archive, "runs")
        report = json.loads(archive.read("reports/report.json"))
        names = archive.namelist()
    # The runs on this study's work only (R1, R2), never the other work's.
    assert [r["name"] for r in runs] == ["llm", "sampled"]
    assert {r["kind"] for r in items} == {"mc"}
    assert {(r["work"], r["field"]) for r in items if r["key"] == "mt-01"} == {
        ("mini-tom@1", "texts"),
        ("mini-tom@1", "answers"),
        ("mini-tom@1", "categories"),
    }
    assert {r["kind"] for r in study_items} == {"mc"}
    assert choices and all(c["item"] for c in choices)
    assert not any(n.startswith("items/") for n in names)
    assert any("not bundled" in w for w in manifest["warnings"])
    # The packaged report is the work's report over the study: ids written as package ids.
    assert report["title"] == "Mini ToM v1 report" and "work_id" not in report["facts"]
    accuracy = {r["System"]: r for r in report["tables"][1]["rows"]}
    assert accuracy["Humans: First (#S)"]["Accuracy %"] == 75.0  # P1 6/6, P2 3/6
    assert accuracy["#R1 llm"]["Accuracy %"] == 75.0

    imported = package_import(path)
    assert imported.created
    assert imported.differences == {"report.json": [], "report-include-excluded.json": []}
    copy = imported.study
    assert copy.benchmark == "generic" and copy.status == Study.Status.CLOSED
    again = ChoiceAnswer.objects.filter(assignment__participant__study=copy)
    assert again.count() == len(choices) and not again.filter(mc_item__isnull=True).exists()
    # The copy is one more study of the same work: its report reads it beside the first.
    rebuilt = build_report("generic", work_id=rows.work.pk, study_ids=[copy.pk])
    people = {r["System"]: r for r in rebuilt.table("accuracy").records()}
    assert people[f"Humans: First (#{copy.pk})"]["Accuracy %"] == 75.0


def test_runs_of_another_generic_benchmark_are_refused(tmp_path):
    rows = build_generic_rows()
    with pytest.raises(ExportRefused, match=f"no generic run with id {rows.other_run.pk}"):
        package_export(rows.s1, tmp_path / "x.zip", runs=[rows.other_run.pk])
    assert not (tmp_path / "x.zip").exists()


def test_an_item_changed_after_export_is_refused_naming_it(tmp_path):
    rows = build_generic_rows()
    path = tmp_path / "generic.zip"
    package_export(rows.s2, path, runs=[rows.r1.pk])
    item = MCItem.objects.get(work=rows.work, item_id="mt-05")
    item.texts["en"]["question"] += "?"
    item.save()
    with pytest.raises(PackageError, match=r"multiple-choice item mt-05 .*'texts' differs"):
        package_import(path)


def test_a_written_check_travels_with_its_picks_and_no_bank_item(tmp_path):
    """A check the researcher wrote (no bank item) goes as an item of kind "instructed"
    with its content; its picks have no item; the copy scores them again the same way."""
    rows = build_generic_rows()
    study = rows.s1
    check = StudyItem.objects.create(
        study=study,
        study_work=study.study_works.get(),
        role=StudyItem.Role.ATTENTION,
        position=99,
        instructed={"question": "Select 'Iris'.", "options": ["Anna", "Iris"], "answer": 1},
    )
    for label, option in (("P1", 1), ("P2", 0)):
        p = Participant.objects.get(study=study, label=label)
        first = p.assignments.order_by("position").first()
        a = Assignment.objects.create(
            participant=p,
            session=first.session,
            study_item=check,
            position=50,
            seen=False,
            status=Assignment.Status.SUBMITTED,
            submitted_at=first.submitted_at,
        )
        ChoiceAnswer.objects.create(
            assignment=a,
            option=option,
            shown=option,
            shown_at=first.submitted_at,
            answered_at=first.submitted_at,
            ms=900,
            correct=option == 1,
        )
    path = tmp_path / "written.zip"
    package_export(study, path)
    with zipfile.ZipFile(path) as archive:
        study_items = _table(archive, "study_items")
        choices = _table(archive, "choices")
    (written,) = [r for r in study_items if r["kind"] == "instructed"]
    assert written["item"] == "" and json.loads(written["instructed"]) == check.instructed
    assert sum(1 for c in choices if c["item"] == "") == 2

    imported = package_import(path)
    assert imported.differences == {"report.json": [], "report-include-excluded.json": []}
    copy = StudyItem.objects.get(study=imported.study, mc_item__isnull=True)
    assert (copy.role, copy.instructed) == ("attention", check.instructed)
    picks = ChoiceAnswer.objects.filter(assignment__study_item=copy).order_by("option")
    assert [(c.option, c.correct) for c in picks] == [(0, False), (1, True)]


def test_a_package_from_before_written_checks_still_imports(tmp_path):
    """study_items.csv written without the ``instructed`` column (older packages) reads."""
    from tests.package_edits import package_rewrite

    rows = build_generic_rows()
    path = tmp_path / "old.zip"
    package_export(rows.s1, path)

    def drop_column(name: str, data: bytes) -> bytes:
        if name == "datapackage.json":  # its schema as an older export wrote it
            descriptor = json.loads(data)
            for resource in descriptor["resources"]:
                if resource["path"] == "data/study_items.csv":
                    fields = resource["schema"]["fields"]
                    resource["schema"]["fields"] = [f for f in fields if f["name"] != "instructed"]
            return json.dumps(descriptor).encode()
        if name != "data/study_items.csv":
            return data
        table = list(csv.DictReader(io.StringIO(data.decode())))
        out = io.StringIO()
        writer = csv.DictWriter(out, [k for k in table[0] if k != "instructed"])
        writer.writeheader()
        for row in table:
            row.pop("instructed")
            writer.writerow(row)
        return out.getvalue().encode()

    old = package_rewrite(path, tmp_path / "older.zip", drop_column)
    imported = package_import(old)
    assert imported.created
    assert not StudyItem.objects.filter(study=imported.study, mc_item__isnull=True).exists()
