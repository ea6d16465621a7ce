"""Prompt templates as versioned, editable records: defaults seeded, revisions, the active one."""

from __future__ import annotations

from typing import Any

from django.db import transaction

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
        _, was_created = PromptTemplate.objects.get_or_create(
            name=spec["name"], version=spec["version"], defaults=spec
        )
        created += was_created
    return created


def prompt_template_revise(*, template: PromptTemplate, **changes: Any) -> PromptTemplate:
    """Edit a template by adding a new version; runs keep pointing at the old one."""
    with transaction.atomic():
        latest = (
            PromptTemplate.objects.select_for_update()
            .filter(name=template.name)
            .order_by("-version")
            .first()
        )
        fields = {
            f: getattr(template, f)
            for f in ("benchmark", "method", "system", "user", "fields", "output_format", "notes")
        }
        fields.update(changes)
        PromptTemplate.objects.filter(name=template.name).update(is_active=False)
        return PromptTemplate.objects.create(
            name=template.name, version=latest.version + 1, is_active=True, **fields
        )


def active_template(name: str) -> PromptTemplate:
    """The newest active version of a template, creating the defaults on first use."""
    template = PromptTemplate.objects.filter(name=name, is_active=True).order_by("-version").first()
    if template is None:
        prompt_templates_ensure_defaults()
        template = (
            PromptTemplate.objects.filter(name=name, is_active=True).order_by("-version").first()
        )
    if template is None:
        raise ValueError(f"no prompt template named {name!r}")
    return template
