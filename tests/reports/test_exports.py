"""Table and long-format exports, each read back with pandas (read_csv, read_excel, read_json)."""

from __future__ import annotations

import io
import json
import zipfile

import pandas as pd
import pytest

from reports import exports
from reports.report_types import Report, Table


@pytest.fixture
def report() -> Report:
    runs = Table(
        key="runs",
        title="Runs",
        columns=["Run", "Name", "Imported", "Predictions", "Unparseable %"],
        rows=[[1, 'vanilla, "quoted"', True, 1719, 1.05], [2, "cot ünïcode", False, 1719, None]],
        note="Unparseable answers count as wrong.",
    )
    long_key = "accuracy-by-mental-state-and-question-type"
    accuracy = Table(
        key=long_key,
        title="Accuracy by mental state",
        columns=["System", "Belief U %", "CI low %", "CI high %"],
        rows=[["#1 vanilla", 71.25, 60.0, 80.5], ["#2 cot", 40.0, None, None]],
    )
    # Same first 31 characters as the one above: the sheet names must still differ.
    twin = Table(
        key=long_key + "-sd",
        title="Standard deviation",
        columns=["System", "Belief U %"],
        rows=[["#1 vanilla", 2.5]],
    )
    return Report(
        benchmark="dyntom",
        title="DynToM report",
        tables=[runs, accuracy, twin],
        facts={"questions": 1719, "runs": 2},
    )


def test_table_csv_reads_back_with_pandas(report):
    frame = pd.read_csv(io.BytesIO(exports.table_csv(report.table("runs"))))
    assert list(frame.columns) == ["Run", "Name", "Imported", "Predictions", "Unparseable %"]
    assert frame["Name"].tolist() == ['vanilla, "quoted"', "cot ünïcode"]
    assert frame["Imported"].dtype == bool and frame["Imported"].tolist() == [True, False]
    assert frame["Predictions"].dtype == "int64"
    assert frame["Unparseable %"].iloc[0] == 1.05
    assert pd.isna(frame["Unparseable %"].iloc[1])  # None is an empty cell


def test_zip_holds_every_table_and_a_readme(report):
    with zipfile.ZipFile(io.BytesIO(exports.tables_zip(report))) as archive:
        names = archive.namelist()
        assert names == ["README.txt", *(f"{t.key}.csv" for t in report.tables)]
        readme = archive.read("README.txt").decode()
        for table in report.tables:
            frame = pd.read_csv(archive.open(f"{table.key}.csv"))
            assert list(frame.columns) == table.columns
            assert len(frame) == len(table.rows)
            assert table.title in readme
    assert "questions: 1719" in readme
    assert "Unparseable answers count as wrong." in readme


def test_xlsx_has_one_sheet_per_table_with_safe_unique_names(report):
    sheets = pd.read_excel(
        io.BytesIO(exports.report_xlsx(report)), sheet_name=None, engine="openpyxl"
    )
    names = list(sheets)
    assert names[0] == "About"
    table_sheets = names[1:]
    assert len(table_sheets) == len(report.tables)
    assert all(len(name) <= 31 for name in names)
    assert len({n.lower() for n in names}) == len(names)
    assert table_sheets[1] == report.tables[1].key[:31]
    assert table_sheets[2].endswith("~2")

    runs = sheets["runs"]
    assert list(runs.columns) == report.table("runs").columns
    assert runs["Predictions"].tolist() == [1719, 1719]
    assert runs["Imported"].tolist() == [True, False]
    accuracy = sheets[table_sheets[1]]
    assert accuracy["Belief U %"].tolist() == [71.25, 40.0]
    assert pd.isna(accuracy["CI low %"].iloc[1])
    about = sheets["About"]
    assert "Accuracy by mental state" in about.to_string()


def test_sheet_names_follow_excels_rules():
    names = exports.sheet_names(
        ["a/b:c*d?e[f]g\\h", "About", "about", "x" * 40, "x" * 40, "History", "'quoted'"],
        reserved=["About"],
    )
    assert names[0] == "a-b-c-d-e-f-g-h"
    assert names[1] == "About~2" and names[2] == "about~3"
    assert names[3] == "x" * 31 and names[4] == "x" * 29 + "~2"
    assert names[5] == "History~2"  # Excel reserves "History"
    assert names[6] == "quoted"
    assert all(len(n) <= 31 for n in names)


def rows_like_the_selector(count: int) -> list[dict]:
    return [
        {
            "source": "model",
            "run_id": 7,
            "question": f"type_a_what_{i}",
            "scenario_from": 1 + i % 4,
            "scenario_to": None if i % 2 else 2 + i % 4,
            "answer": "b",
            "correct": i % 3 != 0,
            "tags": ["x", "y"],
        }
        for i in range(count)
    ]


def test_long_format_json_is_one_valid_array_written_incrementally():
    rows = rows_like_the_selector(5000)
    consumed = 0

    def source():
        nonlocal consumed
        for row in rows:
            consumed += 1
            yield row

    chunks = exports.long_format_json(source())
    first = next(chunks)
    assert first.startswith(b"[")
    assert consumed < len(rows)  # the first chunk left before the last row was read
    body = first + b"".join(chunks)
    assert json.loads(body) == rows
    frame = pd.read_json(io.BytesIO(body))
    assert len(frame) == 5000
    assert frame["correct"].dtype == bool
    assert json.loads(b"".join(exports.long_format_json(iter([])))) == []


def test_tidy_csv_has_proper_dtypes_for_pandas():
    rows = rows_like_the_selector(300)
    columns = ["source", "run_id", "question", "scenario_from", "scenario_to", "correct", "tags"]
    body = b"".join(exports.tidy_csv(iter(rows), columns))
    frame = pd.read_csv(io.BytesIO(body))
    assert list(frame.columns) == columns  # one header row, no index column
    assert len(frame) == 300
    assert frame["run_id"].dtype == "int64"
    assert frame["scenario_from"].dtype == "int64"
    assert frame["scenario_to"].dtype == "float64"  # missing values are NaN
    assert frame["scenario_to"].isna().sum() == 150
    assert frame["correct"].dtype == bool
    assert frame["correct"].tolist() == [r["correct"] for r in rows]
    assert json.loads(frame["tags"].iloc[0]) == ["x", "y"]
    assert "answer" not in frame  # only the columns asked for


def test_empty_tidy_csv_still_has_its_header():
    body = b"".join(exports.tidy_csv(iter([]), ["source", "correct"]))
    frame = pd.read_csv(io.BytesIO(body))
    assert list(frame.columns) == ["source", "correct"] and frame.empty
