"""Scope each request to its user's workspace (``common.scoping``), and send a user
with a one-time password to the password change first.

The scope is set once the URL is resolved (``process_view``), so the participant pages
(the ``rater`` namespace, /s/…) can read unscoped: they authorise by the invite token,
and a participant needs no membership of the study's workspace. The API authenticates
tokens inside DRF, after this middleware: ``accounts.permissions`` scopes those.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextvars import Token

from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.urls import reverse

from common.scoping import Scope, current

from .apps import PASSWORD_CHANGE_SESSION_KEY
from .workspaces import WorkspaceRefused, workspace_for_request

UNSCOPED_NAMESPACES = frozenset({"rater"})
# Where a user who must change their one-time password may still go.
PASSWORD_CHANGE_PATHS = ("password_change", "password_change_done", "logout", "login")


def workspace_activate(request: HttpRequest) -> Token | None:
    """Resolve and set the scope for ``request``'s user; returns the contextvar token.

    The user object carries the result (``_tomlab_workspace``) for the role checks.
    """
    user = request.user
    found = workspace_for_request(request, user)
    if user.is_authenticated:
        user._tomlab_workspace = found
        request._workspace_api_user = user.pk  # the API's permission need not ask again
    request.workspace = found
    return current.set(Scope(found.workspace_id) if found is not None else None)


def _in_scope(scope: Scope | None, chunks: Iterable[bytes]) -> Iterator[bytes]:
    """``chunks``, each produced with ``scope`` active (and the caller's restored)."""
    iterator = iter(chunks)
    while True:
        token = current.set(scope)
        try:
            chunk = next(iterator)
        except StopIteration:
            return
        finally:
            current.reset(token)
        yield chunk


class WorkspaceMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.workspace = None
        request._workspace_token = None
        try:
            response = self.get_response(request)
            streamed = response.streaming and not isinstance(response, FileResponse)
            if request._workspace_token is not None and streamed:
                # A streamed body (a tidy CSV, a long-format JSON) is generated after
                # this returns, when the server iterates it: its queries must still
                # read through the request's scope, not unscoped.
                response.streaming_content = _in_scope(current.get(), response.streaming_content)
            return response
        finally:
            if request._workspace_token is not None:
                current.reset(request._workspace_token)

    def process_view(self, request: HttpRequest, view, args, kwargs) -> HttpResponse | None:
        match = request.resolver_match
        if match is not None and UNSCOPED_NAMESPACES & set(match.namespaces):
            return None
        session = getattr(request, "session", None)
        if (
            session is not None
            and session.get(PASSWORD_CHANGE_SESSION_KEY)
            and (match is None or match.url_name not in PASSWORD_CHANGE_PATHS)
        ):
            return redirect(reverse("password_change") + "?first=1")
        try:
            request._workspace_token = workspace_activate(request)
        except WorkspaceRefused as refused:
            return HttpResponseBadRequest(str(refused))
        return None
