"""The study services: assignment under quotas, answers, submission and scoring."""

from __future__ import annotations

import pytest

from studies.errors import StudyError
from studies.models import Assignment, Guess
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
    participant_score,
    scene_submit,
)
from studies.services import study_pause

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]


def _start(study, label="r", seen=False):
    (participant,) = participants_invite(study=study, labels=[label])
    participant = participant_consent(participant=participant)
    step = participant_next_step(participant=participant)
    assert step.kind == "familiarity"
    session = familiarity_declare(participant=participant, study_work=step.study_work, seen=seen)
    return participant, session


def _answer(participant, assignment, *, right: bool):
    for instance in assignment.study_item.scene.instances.select_related("gold_character"):
        gold = instance.candidates.index(
            next(
                c
                for c in instance.candidates
                if c.casefold() == instance.gold_character.name.casefold()
            )
        )
        choice = gold if right else (gold + 1) % len(instance.candidates)
        guess_record(
            participant=participant,
            assignment_id=assignment.pk,
            instance_id=instance.pk,
            choice=choice,
            tags=["intention"],
        )
    flag_record(participant=participant, assignment_id=assignment.pk, history_needed=False)
    return scene_submit(participant=participant, assignment_id=assignment.pk)


def test_quota_keeps_a_slot_for_an_unseen_rater(live_study):
    scenes = live_study.study_items.count()
    first, _ = _start(live_study, "seen-1", seen=True)
    assert Assignment.objects.filter(participant=first).count() == scenes
    second, _ = _start(live_study, "seen-2", seen=True)
    # overlap 2 with min_unseen 1: the second seen rater gets nothing.
    assert Assignment.objects.filter(participant=second).count() == 0
    third, _ = _start(live_study, "unseen-1", seen=False)
    assert Assignment.objects.filter(participant=third).count() == scenes
    fourth, _ = participants_invite(study=live_study, labels=["late"])[0], None
    fourth = participant_consent(participant=fourth)
    assert participant_next_step(participant=fourth).kind == "done"


def test_answer_submit_score_and_idempotency(live_study):
    participant, _ = _start(live_study)
    # Friends has no earlier scenes: no history step (issue 16).
    step = participant_next_step(participant=participant)
    assert step.kind == "scene"
    first = step.assignment
    with pytest.raises(StudyError, match="choose a character"):
        scene_submit(participant=participant, assignment_id=first.pk)
    done = _answer(participant, first, right=True)
    assert done.status == "submitted" and done.version["item_set_hash"] == live_study.item_set_hash
    again = scene_submit(participant=participant, assignment_id=first.pk)
    assert again.submitted_at == done.submitted_at
    with pytest.raises(StudyError, match="already submitted"):
        guess_record(
            participant=participant,
            assignment_id=first.pk,
            instance_id=Guess.objects.filter(assignment=first).first().instance_id,
            choice=0,
        )
    second = participant_next_step(participant=participant).assignment
    assert second.pk != first.pk
    _answer(participant, second, right=False)
    score = participant_score(participant=participant)
    n1 = first.study_item.scene.instances.count()
    n2 = second.study_item.scene.instances.count()
    assert (score.speakers_correct, score.speakers) == (n1, n1 + n2)
    assert (score.scenes_correct, score.scenes) == (1, 2)


def test_foreign_assignment_bad_choice_and_paused_study_are_refused(live_study):
    alice, session = _start(live_study, "alice")
    bob, _ = _start(live_study, "bob")
    history_confirm(participant=alice, session=session)
    assignment = participant_next_step(participant=alice).assignment
    instance = assignment.study_item.scene.instances.first()
    with pytest.raises(StudyError, match="no such scene"):
        guess_record(
            participant=bob, assignment_id=assignment.pk, instance_id=instance.pk, choice=0
        )
    with pytest.raises(StudyError, match="choose one of the"):
        guess_record(
            participant=alice, assignment_id=assignment.pk, instance_id=instance.pk, choice=99
        )
    study_pause(study=live_study)
    alice.study.refresh_from_db()
    with pytest.raises(StudyError, match="paused"):
        guess_record(
            participant=alice, assignment_id=assignment.pk, instance_id=instance.pk, choice=0
        )
    assert not Guess.objects.exists()


def test_withdrawn_rater_frees_the_slots(live_study):
    scenes = live_study.study_items.count()
    a, _ = _start(live_study, "a", seen=False)
    _b, _ = _start(live_study, "b", seen=False)
    (c,) = participants_invite(study=live_study, labels=["c"])
    c = participant_consent(participant=c)
    assert participant_next_step(participant=c).kind == "done"  # every scene is full
    participant_withdraw(participant=a)
    assert participant_next_step(participant=c).kind == "familiarity"
    d, _ = _start(live_study, "d", seen=False)
    assert Assignment.objects.filter(participant=d).count() == scenes
    assert Assignment.objects.filter(participant=a).count() == scenes  # kept
