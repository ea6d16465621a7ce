"""Multiple-choice studies through their services: CharToM-QA (two rounds) and DynToM."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.models import Benchmark, QAItem, Work
from studies.choice import services as cs
from studies.errors import StudyError
from studies.models import Assignment, ChoiceAnswer, Study
from studies.participation.services import (
    participant_consent,
    participant_withdraw,
    participants_invite,
)
from studies.services import study_launch
from tests.factories import (
    DynToMQuestionFactory,
    DynToMScenarioFactory,
    DynToMStageFactory,
    QAItemFactory,
    WorkFactory,
)

pytestmark = pytest.mark.django_db


def _books(n_books=2, per_book=3):
    works = []
    for b in range(n_books):
        work = WorkFactory(
            benchmark=Benchmark.CHARTOM_QA, kind=Work.Kind.BOOK, split="", key=f"book{b}"
        )
        for _ in range(per_book):
            QAItemFactory(work=work, character__work=work, context_2000="A long window. " * 20)
        works.append(work)
    return works


def chartom_study(n_books=2, per_book=3, **kw):
    works = _books(n_books, per_book)
    created = cs.choice_study_create(
        name="CharToM human study", benchmark="chartom-qa", works=works, seed=1, **kw
    )
    study_launch(study=created.study)
    return created.study, works


def _join(study, read: set[int], label="p"):
    (p,) = participants_invite(study=study, labels=[label])
    participant_consent(participant=p)
    cs.books_declare(participant=p, read_work_ids=read)
    return p


def _open(p):
    return Assignment.objects.filter(participant=p, status="assigned").order_by("position")


def test_create_samples_round_robin_and_skips_items_it_cannot_ask():
    works = _books(2, 4)
    QAItemFactory(work=works[0], character__work=works[0], context_2000=None)
    QAItemFactory(
        work=works[1], character__work=works[1], context_2000="x", misleading_choices=["a"]
    )
    created = cs.choice_study_create(name="S", benchmark="chartom-qa", works=works, questions=6)
    items = created.study.study_items.select_related("qa_item")
    assert created.items == 6
    assert Counter(i.qa_item.work_id for i in items) == {works[0].pk: 3, works[1].pk: 3}
    assert created.skipped == {
        "without both plot windows (c = 0 and c = 2k)": 1,
        "without three misleading choices": 1,
    }
    study = created.study
    assert (study.overlap, study.min_seen, study.min_unseen) == (2, 1, 1)
    with pytest.raises(StudyError, match="exists already"):
        cs.choice_study_create(name="S", benchmark="chartom-qa", works=works)


def test_two_rounds_store_both_picks_and_times_and_score_only_at_the_end():
    study, works = chartom_study()
    a = _join(study, {works[0].pk}, "reader of book0")
    b = _join(study, {works[1].pk}, "reader of book1")
    assert not _open(a).exists()  # nothing until the researcher applies the design
    view = cs.design_apply(study=study)
    assert view.design.uncovered == []
    assert [(r["read"], r["not_read"]) for r in view.rows()] == [(3, 3), (3, 3)]
    assignment = _open(a).first()
    item = QAItem.objects.get(pk=assignment.study_item.qa_item_id)
    order = cs.option_order(assignment.option_seed, 4)
    wrong_shown = next(i for i, o in enumerate(order) if o != 0)
    right_shown = order.index(0)

    with pytest.raises(StudyError, match="first answer"):
        cs.choice_record(participant=a, assignment_id=assignment.pk, action="keep")
    with pytest.raises(StudyError, match="one of the 4 options"):
        cs.choice_record(participant=a, assignment_id=assignment.pk, action="submit", shown=4)
    with pytest.raises(StudyError, match="no such question"):
        cs.choice_record(participant=b, assignment_id=assignment.pk, action="submit", shown=0)
    assert not ChoiceAnswer.objects.exists()

    first = cs.choice_record(
        participant=a, assignment_id=assignment.pk, action="submit", shown=wrong_shown
    )
    assert (first.round, first.option, first.correct) == (1, order[wrong_shown], None)
    with pytest.raises(cs.ChoiceReplay):
        cs.choice_record(participant=a, assignment_id=assignment.pk, action="submit", shown=0)
    with pytest.raises(StudyError, match="that is your first answer"):
        cs.choice_record(
            participant=a, assignment_id=assignment.pk, action="change", shown=wrong_shown
        )
    revision = cs.choice_record(
        participant=a, assignment_id=assignment.pk, action="change", shown=right_shown
    )
    assert (revision.round, revision.option, revision.kept, revision.correct) == (2, 0, False, True)
    assert revision.shown_at == first.answered_at and revision.ms >= 0
    first.refresh_from_db()
    assert first.correct is False
    assignment.refresh_from_db()
    assert assignment.status == "submitted" and assignment.version["option_seed"]
    assert item.answer == cs.chartom_options(item)[0]
    with pytest.raises(cs.ChoiceReplay):
        cs.choice_record(participant=a, assignment_id=assignment.pk, action="keep")
    assert ChoiceAnswer.objects.count() == 2


def test_late_joiner_and_withdrawal_rebalance_without_touching_answers():
    study, works = chartom_study(n_books=2, per_book=4)
    ps = [_join(study, {works[i % 2].pk}, f"p{i}") for i in range(4)]
    cs.design_apply(study=study)
    started = _open(ps[0]).first()
    cs.choice_record(participant=ps[0], assignment_id=started.pk, action="submit", shown=1)
    late = _join(study, {works[1].pk}, "late")
    assert _open(late).exists()  # a late joiner gets questions at once
    participant_withdraw(participant=ps[0])
    live = Assignment.objects.filter(participant__withdrawn_at__isnull=True)
    per_item = Counter((a.study_item_id, a.seen) for a in live)
    assert set(per_item.values()) == {1} and len(per_item) == 2 * 8
    # The withdrawn participant's answered question keeps its row and its pick.
    assert Assignment.objects.filter(pk=started.pk).exists()
    assert ChoiceAnswer.objects.filter(assignment=started).count() == 1
    unstarted = Assignment.objects.filter(participant=ps[0], choices__isnull=True)
    assert not unstarted.exists()


def test_dyntom_stage_quota_questions_and_final_scoring():
    stages = [DynToMStageFactory(work__key=f"trial{i}") for i in range(3)]
    for stage in stages:
        DynToMScenarioFactory(stage=stage, number=1)
        DynToMQuestionFactory(stage=stage, gold_letter="b")
        DynToMQuestionFactory(
            stage=stage,
            question_type="transformation-1",
            gold_letter="a",
            options=["a. x", "b. y", "c. z"],
        )
    created = cs.choice_study_create(
        name="DynToM baseline",
        benchmark="dyntom",
        works=[s.work for s in stages],
        stage_fraction=0.67,
        question_types=["understanding"],
        seed=2,
    )
    study = created.study
    assert created.items == 2 and study.overlap == 1
    study_launch(study=study)
    (p, q) = participants_invite(study=study, labels=["one", "two"])
    for x in (p, q):
        participant_consent(participant=x)
    sw = cs.dyntom_stage_open(p)
    a = cs.dyntom_stage_take(participant=p, study_work_id=sw.pk)
    assert cs.dyntom_stage_open(q) != sw  # overlap 1: the stage is full
    assert cs.dyntom_stage_take(participant=q, study_work_id=sw.pk) is None
    (question,) = cs.dyntom_questions(a.study_item)
    assert question.question_type == "understanding"
    other_stage_q = next(
        qq for s in stages if s.pk != a.study_item.stage_id for qq in s.questions.all()
    )
    with pytest.raises(StudyError, match="not part of this stage"):
        cs.choice_record(
            participant=p,
            assignment_id=a.pk,
            action="submit",
            shown=0,
            question_id=other_stage_q.pk,
        )
    answer = cs.choice_record(
        participant=p, assignment_id=a.pk, action="submit", shown=1, question_id=question.pk
    )
    assert answer.correct is True
    a.refresh_from_db()
    assert a.status == "submitted"
    with pytest.raises(cs.ChoiceReplay):
        cs.choice_record(
            participant=p, assignment_id=a.pk, action="submit", shown=0, question_id=question.pk
        )


def test_paused_study_refuses_answers():
    study, works = chartom_study()
    p = _join(study, {works[0].pk})
    _join(study, {works[1].pk}, "q")
    cs.design_apply(study=study)
    Study.objects.filter(pk=study.pk).update(status="paused")
    p.refresh_from_db()
    with pytest.raises(StudyError, match="paused"):
        cs.choice_record(participant=p, assignment_id=_open(p).first().pk, action="submit", shown=0)


def test_paper_design_through_the_study_150_questions_5_books_8_people():
    from tests.studies.test_choice_design import DECLARED

    works = _books(5, 32)  # 160 askable questions; the study samples 150 (30 per book)
    created = cs.choice_study_create(
        name="Paper design", benchmark="chartom-qa", works=works, questions=150, seed=7
    )
    study = created.study
    assert Counter(i.qa_item.work_id for i in study.study_items.select_related("qa_item")) == {
        w.pk: 30 for w in works
    }
    study_launch(study=study)
    book = {
        name: works[i] for i, name in enumerate(sorted({b for bs in DECLARED.values() for b in bs}))
    }
    for label, read in DECLARED.items():
        (p,) = participants_invite(study=study, labels=[label])
        participant_consent(participant=p)
        cs.books_declare(participant=p, read_work_ids={book[b].pk for b in read})
    view = cs.design_apply(study=study)
    assert view.design.uncovered == [] and view.design.excluded == {}
    slots = Counter(
        (a.study_item_id, a.seen) for a in Assignment.objects.filter(study_item__study=study)
    )
    assert len(slots) == 300 and set(slots.values()) == {1}
    per_person = Counter(
        Assignment.objects.filter(study_item__study=study).values_list("participant__label", "seen")
    )
    loads = []
    for label in DECLARED:
        assert per_person[(label, True)] == per_person[(label, False)], label
        loads.append(per_person[(label, True)] * 2)
    assert sum(loads) == 300 and max(loads) - min(loads) <= 2
    # Every assignment's read flag agrees with what its participant declared.
    for a in Assignment.objects.filter(study_item__study=study).select_related(
        "participant", "study_item__qa_item"
    ):
        declared = {book[b].pk for b in DECLARED[a.participant.label]}
        assert a.seen == (a.study_item.qa_item.work_id in declared)
