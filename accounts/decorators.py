"""Role checks for views. ``researcher_required`` was in ``modeling.views``; every app's
researcher pages use it, so it lives with the roles.

A denied request gets the styled 403 page with a message worded for the page, as a
response rather than a raised ``PermissionDenied``: an expected refusal is not an
error, so no traceback is logged for it (Django logs one line, "Forbidden: /path").
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from .roles import RESEARCHER, is_researcher, may_change

DEFAULT_MESSAGE = "This page is for researchers only."
VIEWER_MESSAGE = "You are a viewer in this workspace: you can read its pages but not change them."
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
View = Callable[..., HttpResponse]


def forbidden(request: HttpRequest, message: str) -> HttpResponse:
    """The styled 403 page saying ``message``."""
    return render(request, "403.html", {"message": message}, status=403)


def _no_workspace(request: HttpRequest) -> str:
    current = getattr(request, "workspace", None)
    if current is None or current.is_member or request.user.is_superuser:
        return ""
    if request.user.groups.filter(name=RESEARCHER).exists():
        return "You are not a member of any workspace yet: ask a workspace's manager to add you."
    return ""


def researcher_required(view_or_message: View | str = DEFAULT_MESSAGE) -> Any:
    """Anonymous users go to the login page; logged-in non-researchers get a 403.

    Use bare (``@researcher_required``) or with the page's wording
    (``@researcher_required("Studies are for researchers only.")``).
    """
    if callable(view_or_message):
        return _decorate(view_or_message, DEFAULT_MESSAGE)
    return lambda view: _decorate(view, view_or_message)


def _decorate(view: View, message: str) -> View:
    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_researcher(request.user):
            return forbidden(request, _no_workspace(request) or message)
        if request.method not in SAFE_METHODS and not may_change(request.user):
            return forbidden(request, VIEWER_MESSAGE)
        return view(request, *args, **kwargs)

    return wrapped


OPERATOR_MESSAGE = "This page is the server operator's (a superuser): it shows every workspace."


def operator_required(view: View) -> View:
    """The server operator's pages (superusers): they show every workspace's work."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_superuser:
            return forbidden(request, OPERATOR_MESSAGE)
        return view(request, *args, **kwargs)

    return wrapped
