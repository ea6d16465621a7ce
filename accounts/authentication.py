"""API authentication: HTTP basic auth that answers 429 to a locked-out user name or
address before it checks the password (``accounts.throttling``).
"""

from __future__ import annotations

from drf_spectacular.authentication import BasicScheme
from rest_framework.authentication import BasicAuthentication
from rest_framework.exceptions import AuthenticationFailed, Throttled

from .throttling import login_blocked, login_blocked_message, login_refused, login_retry_after_s


class ThrottledBasicAuthentication(BasicAuthentication):
    def authenticate_credentials(self, userid, password, request=None):
        if login_blocked(request, userid):
            raise Throttled(wait=login_retry_after_s(), detail=login_blocked_message())
        # authenticate() checks the password only with a place under the limits (a
        # wrong one keeps it); several requests at once may pass the check above.
        try:
            return super().authenticate_credentials(userid, password, request)
        except AuthenticationFailed:
            if login_refused(request):
                raise Throttled(
                    wait=login_retry_after_s(), detail=login_blocked_message()
                ) from None
            raise


class ThrottledBasicScheme(BasicScheme):
    """The OpenAPI schema describes it as the plain HTTP basic auth it is."""

    target_class = "accounts.authentication.ThrottledBasicAuthentication"
