"""A scene's rater quota as slot rows, claimed side by side (issue 31, item 4).

Before, every rater starting a work locked all of its scene rows to count their raters,
so fifty raters starting together queued one behind another (next p95 0.5 s, "seen
it?" p95 1.8 s with human pacing). Now each scene has ``overlap`` ``SceneSlot`` rows
and a rater claims one free slot per scene with ``FOR UPDATE SKIP LOCKED``: two raters
lock two different rows and neither waits.

The slots keep the old counting rule exactly (``_has_room`` before this change: one
more seen rater fits while ``seen + max(unseen, min_unseen) < overlap``, and the same
the other way round):

- ``min_seen`` slots are for seen raters only, ``min_unseen`` for unseen raters only,
  the rest for either;
- a rater takes a slot of their own kind before one for either;
- when slots are freed (withdrawal, exclusion, withdrawn data, idle release), ``slots_rebalance``
  moves raters sitting in an "either" slot into a free slot of their own kind, so a
  freed own-kind slot never leaves an "either" slot blocked.

With those, a free slot a rater may take exists exactly when the old rule had room.

A rater who stops counting (withdrawn or excluded: ``studies.counting``) gives their
slots back, so the scene is offered to the next rater; a rater taken back in
(``slots_retake``) gets them back only where a slot is still free.
A unique slot per assignment (one-to-one) and per (scene, number) stays the last line
of defence. SQLite serialises write transactions (``BEGIN IMMEDIATE``), so there the
free slots are read plainly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Subquery

from studies.counting import counted_participants
from studies.models import Assignment, SceneSlot, Study, StudyItem, StudyWork

SEEN, UNSEEN, ANY = SceneSlot.Kind.SEEN, SceneSlot.Kind.UNSEEN, SceneSlot.Kind.ANY


def _layout(study: Study) -> list[str]:
    return (
        [SEEN] * study.min_seen
        + [UNSEEN] * study.min_unseen
        + [ANY] * max(0, study.overlap - study.min_seen - study.min_unseen)
    )


def slots_ensure(*, study_work: StudyWork) -> None:
    """Create the slots of the work's test scenes that have none, holding their raters.

    A study's quotas are fixed once it is live (only drafts are edited), so the slots
    are made when it goes live (``study_launch``). A claim calls this too, for scenes
    that have none yet: studies live before that, or an item made a test item after the
    launch. Scenes that already had raters before slots existed get them seated own kind
    first; withdrawn and excluded raters do not count. Runs in its own transaction: the
    scene rows are locked only while slots are made.
    """
    # NOT EXISTS, not a LEFT JOIN … IS NULL: PostgreSQL answered the join form by
    # scanning every slot of every study (30 ms at 180,000 slots) on each "seen it?".
    missing = StudyItem.objects.filter(study_work=study_work, role=StudyItem.Role.TEST).exclude(
        Exists(SceneSlot.objects.filter(study_item=OuterRef("pk")))
    )
    if not missing.exists():
        return
    study = study_work.study
    with transaction.atomic():
        item_ids = list(
            missing.select_for_update(of=("self",)).order_by("pk").values_list("pk", flat=True)
        )
        # Another rater made them while this one waited for the locks.
        item_ids = list(
            StudyItem.objects.filter(pk__in=item_ids)
            .exclude(Exists(SceneSlot.objects.filter(study_item=OuterRef("pk"))))
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        if not item_ids:
            return
        live: dict[int, list[tuple[int, bool]]] = defaultdict(list)
        for pk, item_id, seen in (
            Assignment.objects.filter(counted_participants(), study_item_id__in=item_ids)
            .order_by("pk")
            .values_list("pk", "study_item_id", "seen")
        ):
            live[item_id].append((pk, seen))
        rows = []
        for item_id in item_ids:
            slots = [
                SceneSlot(study_item_id=item_id, number=number, kind=kind)
                for number, kind in enumerate(_layout(study))
            ]
            for pk, seen in live[item_id]:
                own = SEEN if seen else UNSEEN
                for kind in (own, ANY):
                    free = next((s for s in slots if s.kind == kind and not s.assignment_id), None)
                    if free is not None:
                        free.assignment_id = pk
                        break
            rows += slots
        SceneSlot.objects.bulk_create(rows)


_CLAIM_SQL = """
SELECT s.id, s.study_item_id, i.position
FROM {item} i
CROSS JOIN LATERAL (
    SELECT id, study_item_id FROM {slot}
    WHERE study_item_id = i.id AND assignment_id IS NULL AND kind IN (%s, %s)
    ORDER BY kind = %s, number
    LIMIT 1
    FOR UPDATE SKIP LOCKED
) s
WHERE i.study_work_id = %s AND i.role = %s AND NOT i.held_back
ORDER BY i.id
"""


def slots_claim(*, study_work: StudyWork, seen: bool) -> list[tuple[int, int]]:
    """One free slot per test scene of the work that has room for this rater, locked.

    Returns ``(study item id, slot id)`` in the scenes' order. Must run inside the
    transaction that seats the rater's assignments in them (``slots_seat``): the locks
    last until it ends.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("slots_claim must run inside transaction.atomic()")
    own = SEEN if seen else UNSEEN
    if connection.vendor == "postgresql":
        sql = _CLAIM_SQL.format(
            item=connection.ops.quote_name(StudyItem._meta.db_table),
            slot=connection.ops.quote_name(SceneSlot._meta.db_table),
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [own, ANY, ANY, study_work.pk, StudyItem.Role.TEST])
            rows = cursor.fetchall()
    else:
        best: dict[int, tuple[int, int, int, str]] = {}
        for pk, item_id, position, kind in (
            SceneSlot.objects.filter(
                study_item__study_work=study_work,
                study_item__role=StudyItem.Role.TEST,
                study_item__held_back=False,
                assignment__isnull=True,
                kind__in=[own, ANY],
            )
            .order_by("study_item_id", "number")
            .values_list("pk", "study_item_id", "study_item__position", "kind")
        ):
            if item_id not in best or (best[item_id][3] == ANY and kind == own):
                best[item_id] = (pk, item_id, position, kind)
        rows = [row[:3] for row in best.values()]
    return [(item_id, pk) for pk, item_id, _ in sorted(rows, key=lambda r: (r[2], r[1]))]


def slots_seat(*, participant_id: int, slot_ids: list[int]) -> None:
    """Put the rater's new assignments in the slots claimed for their scenes."""
    if slot_ids:
        SceneSlot.objects.filter(pk__in=slot_ids).update(
            assignment=Subquery(
                Assignment.objects.filter(
                    participant_id=participant_id, study_item_id=OuterRef("study_item_id")
                ).values("pk")[:1]
            )
        )


def slots_free(*, participant_id: int) -> list[int]:
    """Free the slots of a rater who no longer counts (withdrawn, excluded); their scene
    ids, for ``slots_rebalance``."""
    held = SceneSlot.objects.filter(assignment__participant_id=participant_id)
    item_ids = sorted(set(held.values_list("study_item_id", flat=True)))
    if not item_ids:
        return []
    with transaction.atomic():
        # Every slot of those scenes locked first, in ``slots_rebalance``'s order: two
        # raters freed at once (an exclusion beside a withdrawal) each held their own
        # slots and then waited for the other's in the rebalancing, a deadlock
        # (issue 51's 20-tab test). Claims skip locked slots, so they never wait here.
        list(
            SceneSlot.objects.filter(study_item_id__in=item_ids)
            .select_for_update(of=("self",))
            .order_by("study_item_id", "number")
            .values_list("pk", flat=True)
        )
        held.update(assignment=None)
    return item_ids


def slots_retake(*, participant_id: int) -> int:
    """Seat a rater who counts again (an exclusion lifted) in the free slots of their
    scenes, own kind first; returns how many of their scenes had none left.

    Those scenes were given to others meanwhile: the rater's answers count again, so
    such a scene has more counted raters than the quota (the study page shows it).
    Slots another rater is claiming right now are skipped (they are being taken).
    """
    unseated = list(
        Assignment.objects.filter(participant_id=participant_id, slot__isnull=True)
        .filter(Exists(SceneSlot.objects.filter(study_item_id=OuterRef("study_item_id"))))
        .order_by("study_item_id")
        .values_list("pk", "study_item_id", "seen")
    )
    if not unseated:
        return 0
    with transaction.atomic():
        free: dict[int, list[SceneSlot]] = defaultdict(list)
        for slot in (
            SceneSlot.objects.filter(
                study_item_id__in=[item_id for _, item_id, _ in unseated], assignment__isnull=True
            )
            .select_for_update(skip_locked=True, of=("self",))
            .order_by("study_item_id", "number")
        ):
            free[slot.study_item_id].append(slot)
        seated, short = [], 0
        for pk, item_id, seen in unseated:
            own = SEEN if seen else UNSEEN
            slot = next((s for kind in (own, ANY) for s in free[item_id] if s.kind == kind), None)
            if slot is None:
                short += 1
                continue
            free[item_id].remove(slot)
            slot.assignment_id = pk
            seated.append(slot)
        SceneSlot.objects.bulk_update(seated, ["assignment"])
    return short


def slots_rebalance(item_ids: Iterable[int]) -> None:
    """Move raters from "either" slots into free slots of their own kind.

    Called after slots were freed, so that a freed seen-only slot does not leave a seen
    rater holding an "either" slot an unseen rater could have had. The scenes' slots
    are locked (waiting, not skipping) while they are moved.
    """
    ids = sorted(set(item_ids))
    if not ids:
        return
    with transaction.atomic():
        slots = list(
            SceneSlot.objects.filter(study_item_id__in=ids)
            .select_for_update(of=("self",))
            .order_by("study_item_id", "number")
            .only("pk", "study_item_id", "kind", "assignment_id")
        )
        # Read after the locks, in a statement of its own: a slot a concurrent claim
        # seated while this waited comes back with its new assignment id, but a join in
        # the locking statement would not see that assignment (its snapshot is older)
        # and gave None (issue 51's 20-tab test).
        seen_of = dict(
            Assignment.objects.filter(
                pk__in=[s.assignment_id for s in slots if s.assignment_id is not None]
            ).values_list("pk", "seen")
        )
        by_item: dict[int, list[SceneSlot]] = defaultdict(list)
        for slot in slots:
            by_item[slot.study_item_id].append(slot)
        emptied: list[SceneSlot] = []
        filled: list[SceneSlot] = []
        for item_slots in by_item.values():
            for own, seen in ((SEEN, True), (UNSEEN, False)):
                free = [s for s in item_slots if s.kind == own and s.assignment_id is None]
                movers = [
                    s
                    for s in item_slots
                    if s.kind == ANY
                    and s.assignment_id is not None
                    and seen_of[s.assignment_id] is seen
                ]
                for target, source in zip(free, movers, strict=False):
                    target.assignment_id = source.assignment_id
                    source.assignment_id = None
                    filled.append(target)
                    emptied.append(source)
        # Two statements: one assignment may not sit in two slots even for a moment.
        if emptied:
            SceneSlot.objects.bulk_update(emptied, ["assignment"])
            SceneSlot.objects.bulk_update(filled, ["assignment"])
