"""Workspaces: which one a request reads, who is a member with which role, and the
manager's changes to membership (each logged, and a removed member signed out).

How rows are scoped is ``common.scoping``; this module decides the scope.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.sessions.models import Session
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.text import slugify

from common.scoping import NOWHERE, default_workspace_id

from .models import Membership, MembershipEvent, Workspace

SESSION_KEY = "tomlab_workspace"
# The API's explicit choice: a header, or a query parameter where a header is awkward.
HEADER = "HTTP_X_TOMLAB_WORKSPACE"
PARAMETER = "workspace"

Role = Membership.Role
# What each membership role may do with the researcher pages.
RESEARCHER_ROLES = (Role.MANAGER, Role.RESEARCHER)
READER_ROLES = (Role.MANAGER, Role.RESEARCHER, Role.VIEWER)


class WorkspaceRefused(Exception):
    """A request named a workspace its user is not a member of (or none exists)."""


@dataclass(frozen=True)
class Current:
    """The workspace a request reads and the role its user holds there."""

    workspace_id: int  # NOWHERE for a signed-in user who is a member of none
    role: str  # "" where the user is not a member (superusers, NOWHERE)
    name: str = ""

    @property
    def is_member(self) -> bool:
        return bool(self.role)


# Where ``accounts.backends`` leaves the memberships it read with the session's user.
LOADED_MEMBERSHIPS = "_tomlab_loaded_memberships"


def memberships_ordered() -> QuerySet[Membership]:
    """Memberships with their workspaces, in a stable order (workspace name, then id)."""
    return Membership.objects.select_related("workspace").order_by(
        "workspace__name", "workspace_id"
    )


def memberships_of(user: AbstractBaseUser) -> list[Membership]:
    """The user's memberships, in a stable order (workspace name, then id)."""
    return list(memberships_ordered().filter(user=user))


def request_memberships(request: HttpRequest) -> list[Membership]:
    """The signed-in user's memberships, read once per request."""
    cached = getattr(request, "_tomlab_memberships", None)
    if cached is None:
        cached = request._tomlab_memberships = memberships_of(request.user)
    return cached


def workspace_for_request(
    request: HttpRequest, user: AbstractBaseUser | AnonymousUser
) -> Current | None:
    """The workspace ``request`` reads: None for anonymous visitors (they reach only
    token pages) and for superusers who chose none (they see all).

    The choice comes from the API's header or parameter, else the session's last
    switch, else the user's first membership. Raises :class:`WorkspaceRefused` for an
    explicit choice the user may not make.
    """
    if not user.is_authenticated:
        return None
    explicit = request.META.get(HEADER) or request.GET.get(PARAMETER, "")
    session = getattr(request, "session", None)
    chosen = explicit or (session.get(SESSION_KEY, "") if session is not None else "")
    # Read with the user where the session's user was loaded this request
    # (accounts.backends); a token's user (the API) is read here.
    members = getattr(user, LOADED_MEMBERSHIPS, None)
    if members is None:
        members = memberships_of(user)
    request._tomlab_memberships = members  # the navigation's menu lists them
    if chosen:
        for membership in members:
            if str(chosen) in (str(membership.workspace_id), membership.workspace.slug):
                return _current(membership)
        if user.is_superuser:
            workspace = _workspace_named(str(chosen))
            if workspace is not None:
                return Current(workspace.pk, "", workspace.name)
        if explicit:
            raise WorkspaceRefused(f"you are not a member of a workspace {explicit!r}")
    if user.is_superuser:
        return None
    if not members:
        return Current(NOWHERE, "")
    return _current(members[0])


def _current(membership: Membership) -> Current:
    return Current(membership.workspace_id, membership.role, membership.workspace.name)


def _workspace_named(value: str) -> Workspace | None:
    if value.isascii() and value.isdigit() and len(value) <= 18:  # no "²", no overflow
        return Workspace.objects.filter(pk=int(value)).first()
    if not re.fullmatch(r"[-a-zA-Z0-9_]{1,60}", value):  # a slug's letters: no NUL byte
        return None
    return Workspace.objects.filter(slug=value).first()


def workspace_switch(request: HttpRequest, *, workspace_id: int) -> Membership | None:
    """Make ``workspace_id`` the session's workspace; None if the user is not a member."""
    membership = (
        Membership.objects.filter(user=request.user, workspace_id=workspace_id)
        .select_related("workspace")
        .first()
    )
    if membership is None and not (
        request.user.is_superuser and Workspace.objects.filter(pk=workspace_id).exists()
    ):
        return None
    request.session[SESSION_KEY] = workspace_id
    return membership


@transaction.atomic
def workspace_create(*, name: str, by: AbstractBaseUser | None = None) -> Workspace:
    """A new workspace; its maker (if any) is its first manager."""
    base = slugify(name)[:50] or "workspace"
    slug, n = base, 1
    while Workspace.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    workspace = Workspace.objects.create(name=name, slug=slug)
    if by is not None:
        member_set(workspace=workspace, user=by, role=Role.MANAGER, by=by)
    return workspace


def default_workspace() -> Workspace:
    return Workspace.objects.get(pk=default_workspace_id())


@transaction.atomic
def member_set(
    *, workspace: Workspace, user: AbstractBaseUser, role: str, by: AbstractBaseUser | None
) -> Membership:
    """Add ``user`` with ``role``, or change their role; logged either way."""
    if role not in Role.values:
        raise ValueError(f"unknown role {role!r}; choose one of {', '.join(Role.values)}")
    membership = (
        Membership.objects.select_for_update().filter(workspace=workspace, user=user).first()
    )
    if membership is not None and membership.role == role:
        return membership
    before = membership.role if membership else ""
    if membership is None:
        membership = Membership.objects.create(workspace=workspace, user=user, role=role)
        action = MembershipEvent.Action.ADDED
    else:
        _keep_a_manager(workspace, membership, role)
        membership.role = role
        membership.save(update_fields=["role"])
        action = MembershipEvent.Action.ROLE_CHANGED
    _log(workspace, user, action, before, role, by)
    return membership


@transaction.atomic
def member_remove(
    *, workspace: Workspace, user: AbstractBaseUser, by: AbstractBaseUser | None
) -> None:
    """Remove ``user`` from ``workspace``, log it, and end their sessions: a removed
    member's open pages stop working at their next request."""
    membership = (
        Membership.objects.select_for_update().filter(workspace=workspace, user=user).first()
    )
    if membership is None:
        return
    _keep_a_manager(workspace, membership, "")
    membership.delete()
    _log(workspace, user, MembershipEvent.Action.REMOVED, membership.role, "", by)
    user_sessions_end(user)


def _keep_a_manager(workspace: Workspace, membership: Membership, new_role: str) -> None:
    if membership.role != Role.MANAGER or new_role == Role.MANAGER:
        return
    others = Membership.objects.filter(workspace=workspace, role=Role.MANAGER).exclude(
        pk=membership.pk
    )
    if not others.exists():
        raise ValueError(f"{workspace.name} needs at least one manager: add another one first")


def _log(workspace, user, action, before, after, by) -> None:
    MembershipEvent.objects.create(
        workspace=workspace,
        user=user,
        username=user.get_username(),
        action=action,
        role_before=before,
        role_after=after,
        by=by,
        by_username=by.get_username() if by is not None else "",
    )


def user_sessions_end(user: AbstractBaseUser) -> int:
    """Delete every stored session of ``user`` (database sessions); returns how many."""
    ended = 0
    for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        if session.get_decoded().get("_auth_user_id") == str(user.pk):
            session.delete()
            ended += 1
    return ended


def members_of(workspace: Workspace) -> list[Membership]:
    return list(
        Membership.objects.filter(workspace=workspace)
        .select_related("user")
        .order_by("user__username")
    )


def member_events(workspace: Workspace, limit: int = 50) -> list[MembershipEvent]:
    return list(MembershipEvent.objects.filter(workspace=workspace).order_by("-at", "-pk")[:limit])


def user_named(username: str) -> AbstractBaseUser | None:
    return get_user_model().objects.filter(username__iexact=username.strip()).first()
