"""Account writes: role groups and their permissions."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import transaction

from .roles import ANNOTATOR, RATER, RESEARCHER

# Researchers manage every app's data (admin, API writes, exports); annotators and
# raters get no model permissions: what they may touch is checked per object in views.
_RESEARCHER_APPS = ("benchmarks", "studies", "annotation", "modeling", "reports")


@transaction.atomic
def roles_ensure() -> dict[str, Group]:
    """Create the role groups and give researchers every permission of our apps."""
    groups = {
        name: Group.objects.get_or_create(name=name)[0] for name in (RESEARCHER, ANNOTATOR, RATER)
    }
    perms = Permission.objects.filter(content_type__app_label__in=_RESEARCHER_APPS)
    groups[RESEARCHER].permissions.set(perms)
    return groups


@transaction.atomic
def user_create_with_role(*, username: str, password: str, role: str, email: str = ""):
    """Create (or reset) a user in one role; researchers get admin access."""
    groups = roles_ensure()
    if role not in groups:
        raise ValueError(f"unknown role {role!r}; choose one of {', '.join(groups)}")
    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username=username, defaults={"email": email})
    user.set_password(password)
    user.is_staff = role == RESEARCHER
    user.save()
    user.groups.set([groups[role]])
    return user
