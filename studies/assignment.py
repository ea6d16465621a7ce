"""Hand out slots on shared items without ever overfilling one, by locking the items.

The DynToM choice study (``studies.choice.services.dyntom_stage_take``), DynToM
validation (``annotation.validation.validation_stage_take``) and the CharToM-QA queue
give a person every item of a group that still has room for them. Doing that safely
under concurrency takes the same four steps, kept here so there is one copy (the scene
study, where many raters start the same work at once, claims slot rows instead:
``studies.slots``):

1. lock the candidate item rows in primary-key order (every caller locks in the same
   order, so two transactions cannot deadlock);
2. count the live assignments per item, optionally split by one assignment field
   (the rater's familiarity, the annotator), *after* the locks are held: on
   PostgreSQL's READ COMMITTED each statement sees what committed before it, so a
   transaction that waited for the locks counts the slots the first one took;
3. keep the items the caller's ``has_room`` accepts;
4. ``bulk_create`` the caller's assignment rows. Unique constraints on the assignment
   tables stay the last line of defence.

On SQLite write transactions are ``BEGIN IMMEDIATE`` (settings), which serialises them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TypeVar

from django.db import models, transaction
from django.db.models import Aggregate, Count, QuerySet

from studies.counting import counted_participants
from studies.models import Assignment, StudyItem

ItemT = TypeVar("ItemT", bound=models.Model)


def items_assign_with_room(
    *,
    items: QuerySet[ItemT],
    assignments: QuerySet,
    item_field: str,
    group_field: str | None = None,
    has_room: Callable[[ItemT, Counter[Hashable]], bool],
    build: Callable[[list[ItemT]], Iterable[models.Model]],
    extra: Mapping[str, Aggregate] | None = None,
) -> list[ItemT]:
    """Lock ``items``, count ``assignments`` per item, create slots on those with room.

    ``assignments`` is the queryset of live assignment rows (e.g. excluding withdrawn
    raters); ``item_field`` is its foreign key to the item. ``has_room(item, counts)``
    gets the item's counts keyed by ``group_field``'s value (``None`` when not split).
    ``build(given)`` returns the unsaved assignment rows for the items with room, which
    are created in one query. Returns the items given, in primary-key order. Must run
    inside a transaction (the locks last until it ends).

    ``extra`` adds aggregates over each item's live assignments to the same counting
    statement (an adaptive study's counted answers per item: no statement of their
    own); each locked item gets them as attributes of those names, 0 when it has no
    assignment, as ``QuerySet.annotate`` would. Places are then counted distinct, as
    an aggregate over a related table repeats an assignment's row.
    """
    if not transaction.get_connection(items.db).in_atomic_block:
        raise RuntimeError("items_assign_with_room must run inside transaction.atomic()")
    locked = list(items.select_for_update().order_by("pk"))
    counts: dict[int, Counter[Hashable]] = defaultdict(Counter)
    fields = [item_field] + ([group_field] if group_field else [])
    rows = (
        assignments.filter(**{f"{item_field}__in": locked})
        .order_by()
        .values(*fields)
        .annotate(n=Count("pk", distinct=bool(extra)), **(extra or {}))
    )
    totals: dict[int, Counter[str]] = defaultdict(Counter)
    for row in rows:
        counts[row[item_field]][row[group_field] if group_field else None] = row["n"]
        for name in extra or ():
            totals[row[item_field]][name] += row[name]
    for name in extra or ():
        for item in locked:
            setattr(item, name, totals[item.pk][name])
    given = [item for item in locked if has_room(item, counts[item.pk])]
    new = list(build(given))
    if new:
        assignments.model.objects.bulk_create(new)
    return given


def items_taken_meanwhile(*, participant_id: int, quota: int) -> int:
    """How many of a participant's test items already have ``quota`` other counted
    participants: what a participant taken back in (an exclusion lifted) finds when
    their places went to others meanwhile. Their answers count again, so those items
    have one more than the quota; the caller says so.

    The items are locked as a take locks them (step 1), so a take running now either
    counts this participant or is counted here.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("items_taken_meanwhile must run inside transaction.atomic()")
    item_ids = list(
        Assignment.objects.filter(
            participant_id=participant_id, study_item__role=StudyItem.Role.TEST
        )
        .order_by("study_item_id")
        .values_list("study_item_id", flat=True)
    )
    list(StudyItem.objects.filter(pk__in=item_ids).select_for_update().order_by("pk").values("pk"))
    return (
        Assignment.objects.filter(counted_participants(), study_item_id__in=item_ids)
        .exclude(participant_id=participant_id)
        .order_by()
        .values("study_item_id")
        .annotate(n=Count("pk"))
        .filter(n__gte=quota)
        .count()
    )
