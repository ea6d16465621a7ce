"""Authentication backend: Django's own, checking a password only when the throttle
gives the attempt a place under the limits (``accounts.throttling``), so a locked-out
user name or address is refused, the right password included.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from .throttling import login_attempt_begin, login_attempt_release


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
