"""Forms of the annotation pages: starting a DynToM generation job."""

from __future__ import annotations

from typing import Any

from django import forms

from common.scoping import ScopedModelChoiceField
from modeling.models import Backend

from ...models import DEFAULT_SCENARIOS, MAX_SCENARIOS, MIN_SCENARIOS


class GenerationJobForm(forms.Form):
    backend = ScopedModelChoiceField(queryset=Backend.objects.order_by("name"))
    model = forms.CharField(
        max_length=255, required=False, help_text="Default: the backend's default model."
    )
    stage_count = forms.IntegerField(
        min_value=1, max_value=500, initial=1, label="Stages", help_text="How many to generate."
    )
    scenario_count = forms.IntegerField(
        min_value=MIN_SCENARIOS,
        max_value=MAX_SCENARIOS,
        initial=DEFAULT_SCENARIOS,
        label="Scenarios per stage",
        help_text=f"N, from {MIN_SCENARIOS} to {MAX_SCENARIOS}.",
    )
    seed = forms.IntegerField(
        min_value=0,
        initial=0,
        help_text="Draws the contexts from the pools; the same seed draws the same ones.",
    )
    budget_tokens = forms.IntegerField(
        min_value=1, required=False, label="Budget (tokens)", help_text="Stop before exceeding."
    )

    def service_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "backend": data["backend"],
            "model": data["model"],
            "stage_count": data["stage_count"],
            "scenario_count": data["scenario_count"],
            "seed": data["seed"],
            "budget_tokens": data["budget_tokens"],
        }
