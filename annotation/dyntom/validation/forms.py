"""Forms of the validation pages: a new batch, a decision override, posted scores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from benchmarks.models import Benchmark, DynToMStage
from common.request_params import BadNumber, parse_number

from .rubrics import KIND_LABELS, KINDS
from .rules import OUTCOMES
from .selectors import waiting_generated_stages
from .services import ValidationError

# Radio buttons are named "score-<criterion key>", apart from the comment and CSRF token.
SCORE_PREFIX = "score-"


def scores_from_post(post: Mapping[str, str]) -> dict[str, int]:
    """criterion -> value of every ``score-<key>`` field; malformed numbers are refused."""
    values = {}
    for name in post:
        if name.startswith(SCORE_PREFIX):
            try:
                values[name[len(SCORE_PREFIX) :]] = parse_number(post[name], name=name, maximum=9)
            except BadNumber as exc:
                raise ValidationError(str(exc)) from None
    return values


class BatchCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    k = forms.IntegerField(min_value=1, max_value=20, initial=4, label="Annotators per object (k)")
    kinds = forms.MultipleChoiceField(
        choices=[(k, KIND_LABELS[k]) for k in KINDS],
        initial=list(KINDS),
        widget=forms.CheckboxSelectMultiple,
        label="Objects to score",
    )
    work_keys = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Imported DynToM stages",
        help_text="Work keys (e.g. trial149), separated by spaces, commas or new lines.",
    )
    include_generated = forms.BooleanField(
        required=False,
        initial=True,
        label="Every generated stage awaiting validation that is in no batch yet",
    )

    def clean_work_keys(self) -> list[str]:
        keys = [k for k in self.cleaned_data["work_keys"].replace(",", " ").split() if k]
        found = set(
            DynToMStage.objects.filter(
                work__benchmark=Benchmark.DYNTOM, work__key__in=keys
            ).values_list("work__key", flat=True)
        )
        missing = [k for k in keys if k not in found]
        if missing:
            raise forms.ValidationError(f"no imported DynToM stage {', '.join(missing[:10])}")
        return keys

    def service_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        generated = list(waiting_generated_stages()) if data["include_generated"] else []
        return {
            "name": data["name"],
            "k": data["k"],
            "kinds": data["kinds"],
            "stages": DynToMStage.objects.filter(
                work__benchmark=Benchmark.DYNTOM, work__key__in=data["work_keys"]
            ),
            "generated": generated,
        }


class OverrideForm(forms.Form):
    outcome = forms.ChoiceField(
        choices=[("", "no override (the rules decide)")] + [(o, o) for o in OUTCOMES],
        required=False,
    )
    reason = forms.CharField(max_length=2000, required=False)


# A reviewer's settled scores are posted as "settle-<criterion key>"; "" leaves one open.
SETTLE_PREFIX = "settle-"
FROM_SETTLED = "from-settled"


def settled_from_post(post: Mapping[str, str]) -> dict[str, int]:
    """criterion -> settled value of every non-empty ``settle-<key>`` field."""
    values = {}
    for name in post:
        if name.startswith(SETTLE_PREFIX) and post[name] != "":
            try:
                values[name[len(SETTLE_PREFIX) :]] = parse_number(post[name], name=name, maximum=9)
            except BadNumber as exc:
                raise ValidationError(str(exc)) from None
    return values


class AdjudicationForm(forms.Form):
    """A reviewer's decision: an outcome (or "the rules on my settled scores"), a reason."""

    outcome = forms.ChoiceField(
        choices=[(o, o) for o in ("keep", "discard", "regenerate")]
        + [(FROM_SETTLED, "the rules decide from my settled scores")],
        widget=forms.RadioSelect,
    )
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": "reason: say why you decide so"},
    )


class ReviewThresholdForm(forms.Form):
    spread = forms.IntegerField(
        min_value=1,
        max_value=4,
        label="Disputed from a score spread of",
        help_text="max - min of the annotators' scores on any one criterion (yes/no: 1)",
    )
    split = forms.BooleanField(
        required=False, label="A split keep/discard among the annotators is disputed too"
    )
