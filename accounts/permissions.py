from rest_framework.permissions import BasePermission

from .roles import is_researcher


class IsResearcher(BasePermission):
    """The API is for researchers only: raters and annotators get 403."""

    message = "Only researchers may use the API."

    def has_permission(self, request, view) -> bool:
        return is_researcher(request.user)
