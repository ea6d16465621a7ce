"""Who counts: the one rule for quotas, the study pages' progress and the reports.

A participant who is withdrawn (by the researcher, at their own request, or returned
on the platform) or excluded (by the study's rule or a researcher) holds no place:
their answers stay stored, but they fill no quota, no progress count and no report.
Their places go back to the pool, as a recruiting platform frees the place of a
rejected or returned submission, so recruitment goes on until the counted quota is
met (``studies.slots`` for scene studies, ``studies.assignment`` for multiple-choice
ones). Reports (``reports.selectors``) count the answers of the same participants;
only they may ask for the excluded too.

What counts as an item a participant answers is ruled here too: every page that
tells a participant or a researcher "N scenes" (the consent and history pages, the
study list, the study page's works and estimate, "Scene k / n") counts the items
:func:`told_items` selects (test items and attention checks, not held back), the
practice items (:func:`practice_items`) told apart, never added in.
"""

from __future__ import annotations

from django.db.models import Q

from .models import StudyItem


def counted_participants(prefix: str = "", *, include_excluded: bool = False) -> Q:
    """Rows whose participant (reached through ``prefix``, e.g. ``"assignments__"``)
    counts: not withdrawn, and not excluded unless ``include_excluded``.

    Without ``include_excluded`` these are exactly the participants who hold places.
    """
    q = Q(**{f"{prefix}participant__withdrawn_at__isnull": True})
    if not include_excluded:
        q &= Q(**{f"{prefix}participant__excluded_at__isnull": True})
    return q


def counted_people(*, include_excluded: bool = False) -> Q:
    """:func:`counted_participants` on ``Participant`` rows themselves."""
    q = Q(withdrawn_at__isnull=True)
    if not include_excluded:
        q &= Q(excluded_at__isnull=True)
    return q


def practice_items(prefix: str = "") -> Q:
    """Practice items (reached through ``prefix``, e.g. ``"study_item__"``): done first,
    their answers shown, never in a count a participant or a researcher is told."""
    return Q(**{f"{prefix}role": StudyItem.Role.PRACTICE})


def told_items(prefix: str = "") -> Q:
    """The items told as "N scenes" (or questions): test items and attention checks
    that are not held back. The practice is told apart ("7 scenes, plus 1 practice
    scene") with :func:`practice_items`."""
    return Q(**{f"{prefix}held_back": False}) & ~practice_items(prefix)
