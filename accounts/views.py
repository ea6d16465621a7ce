"""The log-in pages and the password change, throttled: past the failure limit they
answer 429 without checking the password (``accounts.throttling``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.views import LoginView, PasswordChangeView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from .apps import PASSWORD_CHANGE_SESSION_KEY
from .models import PasswordChangeRequired
from .throttling import (
    login_attempt_begin,
    login_attempt_release,
    login_blocked,
    login_blocked_message,
    login_refused,
    login_retry_after_s,
    throttled_response,
)


class ThrottledLoginView(LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if login_blocked(request, request.POST.get("username", "")):
            return self._throttled()
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        # Several requests may pass the check in post() at once; the backend then
        # refused this one's password check, and the answer says so.
        if login_refused(self.request):
            return self._throttled()
        return super().form_invalid(form)

    def _throttled(self) -> HttpResponse:
        username = self.request.POST.get("username", "")
        # An unbound form: validating a bound one would call authenticate() again.
        form = self.form_class(self.request, initial={"username": username[:150]})
        context = self.get_context_data(form=form, throttled=login_blocked_message())
        response = self.render_to_response(context, status=429)
        response["Retry-After"] = str(login_retry_after_s())
        return response


def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's own log-in page, with the same 429 once a client is locked out.

    (The authentication backend refuses a locked-out user there anyway; this says why.)
    """
    if request.method == "POST" and login_blocked(request, request.POST.get("username", "")):
        return throttled_response(request, login_blocked_message(), login_retry_after_s())
    response = admin.site.login(request, extra_context)
    if login_refused(request):
        return throttled_response(request, login_blocked_message(), login_retry_after_s())
    return response


class ThrottledPasswordChangeForm(PasswordChangeForm):
    """Django's form; the old password is checked only with a place under the limits.

    A wrong old password counts against the user name (and the address) exactly as a
    wrong password on the log-in page does, so a stolen session cannot guess it.
    """

    def __init__(self, user: Any, *args: Any, request: HttpRequest | None = None, **kwargs: Any):
        self.request = request
        super().__init__(user, *args, **kwargs)

    def clean_old_password(self) -> str:
        username = self.user.get_username()
        if not login_attempt_begin(self.request, username):
            raise ValidationError(login_blocked_message(), code="throttled")
        try:
            old_password = super().clean_old_password()
        except ValidationError:
            raise  # a wrong old password keeps its place: it counts
        except BaseException:
            login_attempt_release(self.request, username)
            raise
        login_attempt_release(self.request, username)
        return old_password


class ThrottledPasswordChangeView(PasswordChangeView):
    form_class = ThrottledPasswordChangeForm

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "request": self.request}

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if login_blocked(request, request.user.get_username()):
            return throttled_response(request, login_blocked_message(), login_retry_after_s())
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        PasswordChangeRequired.objects.filter(user=form.user).delete()
        self.request.session.pop(PASSWORD_CHANGE_SESSION_KEY, None)
        return response

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["first_sign_in"] = bool(self.request.session.get(PASSWORD_CHANGE_SESSION_KEY))
        return context

    def form_invalid(self, form: Any) -> HttpResponse:
        if login_refused(self.request):
            return throttled_response(self.request, login_blocked_message(), login_retry_after_s())
        return super().form_invalid(form)
