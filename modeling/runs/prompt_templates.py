"""Prompt templates as versioned, editable records: defaults seeded, revisions, the active one.

The defaults belong to no workspace: every workspace reads them. A revision belongs to
the workspace that made it, and becomes the active version there only; version numbers
are the server's, so a version names one text whichever workspace reads it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q

from common.scoping import workspace_of_new_rows

from ..models import PromptTemplate
from ..prompts import DEFAULT_TEMPLATES


@transaction.atomic
def prompt_templates_ensure_defaults(*, specs: list[dict[str, Any]] | None = None) -> int:
    """Create the default templates (name + version) that do not exist yet; returns how many.

    ``specs`` defaults to this app's templates; other apps pass their own (annotation's
    generation prompts) so every default template is written the same way.
    """
    created = 0
    for spec in DEFAULT_TEMPLATES if specs is None else specs:
        _, was_created = PromptTemplate._base_manager.get_or_create(
            name=spec["name"], version=spec["version"], defaults=spec
        )
        created += was_created
    return created


def prompt_template_revise(*, template: PromptTemplate, **changes: Any) -> PromptTemplate:
    """Edit a template by adding a new version in the current workspace (Default for a
    command); runs keep pointing at the old one, other workspaces keep theirs."""
    workspace_id = workspace_of_new_rows()
    with transaction.atomic():
        # Every workspace's versions: the new number must be the server's next.
        latest = (
            PromptTemplate._base_manager.select_for_update()
            .filter(name=template.name)
            .order_by("-version")
            .first()
        )
        fields = {
            f: getattr(template, f)
            for f in ("benchmark", "method", "system", "user", "fields", "output_format", "notes")
        }
        fields.update(changes)
        PromptTemplate._base_manager.filter(name=template.name, workspace_id=workspace_id).update(
            is_active=False
        )
        return PromptTemplate.objects.create(
            name=template.name,
            version=latest.version + 1,
            is_active=True,
            workspace_id=workspace_id,
            **fields,
        )


def newest_active(name: str, *, workspace_id: int | None = None) -> PromptTemplate | None:
    """The newest active version of ``name`` that ``workspace_id`` (default: the current
    workspace, else Default) reads: its own revisions and the built-in defaults."""
    workspace_id = workspace_id or workspace_of_new_rows()
    return (
        PromptTemplate._base_manager.filter(name=name, is_active=True)
        .filter(Q(workspace_id=workspace_id) | Q(workspace__isnull=True))
        .order_by("-version")
        .first()
    )


def active_template(name: str) -> PromptTemplate:
    """:func:`newest_active`, creating the defaults on first use."""
    template = newest_active(name)
    if template is None:
        prompt_templates_ensure_defaults()
        template = newest_active(name)
    if template is None:
        raise ValueError(f"no prompt template named {name!r}")
    return template
