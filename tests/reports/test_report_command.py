"""The ``report`` management command: text tables, one CSV per table, JSON."""

from __future__ import annotations

import csv
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from modeling.models import Prediction, Run
from reports.tables import build_report
from tests.factories import DynToMQuestionFactory
from tests.module_rows import build_friends

pytestmark = pytest.mark.django_db


def _report(*args: str) -> str:
    out = StringIO()
    call_command("report", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def friends(shared_data):
    build_friends(shared_data)


def test_json_for_tvshowguess_has_the_share_keys(friends):
    data = json.loads(_report("tvshowguess", "--format", "json"))
    assert data["dependence"] == {"direct": 26.49, "indirect": 19.87, "none": 53.64}
    assert data["reasoning"]["default conjunction"] == 15.89
    assert data["reasoning"]["not required"] == 70.2
    assert data["evidence"]["memory"] == 36.42
    assert data["evidence"]["fact (any)"] == 20.53
    assert data["evidence"]["inside scene(exclusion)"] == 8.61
    # The generic report is there too: the same tables as build_report.
    assert [t["key"] for t in data["tables"]] == [t.key for t in build_report("tvshowguess").tables]
    assert data["facts"]["instances"] == 149 and data["facts"]["annotations"] == 151


def test_table_format_aligns_columns(friends):
    text = _report("tvshowguess")
    lines = text.splitlines()
    start = lines.index("Memory dependence (share of annotated speakers) [annotation-dependence]")
    header, rule, direct = lines[start + 1 : start + 4]
    assert header.split() == ["Dependence", "Speakers", "Share", "%"]
    assert set(rule.replace(" ", "")) == {"-"}
    assert direct.split() == ["direct", "40", "26.49"]
    # Numbers are right-aligned under their header.
    assert direct.index("26.49") + len("26.49") == header.index("Share %") + len("Share %")


@pytest.fixture
def dyntom_run():
    q = DynToMQuestionFactory(key="type_a_what_1", mental_state="belief")
    run = Run.objects.create(name="r", benchmark="dyntom", method="vanilla", model="m")
    Prediction.objects.create(run=run, dyntom_question=q, parse_status="ok", correct=True)
    return run


def test_csv_writes_one_file_per_table(dyntom_run, tmp_path):
    out = tmp_path / "csv"
    printed = _report("dyntom", "--format", "csv", "--out", str(out), "--runs", str(dyntom_run.pk))
    keys = [t.key for t in build_report("dyntom").tables]
    assert sorted(p.name for p in out.iterdir()) == sorted(f"dyntom-{k}.csv" for k in keys)
    assert printed.splitlines() == [str(out / f"dyntom-{k}.csv") for k in keys]
    with (out / "dyntom-accuracy.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    # One question, answered right: 100% in the belief-understanding cell.
    assert rows[0]["System"] == f"#{dyntom_run.pk} r"
    assert rows[0]["Belief U %"] == "100.0" and rows[0]["Belief T %"] == ""


def test_json_to_a_file_and_seed_is_passed_through(dyntom_run, tmp_path):
    path = tmp_path / "report.json"
    _report("dyntom", "--format", "json", "--out", str(path), "--seed", "7")
    data = json.loads(path.read_text())
    assert data == json.loads(json.dumps(build_report("dyntom", seed=7).as_json()))


def test_usage_errors(dyntom_run):
    with pytest.raises(CommandError, match="--out"):
        _report("dyntom", "--format", "csv")
    with pytest.raises(CommandError, match="no dyntom run with id 999"):
        _report("dyntom", "--runs", "999")
