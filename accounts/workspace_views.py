"""The workspace menu's actions and the manager's members page."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from .decorators import forbidden, researcher_required
from .models import Membership, Workspace
from .roles import is_manager, may_change
from .services import reviewer_ids, reviewer_set
from .workspaces import (
    member_events,
    member_remove,
    member_set,
    members_of,
    user_named,
    workspace_create,
    workspace_switch,
)

ROLE_CHOICES = Membership.Role.choices


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150, help_text="an existing account")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Membership.Role.RESEARCHER)

    def clean_username(self) -> object:
        user = user_named(self.cleaned_data["username"])
        if user is None:
            raise forms.ValidationError(
                "no account has this username: add the person on the Users page first"
            )
        return user


class MemberChangeForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=ROLE_CHOICES, required=False)
    remove = forms.BooleanField(required=False)
    # "on"/"off": give or take the reviewer permission (annotators; researchers hold it).
    reviewer = forms.ChoiceField(choices=[("on", "on"), ("off", "off")], required=False)


class WorkspaceNewForm(forms.Form):
    name = forms.CharField(max_length=100)

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if Workspace.objects.filter(name__iexact=name).exists():
            raise forms.ValidationError("a workspace has this name already")
        return name


def _back(request: HttpRequest) -> str:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return "/"


@require_POST
@login_required
def switch(request: HttpRequest) -> HttpResponse:
    """Read another of the user's workspaces from now on (the menu's buttons)."""
    value = request.POST.get("workspace", "")
    if not (value.isascii() and value.isdigit() and len(value) <= 18):  # no "²", no overflow
        raise Http404("no such workspace")
    if workspace_switch(request, workspace_id=int(value)) is None:
        raise Http404("no such workspace")
    # Pages of the workspace left behind answer 404 in the new one: start at home.
    return redirect("home")


@require_http_methods(["GET", "POST"])
@researcher_required("Workspaces are for researchers.")
def new(request: HttpRequest) -> HttpResponse:
    form = WorkspaceNewForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        workspace = workspace_create(name=form.cleaned_data["name"], by=request.user)
        workspace_switch(request, workspace_id=workspace.pk)
        messages.success(request, f"Workspace {workspace.name} made; you are its manager.")
        return redirect("workspace-members")
    return render(request, "accounts/workspace_new.html", {"form": form})


@never_cache
@require_http_methods(["GET", "POST"])
@researcher_required("Members are managed by the workspace's managers.")
def members(request: HttpRequest) -> HttpResponse:
    current = request.workspace
    if current is None or not current.workspace_id:
        return forbidden(request, "Choose a workspace in the menu first.")
    workspace = Workspace.objects.get(pk=current.workspace_id)
    manager = is_manager(request.user) and may_change(request.user)
    add_form = MemberAddForm(prefix="add")
    if request.method == "POST":
        if not manager:
            return forbidden(request, "Only the workspace's managers change its members.")
        if "add-username" in request.POST:
            add_form = MemberAddForm(request.POST, prefix="add")
            if add_form.is_valid():
                member = add_form.cleaned_data["username"]
                member_set(
                    workspace=workspace,
                    user=member,
                    role=add_form.cleaned_data["role"],
                    by=request.user,
                )
                messages.success(request, f"{member.username} is now a member.")
                return redirect("workspace-members")
        else:
            change = MemberChangeForm(request.POST)
            if change.is_valid() and (member := user_named(change.cleaned_data["username"])):
                try:
                    if change.cleaned_data["reviewer"]:
                        allowed = change.cleaned_data["reviewer"] == "on"
                        reviewer_set(user=member, allowed=allowed)
                        messages.success(
                            request,
                            f"{member.username} {'may now' if allowed else 'may no longer'} "
                            "review and settle disagreements.",
                        )
                    elif change.cleaned_data["remove"]:
                        member_remove(workspace=workspace, user=member, by=request.user)
                        messages.success(request, f"{member.username} is no longer a member.")
                    elif change.cleaned_data["role"]:
                        member_set(
                            workspace=workspace,
                            user=member,
                            role=change.cleaned_data["role"],
                            by=request.user,
                        )
                        messages.success(
                            request, f"{member.username} is now a {change.cleaned_data['role']}."
                        )
                except ValueError as refused:
                    messages.error(request, str(refused))
                return redirect("workspace-members")
            messages.error(request, "Choose a member and what to change.")
    listed = members_of(workspace)
    reviewers = reviewer_ids(user_ids=[m.user_id for m in listed])
    for m in listed:
        m.reviewer = m.user_id in reviewers
    context = {
        "workspace": workspace,
        "members": listed,
        "events": member_events(workspace),
        "add_form": add_form,
        "roles": ROLE_CHOICES,
        "manager": manager,
    }
    return render(request, "accounts/workspace_members.html", context)
