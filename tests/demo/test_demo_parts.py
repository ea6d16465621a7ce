"""What load_demo sets up beyond the works: every part of ToMLab has something to try.

The annotator finds a task in every CharToM-QA queue (the model replies recorded as an
ordinary run of the ``demo-recorded`` backend), the three studies are live with
answers in and invite links, every benchmark of the demo has a finished run that its
report shows beside the humans, and a second run creates nothing.
"""

from __future__ import annotations

import json
import re
import shutil
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db.models import Count

from annotation.chartom.board import annotator_cards
from annotation.chartom.models import (
    AnnotationTask,
    Construction,
    FieldChange,
    JudgementSample,
    NoteBatch,
    QualificationAttempt,
    QualificationSet,
    TaskAssignment,
    TaskKind,
)
from demo import studies as demo_studies
from demo.management.commands import load_demo
from modeling.models import CachedResponse, Prediction, Run, RunCall
from reports.tables import build_report
from studies.models import Assignment, ChoiceAnswer, Guess, Participant, Study

pytestmark = pytest.mark.django_db

DEMO = load_demo.DEMO_DIR
CONSTRUCTION = json.loads((DEMO / "chartom_construction.json").read_text(encoding="utf-8"))
BENCHMARKS = ("tom-in-amc", "chartom-qa", "dyntom")


def run_demo(*args: str) -> str:
    out = StringIO()
    call_command("load_demo", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def user(name: str):
    return get_user_model().objects.get(username=name)


def recorded_replies() -> set[str]:
    """Every model reply the construction fixture holds."""
    replies: set[str] = set()
    for note in CONSTRUCTION["notes"]:
        for entries in note["constructions"].values():
            for key in ("filter", "paraphrase", "bonus", "distractors"):
                if key in entries:
                    replies.add(entries[key])
            replies.update(entries.get("questions", []))
            replies.update(entries.get("verify", {}).values())
    return replies


# --- CharToM-QA construction: every queue ------------------------------------------------


def test_every_annotator_queue_has_a_task_and_each_screen_opens(client):
    run_demo()
    annotator = user("annotator")

    cards = {card.kind: card.open for card in annotator_cards(annotator)}
    assert set(cards) == set(TaskKind.values)
    assert all(cards.values()), cards
    # One note check and one judgement are the seeded annotators' disagreements
    # (demo.disputes); the demo annotator keeps the rest of both queues.
    assert cards == {
        "note_check": 2,
        "extract": 3,
        "paraphrase_review": 1,
        "question_choice": 1,
        "bonus_review": 1,
        "distractor_review": 1,
        "judgement": 8,
    }

    assert client.login(username="annotator", password="tomlab-annotator")
    takes = {
        "note_check": "/annotation/chartom/checks/notes/take/",
        "extract": "/annotation/chartom/work/extract/take/",
        "paraphrase_review": "/annotation/chartom/work/paraphrase_review/take/",
        "question_choice": "/annotation/chartom/work/question_choice/take/",
        "bonus_review": "/annotation/chartom/bonus/take/",
        "distractor_review": "/annotation/chartom/distractors/take/",
    }
    sample = JudgementSample.objects.get()
    takes["judgement"] = f"/annotation/chartom/checks/judgement/samples/{sample.pk}/take/"
    for kind, url in takes.items():
        response = client.post(url)
        assert response.status_code == 302, kind
        screen = client.get(response["Location"])
        assert screen.status_code == 200, (kind, response["Location"])
        assert TaskAssignment.objects.filter(
            annotator=annotator, task__kind=kind, submitted_at__isnull=True
        ).exists(), kind


def test_construction_walks_the_real_workflow_with_recorded_replies():
    run_demo()
    batch = NoteBatch.objects.get(name=CONSTRUCTION["batch"])

    assert (batch.backend.name, batch.model) == ("demo-recorded", "demo-recorded")
    # Every call of the LLM steps is an ordinary RunCall of the batch's run, answered
    # with one of our recorded replies; the backend itself was never asked.
    run = batch.run
    calls = RunCall.objects.filter(run=run)
    assert calls.count() == run.total_calls == run.done_calls == 46
    assert {c.status for c in calls} == {RunCall.Status.DONE}
    assert all(c.from_cache for c in calls)
    assert {c.raw_output for c in calls} <= recorded_replies()
    assert CachedResponse.objects.filter(backend_name="demo-recorded").count() == 46
    # Model fields carry their provenance: the model, the template version and the call.
    generated = FieldChange.objects.filter(
        construction__note__batch=batch, action="generated", model="demo-recorded"
    )
    assert generated.exclude(call__isnull=True).count() == generated.count() > 0
    # People's steps were the annotator's, through the screens' services.
    extracted = FieldChange.objects.filter(
        construction__note__batch=batch, field="key_note", changed_by__username="annotator"
    )
    assert extracted.count() == 4
    stages = dict(
        Construction.objects.filter(note__batch=batch)
        .exclude(stage="dropped")
        .values_list("stage")
        .annotate(n=Count("pk"))
    )
    assert stages == {
        "extract": 3,
        "paraphrase_review": 1,
        "question_choice": 1,
        "bonus_review": 1,
        "distractor_review": 1,
    }
    assert Construction.objects.filter(note__batch=batch, stage="dropped").count() == 5


def test_qualification_trial_is_active_and_the_annotator_passed_it(client):
    run_demo()

    qset = QualificationSet.objects.get(name=CONSTRUCTION["qualification"]["name"])
    assert qset.is_active and qset.items.count() == 2
    attempt = QualificationAttempt.objects.get(qset=qset, annotator__username="annotator")
    assert attempt.passed and 0.8 <= attempt.score < 1

    # The board links the trial for annotators and researchers alike.
    for name, password in (("annotator", "tomlab-annotator"), ("researcher", "tomlab-researcher")):
        assert client.login(username=name, password=password)
        board = client.get("/annotation/chartom/").content.decode()
        assert 'href="/annotation/chartom/qualification/"' in board
        trial = client.get("/annotation/chartom/qualification/").content.decode()
        assert qset.name in trial
        client.logout()


# --- the studies -----------------------------------------------------------------------


def test_the_two_multiple_choice_studies_are_live_with_invites_and_answers(client):
    out = run_demo()

    chartom = Study.objects.get(name=demo_studies.CHARTOM_STUDY)
    dyntom = Study.objects.get(name=demo_studies.DYNTOM_STUDY)
    for study in (chartom, dyntom):
        assert study.status == Study.Status.LIVE
        assert study.consent == demo_studies.CONSENT
        invites = demo_studies.invite_participants(study)
        assert len(invites) == 3
        assert all(f"  invite link: /s/{p.token}/" in out for p in invites)
        loaded = Participant.objects.filter(study=study, label__endswith="(answers loaded)")
        assert loaded.count() == 2
        assert Assignment.objects.filter(
            participant__in=loaded, status=Assignment.Status.SUBMITTED
        ).exists()
    assert chartom.design_applied_at is not None
    assert chartom.study_items.count() == 9
    assert all(i.qa_item.context_2000 for i in chartom.study_items.select_related("qa_item"))
    assert f"read/not-read design: /studies/{chartom.pk}/design/" in out
    # Two rounds per question: the short window's pick, then keep or change.
    assert ChoiceAnswer.objects.filter(qa_item__isnull=False).count() == 16

    # An invited participant who has read one of the books gets questions at once.
    participant = demo_studies.invite_participants(chartom)[0]
    client.post(f"/s/{participant.token}/consent/")
    book = chartom.study_works.order_by("position").first()
    client.post(f"/s/{participant.token}/books/", {"read": [book.work_id]})
    page = client.get(f"/s/{participant.token}/").content.decode()
    assert "Submit answer" in page
    assert Assignment.objects.filter(participant=participant).exists()


def test_a_balanced_by_category_study_shows_its_strata_on_the_study_page(client):
    """Issue 50 in the demo: a Mini ToM study whose answers are allocated "balanced by
    category" over the four abilities, ten participants' answers in (phase one's 24,
    then 6 where the rule sent them), and its study page's per-stratum table with each
    ability's interval and the answers left to reach ±5 points."""
    from django.urls import reverse

    from studies.choice.allocation import stratum_rows, study_allocation

    out = run_demo()
    study = Study.objects.get(name=demo_studies.BALANCED_STUDY)
    assert study.status == Study.Status.LIVE
    spec = study_allocation(study)
    assert (spec.design, spec.stratum_field, spec.min_per_item) == ("balanced", "ability", 2)
    answers = ChoiceAnswer.objects.filter(assignment__participant__study=study)
    assert answers.count() == 30
    assert len(demo_studies.invite_participants(study)) == 3
    assert f"researcher's page: /studies/{study.pk}/" in out
    rows = stratum_rows(study)
    assert [row["stratum"] for row in rows] == [
        "Discrepant desires",
        "False belief",
        "Hidden emotions",
        "Knowledge and perception",
    ]
    assert sum(row["answers"] for row in rows) == 30
    assert all(row["answers"] >= 6 for row in rows)  # phase one: 2 per item, 3 items
    assert all(row["half_width_points"] > 0 for row in rows)

    client.force_login(user("researcher"))
    page = client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert "Design: balanced by ability, phase one 2 answers per item" in page
    table = page.split('data-testid="strata-table"')[1].split("</table>")[0]
    assert "Answers to ±5" in table
    for row in rows:
        assert f"<td>{row['stratum']}</td>" in table
        assert f'<td class="num">{row["half_width_points"]}</td>' in table


def test_scene_study_is_one_to_one_with_a_consent_text(client):
    run_demo()

    study = Study.objects.get(name=demo_studies.SCENE_STUDY)
    assert study.one_to_one
    assert study.consent == demo_studies.CONSENT
    assert Guess.objects.filter(assignment__participant__study=study).count() == 24
    participant = demo_studies.invite_participants(study)[0]
    page = client.get(f"/s/{participant.token}/").content.decode()
    assert "Nothing you answer is used for research" in page


# --- model runs and reports ------------------------------------------------------------


def _labels(report, key: str) -> list[str]:
    return [str(row[0]) for row in report.table(key).rows]


def test_one_finished_run_per_benchmark_beside_the_humans_in_every_report(client):
    run_demo()

    for benchmark in BENCHMARKS:
        runs = Run.objects.filter(benchmark=benchmark, name__startswith="Demo: recorded answers")
        assert runs.exists(), benchmark
        assert {r.status for r in runs} == {Run.Status.SUCCEEDED}
        assert Prediction.objects.filter(run__in=runs).exists()
    assert Run.objects.filter(benchmark="chartom-qa", name__startswith="Demo:").count() == 3

    amc = _labels(build_report("tom-in-amc"), "accuracy")
    assert "Humans: Demo: who is speaking?" in amc
    assert any(re.match(r"#\d+ Demo: recorded answers$", label) for label in amc)
    chartom = _labels(build_report("chartom-qa"), "human-table3")
    assert {"Humans who had read the book", "Humans who had not"} <= set(chartom)
    assert any("Demo: recorded answers (multichoice, c=2k)" in label for label in chartom)
    dyntom = _labels(build_report("dyntom"), "human-vs-models")
    assert dyntom[0] == "Human mean (2 participants)"
    assert any(label.endswith("Demo: recorded answers") for label in dyntom)

    assert client.login(username="researcher", password="tomlab-researcher")
    for benchmark in BENCHMARKS:
        page = client.get(f"/reports/{benchmark}/")
        assert page.status_code == 200
        assert "Demo: recorded answers" in page.content.decode()


# --- idempotent and atomic ---------------------------------------------------------------

COUNTED = (
    Study,
    Participant,
    Assignment,
    ChoiceAnswer,
    Guess,
    Run,
    Prediction,
    RunCall,
    CachedResponse,
    NoteBatch,
    Construction,
    FieldChange,
    AnnotationTask,
    TaskAssignment,
    QualificationSet,
    QualificationAttempt,
    JudgementSample,
)


def test_second_run_adds_no_part_and_says_so():
    first = run_demo()
    assert "demo set-up: new this time: model runs" in first
    counts = {model.__name__: model.objects.count() for model in COUNTED}

    out = run_demo()

    assert {model.__name__: model.objects.count() for model in COUNTED} == counts
    assert "demo set-up: nothing new, every demo part was already there" in out


def test_a_refused_construction_loads_nothing(tmp_path, monkeypatch):
    demo = tmp_path / "demo"
    shutil.copytree(DEMO, demo)
    fixture = json.loads((demo / "chartom_construction.json").read_text(encoding="utf-8"))
    del fixture["notes"][2]["constructions"]["desire"]["verify"]
    (demo / "chartom_construction.json").write_text(json.dumps(fixture), encoding="utf-8")
    monkeypatch.setattr(load_demo, "DEMO_DIR", demo)

    with pytest.raises(CommandError) as excinfo:
        run_demo()

    message = str(excinfo.value)
    assert "nothing was loaded" in message
    assert "Agnes Quill" in message and "no recorded verification" in message
    assert all(model.objects.count() == 0 for model in COUNTED)
    assert not get_user_model().objects.exists()
