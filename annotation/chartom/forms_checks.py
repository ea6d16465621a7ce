"""The researcher's forms on the checks page: a note-check sample and a judgement sample."""

from __future__ import annotations

from typing import Any

from django import forms

from common.scoping import ScopedModelChoiceField

from . import judgement, note_checks
from .models import NoteBatch


class NoteCheckSampleForm(forms.Form):
    batch = ScopedModelChoiceField(queryset=NoteBatch.objects.order_by("-created_at"))
    size = forms.IntegerField(
        min_value=1, max_value=100_000, initial=100, help_text="notes (the paper: 100)"
    )
    seed = forms.IntegerField(min_value=0, initial=0, help_text="same seed, same notes")
    k = forms.IntegerField(
        min_value=1,
        max_value=note_checks.MAX_K,
        initial=2,
        label="Annotators per note",
        help_text="the paper: 2",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, prefix="notes", **kwargs)


class JudgementSampleForm(forms.Form):
    # Experts see the sample's name: a run or model name there would unblind them.
    name = forms.CharField(max_length=200, help_text="experts see it: do not name a model or run")
    runs = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple, help_text="generative CharToM-QA runs"
    )
    size = forms.IntegerField(min_value=1, max_value=100_000, initial=50, help_text="answers")
    seed = forms.IntegerField(min_value=0, initial=0)
    k = forms.IntegerField(
        min_value=1, max_value=judgement.MAX_K, initial=2, label="Experts per answer"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, prefix="judgement", **kwargs)
        self.fields["runs"].choices = [
            (str(r["pk"]), f"#{r['pk']} {r['name']} ({r['answers']} answers)")
            for r in judgement.generative_runs()
        ]

    def service_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "run_ids": [int(pk) for pk in data["runs"]],
            "size": data["size"],
            "seed": data["seed"],
            "k": data["k"],
        }
