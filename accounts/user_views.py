"""User management for researchers: who has which role, and adding an annotator,
researcher or rater account from the app (not only through ``createsuperuser``).

A new account gets a random one-time password, shown once on the page that created it
(never put in a message: message storage may be a cookie), with ``no-store`` so no
cache keeps it; the person must change it at their first sign-in (every page sends
them to /accounts/password/ until they have). A new researcher or annotator joins the
current workspace with that role; only its managers add them.
"""

from __future__ import annotations

import secrets

from django import forms
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from .decorators import forbidden, researcher_required
from .models import Workspace
from .roles import ANNOTATOR, RATER, RESEARCHER, is_manager
from .services import user_create_with_role

users_only = researcher_required("Managing users is for researchers only.")


class UserInviteForm(forms.Form):
    username = forms.RegexField(
        regex=r"^[\w.@+-]{1,150}$",
        max_length=150,
        help_text="letters, digits and @ . + - _",
        error_messages={"invalid": "use letters, digits and @ . + - _ only"},
    )
    role = forms.ChoiceField(
        choices=[(ANNOTATOR, "annotator"), (RESEARCHER, "researcher"), (RATER, "rater")]
    )
    email = forms.EmailField(required=False)

    def clean_username(self) -> str:
        name = self.cleaned_data["username"]
        if get_user_model().objects.filter(username__iexact=name).exists():
            raise forms.ValidationError("this username is taken")
        return name


@never_cache
@require_http_methods(["GET", "POST"])
@users_only
def user_list(request: HttpRequest) -> HttpResponse:
    form = UserInviteForm(request.POST or None)
    created = password = None
    if request.method == "POST" and form.is_valid():
        role = form.cleaned_data["role"]
        current = request.workspace
        if role != RATER and not is_manager(request.user):
            return forbidden(request, "Only a workspace's managers add researchers and annotators.")
        password = secrets.token_urlsafe(12)
        # A researcher or an annotator joins the workspace this page is read in, with
        # that role; the password is one-time: changed at the first sign-in.
        workspace = (
            Workspace.objects.get(pk=current.workspace_id)
            if current is not None and current.workspace_id
            else None
        )
        created = user_create_with_role(
            password=password,
            workspace=workspace,
            workspace_role=role if role != RATER else "",
            by=request.user,
            one_time=True,
            **form.cleaned_data,
        )
        form = UserInviteForm()
    users = (
        get_user_model()
        .objects.prefetch_related("groups")
        .order_by("username")
        .only("username", "email", "is_active", "is_superuser", "last_login")
    )
    context = {"form": form, "users": users, "created": created, "password": password}
    return render(request, "accounts/user_list.html", context)
