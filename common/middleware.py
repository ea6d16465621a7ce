"""Content-Security-Policy on every response (Django 5.2 has none built in).

Pages get ``settings.CONTENT_SECURITY_POLICY``: scripts, styles, images and fonts
from our own origin only, so an injected ``<script>``, ``style=""`` or ``onclick`` does
nothing. SVG documents (the report charts, opened on their own) get a policy of their
own: matplotlib writes inline ``<style>``, which they may use, and nothing may run.
Paths in ``settings.CONTENT_SECURITY_POLICY_BY_PATH`` (the third-party API pages) get
theirs.
A view that sets the header itself keeps its own.
https://developer.mozilla.org/en-US/docs/Web/HTTP/Headers/Content-Security-Policy
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"
SVG_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:"


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if HEADER in response:
            return response
        if settings.DEBUG and response.status_code >= 400:
            # Django's debug error pages are all inline styles and scripts; they only
            # exist with DEBUG on, where readable tracebacks matter more.
            return response
        if response.get("Content-Type", "").startswith("image/svg+xml"):
            response[HEADER] = SVG_POLICY
        elif policy := self._policy_for(request.path):
            response[HEADER] = policy
        return response

    @staticmethod
    def _policy_for(path: str) -> str:
        for prefix, policy in getattr(settings, "CONTENT_SECURITY_POLICY_BY_PATH", {}).items():
            if path.startswith(prefix):
                return policy
        return settings.CONTENT_SECURITY_POLICY
