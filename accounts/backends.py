"""Authentication backend: Django's own, checking a password only when the throttle
gives the attempt a place under the limits (``accounts.throttling``), so a locked-out
user name or address is refused, the right password included; and reading a session's
user together with their memberships, which every signed-in request needs next.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from .throttling import login_attempt_begin, login_attempt_release
from .workspaces import LOADED_MEMBERSHIPS, memberships_ordered


class ThrottledModelBackend(ModelBackend):
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ):
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None:
            return None  # ModelBackend's answer too; nothing is checked, nothing counts
        if not login_attempt_begin(request, username):
            # PermissionDenied stops authenticate() at once: no other backend is tried.
            raise PermissionDenied("too many failed log-in attempts")
        try:
            user = super().authenticate(request, username=username, password=password, **kwargs)
        except BaseException:
            login_attempt_release(request, username)  # no answer: it does not count
            raise
        # A wrong password (or an inactive account) keeps its place: the failure counts.
        if user is not None:
            login_attempt_release(request, username)
        return user

    def get_user(self, user_id: Any):
        """The session's user, read with their memberships in one query where they have any.

        Every signed-in request reads its user and then the user's memberships
        (``accounts.workspaces.workspace_for_request``, which picks the workspace): the
        memberships joined to the user's row spare a query a request. Both are read
        again on every request, so a removed member loses access at their next one.
        A user with no membership (a superuser, a participant) is read as Django reads
        them."""
        memberships = list(memberships_ordered().filter(user_id=user_id).select_related("user"))
        if not memberships:
            return super().get_user(user_id)
        user = memberships[0].user
        for membership in memberships:
            membership.user = user  # one user object, not one per row
        setattr(user, LOADED_MEMBERSHIPS, memberships)
        return user if self.user_can_authenticate(user) else None
