"""The researcher's forms on the checks page (a note-check sample, a judgement sample) and
on the reviewer queue (a sample's threshold, a decision)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms

from common.scoping import ScopedModelChoiceField

from . import judgement, note_checks
from .models import DEFAULT_REVIEW_SPREAD, NoteBatch, NoteCheckLabel, TaskKind


class ReviewSpreadField(forms.DecimalField):
    """The reviewer queue's threshold of a judgement sample (0.1 to 1.0, steps of 0.1)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("label", "Review when scores differ by")
        kwargs.setdefault(
            "help_text", "an answer goes to the reviewer queue when max - min reaches this"
        )
        super().__init__(
            min_value=Decimal("0.1"),
            max_value=Decimal("1.0"),
            decimal_places=1,
            initial=Decimal(str(DEFAULT_REVIEW_SPREAD)),
            **kwargs,
        )

    def clean(self, value: Any) -> float | None:  # type: ignore[override]
        cleaned = super().clean(value)
        return None if cleaned is None else float(cleaned)


class ReviewSpreadForm(forms.Form):
    """The threshold alone, on the reviewer queue (researchers)."""

    spread = ReviewSpreadField()


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
    # Left empty: the default threshold.
    review_spread = ReviewSpreadField(required=False)

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
            "review_spread": data["review_spread"],
        }


class CheckDecisionForm(forms.Form):
    """A reviewer's decision on a check: the settled label or score, and a reason."""

    value = forms.ChoiceField(widget=forms.RadioSelect)
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": "reason: say why you decide so"},
    )

    def __init__(self, *args: Any, kind: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["value"]
        if kind == TaskKind.NOTE_CHECK:
            field.label, field.choices = "Settled label", NoteCheckLabel.choices
            field.error_messages["required"] = "label: choose the settled label"
        else:
            field.label = "Settled score"
            field.choices = [(f"{v:.1f}", f"{v:.1f}") for v in judgement.SCORES]
            field.error_messages["required"] = "score: choose the settled score"
