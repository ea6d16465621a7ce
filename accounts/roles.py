"""The three roles, as Django groups. Membership is the only source of truth."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

RESEARCHER = "researcher"
ANNOTATOR = "annotator"
RATER = "rater"
ROLES = (RESEARCHER, ANNOTATOR, RATER)


def has_role(user: AbstractBaseUser | AnonymousUser, role: str) -> bool:
    """True for an active user in the role's group; superusers hold every role."""
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    cache = getattr(user, "_tomlab_roles", None)
    if cache is None:
        cache = set(user.groups.values_list("name", flat=True))
        user._tomlab_roles = cache
    return role in cache


def is_researcher(user: AbstractBaseUser | AnonymousUser) -> bool:
    return has_role(user, RESEARCHER)
