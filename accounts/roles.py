"""The roles. Raters (and participants) are a global group: they answer in any
workspace's study without being its members. A researcher's or an annotator's role
comes from their membership of the workspace the request reads
(``accounts.workspaces``): manager and researcher do everything a researcher does
there, a viewer reads the researcher pages and changes nothing, an annotator works the
annotation queues.

Outside a request (a command, a task), or before a request's workspace is known, the
groups answer, as they did before workspaces.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

RESEARCHER = "researcher"
ANNOTATOR = "annotator"
RATER = "rater"
ROLES = (RESEARCHER, ANNOTATOR, RATER)

MANAGER = "manager"
VIEWER = "viewer"
# Membership roles that count as each global role in the current workspace.
_MEMBER_ROLES = {RESEARCHER: (MANAGER, RESEARCHER, VIEWER), ANNOTATOR: (ANNOTATOR,)}
_UNSET = object()


def has_role(user: AbstractBaseUser | AnonymousUser, role: str) -> bool:
    """True for an active user in the role; superusers hold every role."""
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    current = getattr(user, "_tomlab_workspace", _UNSET)
    if role in _MEMBER_ROLES and current is not _UNSET:
        return current is not None and current.role in _MEMBER_ROLES[role]
    cache = getattr(user, "_tomlab_roles", None)
    if cache is None:
        cache = set(user.groups.values_list("name", flat=True))
        user._tomlab_roles = cache
    return role in cache


def is_researcher(user: AbstractBaseUser | AnonymousUser) -> bool:
    """May read the researcher pages (viewers too: see :func:`may_change`)."""
    return has_role(user, RESEARCHER)


def may_change(user: AbstractBaseUser | AnonymousUser) -> bool:
    """May change things on the researcher pages: not a viewer."""
    if not is_researcher(user):
        return False
    current = getattr(user, "_tomlab_workspace", _UNSET)
    return current is _UNSET or current is None or current.role != VIEWER


def is_manager(user: AbstractBaseUser | AnonymousUser) -> bool:
    """May add and remove the current workspace's members and change their roles."""
    if user.is_authenticated and user.is_superuser:
        return True
    current = getattr(user, "_tomlab_workspace", None)
    return bool(user.is_authenticated and current is not None and current.role == MANAGER)


# The reviewer permission (a Meta permission of annotation.Adjudication). Researchers'
# group holds it with every permission of our apps; a manager may give it to annotators.
ADJUDICATE = "annotation.adjudicate"


def may_adjudicate(user: AbstractBaseUser | AnonymousUser) -> bool:
    """May settle annotators' disagreements: researchers who may change things here,
    and annotators of this workspace who were given the reviewer permission."""
    if is_researcher(user):
        return may_change(user)
    return has_role(user, ANNOTATOR) and user.has_perm(ADJUDICATE)
