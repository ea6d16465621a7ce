"""Workspace scoping: every read of a workspace's rows goes through its model's manager.

A lab's server holds several workspaces (``accounts.Workspace``). A request made by a
member is *scoped*: ``accounts.middleware`` (and, for the API, the permission that runs
after DRF's authentication) sets :data:`current` to the member's workspace for the
length of the request, and the default manager of every workspace-owned model filters
by it. So every page, API endpoint, admin list, htmx partial, export and report reads
only that workspace's rows without a view ever filtering by workspace itself, and an
object of another workspace is simply not found (404, never 403).

Unscoped (``current`` unset): Celery tasks and management commands, which act on ids
a scoped request queued or an operator typed; superusers, who see all; and the
participant pages, which authorise by token (``accounts.middleware.workspace_exempt``).
A signed-in user who is a member of no workspace is scoped to :data:`NOWHERE`, which
matches nothing.

Related-object access (``participant.study``) uses Django's base manager, which is
never filtered: a row already reached through a scoped query may follow its foreign keys.

The manager filters when the queryset is made, so a queryset must never be built at
import time (a form field's or an API view's class attribute): build it in
``__init__``/``get_queryset``. ``tests/security/test_workspace_isolation.py`` walks
every URL as a member of another workspace to hold that.

This module sits in ``common`` so that the item bank (below accounts in the layers)
can scope its works too; the Workspace model itself is ``accounts.Workspace``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django import forms
from django.apps import apps
from django.db import models
from django.db.models import Q

DEFAULT_SLUG = "default"
# A workspace id no row has: a signed-in user with no membership sees nothing.
NOWHERE = 0


@dataclass(frozen=True)
class Scope:
    workspace_id: int
    # Whether rows other workspaces published are read too (not by imports: a
    # workspace never writes into another's work, published or not).
    shared: bool = True


current: ContextVar[Scope | None] = ContextVar("tomlab_workspace", default=None)


def current_workspace_id() -> int | None:
    scope = current.get()
    return scope.workspace_id if scope else None


@contextmanager
def scoped_to(workspace_id: int | None, *, shared: bool = True) -> Iterator[None]:
    """Read as a member of ``workspace_id`` (None: unscoped) inside the block;
    ``shared=False`` leaves out what other workspaces published."""
    token = current.set(Scope(workspace_id, shared) if workspace_id is not None else None)
    try:
        yield
    finally:
        current.reset(token)


def default_workspace_id() -> int:
    """The installation's "Default" workspace, made by the migration (created if a
    database was flushed since)."""
    workspace_model = apps.get_model("accounts", "Workspace")
    workspace, _ = workspace_model.objects.get_or_create(
        slug=DEFAULT_SLUG, defaults={"name": "Default"}
    )
    return workspace.pk


class WorkspaceQuerySet(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs):
        """Rows of a workspace-owned model with no workspace take the current one
        (``bulk_create`` does not call ``save``)."""
        objs = list(objs)
        if issubclass(self.model, WorkspaceOwned):
            workspace_id = None
            for obj in objs:
                if obj.workspace_id is None:
                    workspace_id = workspace_id or workspace_of_new_rows()
                    obj.workspace_id = workspace_id
        return super().bulk_create(objs, *args, **kwargs)


class WorkspaceManager(models.Manager.from_queryset(WorkspaceQuerySet)):
    """The default manager of a workspace-owned model: scoped to :data:`current`.

    ``path`` leads from the model to its workspace (``"workspace"`` on an owner,
    ``"study__workspace"`` on a study's participant); a tuple of paths for a row that
    hangs off one of several owners. ``shared`` names a boolean beside it that makes a
    row readable from every workspace (a published benchmark).
    """

    def __init__(self, path: str | tuple[str, ...] = "workspace", shared: str | None = None):
        super().__init__()
        self.scope_paths = (path,) if isinstance(path, str) else tuple(path)
        self.shared_path = shared

    def scope_filter(self, workspace_id: int, *, shared: bool = True) -> Q:
        lookups = [(f"{path}_id", workspace_id) for path in self.scope_paths]
        if self.shared_path and shared:
            lookups.append((self.shared_path, True))
        # A path through an owner goes through a subquery, not joins in the query
        # itself: it would otherwise join the owner (LEFT OUTER for several paths), and
        # PostgreSQL refuses SELECT … FOR UPDATE on the nullable side of an outer join
        # (and locks the joined owner rows with an inner one). Each subquery reads the
        # owner's table and the row is matched on its own foreign key
        # (``run_id IN (SELECT id FROM run WHERE workspace_id = 1)``): a subquery over
        # this model's own rows (``pk IN (SELECT id FROM prediction JOIN run …)``) made
        # PostgreSQL hash a million prediction ids for each report (580 ms against 175).
        scoped = Q()
        by_owner: dict[str, Q] = {}
        for lookup, value in lookups:
            if "__" not in lookup.removesuffix("__isnull"):
                scoped |= Q(**{lookup: value})  # this model's own column
                continue
            owner, rest = lookup.split("__", 1)
            by_owner[owner] = by_owner.get(owner, Q()) | Q(**{rest: value})
        for owner, condition in by_owner.items():
            related = self.model._meta.get_field(owner).related_model
            scoped |= Q(**{f"{owner}__in": related._base_manager.filter(condition).values("pk")})
        return scoped

    def get_queryset(self) -> models.QuerySet:
        queryset = super().get_queryset()
        workspace_id = current_workspace_id()
        # A related manager (``stage.scenarios``) subclasses this one: its rows hang off
        # an instance already reached through a scoped query.
        if workspace_id is None or hasattr(self, "instance"):
            return queryset
        return queryset.filter(self.scope_filter(workspace_id, shared=current.get().shared))


class WorkspaceOwned(models.Model):
    """A row that belongs to exactly one workspace (a study, a run, a backend…).

    A new row with no workspace is born in the workspace of the request that makes it,
    or, made by a command or a task with nothing scoped, in the Default workspace.
    """

    workspace = models.ForeignKey(
        "accounts.Workspace", on_delete=models.PROTECT, related_name="+", db_index=True
    )

    objects = WorkspaceManager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        if self.workspace_id is None:
            self.workspace_id = workspace_of_new_rows()
        super().save(*args, **kwargs)


def workspace_of_new_rows() -> int:
    """The workspace a new row takes: the request's, else (a command, a task with
    nothing scoped) Default."""
    return current_workspace_id() or default_workspace_id()


def scoped(queryset: models.QuerySet) -> models.QuerySet:
    """``queryset`` limited to the current workspace now.

    For a queryset built before the request (an API view's or a serializer field's
    class attribute): the manager could not scope it then.
    """
    manager = queryset.model._default_manager
    workspace_id = current_workspace_id()
    if workspace_id is None or not isinstance(manager, WorkspaceManager):
        return queryset.all()
    return queryset.filter(manager.scope_filter(workspace_id))


class ScopedQuerysetMixin:
    """For a DRF view whose ``queryset`` is a class attribute: scoped per request."""

    def get_queryset(self):
        return scoped(super().get_queryset())  # type: ignore[misc]


class ScopedModelChoiceField(forms.ModelChoiceField):
    """A form field declared on the class (before any request) whose choices are the
    request's workspace's rows when it is rendered or validated."""

    @property
    def queryset(self):
        return None if self._queryset is None else scoped(self._queryset)

    @queryset.setter
    def queryset(self, queryset) -> None:
        forms.ModelChoiceField.queryset.fset(self, queryset)
