"""The API's permission: researchers of the workspace the request reads.

DRF authenticates a token inside the view, after ``accounts.middleware`` ran, so the
scope is set here, once the user is known: the workspace comes from the token's user
and the ``X-ToMLab-Workspace`` header or ``?workspace=`` parameter (id or slug), else
their first membership. A viewer may read (safe methods) and change nothing.
"""

from rest_framework.exceptions import ValidationError
from rest_framework.permissions import SAFE_METHODS, BasePermission

from .middleware import workspace_activate
from .roles import is_researcher, may_change
from .workspaces import WorkspaceRefused


class IsResearcher(BasePermission):
    """The API is for researchers only: raters and annotators get 403."""

    message = "Only researchers may use the API."

    def has_permission(self, request, view) -> bool:
        django_request = request._request
        if getattr(django_request, "_workspace_api_user", None) != request.user.pk:
            # Scoped for the token's user; the middleware resets the scope at the end.
            # DRF has set django_request.user to the token's user by now.
            try:
                token = workspace_activate(django_request)
            except WorkspaceRefused as refused:
                raise ValidationError({"workspace": str(refused)}) from refused
            if getattr(django_request, "_workspace_token", None) is None:
                django_request._workspace_token = token
            django_request._workspace_api_user = request.user.pk
        if not is_researcher(request.user):
            return False
        if request.method not in SAFE_METHODS and not may_change(request.user):
            self.message = "Viewers may read this workspace but not change it."
            return False
        return True
