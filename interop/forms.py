"""The export page's form: what to export, for which harness, narrowed how."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from benchmarks.models import Benchmark, Split, Work
from modeling.pipelines.generic import parse_categories
from studies.choice.generic import GenericFacts, generic_facts
from studies.models import Study

from .export import (
    DYNTOM,
    HARNESS_LABELS,
    HARNESSES,
    INSPECT,
    INSPECT_PLAIN,
    ITEM_SET,
    LM_EVAL,
    STUDY,
    ExportError,
    ExportRequest,
)
from .exporting import APPLIES, error_param, stage_keys

SOURCE_LABELS = {
    ITEM_SET: "An item set (a mapped benchmark)",
    DYNTOM: "DynToM stages",
    STUDY: "A study's items",
}
HARNESS_HELP = {
    INSPECT: "Inspect's multiple_choice() solver and choice() scorer: the model picks a "
    "letter among the options.",
    INSPECT_PLAIN: "The exact prompt our engine sends, answered by plain generation; ToMLab "
    "reads each reply with its own parser on import. Item sets and their studies only.",
    LM_EVAL: "A multiple_choice task scored by log-likelihood (open-weight models through "
    "lm_eval --model hf or vllm).",
}
# A study id the database can hold: a longer number is refused by the field, not the query.
MAX_ID = 2**31 - 1
# The studies whose items export (the others are refused with a word on the field).
EXPORTABLE_STUDIES = (Benchmark.GENERIC, Benchmark.DYNTOM)


class HarnessExportForm(forms.Form):
    source = forms.ChoiceField(
        choices=list(SOURCE_LABELS.items()), initial=ITEM_SET, widget=forms.RadioSelect
    )
    # Choices from the request's workspace in __init__; a key typed into the query
    # string that is not among them is refused by the export, naming it.
    work = forms.CharField(
        required=False,
        label="Item set",
        widget=forms.Select,
        help_text="The mapped benchmark to export.",
    )
    works = forms.CharField(
        required=False,
        label="DynToM stages",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Stage keys (e.g. trial50), separated by commas or spaces. Blank: every "
        "stage (of the split, if one is chosen).",
    )
    split = forms.ChoiceField(
        choices=[("", "any"), *[(s.value, s.label) for s in Split if s.value]],
        required=False,
        label="DynToM split",
    )
    study = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_ID,
        widget=forms.Select,
        help_text="A multiple-choice study of a mapped benchmark or of DynToM: its test "
        "items (practice items are left out).",
    )
    harness = forms.ChoiceField(
        choices=[(h, HARNESS_LABELS[h]) for h in HARNESSES],
        initial=INSPECT,
        widget=forms.RadioSelect,
    )
    method = forms.ChoiceField(
        choices=[("vanilla", "vanilla"), ("cot", "chain of thought (cot)")],
        initial="vanilla",
        required=False,
        label="Prompt method",
        help_text="Inspect with our prompt only: the template the engine would use.",
    )
    language = forms.CharField(
        max_length=20,
        required=False,
        help_text="e.g. en or zh. Blank: the item set's first language (a study's own).",
    )
    categories = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Only items with these values, one FIELD=VALUE per line (e.g. "
        "ability=False belief); values of one field are alternatives. Blank: all items.",
    )
    limit = forms.IntegerField(
        min_value=1,
        max_value=MAX_ID,
        required=False,
        help_text="At most this many items (DynToM: stages). Blank: all.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Built per request: the managers scope them to the request's workspace.
        self.item_sets = list(
            Work.objects.filter(benchmark=Benchmark.GENERIC).order_by("title", "key")
        )
        self.fields["work"].widget.choices = [
            ("", "—"),
            *[(w.key, f"{w.title} ({w.key})") for w in self.item_sets],
        ]
        studies = Study.objects.filter(benchmark__in=EXPORTABLE_STUDIES).order_by("-pk")
        self.fields["study"].widget.choices = [
            ("", "—"),
            *[(s.pk, f"{s.name} (#{s.pk}, {s.benchmark})") for s in studies],
        ]

    @classmethod
    def initial_from(cls, query: QueryDict) -> dict[str, Any]:
        """Initial values from a link: ``?source=item_set&work=mini-tom@1``,
        ``?source=study&study=4``, ``?source=dyntom&works=trial50`` (``category`` may
        repeat, one FIELD=VALUE each)."""
        names = ("source", "work", "works", "split", "study", "harness", "language", "limit")
        initial: dict[str, Any] = {n: query[n] for n in names if query.get(n)}
        if categories := query.getlist("category"):
            initial["categories"] = "\n".join(categories)
        return initial

    def harness_choices(self) -> list[dict[str, str]]:
        """The harness radios with their one-line explanations, for the template."""
        return [
            {"choice": choice, "help": HARNESS_HELP[choice.data["value"]]}
            for choice in self["harness"]
        ]

    def item_set_facts(self) -> list[GenericFacts]:
        return generic_facts(self.item_sets)

    def clean_categories(self) -> dict[str, list[str]]:
        try:
            return parse_categories(self.cleaned_data["categories"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("source") == ITEM_SET and not data.get("work"):
            self.add_error("work", "choose the item set to export")
        if data.get("source") == STUDY and data.get("study") is None:
            self.add_error("study", "choose the study to export")
        return data

    def export_request(self) -> ExportRequest:
        """The export asked for. Only the chosen source's fields are passed on: the
        others' values stay posted from the parts of the form hidden for this source."""
        data = self.cleaned_data
        source = data["source"]
        given = {
            "work": data["work"],
            "works": stage_keys(data["works"]),
            "split": data["split"],
            "study_id": data["study"],
            "language": data["language"],
            "categories": data["categories"],
            "limit": data["limit"],
        }
        applies = {"study_id" if name == "study" else name for name in APPLIES[source]}
        return ExportRequest(
            source=source,
            harness=data["harness"],
            method=(data["method"] or "vanilla") if data["harness"] == INSPECT_PLAIN else "vanilla",
            **{name: value for name, value in given.items() if name in applies},
        )

    def add_export_error(self, exc: ExportError) -> None:
        """The export's refusal at the field it names (the form's top otherwise)."""
        name, message = error_param(exc, source=self.cleaned_data.get("source", ""))
        self.add_error(name if name in self.fields else None, message)
