"""Many raters at once: assignment quotas and idempotent answers under real concurrency.

Every worker is a thread with its own database connection (Django's connections are
per thread), started together behind a barrier. On PostgreSQL this exercises the slot
claims (``SKIP LOCKED``) of ``familiarity_declare`` and the row locks of
``_assignment_for``; the ``postgres`` tests are skipped on SQLite. The lighter SQLite
versions run because its write transactions are ``BEGIN IMMEDIATE`` (settings), which
serialise them: the same invariants must hold.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections
from django.db.models import Count, Q

from studies.counting import counted_participants
from studies.errors import StudyError
from studies.models import Assignment, Familiarity, Guess, Participant, SceneSlot, WorkSession
from studies.participation.ledger import participant_exclusion_override
from studies.participation.services import (
    participant_consent,
    participant_withdraw,
    participants_invite,
)
from studies.scene.services import (
    familiarity_declare,
    flag_record,
    guess_record,
    history_confirm,
    participant_next_step,
    scene_submit,
)
from studies.services import study_create, study_go_live

pytestmark = pytest.mark.django_db(transaction=True)

ON_POSTGRES = connection.vendor == "postgresql"


def run_together(jobs: list[Callable[[], Any]]) -> tuple[list[Any], list[BaseException]]:
    """Run each job in its own thread, all released at once; results and errors back."""
    barrier = threading.Barrier(len(jobs))
    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = jobs[i]()
        except BaseException as exc:
            errors.append(exc)
        finally:
            # Each thread opened its own connection; leaving it open would block the
            # test database teardown on PostgreSQL.
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    return results, errors


def _study(friends, *, overlap: int, min_seen: int, min_unseen: int):
    study = study_create(
        name="load",
        benchmark="tvshowguess",
        works=[friends],
        overlap=overlap,
        min_seen=min_seen,
        min_unseen=min_unseen,
    )
    return study_go_live(study=study)


def _consented(study, count: int) -> list[Participant]:
    raters = participants_invite(study=study, labels=[f"rater {i}" for i in range(count)])
    return [participant_consent(participant=p) for p in raters]


def _declare(participant_id: int, study_work_id: int, seen: bool) -> int:
    # Load the rows in the thread, as a request would.
    participant = Participant.objects.select_related("study").get(pk=participant_id)
    study_work = participant.study.study_works.get(pk=study_work_id)
    session = familiarity_declare(participant=participant, study_work=study_work, seen=seen)
    return session.pk


def _check_quotas(study, raters: list[Participant], seen_of: dict[int, bool]) -> Counter:
    """The invariants every assignment must keep; returns assignments per rater."""
    scenes = study.study_items.count()
    rows = list(Assignment.objects.filter(study_item__study=study))
    pairs = Counter((a.participant_id, a.study_item_id) for a in rows)
    assert max(pairs.values()) == 1, "a rater got a scene twice"
    per_scene = study.study_items.annotate(
        n=Count("assignments"),
        seen=Count("assignments", filter=Q(assignments__seen=True)),
        unseen=Count("assignments", filter=Q(assignments__seen=False)),
    )
    for scene in per_scene:
        assert scene.n <= study.overlap, f"{scene} has {scene.n} raters"
        # Slots the other group needs are never taken, so both minimums stay reachable.
        assert scene.seen <= study.overlap - study.min_unseen
        assert scene.unseen <= study.overlap - study.min_seen
    for a in rows:
        assert a.seen == seen_of[a.participant_id], "counted in the wrong familiarity group"
    # A rater takes every scene with room for them. Raters claiming at the same moment
    # take different slot rows (SKIP LOCKED), so the last slots of a work may be split
    # between them; nobody gets more than the work.
    per_rater = Counter(a.participant_id for a in rows)
    assert max(per_rater.values()) <= scenes
    sessions = WorkSession.objects.filter(participant__in=raters)
    assert sessions.count() == len(raters)  # one per rater, including those who got nothing
    for familiarity in Familiarity.objects.filter(participant__in=raters):
        assert familiarity.seen == seen_of[familiarity.participant_id]
    return per_scene


def _start_all(friends, *, raters: int, overlap: int, min_seen: int, min_unseen: int, seen: int):
    study = _study(friends, overlap=overlap, min_seen=min_seen, min_unseen=min_unseen)
    people = _consented(study, raters)
    study_work = study.study_works.get()
    flags = [True] * seen + [False] * (raters - seen)
    random.Random(7).shuffle(flags)
    seen_of = {p.pk: flag for p, flag in zip(people, flags, strict=True)}
    _, errors = run_together(
        [lambda p=p: _declare(p.pk, study_work.pk, seen_of[p.pk]) for p in people]
    )
    assert not errors, errors
    return study, people, seen_of


@pytest.mark.parametrize(
    ("overlap", "min_seen", "min_unseen", "seen"),
    [(2, 0, 1, 20), (4, 1, 2, 6), (20, 5, 5, 15)],
    ids=["overlap2-min-unseen1", "overlap4-both-minimums", "overlap20"],
)
@pytest.mark.postgres
@pytest.mark.skipif(not ON_POSTGRES, reason="row locks are only meaningful on PostgreSQL")
def test_thirty_raters_start_at_once_on_postgres(friends, overlap, min_seen, min_unseen, seen):
    study, people, seen_of = _start_all(
        friends, raters=30, overlap=overlap, min_seen=min_seen, min_unseen=min_unseen, seen=seen
    )
    per_scene = _check_quotas(study, people, seen_of)
    # 30 raters with both groups well represented are enough: every scene is full and
    # holds at least the minimum of each group.
    for scene in per_scene:
        assert scene.n == overlap
        assert scene.seen >= min_seen and scene.unseen >= min_unseen
    assert Assignment.objects.filter(participant__in=people).count() == overlap * len(per_scene)
    # Whoever came too late is told there is nothing left.
    late = [p for p in people if not p.assignments.exists()]
    assert late and all(participant_next_step(participant=p).kind == "done" for p in late)


def _check_counted_exact(study, seen_of: dict[int, bool]) -> list[Any]:
    """The quotas on the raters who count (the excluded and the withdrawn keep their
    answers but hold no place), and every counted rater of a scene sits in one of its
    slots and nobody else does: the slots' count is the counted raters, exactly.
    Returns the scenes with ``n`` counted raters."""
    counted = Assignment.objects.filter(counted_participants(), study_item__study=study)
    pairs = Counter(counted.values_list("participant_id", "study_item_id"))
    assert max(pairs.values()) == 1, "a rater got a scene twice"
    for participant_id, seen in counted.values_list("participant_id", "seen"):
        assert seen == seen_of[participant_id], "counted in the wrong familiarity group"
    counts = counted_participants("assignments__")
    per_scene = list(
        study.study_items.annotate(
            n=Count("assignments", filter=counts),
            seen=Count("assignments", filter=counts & Q(assignments__seen=True)),
            unseen=Count("assignments", filter=counts & Q(assignments__seen=False)),
        )
    )
    for scene in per_scene:
        assert scene.n <= study.overlap, f"{scene} has {scene.n} counted raters"
        assert scene.seen <= study.overlap - study.min_unseen
        assert scene.unseen <= study.overlap - study.min_seen
    slots = SceneSlot.objects.filter(study_item__study=study, assignment__isnull=False)
    seated = list(slots.values_list("assignment_id", flat=True))
    assert sorted(seated) == sorted(counted.values_list("pk", flat=True)), (
        "an uncounted rater holds a slot, or a counted one holds none"
    )
    return per_scene


def _mixed_launch(friends, *, tabs: int):
    """``tabs`` requests at once on a live study: new raters declaring (one of them from
    three tabs), a researcher excluding a rater who holds scenes and a rater
    withdrawing. Returns the study and each rater's group."""
    study = _study(friends, overlap=6, min_seen=2, min_unseen=2)
    study_work = study.study_works.get()
    early = _consented(study, 4)
    seen_of = {p.pk: i % 2 == 0 for i, p in enumerate(early)}
    for p in early:
        _declare(p.pk, study_work.pk, seen_of[p.pk])
    leaving, excluded = early[0], early[1]
    arrivals = _consented(study, tabs - 4)  # the two more tabs are one arrival's
    flags = [True] * (len(arrivals) // 2) + [False] * (len(arrivals) - len(arrivals) // 2)
    random.Random(51).shuffle(flags)
    seen_of |= {p.pk: flag for p, flag in zip(arrivals, flags, strict=True)}
    jobs: list[Callable[[], Any]] = [
        lambda p=p: _declare(p.pk, study_work.pk, seen_of[p.pk]) for p in arrivals
    ]
    jobs += [lambda p=arrivals[0]: _declare(p.pk, study_work.pk, seen_of[p.pk])] * 2
    jobs.append(
        lambda: participant_exclusion_override(
            participant=Participant.objects.get(pk=excluded.pk),
            decision="exclude",
            reason="failed the checks",
        )
    )
    jobs.append(lambda: participant_withdraw(participant=Participant.objects.get(pk=leaving.pk)))
    assert len(jobs) == tabs
    random.Random(52).shuffle(jobs)  # which thread each lands on
    _, errors = run_together(jobs)
    assert not errors, errors
    return study, early + arrivals, seen_of


@pytest.mark.postgres
@pytest.mark.skipif(not ON_POSTGRES, reason="row locks are only meaningful on PostgreSQL")
def test_twenty_tabs_with_an_exclusion_and_a_withdrawal_keep_the_counts_exact(friends):
    """A launch's arrivals, a second and third tab of one of them, an exclusion and a
    withdrawal, all at once (issue 51): the counts stay exact, and the places the
    exclusion and the withdrawal reopened go to the next raters, no more, no fewer."""
    study, raters, seen_of = _mixed_launch(friends, tabs=20)
    leaving, excluded = raters[0], raters[1]
    assert Participant.objects.get(pk=leaving.pk).withdrawn_at is not None
    assert Participant.objects.get(pk=excluded.pk).excluded_at is not None
    assert not SceneSlot.objects.filter(assignment__participant__in=[leaving, excluded]).exists()
    _check_counted_exact(study, seen_of)
    # The rater declaring from three tabs has one session, and everyone one each.
    assert WorkSession.objects.filter(participant__in=raters).count() == len(raters)
    # Late raters of both groups until no scene has room left for either: every scene
    # then holds exactly its quota of counted raters, the reopened places included.
    study_work = study.study_works.get()
    late = _consented(study, 8)
    for i, p in enumerate(late):
        seen_of[p.pk] = i % 2 == 0
        _declare(p.pk, study_work.pk, seen_of[p.pk])
    per_scene = _check_counted_exact(study, seen_of)
    assert {scene.n for scene in per_scene} == {study.overlap}
    assert not SceneSlot.objects.filter(study_item__study=study, assignment__isnull=True).exists()


def test_raters_start_at_once_on_sqlite_too(friends):
    """The same invariants with fewer threads; SQLite serialises the declarations."""
    study, people, seen_of = _start_all(
        friends, raters=12, overlap=3, min_seen=1, min_unseen=1, seen=8
    )
    per_scene = _check_quotas(study, people, seen_of)
    for scene in per_scene:
        assert (scene.n, scene.seen >= 1, scene.unseen >= 1) == (3, True, True)


def test_one_rater_declaring_from_many_tabs_gets_one_session(friends):
    study = _study(friends, overlap=2, min_seen=0, min_unseen=0)
    (rater,) = _consented(study, 1)
    study_work = study.study_works.get()
    # Tabs disagree about "seen"; the first declaration must stand everywhere.
    answers = [i % 2 == 0 for i in range(8)]
    results, errors = run_together(
        [lambda s=s: _declare(rater.pk, study_work.pk, s) for s in answers]
    )
    assert not errors, errors
    session = WorkSession.objects.get(participant=rater)
    assert set(results) == {session.pk}
    assignments = Assignment.objects.filter(participant=rater)
    assert assignments.count() == study.study_items.count()
    assert set(assignments.values_list("seen", flat=True)) == {session.seen}
    assert Familiarity.objects.get(participant=rater).seen == session.seen


def _ready_scene(friends):
    """A rater on their first scene (history read), and the scene's gold choices."""
    study = _study(friends, overlap=2, min_seen=0, min_unseen=0)
    (rater,) = _consented(study, 1)
    step = participant_next_step(participant=rater)
    session = familiarity_declare(participant=rater, study_work=step.study_work, seen=False)
    history_confirm(participant=rater, session=session)
    assignment = participant_next_step(participant=rater).assignment
    instances = list(assignment.study_item.scene.instances.select_related("gold_character"))
    assert len(instances) >= 2  # Friends scenes have several masked speakers
    gold = {
        i.pk: [c.casefold() for c in i.candidates].index(i.gold_character.name.casefold())
        for i in instances
    }
    # Answer the first speaker wrongly so "correctness unchanged" can tell both apart.
    first = instances[0]
    choices = dict(gold)
    choices[first.pk] = (gold[first.pk] + 1) % len(first.candidates)
    return rater, assignment, instances, choices, gold


def _answer_and_submit(rater_id: int, assignment_id: int, choices: dict[int, int]):
    rater = Participant.objects.select_related("study").get(pk=rater_id)
    try:
        for instance_id, choice in choices.items():
            guess_record(
                participant=rater,
                assignment_id=assignment_id,
                instance_id=instance_id,
                choice=choice,
                tags=["intention", "personality"],
            )
        flag_record(participant=rater, assignment_id=assignment_id, history_needed=True)
    except StudyError as exc:
        # A replay that lands after another thread's submit is refused, never stored.
        assert "already submitted" in str(exc)
    done = scene_submit(participant=rater, assignment_id=assignment_id)
    return done.status, done.submitted_at


def _check_one_submission(assignment, instances, choices, gold, results) -> None:
    assert {status for status, _ in results} == {"submitted"}
    assert len({at for _, at in results}) == 1, "the scene was submitted more than once"
    guesses = Guess.objects.filter(assignment=assignment)
    assert guesses.count() == len(instances)  # one per masked speaker
    for guess in guesses:
        assert guess.answer == guess.instance.candidates[choices[guess.instance_id]]
        assert guess.correct is (choices[guess.instance_id] == gold[guess.instance_id])
        assert guess.tags == ["intention", "personality"]
    assignment.refresh_from_db()
    assert assignment.status == "submitted" and assignment.history_needed is True


@pytest.mark.postgres
@pytest.mark.skipif(not ON_POSTGRES, reason="row locks are only meaningful on PostgreSQL")
def test_ten_replays_of_one_scene_store_one_answer_on_postgres(friends):
    rater, assignment, instances, choices, gold = _ready_scene(friends)
    # The same guesses, recorded by ten requests at once (no Guess row exists yet).
    instance = instances[1]
    _, errors = run_together(
        [
            lambda: guess_record(
                participant=Participant.objects.select_related("study").get(pk=rater.pk),
                assignment_id=assignment.pk,
                instance_id=instance.pk,
                choice=choices[instance.pk],
            )
            for _ in range(10)
        ]
    )
    assert not errors, errors
    assert Guess.objects.filter(assignment=assignment, instance=instance).count() == 1
    # Then ten double submits / replays of the whole scene.
    results, errors = run_together(
        [lambda: _answer_and_submit(rater.pk, assignment.pk, choices) for _ in range(10)]
    )
    assert not errors, errors
    _check_one_submission(assignment, instances, choices, gold, results)
    before = list(Guess.objects.filter(assignment=assignment).values_list("answer", "correct"))
    # A late replay with different answers changes nothing.
    sizes = {i.pk: len(i.candidates) for i in instances}
    late = {pk: (c + 1) % sizes[pk] for pk, c in choices.items()}
    _, errors = run_together(
        [lambda: _answer_and_submit(rater.pk, assignment.pk, late) for _ in range(4)]
    )
    assert not errors, errors
    after = list(Guess.objects.filter(assignment=assignment).values_list("answer", "correct"))
    assert after == before


def test_replays_of_one_scene_store_one_answer_on_sqlite_too(friends):
    rater, assignment, instances, choices, gold = _ready_scene(friends)
    results, errors = run_together(
        [lambda: _answer_and_submit(rater.pk, assignment.pk, choices) for _ in range(6)]
    )
    assert not errors, errors
    _check_one_submission(assignment, instances, choices, gold, results)
