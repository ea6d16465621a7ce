"""What load_demo sets up beyond the works: every part of ToMLab has something to try.

The annotator finds a task in every CharToM-QA queue (the model replies recorded as an
ordinary run of the ``demo-recorded`` backend), the three studies are live with
answers in and invite links, every benchmark of the demo has a finished run that its
report shows beside the humans, and a second run creates nothing.
"""

from __future__ import annotations

import json
import re

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext

from accounts.roles import has_role
from annotation.chartom.board import annotator_cards
from annotation.chartom.models import (
    Construction,
    FieldChange,
    JudgementSample,
    NoteBatch,
    QualificationAttempt,
    QualificationSet,
    TaskAssignment,
    TaskKind,
)
from benchmarks.models import Benchmark
from common.admin_delete import str_select_related
from demo import studies as demo_studies
from demo.management.commands import load_demo
from modeling.models import CachedResponse, Prediction, Run, RunCall
from reports.tables import build_report
from studies.models import Assignment, ChoiceAnswer, Guess, Participant, Study
from tests.demo.loads import COUNTED, LOGINS, run_demo, snapshot

# One load_demo for the module (tests/module_rows.py): every test here reads what one
# load made, each in its own savepoint. Tests of a first load into an empty database
# (what it prints, what a refused fixture leaves) are in test_demo.py.
pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("demo")]

DEMO = load_demo.DEMO_DIR
CONSTRUCTION = json.loads((DEMO / "chartom_construction.json").read_text(encoding="utf-8"))
BENCHMARKS = ("tom-in-amc", "chartom-qa", "dyntom")


@pytest.fixture
def demo_out(module_rows) -> str:
    """What the module's one load_demo printed."""
    return module_rows.get("demo")


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


def test_the_two_multiple_choice_studies_are_live_with_invites_and_answers(client, demo_out):
    out = demo_out

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


def test_a_balanced_by_category_study_shows_its_strata_on_the_study_page(client, demo_out):
    """Issue 50 in the demo: a Mini ToM study whose answers are allocated "balanced by
    category" over the four abilities, ten participants' answers in (phase one's 24,
    then 6 where the rule sent them), and its study page's per-stratum table with each
    ability's interval and the answers left to reach ±5 points."""
    from django.urls import reverse

    from studies.choice.allocation import stratum_rows, study_allocation

    out = demo_out
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


def test_second_run_adds_no_part_and_says_so(demo_out):
    first = demo_out
    assert "demo set-up: new this time: model runs" in first
    counts = {model.__name__: model.objects.count() for model in COUNTED}

    out = run_demo()

    assert {model.__name__: model.objects.count() for model in COUNTED} == counts
    assert "demo set-up: nothing new, every demo part was already there" in out


# --- moved from test_demo.py: they read one load ----------------------------------------


def test_second_run_creates_and_changes_nothing():
    # The module's load is the first run.
    from annotation.chartom.models import TaskAssignment
    from annotation.models import ValidationAssignment, ValidationScore

    before = snapshot()
    # The seeded annotators' answers (demo.disputes) are not given twice.
    answers = [m.objects.count() for m in (ValidationAssignment, ValidationScore, TaskAssignment)]

    out = run_demo()

    assert snapshot() == before
    assert [
        m.objects.count() for m in (ValidationAssignment, ValidationScore, TaskAssignment)
    ] == answers
    assert "demo data: 0 created, 86 unchanged, 0 updated" in out
    assert "created" not in out.replace("0 created", "")


def test_demo_annotator_finds_a_validation_batch_and_the_pools_are_loaded(client, demo_out):
    from annotation.chartom.check_review import check_disputes
    from annotation.dyntom.validation.review import batch_disputes
    from annotation.models import Adjudication, Location, ValidationBatch

    out = demo_out

    batch = ValidationBatch.objects.get(name=load_demo.DEMO_VALIDATION_BATCH)
    assert list(batch.stages.values_list("stage__work__key", flat=True)) == ["trial_demo1"]
    assert batch.k == 4
    assert "Demo DynToM validation: Demo: validate the DynToM stage" in out
    # The generator's pools come from ../shared/data beside the checkout (261 + 2).
    assert Location.objects.count() == 263
    assert client.login(username="annotator", password=LOGINS["annotator"])
    response = client.post(f"/annotation/validation/{batch.pk}/take/")
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "Hana Okafor" in page  # the whole stage is on the scoring screen

    # Disagreements to settle (issue 49): three seeded annotators scored a second,
    # small batch in full, so its objects are decided and some disputed.
    seeded = get_user_model().objects.filter(username__startswith="demo-annotator-")
    assert sorted(seeded.values_list("username", flat=True)) == [
        "demo-annotator-2",
        "demo-annotator-3",
        "demo-annotator-4",
    ]
    assert not any(u.has_usable_password() for u in seeded)
    assert all(has_role(u, "annotator") for u in seeded)
    review = ValidationBatch.objects.get(name="Demo: DynToM disagreements to settle")
    disputes = {d.obj.label: d for d in batch_disputes(review) if d.disputed}
    assert sorted(disputes) == [
        "mental-state trajectory",
        "profiles and relationship",
        "scenario 3",
    ]
    assert all(len(d.answers) == review.k == 3 for d in disputes.values())
    assert disputes["scenario 3"].spread == 3 and disputes["profiles and relationship"].split
    checks = sorted((d.kind, d.rule_outcome) for d in check_disputes() if d.disputed)
    assert checks == [("judgement", "0.65"), ("note_check", "split")]
    assert "Demo disagreements to settle (sign in as researcher):" in out
    assert "DynToM validation, Demo: DynToM disagreements to settle: 3 disputed" in out
    assert "CharToM-QA checks: 2 disputed: /annotation/chartom/checks/review/" in out

    # The researcher finds them in both queues and settles one of each.
    client.logout()
    assert client.login(username="researcher", password=LOGINS["researcher"])
    queue = client.get(f"/annotation/validation/review/{review.pk}/").content.decode()
    assert "scenario 3" in queue
    obj = disputes["scenario 3"].obj
    response = client.post(
        f"/annotation/validation/review/objects/{obj.pk}/",
        {"outcome": "keep", "reason": "The dialogue is plain, not unreal."},
    )
    assert response.status_code == 302
    obj.decision.refresh_from_db()
    assert (obj.decision.outcome, obj.decision.override_outcome) == ("discard", "keep")
    queue = client.get("/annotation/chartom/checks/review/").content.decode()
    note = next(d.task for d in check_disputes() if d.disputed and d.kind == "note_check")
    assert f"/annotation/chartom/checks/review/{note.pk}/" in queue
    response = client.post(
        f"/annotation/chartom/checks/review/{note.pk}/",
        {"value": "subjective", "reason": "A reading the book allows."},
    )
    assert response.status_code == 302
    assert Adjudication.objects.get(task=note).outcome == "subjective"


def test_demo_dyntom_study_is_live_and_its_invite_opens_the_first_story(client, demo_out):
    from studies.models import Participant, Study

    out = demo_out
    study = Study.objects.get(name="Demo: DynToM human baseline")
    assert (study.status, study.benchmark, study.study_items.count()) == ("live", "dyntom", 1)
    invited = Participant.objects.filter(study=study, label__startswith="demo invite")
    participant, *others = invited.order_by("pk")
    assert len(others) == 2 and f"/s/{participant.token}/" in out
    client.post(f"/s/{participant.token}/consent/")
    assert "Start this story" in client.get(f"/s/{participant.token}/").content.decode()
    run_demo()
    assert Study.objects.filter(name=study.name).count() == 1
    assert Participant.objects.filter(study=study).count() == 5


def test_demo_mapped_benchmark_has_a_study_answers_and_a_recorded_run(client, demo_out):
    """Mini ToM: three participants' answers loaded (30 of 36 right, as the fixture
    says), the recorded run (8 of 12 right, one reply unparseable), the run imported
    from an Inspect log and invite links that open the participant's items."""
    from modeling.models import Prediction
    from studies.models import ChoiceAnswer, Participant, Study

    out = demo_out
    study = Study.objects.get(name="Demo: Mini ToM, a mapped benchmark")
    assert (study.status, study.benchmark, study.study_items.count()) == ("live", "generic", 12)
    answers = ChoiceAnswer.objects.filter(assignment__participant__study=study)
    assert (answers.count(), answers.filter(correct=True).count()) == (36, 30)
    predictions = Prediction.objects.filter(
        run__benchmark=Benchmark.GENERIC, run__name="Demo: recorded answers"
    )
    assert predictions.count() == 12
    assert predictions.filter(correct=True).count() == 8
    assert predictions.filter(parse_status="unparseable").count() == 1
    # The Inspect log: Inspect's own accuracy was 18 of 24 (two epochs; epoch 1 has a
    # reply in no answer format and an empty one, both wrong, as Inspect scores them).
    inspect = Prediction.objects.filter(run__selection__origin="inspect")
    assert inspect.count() == 24 and inspect.filter(correct=True).count() == 18
    assert sorted(set(inspect.values_list("sample_index", flat=True))) == [0, 1]
    assert inspect.filter(parse_status="unparseable").count() == 2
    participant = Participant.objects.filter(study=study, label__startswith="demo invite").order_by(
        "pk"
    )[0]
    assert f"/s/{participant.token}/" in out
    client.post(f"/s/{participant.token}/consent/")
    assert client.get(f"/s/{participant.token}/").status_code == 200


def test_demo_answerers_are_finished_with_believable_times():
    """Issue 49's walk: the loaded participants read as finished in the ledger, and each
    answer took a reader's time (the words at about 220 wpm plus 12 to 40 s), not 0 s."""
    from studies.models import Assignment, Participant

    loaded = Participant.objects.filter(label__contains="answers loaded").exclude(
        study__benchmark="chartom-qa"  # they answer their first few and leave, on purpose
    )
    assert loaded.count() >= 7
    assert not loaded.filter(finished_at__isnull=True).exists()
    answered = Assignment.objects.filter(participant__in=loaded, submitted_at__isnull=False)
    seconds = [ms / 1000 for ms in answered.values_list("total_ms", flat=True)]
    assert seconds and min(seconds) >= 12 and max(seconds) < 60 * 20
    first = answered.order_by("participant", "position", "pk").first()
    assert first.first_shown_at >= first.participant.consented_at
    assert first.submitted_at > first.first_shown_at


def test_every_demo_row_is_named_without_a_query_once_its_str_relations_are_selected():
    """The admin's delete list selects each model's ``str_relations``
    (common.admin_delete); a relation a ``__str__`` reads but does not declare would
    cost a query per listed row again."""
    named: dict[str, int] = {}
    queried: dict[str, str] = {}
    ours = [c for c in apps.get_app_configs() if (settings.BASE_DIR / c.name).is_dir()]
    for model in (model for config in ours for model in config.get_models()):
        rows = model._base_manager.all()[:200]
        if paths := str_select_related(model):  # with no names it would select every FK
            rows = rows.select_related(*paths)
        rows = list(rows)
        with CaptureQueriesContext(connection) as queries:
            for row in rows:
                str(row)
        if queries:
            queried[model._meta.label] = queries[0]["sql"]
        if rows:
            named[model._meta.label] = len(rows)

    assert queried == {}
    # The demo reaches the models whose names follow relations.
    for label in (
        "benchmarks.SpeakerInstance",
        "benchmarks.DynToMQuestion",
        "studies.Assignment",
        "studies.Guess",
        "studies.ChoiceAnswer",
        "annotation.Construction",
        "accounts.Membership",
    ):
        assert named.get(label), label
