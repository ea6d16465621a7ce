"""The labeling trial an annotator passes before extracting key notes (paper section 4.2).

A researcher builds a :class:`QualificationSet` of gold extractions; an annotator
labels each item, and the mean span F1 against the gold decides whether they
qualify at the set's threshold.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from ..chartom_models import QualificationAttempt, QualificationSet


def annotator_qualified(user: AbstractBaseUser) -> bool:
    """May ``user`` extract key notes? True when no set is active, else a passed attempt.

    An attempt passed on any active set counts: a new set added later does not take
    the right away from people who already qualified.
    """
    if not QualificationSet.objects.filter(is_active=True).exists():
        return True
    if not user.is_authenticated:
        return False
    return QualificationAttempt.objects.filter(
        annotator=user, qset__is_active=True, passed=True
    ).exists()
