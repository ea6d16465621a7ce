"""Human multiple-choice studies in the reports, checked against hand-computed values."""

from __future__ import annotations

import pytest

from modeling.models import Prediction, Run
from reports.selectors import human_response_size
from reports.tables import build_report
from studies.choice import services as cs
from studies.models import Assignment
from studies.participation.services import participant_consent, participants_invite
from studies.services import study_launch
from tests.factories import DynToMQuestionFactory, DynToMStageFactory, QAItemFactory
from tests.studies.test_choice_services import _books

pytestmark = pytest.mark.django_db


def _row(table, *first):
    (record,) = [
        r for r in table.records() if tuple(r[c] for c in table.columns[: len(first)]) == first
    ]
    return record


def _pick(p, assignment, *, right: bool, action="submit"):
    order = cs.option_order(assignment.option_seed, 4)
    shown = order.index(0) if right else next(i for i, o in enumerate(order) if o != 0)
    cs.choice_record(participant=p, assignment_id=assignment.pk, action=action, shown=shown)


def test_chartom_table3_groups_windows_indirect_and_models_on_the_same_items():
    works = _books(2, 2)
    study = cs.choice_study_create(name="T3", benchmark="chartom-qa", works=works, seed=1).study
    study_launch(study=study)
    a, b = participants_invite(study=study, labels=["A", "B"])
    for p, read in ((a, works[0]), (b, works[1])):
        participant_consent(participant=p)
        cs.books_declare(participant=p, read_work_ids={read.pk})
    cs.design_apply(study=study)
    for x in Assignment.objects.filter(participant=a):
        # A: right at first on read books; wrong at first on the others, then changes.
        _pick(a, x, right=x.seen)
        if x.seen:
            cs.choice_record(participant=a, assignment_id=x.pk, action="keep")
        else:
            _pick(a, x, right=True, action="change")
    for x in Assignment.objects.filter(participant=b):
        _pick(b, x, right=False)  # B: always wrong, keeps it
        cs.choice_record(participant=b, assignment_id=x.pk, action="keep")
    indirect_item = works[0].qa_items.order_by("pk").first()
    indirect_item.directness = "indirect"
    indirect_item.save()
    for item in works[1].qa_items.all():
        item.directness = "direct"
        item.save()
    run = Run.objects.create(
        name="gpt", benchmark="chartom-qa", method="multichoice", model="m", imported=True
    )
    items = [i.qa_item for i in study.study_items.select_related("qa_item")]
    for item, correct in zip(items, [True, True, True, False], strict=True):
        Prediction.objects.create(run=run, qa_item=item, correct=correct, parse_status="ok")
    outside = QAItemFactory(work=works[0], character__work=works[0])
    Prediction.objects.create(run=run, qa_item=outside, correct=False, parse_status="ok")

    report = build_report("chartom-qa", seed=0)
    t3 = report.table("human-table3")
    # Read: A's 2 right + B's 2 wrong at c=0 -> 2/4; both keep -> 2/4 at c=2k.
    assert _row(t3, cs_read := "Humans who had read the book", "c=0")["All %"] == 50.0
    assert _row(t3, cs_read, "c=2k")["All %"] == 50.0
    # Not read: all 4 wrong at c=0; A changes its 2 to right -> 2/4 at c=2k.
    assert _row(t3, "Humans who had not", "c=0")["All %"] == 0.0
    assert _row(t3, "Humans who had not", "c=2k")["All %"] == 50.0
    assert _row(t3, "Humans who had not", "c=2k")["All n"] == 4
    # The indirect question: read by A (right), not read by B (wrong).
    assert _row(t3, cs_read, "c=0")["Indirect %"] == 100.0
    assert _row(t3, "Humans who had not", "c=0")["Indirect %"] == 0.0
    # The model on the study's 4 questions only: 3/4; the outside item is left out.
    model = _row(t3, f"#{run.pk} gpt (m)", "c=0")
    assert (model["All n"], model["All %"]) == (4, 75.0)
    assert "(4 labelled direct/indirect, 1 indirect)" in t3.note
    assert report.facts["human_answers"] == 16
    assert report.table("human-by-dimension").rows


def test_dyntom_human_mean_sd_beside_models():
    stage = DynToMStageFactory()
    questions = [DynToMQuestionFactory(stage=stage, gold_letter="b") for _ in range(2)]
    study = cs.choice_study_create(
        name="D", benchmark="dyntom", works=[stage.work], stage_fraction=1, overlap=2
    ).study
    study_launch(study=study)
    people = participants_invite(study=study, labels=["P1", "P2"])
    answers = {"P1": [1, 1], "P2": [1, 0]}  # P1 2/2, P2 1/2
    for p in people:
        participant_consent(participant=p)
        x = cs.dyntom_stage_take(participant=p, study_work_id=study.study_works.get().pk)
        for q, shown in zip(questions, answers[p.label], strict=True):
            cs.choice_record(
                participant=p, assignment_id=x.pk, action="submit", shown=shown, question_id=q.pk
            )
    run = Run.objects.create(
        name="llm", benchmark="dyntom", method="vanilla", model="m", imported=True
    )
    Prediction.objects.create(
        run=run, dyntom_question=questions[0], correct=True, parse_status="ok"
    )
    Prediction.objects.create(
        run=run, dyntom_question=questions[1], correct=None, parse_status="unparseable"
    )
    report = build_report("dyntom", seed=0)
    people_table = report.table("human-participants")
    assert [r["Overall %"] for r in people_table.records()] == [100.0, 50.0]
    compare = report.table("human-vs-models")
    assert _row(compare, "Human mean (2 participants)")["Overall %"] == 75.0
    # sd of (1.0, 0.5) with n - 1: sqrt(2 * 0.25**2) = 0.35355 -> 35.36%.
    assert _row(compare, "Human sd")["Overall %"] == 35.36
    assert _row(compare, "Human mean (2 participants)")["Belief U %"] == 75.0
    assert _row(compare, f"#{run.pk} llm")["Overall %"] == 50.0  # unparseable is wrong


def test_a_new_pick_changes_the_cached_reports_fingerprint():
    """The report cache is keyed by ``human_response_size``: a DynToM pick must move it,
    or a report page would show the human row without the newest answers until the
    cache expired."""
    stage = DynToMStageFactory()
    questions = [DynToMQuestionFactory(stage=stage, gold_letter="b") for _ in range(2)]
    study = cs.choice_study_create(
        name="D", benchmark="dyntom", works=[stage.work], stage_fraction=1, overlap=1
    ).study
    study_launch(study=study)
    (p,) = participants_invite(study=study, labels=["P1"])
    participant_consent(participant=p)
    before = human_response_size("dyntom")
    x = cs.dyntom_stage_take(participant=p, study_work_id=study.study_works.get().pk)
    cs.choice_record(
        participant=p, assignment_id=x.pk, action="submit", shown=1, question_id=questions[0].pk
    )
    after_one = human_response_size("dyntom")
    cs.choice_record(
        participant=p, assignment_id=x.pk, action="submit", shown=0, question_id=questions[1].pk
    )
    after_two = human_response_size("dyntom")
    assert (before["human_answers"], after_one["human_answers"], after_two["human_answers"]) == (
        0,
        1,
        2,
    )
    assert after_two["last_human_answer"] > after_one["last_human_answer"]
    assert human_response_size("chartom-qa")["human_answers"] == 0
