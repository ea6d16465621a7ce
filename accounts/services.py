"""Account writes: role groups and their permissions."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import transaction

from .models import PasswordChangeRequired, Workspace
from .roles import ADJUDICATE, ANNOTATOR, MANAGER, RATER, RESEARCHER
from .workspaces import default_workspace, member_set

# Researchers manage every app's data (admin, API writes, exports); annotators and
# raters get no model permissions: what they may touch is checked per object in views.
_RESEARCHER_APPS = ("benchmarks", "studies", "annotation", "modeling", "reports")


@transaction.atomic
def roles_ensure() -> dict[str, Group]:
    """Create the role groups and give researchers every permission of our apps."""
    names = (RESEARCHER, ANNOTATOR, RATER)
    found = {group.name: group for group in Group.objects.filter(name__in=names)}
    groups = {name: found.get(name) or Group.objects.get_or_create(name=name)[0] for name in names}
    # Ids, not Permission rows: every user created calls this, and building ~250
    # Permission objects (with their content types) to compare them cost more than the
    # rest of the user's creation.
    perms = (
        Permission.objects.filter(content_type__app_label__in=_RESEARCHER_APPS)
        .order_by()
        .values_list("pk", flat=True)
    )
    groups[RESEARCHER].permissions.set(list(perms))
    return groups


@transaction.atomic
def user_create_with_role(
    *,
    username: str,
    password: str | None,
    role: str,
    email: str = "",
    workspace: Workspace | None = None,
    workspace_role: str = "",
    by=None,
    one_time: bool = False,
):
    """Create (or reset) a user in one role; researchers get admin access.

    A researcher or an annotator is also made a member of ``workspace`` (the Default
    workspace if none is given) with ``workspace_role``: by default an annotator is an
    annotator there and a researcher its manager (the operator's first researcher runs
    the server's Default workspace; a manager's page adds the others with their role).
    ``one_time``: the password is a one-time password, to be changed at the user's
    first sign-in. ``password=None`` gives an unusable password: an account nobody
    signs in to (the demo's seeded annotators, whose answers are loaded for them).
    """
    groups = roles_ensure()
    if role not in groups:
        raise ValueError(f"unknown role {role!r}; choose one of {', '.join(groups)}")
    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username=username, defaults={"email": email})
    user.set_password(password)
    user.is_staff = role == RESEARCHER
    user.save()
    user.groups.set([groups[role]])
    if role in (RESEARCHER, ANNOTATOR):
        member_set(
            workspace=workspace or default_workspace(),
            user=user,
            role=workspace_role or (MANAGER if role == RESEARCHER else role),
            by=by,
        )
    if one_time:
        PasswordChangeRequired.objects.get_or_create(user=user)
    else:
        PasswordChangeRequired.objects.filter(user=user).delete()
    return user


@transaction.atomic
def reviewer_set(*, user, allowed: bool) -> None:
    """Give ``user`` the reviewer permission (settle annotators' disagreements), or take
    it away. Researchers hold it through their group; this is for annotators."""
    app_label, codename = ADJUDICATE.split(".")
    perm = Permission.objects.get(content_type__app_label=app_label, codename=codename)
    if allowed:
        user.user_permissions.add(perm)
    else:
        user.user_permissions.remove(perm)


def reviewer_ids(*, user_ids: list[int]) -> set[int]:
    """Which of ``user_ids`` hold the reviewer permission of their own (not by group)."""
    app_label, codename = ADJUDICATE.split(".")
    return set(
        get_user_model()
        .objects.filter(
            pk__in=user_ids,
            user_permissions__content_type__app_label=app_label,
            user_permissions__codename=codename,
        )
        .values_list("pk", flat=True)
    )
