"""The log-in pages, throttled: past the failure limit they answer 429 without checking
the password (``accounts.throttling``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse

from .throttling import (
    login_blocked,
    login_blocked_message,
    login_retry_after_s,
    throttled_response,
)


class ThrottledLoginView(LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = request.POST.get("username", "")
        if login_blocked(request, username):
            # An unbound form: validating a bound one would call authenticate() again.
            form = self.form_class(request, initial={"username": username[:150]})
            context = self.get_context_data(form=form, throttled=login_blocked_message())
            response = self.render_to_response(context, status=429)
            response["Retry-After"] = str(login_retry_after_s())
            return response
        return super().post(request, *args, **kwargs)


def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's own log-in page, with the same 429 once a client is locked out.

    (The authentication backend refuses a locked-out user there anyway; this says why.)
    """
    if request.method == "POST" and login_blocked(request, request.POST.get("username", "")):
        return throttled_response(request, login_blocked_message(), login_retry_after_s())
    return admin.site.login(request, extra_context)
