"""Scene quotas as slot rows: the old counting rule exactly, and no rater waits for another.

``familiarity_declare`` used to lock every scene row of the work and count raters; it
now claims one free ``SceneSlot`` per scene (``studies.slots``). These tests hold the
claims to the old rule scene by scene through withdrawals, withdrawn data and idle
releases (which need the rebalancing of "either" slots), and show on PostgreSQL that a
rater declaring while another's claim is still open is not kept waiting.
"""

from __future__ import annotations

import random
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from studies.models import Assignment, Participant, SceneSlot, StudyItem
from studies.participation.recruitment import assignments_release_idle, participant_data_withdraw
from studies.participation.services import (
    participant_consent,
    participant_withdraw,
    participants_invite,
)
from studies.scene.services import familiarity_declare
from studies.services import study_create, study_go_live

ON_POSTGRES = connection.vendor == "postgresql"


def _study(friends, *, overlap: int, min_seen: int, min_unseen: int, idle: int = 0):
    return study_go_live(
        study=study_create(
            name="slots",
            benchmark="tvshowguess",
            works=[friends],
            overlap=overlap,
            min_seen=min_seen,
            min_unseen=min_unseen,
            idle_timeout_minutes=idle,
        )
    )


def _rater(study, label: str) -> Participant:
    (participant,) = participants_invite(study=study, labels=[label])
    return participant_consent(participant=participant)


def _rule_has_room(study, item_id: int, seen: bool) -> bool:
    """The counting rule the slots replace (``_has_room`` before issue 31), read from
    the live assignments: one more rater fits while the other group's minimum stays
    reachable."""
    live = Assignment.objects.filter(study_item_id=item_id, participant__withdrawn_at__isnull=True)
    counts = {True: live.filter(seen=True).count(), False: live.filter(seen=False).count()}
    total = counts[True] + counts[False]
    if total >= study.overlap:
        return False
    other_needs = max(0, (study.min_unseen if seen else study.min_seen) - counts[not seen])
    return study.overlap - total - 1 >= other_needs


@pytest.mark.django_db
def test_a_freed_own_kind_slot_moves_a_rater_out_of_an_either_slot(friends):
    study = _study(friends, overlap=3, min_seen=1, min_unseen=1)
    work = study.study_works.get()
    scenes = study.study_items.filter(role=StudyItem.Role.TEST).count()

    def declare(label: str, seen: bool) -> Participant:
        rater = _rater(study, label)
        familiarity_declare(participant=rater, study_work=work, seen=seen)
        return rater

    first, second = declare("seen 1", True), declare("seen 2", True)
    assert declare("seen 3", True).assignments.count() == 0  # one place is the unseen's
    kinds = SceneSlot.objects.filter(assignment__participant=second).values_list("kind", flat=True)
    assert set(kinds) == {"any"}
    participant_withdraw(participant=first)
    # The second seen rater now sits in the seen-only slot, leaving "either" free ...
    kinds = SceneSlot.objects.filter(assignment__participant=second).values_list("kind", flat=True)
    assert set(kinds) == {"seen"}
    # ... so two unseen raters fit, as the counting rule says (1 seen + 2 unseen = 3).
    assert declare("unseen 1", False).assignments.count() == scenes
    assert declare("unseen 2", False).assignments.count() == scenes
    assert declare("unseen 3", False).assignments.count() == 0


@pytest.mark.django_db
def test_slot_claims_follow_the_counting_rule_scene_by_scene_through_releases(friends):
    """A seeded run of declarations, submissions, withdrawals, withdrawn data and idle
    releases: before each declaration the old rule is asked about every scene, and the
    rater gets exactly the scenes it has room on."""
    study = _study(friends, overlap=3, min_seen=1, min_unseen=1, idle=30)
    work = study.study_works.get()
    items = list(
        study.study_items.filter(role=StudyItem.Role.TEST, held_back=False).values_list(
            "pk", flat=True
        )
    )
    rng = random.Random(31)
    active: list[Participant] = []
    declared = refused = 0
    for step in range(60):
        event = rng.choices(
            ["declare", "submit", "withdraw", "data", "idle"], weights=[6, 2, 2, 2, 1]
        )[0]
        if event == "declare" or not active:
            seen = rng.random() < 0.5
            expected = {i for i in items if _rule_has_room(study, i, seen)}
            rater = _rater(study, f"rater {step}")
            familiarity_declare(participant=rater, study_work=work, seen=seen)
            given = set(rater.assignments.values_list("study_item_id", flat=True))
            assert given == expected, f"step {step}: {len(given)} given, {len(expected)} expected"
            declared += bool(given)
            refused += not given
            if given:
                active.append(rater)
        elif event == "submit":
            # A part of the rater's scenes is final: an idle release keeps those.
            rater = rng.choice(active)
            open_ids = list(
                rater.assignments.filter(status=Assignment.Status.ASSIGNED).values_list(
                    "pk", flat=True
                )
            )
            done = rng.sample(open_ids, k=len(open_ids) // 2)
            Assignment.objects.filter(pk__in=done).update(
                status=Assignment.Status.SUBMITTED, submitted_at=timezone.now()
            )
        elif event == "withdraw":
            participant_withdraw(participant=active.pop(rng.randrange(len(active))))
        elif event == "data":
            participant_data_withdraw(participant=active.pop(rng.randrange(len(active))))
        else:
            assignments_release_idle(study=study, now=timezone.now() + timedelta(hours=1))
        # Every live assignment holds exactly one slot of a kind it may hold.
        live = Assignment.objects.filter(
            study_item__study=study, participant__withdrawn_at__isnull=True
        )
        seated = SceneSlot.objects.filter(assignment__in=live)
        assert seated.count() == live.count()
        assert not seated.filter(kind="seen", assignment__seen=False).exists()
        assert not seated.filter(kind="unseen", assignment__seen=True).exists()
    assert declared >= 5 and refused >= 3  # the run reached full scenes, and freed some


@pytest.mark.postgres
@pytest.mark.skipif(not ON_POSTGRES, reason="SKIP LOCKED is PostgreSQL's; SQLite serialises")
@pytest.mark.django_db(transaction=True)
def test_a_rater_declaring_while_another_claim_is_open_does_not_wait(friends):
    """Rater A's claim stays uncommitted; rater B declares the same work meanwhile and
    gets every scene at once. Under the old row locks B waited until A committed."""
    study = _study(friends, overlap=2, min_seen=0, min_unseen=0)
    work = study.study_works.get()
    scenes = study.study_items.filter(role=StudyItem.Role.TEST).count()
    a, b = _rater(study, "a"), _rater(study, "b")
    familiarity_declare(participant=_rater(study, "warm"), study_work=work, seen=True)
    participant_withdraw(participant=Participant.objects.get(study=study, label="warm"))
    claimed, b_done = threading.Event(), threading.Event()
    order: list[str] = []
    errors: list[BaseException] = []

    def rater_a() -> None:
        try:
            with transaction.atomic():
                familiarity_declare(participant=a, study_work=work, seen=True)
                claimed.set()
                b_done.wait(timeout=20)  # keeps its slot locks until B is done (or not)
                order.append("a commits")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    def rater_b() -> None:
        try:
            claimed.wait(timeout=20)
            started = time.monotonic()
            familiarity_declare(participant=b, study_work=work, seen=False)
            order.append(f"b done in {time.monotonic() - started:.1f} s")
            b_done.set()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=rater_a), threading.Thread(target=rater_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert order[0].startswith("b done"), order  # B finished while A still held its claim
    assert Assignment.objects.filter(participant=a).count() == scenes
    assert Assignment.objects.filter(participant=b).count() == scenes
