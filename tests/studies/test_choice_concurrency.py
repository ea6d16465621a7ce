"""Multiple-choice studies under real concurrency (threads with their own connections).

On PostgreSQL this exercises the study-row lock of the CharToM-QA design, the stage
rows locked by the DynToM quota and the assignment row locked for each pick; on SQLite
the write transactions are serialised (``BEGIN IMMEDIATE``), and the same invariants
must hold.
"""

from __future__ import annotations

from collections import Counter

import pytest

from studies.choice import services as cs
from studies.errors import StudyError
from studies.models import Assignment, ChoiceAnswer, Participant
from studies.participation.services import (
    participant_consent,
    participant_withdraw,
    participants_invite,
)
from studies.services import study_launch
from tests.factories import DynToMQuestionFactory, DynToMStageFactory
from tests.studies.test_choice_services import _books
from tests.studies.test_concurrency import ON_POSTGRES, run_together

pytestmark = pytest.mark.django_db(transaction=True)
N = 8 if ON_POSTGRES else 4


def _fresh(p: Participant) -> Participant:
    return Participant.objects.select_related("study").get(pk=p.pk)


def _chartom(n_people: int, per_book: int = 4):
    works = _books(3, per_book)
    study = cs.choice_study_create(name="race", benchmark="chartom-qa", works=works, seed=2).study
    study_launch(study=study)
    people = participants_invite(study=study, labels=[f"p{i}" for i in range(n_people)])
    for p in people:
        participant_consent(participant=p)
    return study, works, people


def _live_slots(study) -> Counter:
    live = Assignment.objects.filter(
        study_item__study=study, participant__withdrawn_at__isnull=True
    )
    return Counter((a.study_item_id, a.seen) for a in live)


def test_late_joiners_and_withdrawals_at_once_keep_one_reader_and_one_non_reader():
    study, works, people = _chartom(4 + N)
    first, late = people[:4], people[4:]
    for i, p in enumerate(first):
        cs.books_declare(participant=p, read_work_ids={works[i % 3].pk})
    cs.design_apply(study=study)
    started = Assignment.objects.filter(participant=first[0]).order_by("position").first()
    cs.choice_record(
        participant=_fresh(first[0]), assignment_id=started.pk, action="submit", shown=2
    )

    jobs = [
        (lambda p=p, i=i: cs.books_declare(participant=_fresh(p), read_work_ids={works[i % 3].pk}))
        for i, p in enumerate(late)
    ] + [lambda: participant_withdraw(participant=_fresh(first[1]))]
    _, errors = run_together(jobs)
    assert errors == []
    slots = _live_slots(study)
    assert set(slots.values()) == {1}, "a question got two readers or two non-readers"
    assert len(slots) == 2 * study.study_items.count()  # and every slot is filled
    pairs = Counter(
        (a.participant_id, a.study_item_id)
        for a in Assignment.objects.filter(study_item__study=study)
    )
    assert max(pairs.values()) == 1
    assert ChoiceAnswer.objects.get(assignment=started).round == 1  # the answer was kept
    # Everyone the design could use has as many read as not-read questions.
    live = Assignment.objects.filter(
        study_item__study=study, participant__withdrawn_at__isnull=True
    )
    per_person = Counter(live.values_list("participant_id", "seen"))
    for pid in {pid for pid, _ in per_person}:
        assert per_person[(pid, True)] == per_person[(pid, False)], per_person
    assert len({pid for pid, _ in per_person}) >= len(late)


def test_many_tabs_pick_and_revise_once():
    study, works, people = _chartom(2, per_book=1)
    for p, w in zip(people, works, strict=False):
        cs.books_declare(participant=p, read_work_ids={w.pk})
    cs.design_apply(study=study)
    me = people[0]
    a = Assignment.objects.filter(participant=me).first()

    def pick(action: str, shown: int | None):
        try:
            return cs.choice_record(
                participant=_fresh(me), assignment_id=a.pk, action=action, shown=shown
            )
        except cs.ChoiceReplay:
            return "replay"

    results, errors = run_together([lambda i=i: pick("submit", i % 4) for i in range(N)])
    assert errors == [] and results.count("replay") == N - 1
    results, errors = run_together([lambda: pick("keep", None) for _ in range(N)])
    assert errors == [] and results.count("replay") == N - 1
    assert Counter(ChoiceAnswer.objects.filter(assignment=a).values_list("round", flat=True)) == {
        1: 1,
        2: 1,
    }
    a.refresh_from_db()
    assert a.status == "submitted"


def test_dyntom_stage_quota_and_one_answer_per_question():
    stage = DynToMStageFactory()
    question = DynToMQuestionFactory(stage=stage, gold_letter="a")
    study = cs.choice_study_create(
        name="dyn race", benchmark="dyntom", works=[stage.work], stage_fraction=1, overlap=2
    ).study
    study_launch(study=study)
    people = participants_invite(study=study, labels=[f"d{i}" for i in range(N)])
    for p in people:
        participant_consent(participant=p)
    sw = study.study_works.get()
    results, errors = run_together(
        [
            lambda p=p: cs.dyntom_stage_take(participant=_fresh(p), study_work_id=sw.pk)
            for p in people
        ]
    )
    assert errors == []
    assert Assignment.objects.filter(study_item__study=study).count() == 2
    taken = [r for r in results if r is not None]
    assert len(taken) == 2
    owner = taken[0].participant

    def answer():
        try:
            return cs.choice_record(
                participant=_fresh(owner),
                assignment_id=taken[0].pk,
                action="submit",
                shown=0,
                question_id=question.pk,
            )
        except StudyError as exc:
            return type(exc).__name__

    results, errors = run_together([answer for _ in range(N)])
    assert errors == [] and results.count("ChoiceReplay") == N - 1
    assert ChoiceAnswer.objects.filter(question=question).count() == 1


def test_mapped_item_batches_keep_the_quota_and_one_answer_per_item():
    """Participants take their batches of a mapped benchmark's items at once: no item
    gets more than its participants per item, nobody gets an item twice, every place
    is taken when there are more takers than places, a participant taking from many
    tabs gets one batch, and replays of one pick store one answer."""
    from studies.choice.generic import GenericSpec
    from tests.generic_items import make_generic_benchmark

    work = make_generic_benchmark()
    study = cs.choice_study_create(
        name="mapped race",
        benchmark="generic",
        works=[work],
        generic=GenericSpec(language="en", items_per_participant=6),
        overlap=2,
        seed=5,
    ).study
    study_launch(study=study)
    people = participants_invite(study=study, labels=[f"g{i}" for i in range(N)])
    for p in people:
        participant_consent(participant=p)
    # One participant's batch asked for from several tabs at once as well.
    takers = [people[0]] * 3 + people[1:]
    results, errors = run_together(
        [lambda p=p: cs.generic_batch_take(participant=_fresh(p)) for p in takers]
    )
    assert errors == []
    live = Assignment.objects.filter(study_item__study=study)
    per_item = Counter(live.values_list("study_item_id", flat=True))
    assert max(per_item.values()) <= 2
    pairs = list(live.values_list("participant_id", "study_item_id"))
    assert len(pairs) == len(set(pairs))  # nobody holds an item twice
    # 12 items x 2 places; N participants ask for 6 each (PostgreSQL: 48 for 24 places).
    assert len(pairs) == min(24, 6 * N)
    per_person = Counter(pid for pid, _ in pairs)
    assert max(per_person.values()) == 6  # a batch is never more than asked for
    # The tabs of one participant see one batch (or, come too late, none), never two.
    first = {a.pk for a in results[0]}
    assert all({a.pk for a in r} == first for r in results[1:3])
    assert len(first) == per_person[people[0].pk]

    owner = Participant.objects.get(pk=next(iter(per_person)))
    assignment = live.filter(participant=owner).order_by("position").first()

    def answer():
        try:
            return cs.choice_record(
                participant=_fresh(owner),
                assignment_id=assignment.pk,
                action="submit",
                shown=0,
            )
        except StudyError as exc:
            return type(exc).__name__

    results, errors = run_together([answer for _ in range(N)])
    assert errors == [] and results.count("ChoiceReplay") == N - 1
    assert ChoiceAnswer.objects.filter(assignment=assignment).count() == 1
