"""Accounts use Django's User and Groups; workspaces scope what a member sees.

The global roles (researcher, annotator, rater) are groups (see roles.py): raters and
participants answer in any workspace's study without being members. A researcher's
or annotator's work happens in a workspace, with the role their membership gives:

- manager: a researcher who also adds and removes members and changes their roles;
- researcher: everything a researcher does, inside the workspace;
- annotator: the workspace's annotation queues;
- viewer: reads the researcher pages, changes nothing.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Workspace(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=60, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MANAGER = "manager", "manager"
        RESEARCHER = "researcher", "researcher"
        ANNOTATOR = "annotator", "annotator"
        VIEWER = "viewer", "viewer"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workspace__name", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="membership_once")
        ]

    str_relations = ("user", "workspace")

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"


class MembershipEvent(models.Model):
    """The log of every member change: who changed whom, in which workspace, how."""

    class Action(models.TextChoices):
        ADDED = "added", "added"
        ROLE_CHANGED = "role_changed", "role changed"
        REMOVED = "removed", "removed"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="events")
    # Kept as text too: the log outlives a deleted account.
    username = models.CharField(max_length=150)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=20, choices=Action.choices)
    role_before = models.CharField(max_length=20, blank=True, default="")
    role_after = models.CharField(max_length=20, blank=True, default="")
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    by_username = models.CharField(max_length=150, blank=True, default="")
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.username} {self.action} in {self.workspace_id}"


class PasswordChangeRequired(models.Model):
    """A user who signed in with a one-time password: every page sends them to the
    password change until they have chosen their own (the row is then deleted)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="password_change_required"
    )
    since = models.DateTimeField(default=timezone.now)

    str_relations = ("user",)

    def __str__(self) -> str:
        return f"{self.user} must change their password"
