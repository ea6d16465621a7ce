"""The CharToM-QA construction tables at /reports/chartom-qa/: note-check shares and
agreement, qualification trials and Table 7's human correlations, with hand-computed
figures, on the page and in the CSV zip and XLSX exports (read back with pandas)."""

from __future__ import annotations

import hashlib
import io
import math
import zipfile
from datetime import timedelta

import pandas as pd
import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.models import (
    AnnotationTask,
    BookText,
    JudgementSample,
    NoteBatch,
    QualificationAnswer,
    QualificationAttempt,
    QualificationItem,
    QualificationSet,
    ReaderNote,
    TaskAssignment,
)
from benchmarks.models import Benchmark, QAItem, Work
from common.models import QueuedJob
from common.queueing import HEADER
from modeling.models import Prediction, Run
from reports.tables import build_report
from tests.factories import QAItemFactory, UserFactory, WorkFactory

pytestmark = pytest.mark.django_db

NEW_TABLES = [
    "note-checks",
    "note-check-agreement",
    "check-review",
    "checks-by-annotator",
    "qualification",
    "table-7",
]


def row(table, label) -> dict:
    return next(r for r in table.records() if r[table.columns[0]] == label)


@pytest.fixture
def experts(db):
    return [UserFactory(username=f"expert{i}", role="annotator") for i in range(2)]


@pytest.fixture
def notes(db) -> list[ReaderNote]:
    text = "Vautrin poured the wine and watched Eugene closely."
    book = BookText.objects.create(
        title="Father Goriot", text=text, sha256=hashlib.sha256(text.encode()).hexdigest()
    )
    batch = NoteBatch.objects.create(name="report batch")
    return [
        ReaderNote.objects.create(
            batch=batch,
            position=i + 1,
            book=book,
            target_character="Vautrin",
            underlined_text="poured the wine",
            context=text,
            note_text=f"He wants to win Eugene over ({i}).",
        )
        for i in range(5)
    ]


def judge(kind: str, users, labels_or_scores, **target) -> AnnotationTask:
    """A task with one submitted slot per value, in submission order."""
    task = AnnotationTask.objects.create(kind=kind, k=len(users), closed=True, **target)
    now = timezone.now()
    for i, (user, value) in enumerate(zip(users, labels_or_scores, strict=True)):
        answer = {"label": value} if kind == "note_check" else {"score": value, "comment": ""}
        TaskAssignment.objects.create(
            task=task,
            annotator=user,
            taken_at=now - timedelta(minutes=5),
            submitted_at=now + timedelta(seconds=i),
            answer=answer,
        )
    return task


@pytest.fixture
def checked(notes, experts):
    """Ten judgements of five notes, 8 accurate / 1 subjective / 1 inappropriate."""
    labels = [
        ("accurate", "accurate"),
        ("accurate", "accurate"),
        ("accurate", "accurate"),
        ("accurate", "subjective"),
        ("inappropriate", "accurate"),
    ]
    for note, pair in zip(notes, labels, strict=True):
        judge("note_check", experts, pair, note=note, batch=note.batch)


def test_note_check_shares_and_agreement_by_hand(checked):
    report = build_report("chartom-qa")
    shares = report.table("note-checks")
    ours = row(shares, "This study")
    assert ours["Notes"] == 5 and ours["Judgements"] == 10
    assert ours["Accurate %"] == 80.0
    assert ours["Subjective but consistent %"] == 10.0
    assert ours["Inappropriate %"] == 10.0
    assert ours["Treated as accurate %"] == 90.0
    assert ours["Accurate CI low %"] <= 80.0 <= ours["Accurate CI high %"]
    paper = row(shares, "Paper, section 4.1 (reference)")
    assert [paper["Accurate %"], paper["Subjective but consistent %"]] == [80.0, 13.0]
    assert [paper["Inappropriate %"], paper["Treated as accurate %"]] == [7.0, 93.0]

    agreement = report.table("note-check-agreement")
    three = row(agreement, "Three labels")
    assert three["Notes judged twice"] == 5
    assert three["Agreement %"] == 60.0  # notes 1-3 agree, 4 and 5 do not
    # First raters: a a a a i; second: a a a s a. p_o = 3/5, p_e = (4*4)/25 = 0.64.
    assert three["Cohen's kappa"] == pytest.approx((0.6 - 0.64) / (1 - 0.64), abs=1e-4)
    by_annotator = report.table("checks-by-annotator")
    first = row(by_annotator, "expert0")  # a a a a i
    assert first["Note checks"] == 5 and first["Accurate %"] == 80.0
    assert first["Inappropriate %"] == 20.0 and first["Answers scored"] == 0
    assert first["Median seconds per note"] is None  # rows made without timing
    binary = row(agreement, "Treated as accurate or not")
    assert binary["Agreement %"] == 80.0  # only note 5 (inappropriate / accurate) differs
    assert binary["Cohen's kappa"] == 0.0  # p_o = p_e = 0.8


def test_empty_construction_tables_say_so():
    report = build_report("chartom-qa")
    assert [t.key for t in report.tables[-6:]] == NEW_TABLES
    assert report.table("checks-by-annotator").rows == []
    # Nothing to review: zero counts, agreement undefined.
    assert [r[1:] for r in report.table("check-review").rows] == [[0, 0, 0, 0] + [None] * 4] * 2
    assert "No note checked yet." in report.table("note-checks").note
    assert report.table("qualification").rows == []
    assert "No qualification attempt yet." in report.table("qualification").note
    table_7 = report.table("table-7")
    assert [r[0] for r in table_7.rows] == [
        "Human Correlation (Pearson r)",
        "Paper, Table 7 Human Correlation (reference)",
    ]
    assert row(table_7, "Paper, Table 7 Human Correlation (reference)")["BPC"] == 0.92
    assert "no expert score yet" in row(table_7, "Human Correlation (Pearson r)")["Notes"]


def test_qualification_table_per_annotator(notes, experts):
    qset = QualificationSet.objects.create(name="gold v1", threshold=0.8)
    items = [
        QualificationItem.objects.create(
            qset=qset, position=i, note=notes[i], dimension="intention", gold_spans=[[0, 8]]
        )
        for i in range(2)
    ]
    first = QualificationAttempt.objects.create(
        qset=qset, annotator=experts[0], finished_at=timezone.now(), score=0.5, passed=False
    )
    second = QualificationAttempt.objects.create(
        qset=qset, annotator=experts[0], finished_at=timezone.now(), score=0.9, passed=True
    )
    for attempt, f1s in ((first, [0.4, 0.6]), (second, [1.0, 0.8])):
        for item, f1 in zip(items, f1s, strict=True):
            QualificationAnswer.objects.create(attempt=attempt, item=item, spans=[], f1=f1)
    QualificationAttempt.objects.create(qset=qset, annotator=experts[1])  # still open
    table = build_report("chartom-qa").table("qualification")
    done = row(table, "expert0")
    assert done["Attempts"] == 2 and done["Finished"] == 2 and done["Items answered"] == 4
    assert done["Mean span F1"] == pytest.approx((0.4 + 0.6 + 1.0 + 0.8) / 4)
    assert done["Best score"] == 0.9 and done["Passed"] is True
    open_ = row(table, "expert1")
    assert open_["Attempts"] == 1 and open_["Finished"] == 0 and open_["Passed"] is False
    assert open_["Mean span F1"] is None and open_["Threshold"] == 0.8


# --- Table 7 ---------------------------------------------------------------------------


@pytest.fixture
def judged_run(experts):
    """Four judged answers with hand-picked BPC and RougeL, and one unjudged answer."""
    book = WorkFactory(benchmark=Benchmark.CHARTOM_QA, kind=Work.Kind.BOOK, key="goriot")
    run = Run.objects.create(
        name="gen", benchmark="chartom-qa", method="generative", model="m", imported=True
    )
    # (included, total, RougeL, expert scores): human means 1.0, 0.6, 0.4, 0.0.
    answers = [
        ([0], 1, 0.4, [1.0, 1.0]),
        ([0], 2, 0.2, [0.5, 0.7]),
        ([1], 2, 0.3, [0.4]),
        ([], 2, 0.1, [0.0, 0.0]),
        ([0, 1], 2, None, None),
    ]
    sample = JudgementSample.objects.create(name="t7", size=4)
    for i, (included, total, rouge, scores) in enumerate(answers):
        details = {
            "task": "generative",
            "bonus_points_total": total,
            "bonus_points_included": included,
            "defects": [],
        }
        if rouge is not None:
            details["rouge_l"] = rouge
        prediction = Prediction.objects.create(
            run=run,
            qa_item=QAItemFactory(work=book),
            parse_status="ok",
            raw_output=f"answer {i}",
            details=details,
        )
        if scores:
            judge("judgement", experts[: len(scores)], scores, prediction=prediction, sample=sample)
    return run


def test_table_7_correlations_by_hand(judged_run, settings):
    settings.TOMLAB_BERTSCORE_MODEL = ""
    table = build_report("chartom-qa").table("table-7")
    run = row(table, f"#{judged_run.pk} gen")
    assert run["Answers"] == 5 and run["Judged answers"] == 4
    assert run["BPC"] == round(5 / 9, 4)  # (1 + 1 + 1 + 0 + 2) / (1 + 2 + 2 + 2 + 2)
    assert run["RougeL"] == 0.25 and run["BERTScore"] is None
    assert run["Mean human score"] == 0.5
    assert "RougeL on 4 of 5 answers" in run["Notes"]
    expert = row(build_report("chartom-qa").table("checks-by-annotator"), "expert1")
    assert expert["Answers scored"] == 3  # the second scores: 1.0, 0.7, 0.0
    assert expert["Mean score"] == round(1.7 / 3, 4)
    human = row(table, "Human Correlation (Pearson r)")
    assert human["Answers"] == 4
    # h = 1, .6, .4, 0 (mean .5); BPC = 1, .5, .5, 0 (mean .5):
    # sxy = .25 + .25 = .5, sxx = .25 + .01 + .01 + .25 = .52, syy = .5.
    assert human["BPC"] == pytest.approx(0.5 / math.sqrt(0.52 * 0.5), abs=1e-4)
    # RougeL = .4, .2, .3, .1 (mean .25): sxy = .075 - .005 - .005 + .075 = .14, syy = .05.
    assert human["RougeL"] == pytest.approx(0.14 / math.sqrt(0.52 * 0.05), abs=1e-4)
    assert human["BERTScore"] is None
    assert (
        "BERTScore not computed: no model configured (TOMLAB_BERTSCORE_MODEL)" in (human["Notes"])
    )
    reference = row(table, "Paper, Table 7 Human Correlation (reference)")
    assert (reference["BPC"], reference["RougeL"], reference["BERTScore"]) == (0.92, 0.72, 0.81)


def test_table_7_says_when_bertscore_waits_for_scoring(judged_run, settings):
    settings.TOMLAB_BERTSCORE_MODEL = "/models/some-bert"
    prediction = Prediction.objects.filter(run=judged_run).order_by("pk").first()
    prediction.details = {**prediction.details, "bertscore_f1": 0.9}
    prediction.save(update_fields=["details"])
    human = row(build_report("chartom-qa").table("table-7"), "Human Correlation (Pearson r)")
    assert human["BERTScore"] is None
    assert "BERTScore: needs 3 judged answers with a value, has 1" in human["Notes"]


# --- the page and the exports ----------------------------------------------------------


@pytest.fixture
def client_researcher(client, researcher):
    client.force_login(researcher)
    return client


def test_page_shows_the_tables_and_raters_get_403(client, rater, checked, judged_run):
    client.force_login(rater)
    assert client.get(reverse("reports:report", args=["chartom-qa"])).status_code == 403
    client.force_login(UserFactory(username="boss", role="researcher"))
    page = client.get(reverse("reports:report", args=["chartom-qa"]))
    html = page.content.decode()
    for key in NEW_TABLES:
        assert f'id="table-{key}"' in html
    assert "Human Correlation (Pearson r)" in html and "Paper, section 4.1 (reference)" in html
    assert "[" in html  # CIs shown as [low, high]


def test_a_new_judgement_shows_without_waiting_for_the_cache(client_researcher, checked, notes):
    url = reverse("reports:report", args=["chartom-qa"])
    before = client_researcher.get(url).context["report"].table("note-checks")
    assert row(before, "This study")["Judgements"] == 10
    extra = UserFactory(username="late", role="annotator")
    judge("note_check", [extra], ["inappropriate"], note=notes[0], batch=notes[0].batch)
    after = client_researcher.get(url).context["report"].table("note-checks")
    assert row(after, "This study")["Judgements"] == 11


def test_the_api_answers_from_the_page_cache_and_sees_a_new_judgement(
    client_researcher, checked, notes
):
    def judgements(tables: list[dict]) -> int:
        table = next(t for t in tables if t["key"] == "note-checks")
        return next(r for r in table["rows"] if r["Source"] == "This study")["Judgements"]

    page = reverse("reports:report", args=["chartom-qa"])
    api = reverse("reports-report", args=["chartom-qa"])
    client_researcher.get(page)
    with CaptureQueriesContext(connection) as read:
        cached = client_researcher.get(api)
    assert cached.status_code == 200 and judgements(cached.json()["tables"]) == 10
    cache.clear()
    with CaptureQueriesContext(connection) as built:
        client_researcher.get(api)
    # Building reads the questions behind the predictions; the page's build, reused,
    # needs only the fingerprint's counts.
    items = QAItem._meta.db_table
    assert any(items in q["sql"] for q in built.captured_queries)
    assert not any(items in q["sql"] for q in read.captured_queries)
    # Construction counts are in the fingerprint every caller computes.
    extra = UserFactory(username="late", role="annotator")
    judge("note_check", [extra], ["inappropriate"], note=notes[0], batch=notes[0].batch)
    assert judgements(client_researcher.get(api).json()["tables"]) == 11


def test_exports_hold_every_new_table(client_researcher, checked, judged_run):
    report = client_researcher.get(reverse("reports:report", args=["chartom-qa"])).context["report"]
    zipped = client_researcher.get(reverse("reports:export", args=["chartom-qa", "csv"]))
    with zipfile.ZipFile(io.BytesIO(zipped.content)) as archive:
        for key in NEW_TABLES:
            frame = pd.read_csv(archive.open(f"{key}.csv"))
            assert list(frame.columns) == report.table(key).columns
            assert len(frame) == len(report.table(key).rows)
        shares = pd.read_csv(archive.open("note-checks.csv"))
    assert shares["Accurate %"].tolist() == [80.0, 80.0]
    xlsx = client_researcher.get(reverse("reports:export", args=["chartom-qa", "xlsx"]))
    sheets = pd.read_excel(io.BytesIO(xlsx.content), sheet_name=None, engine="openpyxl")
    assert set(NEW_TABLES) <= set(sheets)
    table_7 = sheets["table-7"].set_index("System")
    assert table_7.loc["Paper, Table 7 Human Correlation (reference)", "RougeL"] == 0.72
    assert table_7.loc["Human Correlation (Pearson r)", "BPC"] == pytest.approx(
        0.5 / math.sqrt(0.26), abs=1e-4
    )
    single = client_researcher.get(reverse("reports:table-csv", args=["chartom-qa", "table-7"]))
    assert pd.read_csv(io.BytesIO(single.content))["Judged answers"].iloc[0] == 4


def test_researcher_queues_text_similarity_from_the_report(
    client, rater, researcher, judged_run, monkeypatch, django_capture_on_commit_callbacks
):
    from modeling.pipelines.chartom_qa.tasks import score_text_similarity_task

    sent = []
    monkeypatch.setattr(
        score_text_similarity_task, "apply_async", lambda args, **kw: sent.append((args, kw))
    )
    url = reverse("reports:chartom-text-similarity")
    client.force_login(rater)
    assert client.post(url, {"runs": str(judged_run.pk)}).status_code == 403
    client.force_login(researcher)
    page = client.get(reverse("reports:report", args=["chartom-qa"])).content.decode()
    assert "Score RougeL / BERTScore" in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"runs": str(judged_run.pk)}, follow=True)
    ((args, options),) = sent
    assert args == ([judged_run.pk],) and options["queue"] == "gpu"
    # Sent with its envelope, so a lost message is sent again (common.queueing).
    envelope = QueuedJob.objects.get(pk=options["headers"][HEADER])
    assert envelope.args == [[judged_run.pk]] and envelope.queue == "gpu"
    assert f"of run(s) {judged_run.pk} queued for a GPU worker" in response.content.decode()
    bad = client.post(url, {"runs": "999999"}, follow=True)
    assert b"no chartom-qa run with id 999999" in bad.content
    assert len(sent) == 1
