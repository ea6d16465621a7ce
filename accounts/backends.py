"""Authentication backend: Django's own, refusing user names and addresses that are
locked out for failed passwords (``accounts.throttling``), the right password included.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from .throttling import login_blocked


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
        if login_blocked(request, username):
            # PermissionDenied stops authenticate() at once (no other backend is tried)
            # and still sends user_login_failed, so the attempt counts as well.
            raise PermissionDenied("too many failed log-in attempts")
        return super().authenticate(request, username=username, password=password, **kwargs)
