"""Tests that change a live study's quotas (the product allows it on drafts only)."""

from __future__ import annotations

from typing import Any

from studies.models import SceneSlot, Study


def quotas_set(study: Study, **fields: Any) -> Study:
    """Save ``fields`` on a live study no rater has claimed a scene of yet, as if it had
    been created with them: its slots, made at go-live with the old quotas, are dropped
    and made again on the first claim (``studies.slots.slots_ensure``)."""
    for name, value in fields.items():
        setattr(study, name, value)
    study.save(update_fields=[*fields, "updated_at"])
    SceneSlot.objects.filter(study_item__study=study).delete()
    return study
