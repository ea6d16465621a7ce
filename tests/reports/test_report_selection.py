"""Reports choose what they compare, and leave excluded participants out (issue 28).

The study of ``test_human_tables`` (Friends scenes A, B, C; raters r1-r3, r4 withdrawn:
11 of 18 answers right) sits beside a closed study nobody answered and a run on scene D
only, outside the study: the issue's "No data yet, 0 of 83 speakers compared".
"""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks.models import DynToMQuestion
from modeling.models import Prediction, Run
from reports.selectors import human_choice_rows, report_studies
from reports.services import report_job_create, report_job_execute
from reports.tables import build_report
from studies.choice import services as cs
from studies.models import Assignment, Participant, StudyItem
from studies.participation.ledger import participant_exclusion_override
from studies.participation.services import participant_consent, participants_invite
from studies.services import study_close, study_create, study_go_live, study_launch
from tests.reports.test_human_choice_tables import _pick
from tests.reports.test_human_tables import HUMANS, _instances, _row, _scene, study  # noqa: F401
from tests.reports.test_tables import dyntom_set  # noqa: F401
from tests.studies.conftest import friends  # noqa: F401
from tests.studies.test_choice_services import _books

pytestmark = pytest.mark.django_db

CLOSED = "Humans: Closed pilot"


@pytest.fixture
def closed(friends):  # noqa: F811
    """A closed study that never got an answer."""
    pilot = study_create(name="Closed pilot", benchmark="tvshowguess", works=[friends])
    return study_close(study=study_go_live(study=pilot))


@pytest.fixture
def other_run(friends):  # noqa: F811
    """A run on scene D only (2 speakers, both right), which the study does not hold."""
    run = Run.objects.create(
        name="D only", benchmark="tvshowguess", method="vanilla", model="d", imported=True
    )
    for instance in _instances("D"):
        Prediction.objects.create(run=run, speaker_instance=instance, correct=True)
    return run


def _exclude(participant: Participant) -> None:
    # The studies ledger sets this through its exclusion rule; reports only read it.
    Participant.objects.filter(pk=participant.pk).update(
        excluded_at=timezone.now(), exclusion_source="researcher", exclusion_reason="test"
    )


def test_own_accuracy_stays_when_the_common_set_is_empty(study, closed, other_run):  # noqa: F811
    report = build_report("tvshowguess")
    # The closed study without answers is left out by default.
    assert [s["id"] for s in report_studies("tvshowguess")] == [study.pk]
    assert report.facts["compared_instances"] == 0
    common = report.table("accuracy-common")
    assert common.rows == [] and common.note.startswith("Common set: empty.")
    own = report.table("accuracy")
    humans = _row(own, HUMANS)
    assert (humans["Instances"], humans["Answers"], humans["Accuracy %"]) == (7, 18, 61.11)
    machine = _row(own, f"#{other_run.pk} D only")
    assert (machine["Instances"], machine["Accuracy %"]) == (2, 100.0)
    assert _row(own, "Random")["Instances"] == 9  # A, B, C (study) and D (run)
    assert CLOSED not in {r[0] for r in own.rows}

    # Asked for by id, the closed study is a system: it answered nothing, so it is left
    # out of the common set rather than emptying it.
    chosen = build_report("tvshowguess", study_ids=[study.pk, closed.pk], run_ids=[])
    assert _row(chosen.table("accuracy"), CLOSED)["Answers"] == 0
    assert chosen.facts["compared_instances"] == 7
    assert "Without any answer, left out of it: " + CLOSED in chosen.table("accuracy-common").note


def test_dyntom_runs_on_other_questions_keep_their_own_accuracy(dyntom_set):  # noqa: F811
    a, b = dyntom_set
    q8 = DynToMQuestion.objects.get(key="q8")
    c = Run.objects.create(name="C", benchmark="dyntom", method="vanilla", model="c")
    Prediction.objects.create(run=c, dyntom_question=q8, correct=False)  # q8 only, like A
    queued = Run.objects.create(name="queued", benchmark="dyntom", method="vanilla", model="q")
    report = build_report("dyntom", run_ids=[b.pk, c.pk, queued.pk])
    # B answered q1..q7, C only q8: no question in common, but each has its numbers.
    assert report.facts["compared_questions"] == 0
    common = report.table("accuracy-common")
    assert common.rows == [] and common.note.startswith("Common set: empty.")
    assert f"#{queued.pk} queued" in common.note  # without any answer: left out of it
    own = report.table("accuracy")
    assert (_row(own, f"#{b.pk} B")["Questions"], _row(own, f"#{b.pk} B")["Overall %"]) == (
        7,
        71.43,  # 5 of 7 in both samples
    )
    assert (_row(own, f"#{c.pk} C")["Questions"], _row(own, f"#{c.pk} C")["Overall %"]) == (1, 0.0)
    # A and B share q1..q7; the queued run does not empty that.
    both = build_report("dyntom", run_ids=[a.pk, b.pk, queued.pk])
    assert both.facts["compared_questions"] == 7
    assert _row(both.table("accuracy-common"), f"#{a.pk} A")["Overall %"] == 57.14  # 4 of 7


def test_a_dyntom_run_with_no_parseable_answer_is_named_in_the_common_set(dyntom_set):  # noqa: F811
    a, b = dyntom_set
    garbage = Run.objects.create(name="G", benchmark="dyntom", method="vanilla", model="g")
    for question in DynToMQuestion.objects.filter(key__in=["q1", "q2", "q3"]):
        Prediction.objects.create(
            run=garbage, dyntom_question=question, correct=False, parse_status="unparseable"
        )
    report = build_report("dyntom", run_ids=[a.pk, b.pk, garbage.pk])
    common = report.table("accuracy-common")
    assert report.facts["compared_questions"] == 3
    assert _row(common, f"#{garbage.pk} G")["Overall %"] == 0.0
    assert (
        "No parseable answer, in it at 0% (every answer counted wrong): "
        f"#{garbage.pk} G (all 3 replies unparseable)."
    ) in common.note
    unparsed = common.note.split("No parseable answer", 1)[1].split(".", 1)[0]
    assert unparsed.count("#") == 1  # A and B parsed (A's one unparseable answer aside)
    # Without it, the note names no run.
    assert "No parseable answer" not in (
        build_report("dyntom", run_ids=[a.pk, b.pk]).table("accuracy-common").note
    )


def test_excluded_participants_are_left_out_unless_included(study):  # noqa: F811
    _exclude(study.raters["r1"])  # r1 answered A ✓✓, B ✓✓, C ✓✓✓: 7 of 7
    default = build_report("tvshowguess")
    # r2: A ✗✗, B ✓✗, C ✓✗✗; r3: A ✓✓, B ✗✗ (C unsubmitted) = 4 of 11.
    humans = _row(default.table("accuracy"), HUMANS)
    assert (humans["Answers"], humans["Accuracy %"]) == (11, 36.36)
    assert default.facts["human_participants"] == 2
    assert default.facts["excluded_participants_left_out"] == 1
    studies = default.table("human-studies")
    assert _row(studies, HUMANS)["Excluded"] == 1
    assert "left out: 1" in studies.note

    included = build_report("tvshowguess", include_excluded=True)
    humans = _row(included.table("accuracy"), HUMANS)
    assert (humans["Answers"], humans["Accuracy %"]) == (18, 61.11)
    assert included.facts["excluded_participants_included"] == 1
    assert "are included (1)" in included.table("human-studies").note


def test_a_background_job_keeps_the_study_selection_and_the_switch(study):  # noqa: F811
    _exclude(study.raters["r1"])
    included = report_job_create(benchmark="tvshowguess", include_excluded=True, enqueue=False)
    no_studies = report_job_create(benchmark="tvshowguess", study_ids=[], enqueue=False)

    for job in (included, no_studies):
        assert report_job_execute(job_id=job.pk) == "succeeded"
        job.refresh_from_db()

    assert included.result["facts"]["excluded_participants_included"] == 1
    assert not any(t["key"] == "human-studies" for t in no_studies.result["tables"])
    with pytest.raises(ValueError, match="999"):
        report_job_create(benchmark="tvshowguess", study_ids=[999], enqueue=False)


def test_an_exclusion_rebuilds_stored_jobs(study):  # noqa: F811
    job = report_job_create(benchmark="tvshowguess", enqueue=False)
    assert report_job_execute(job_id=job.pk) == "succeeded"
    job.refresh_from_db()
    assert job.result["facts"]["human_participants"] == 3

    participant_exclusion_override(
        participant=study.raters["r1"], decision="exclude", reason="answered at random"
    )

    job.refresh_from_db()
    assert job.status == "queued" and job.result is None
    assert job.rebuilt_after_withdrawal_at is not None
    assert report_job_execute(job_id=job.pk) == "succeeded"
    job.refresh_from_db()
    assert job.result["facts"]["human_participants"] == 2


def test_practice_and_attention_items_never_count(study):  # noqa: F811
    StudyItem.objects.filter(study=study, scene=_scene("A")).update(role=StudyItem.Role.PRACTICE)
    StudyItem.objects.filter(study=study, scene=_scene("B")).update(role=StudyItem.Role.ATTENTION)
    report = build_report("tvshowguess", include_excluded=True)
    # Only C counts: r1 ✓✓✓, r2 ✓✗✗ (r3's C is not submitted).
    humans = _row(report.table("accuracy"), HUMANS)
    assert (humans["Instances"], humans["Answers"], humans["Accuracy %"]) == (3, 6, 66.67)
    assert report.facts["human_answers"] == 6


def test_multiple_choice_reads_leave_out_attention_items_and_excluded_people():
    works = _books(2, 2)
    mc = cs.choice_study_create(name="MC", benchmark="chartom-qa", works=works, seed=1).study
    study_launch(study=mc)
    a, b = participants_invite(study=mc, labels=["A", "B"])
    for p, read in ((a, works[0]), (b, works[1])):
        participant_consent(participant=p)
        cs.books_declare(participant=p, read_work_ids={read.pk})
    cs.design_apply(study=mc)
    for p in (a, b):
        for x in Assignment.objects.filter(participant=p):
            _pick(p, x, right=True)
            cs.choice_record(participant=p, assignment_id=x.pk, action="keep")
    every = list(human_choice_rows([mc.pk]))
    assert {r["participant_id"] for r in every} == {a.pk, b.pk}
    check = StudyItem.objects.filter(study=mc).order_by("pk").first()
    StudyItem.objects.filter(pk=check.pk).update(role=StudyItem.Role.ATTENTION)
    counted = list(human_choice_rows([mc.pk]))
    dropped = [r for r in every if r["qa_item_id"] == check.qa_item_id]
    assert dropped and len(counted) == len(every) - len(dropped)

    _exclude(b)
    assert {r["participant_id"] for r in human_choice_rows([mc.pk])} == {a.pk}
    report = build_report("chartom-qa")
    assert report.facts["participants"] == 1
    assert report.facts["excluded_participants_left_out"] == 1
    assert "left out: 1" in report.table("human-table3").note
    both = human_choice_rows([mc.pk], include_excluded=True)
    assert {r["participant_id"] for r in both} == {a.pk, b.pk}
    assert build_report("chartom-qa", include_excluded=True).facts["participants"] == 2


def test_the_page_picks_studies_runs_and_the_switch(
    client,
    researcher,
    study,  # noqa: F811
    closed,
    other_run,
):
    client.force_login(researcher)
    _exclude(study.raters["r1"])
    url = reverse("reports:report", args=["tvshowguess"])
    page = client.get(url)
    content = page.content.decode()
    assert f'name="studies" value="{study.pk}" checked' in content
    assert f'name="studies" value="{closed.pk}">' in content  # closed and empty: not ticked
    assert "Include excluded participants (1)" in content
    assert _row(page.context["report"].table("accuracy"), HUMANS)["Answers"] == 11

    # The form sends every ticked box; the page moves to the shareable URL.
    ticked = {"runs": [other_run.pk], "studies": [study.pk, closed.pk], "include_excluded": "1"}
    picked = client.get(url, {"picked": "1", **ticked})
    expected = f"?runs={other_run.pk}&studies={study.pk}%2C{closed.pk}&include_excluded=1"
    assert picked.status_code == 302 and picked["Location"] == url + expected
    shared = client.get(url + expected)
    report = shared.context["report"]
    assert _row(report.table("accuracy"), HUMANS)["Answers"] == 18
    assert _row(report.table("accuracy"), CLOSED)["Answers"] == 0
    assert f"#{other_run.pk} D only" in {r[0] for r in report.table("accuracy").rows}
    content = shared.content.decode()
    assert "include_excluded" in content and 'role="switch" checked' in content
    # Every download carries the selection, and honours it.
    tidy = reverse("reports:tidy-csv", args=["tvshowguess"])
    assert f"{tidy}{expected.replace('&', '&amp;')}" in content
    rows = list(csv.DictReader(io.StringIO(client.get(tidy + expected).getvalue().decode())))
    human_rows = [r for r in rows if r["study_id"] == str(study.pk)]
    assert len(human_rows) == 18
    default_rows = csv.DictReader(io.StringIO(client.get(tidy).getvalue().decode()))
    assert len([r for r in default_rows if r["study_id"] == str(study.pk)]) == 11
    table = reverse("reports:table-csv", args=["tvshowguess", "accuracy"])
    accuracy = client.get(table + f"?runs=none&studies={study.pk}").content.decode()
    assert "D only" not in accuracy and HUMANS in accuracy

    # No box ticked: none of them, not the default.
    nothing = client.get(url, {"picked": "1"})
    assert nothing["Location"] == url + "?runs=none&studies=none"
    bad = client.get(url, {"studies": "999999"})
    assert bad.status_code == 400 and "studies: no tvshowguess study with id 999999" in (
        bad.content.decode()
    )
    assert client.get(url, {"include_excluded": "maybe"}).status_code == 400


def test_the_api_honours_the_selection(researcher, study, closed, other_run):  # noqa: F811
    _exclude(study.raters["r1"])
    client = APIClient()
    client.force_authenticate(researcher)
    url = reverse("reports-report", kwargs={"benchmark": "tvshowguess"})
    default = client.get(url).json()
    assert default["facts"]["excluded_participants_left_out"] == 1
    assert default["facts"]["human_answers"] == 11
    included = client.get(url, {"include_excluded": "1"}).json()
    assert included["facts"]["human_answers"] == 18
    humans_only = client.get(url, {"runs": "none", "studies": str(closed.pk)}).json()
    assert humans_only["facts"]["runs"] == 0
    assert [r["Study"] for r in _table(humans_only, "human-studies")] == [CLOSED]
    bad = client.get(url, {"include_excluded": "maybe"})
    assert bad.status_code == 400 and "include_excluded" in bad.json()
    bad = client.get(url, {"studies": "999999"})
    assert bad.status_code == 400 and "999999" in bad.json()["studies"][0]


def _table(data: dict, key: str) -> list[dict]:
    (table,) = [t for t in data["tables"] if t["key"] == key]
    return table["rows"]
