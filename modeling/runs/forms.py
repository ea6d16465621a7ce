"""Forms for the run pages: a new run (preview or start) and a template revision."""

from __future__ import annotations

import json
import re
import string
from decimal import Decimal
from typing import Any

from django import forms
from django.db.models import Count

from benchmarks.models import Benchmark, Split, Work
from common.scoping import ScopedModelChoiceField

from ..models import PromptTemplate
from ..pipelines import get_pipeline, pipeline_benchmarks
from ..pipelines.generic import parse_categories
from .backend_services import backend_selectable
from .recording import NO_CACHE

# Sampling parameters the form offers; a blank field means "the pipeline's default".
PARAM_FIELDS = ("temperature", "top_p", "max_tokens", "samples", "seed")
GENERIC = Benchmark.GENERIC
# The form's fields for a generic (mapped) benchmark's run, and where the pipeline's
# selection errors go: it names the selection key first ("language 'fr': …").
GENERIC_FIELDS = ("item_set", "language", "categories", "shuffle", "shuffle_seed")
_SELECTION_ERROR_FIELDS = {
    "works": "item_set",
    "language": "language",
    "categories": "categories",
    "limit": "limit",
}


class ItemSetChoiceField(ScopedModelChoiceField):
    def label_from_instance(self, obj: Work) -> str:
        return f"{obj.title} ({obj.key})"


class RunForm(forms.Form):
    """What a run answers and how; ``service_kwargs()`` feeds ``run_plan``/``run_create``."""

    name = forms.CharField(
        max_length=200, required=False, help_text="Default: benchmark, method and model."
    )
    benchmark = forms.ChoiceField(choices=())
    method = forms.ChoiceField(choices=())
    # Disabled backends are not offered.
    backend = ScopedModelChoiceField(queryset=backend_selectable())
    model = forms.CharField(
        max_length=255, required=False, help_text="Default: the backend's default model."
    )
    template = ScopedModelChoiceField(
        queryset=PromptTemplate.objects.order_by("name", "-version"),
        required=False,
        empty_label="the method's active template",
    )
    works = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Work keys (e.g. trial50), separated by commas or spaces; a key with "
        "spaces (a screenplay's title) as it stands. Blank: all works.",
    )
    split = forms.ChoiceField(
        choices=[("", "any"), *[(s.value, s.label) for s in Split if s.value]], required=False
    )
    limit = forms.IntegerField(min_value=1, required=False, help_text="At most this many works.")
    context = forms.TypedChoiceField(
        choices=[("", "0 (default)"), ("1000", "1k"), ("2000", "2k")],
        coerce=int,
        empty_value=None,
        required=False,
        label="Context (CharToM-QA)",
        help_text="The plot window shown, in tokens.",
    )
    responses_of = forms.IntegerField(
        min_value=1,
        required=False,
        label="Responses of run (CharToM-QA judge)",
        help_text="For judge-bonus / judge-defects: the id of the generative run to judge.",
    )
    scene_limit = forms.IntegerField(
        min_value=1,
        required=False,
        label="Scenes per work (speaker guessing)",
        help_text="At most this many scenes guessed per work.",
    )
    item_set = ItemSetChoiceField(
        queryset=Work.objects.filter(benchmark=GENERIC).order_by("title", "key"),
        required=False,
        empty_label="—",
        label=f"Item set ({GENERIC.label})",
        help_text="The imported benchmark to run.",
    )
    language = forms.CharField(
        max_length=20,
        required=False,
        label=f"Language ({GENERIC.label})",
        help_text="e.g. en or zh. Blank: the item set's first language.",
    )
    categories = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=f"Categories ({GENERIC.label})",
        help_text="Only items with these values, one FIELD=VALUE per line (e.g. "
        "ability=false belief); values of one field are alternatives. Blank: all items.",
    )
    shuffle = forms.BooleanField(
        required=False,
        label=f"Shuffle options ({GENERIC.label})",
        help_text="Show each item's options in an order drawn from the seed and the item.",
    )
    shuffle_seed = forms.IntegerField(
        min_value=0,
        max_value=2**31 - 1,
        required=False,
        label="Shuffle seed",
        help_text="Blank: 0. The same seed shows every run the same orders.",
    )
    options = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Method options, one KEY=VALUE per line (e.g. shots=20, perturb_names=true).",
    )
    temperature = forms.FloatField(min_value=0, max_value=2, required=False)
    top_p = forms.FloatField(min_value=0, max_value=1, required=False, label="Top-p")
    max_tokens = forms.IntegerField(min_value=1, required=False, label="Max tokens")
    samples = forms.IntegerField(
        min_value=1, max_value=50, required=False, help_text="Samples per prompt, averaged."
    )
    seed = forms.IntegerField(
        min_value=0,
        required=False,
        help_text="Sampling seed, for servers that honour it; sample i uses seed + i.",
    )
    send_again = forms.BooleanField(
        required=False,
        label="Send again, do not use the cache",
        help_text="Ask the model every call, even one a run asked before; the new replies "
        "replace the cached ones.",
    )
    budget_tokens = forms.IntegerField(
        min_value=1, required=False, label="Budget (tokens)", help_text="Stop before exceeding."
    )
    budget_cost = forms.DecimalField(
        min_value=Decimal(0),
        max_digits=12,
        decimal_places=6,
        required=False,
        label="Budget (cost)",
        help_text="In the backend's price unit.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        benchmarks = pipeline_benchmarks()
        pipelines = {b: get_pipeline(b) for b in benchmarks}
        # The mapped benchmarks go by their label: each item set is picked below.
        self.fields["benchmark"].choices = [
            (b, GENERIC.label if b == GENERIC else b) for b in benchmarks
        ]
        methods = dict.fromkeys(m for p in pipelines.values() for m in p.methods)
        self.fields["method"].choices = [(m, m) for m in methods]
        # static/js/run_form.js offers only the chosen benchmark's methods; the server
        # refuses any other (clean), so the page works without JavaScript too.
        self.fields["method"].widget.attrs["data-methods"] = json.dumps(
            {b: list(p.methods) for b, p in pipelines.items()}
        )
        self.pipelines = pipelines

    @classmethod
    def initial_for(cls, benchmark: str | None = None) -> dict[str, Any]:
        """Initial values: the pipeline's default sampling parameters and one sample."""
        benchmark = benchmark if benchmark in pipeline_benchmarks() else pipeline_benchmarks()[0]
        pipeline = get_pipeline(benchmark)
        defaults = {"samples": 1, **pipeline.default_params}
        return {
            "benchmark": benchmark,
            "method": pipeline.methods[0] if pipeline.methods else "",
            **{k: defaults[k] for k in PARAM_FIELDS if k in defaults},
        }

    def clean_options(self) -> dict[str, str]:
        options = {}
        for line in self.cleaned_data["options"].splitlines():
            if not line.strip():
                continue
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise forms.ValidationError(f"{line.strip()!r}: expected KEY=VALUE")
            options[key.strip()] = value.strip()
        return options

    def clean_categories(self) -> dict[str, list[str]]:
        try:
            return parse_categories(self.cleaned_data["categories"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_works(self) -> list[str]:
        # Pieces between commas and line breaks; clean() splits a piece at its spaces
        # unless it is a key as it stands (a screenplay's work key is its title).
        return [p.strip() for p in re.split(r"[,\r\n]+", self.cleaned_data["works"]) if p.strip()]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        benchmark = data.get("benchmark")
        if not benchmark:
            return data
        pipeline = self.pipelines[benchmark]
        method = data.get("method")
        if method and method not in pipeline.methods:
            self.add_error(
                "method",
                f"{method!r} is not a method for {benchmark}; choose {', '.join(pipeline.methods)}",
            )
        template = data.get("template")
        if template and template.benchmark != benchmark:
            self.add_error("template", f"{template} is a {template.benchmark} template")
        if pieces := data.get("works"):
            # Work keys are natural keys of the pipeline's benchmark in the item bank.
            words = {word for piece in pieces for word in piece.split()}
            known = set(
                Work.objects.filter(benchmark=benchmark, key__in={*pieces, *words}).values_list(
                    "key", flat=True
                )
            )
            works = [
                key for piece in pieces for key in ([piece] if piece in known else piece.split())
            ]
            data["works"] = works
            if unknown := [k for k in works if k not in known]:
                self.add_error("works", f"unknown {benchmark} work key(s): {', '.join(unknown)}")
        if benchmark == GENERIC:
            self._clean_generic(data, pipeline)
        else:
            for name in GENERIC_FIELDS:
                value = data.get(name)
                if value is not None and value is not False and value not in ("", {}):
                    self.add_error(name, f"applies to {GENERIC.label} runs only")
        return data

    def _clean_generic(self, data: dict[str, Any], pipeline: Any) -> None:
        """The item set into ``works``; the pipeline checks the language and categories
        here too, so that each error shows at its field."""
        item_set = data.get("item_set")
        if item_set is not None:
            if data.get("works") and data["works"] != [item_set.key]:
                self.add_error("works", f"the item set is {item_set.key}; leave this blank")
                return
            data["works"] = [item_set.key]
        elif not data.get("works"):
            self.add_error("item_set", "choose the item set to run")
            return
        if data.get("shuffle_seed") is not None and not data.get("shuffle"):
            self.add_error("shuffle_seed", "tick Shuffle options to use a seed")
        if self.errors:
            return
        try:
            pipeline.clean_selection(selection=self._selection(data))
        except ValueError as exc:
            message = str(exc)
            key = next((k for k in _SELECTION_ERROR_FIELDS if message.startswith(k)), None)
            self.add_error(_SELECTION_ERROR_FIELDS.get(key), message)

    @staticmethod
    def _selection(data: dict[str, Any]) -> dict[str, Any]:
        return {
            k: v
            for k, v in {
                "works": data.get("works"),
                "split": data.get("split"),
                "limit": data.get("limit"),
                "context": data.get("context"),
                "run": data.get("responses_of"),
                "scene_limit": data.get("scene_limit"),
                "language": data.get("language"),
                "categories": data.get("categories"),
            }.items()
            if v
        }

    def service_kwargs(self) -> dict[str, Any]:
        """Keyword arguments shared by ``run_plan`` and ``run_create``."""
        data = self.cleaned_data
        selection = self._selection(data)
        params = {k: data[k] for k in ("model", *PARAM_FIELDS) if data[k] not in (None, "")}
        options = dict(data["options"])
        if data.get("shuffle"):
            options["shuffle"] = True
            if data.get("shuffle_seed") is not None:
                options["shuffle_seed"] = data["shuffle_seed"]
        if options:
            params["options"] = options
        if data.get("send_again"):
            params[NO_CACHE] = True
        return {
            "benchmark": data["benchmark"],
            "method": data["method"],
            "backend": data["backend"],
            "selection": selection,
            "params": params,
            "template": data["template"],
        }


class TemplateReviseForm(forms.Form):
    """A new version of a template: its texts must use only the template's named fields."""

    system = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 6}))
    user = forms.CharField(widget=forms.Textarea(attrs={"rows": 14}))
    notes = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="What changed and why.",
    )

    def __init__(self, *args: Any, template: PromptTemplate, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.template = template

    def _check_fields(self, name: str) -> str:
        text = self.cleaned_data[name]
        allowed = set(self.template.fields)
        try:
            used = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
        except ValueError as exc:
            raise forms.ValidationError(f"{exc} (write literal braces as {{{{ and }}}})") from None
        # "{questions[0]}" or "{x.y}" would index into a field: only plain names are allowed.
        if unknown := sorted(u for u in used if u not in allowed):
            raise forms.ValidationError(
                f"unknown field(s) {', '.join('{' + u + '}' for u in unknown)}; "
                f"available: {', '.join('{' + f + '}' for f in self.template.fields) or 'none'}"
            )
        return text

    def clean_system(self) -> str:
        return self._check_fields("system")

    def clean_user(self) -> str:
        return self._check_fields("user")


BASELINE_BENCHMARKS = [("tom-in-amc", "ToM-in-AMC"), ("tvshowguess", "TVShowGuess")]


class BaselineRunForm(forms.Form):
    """A trained-baseline run (``modeling.baselines``); blank numbers keep the paper's values."""

    method = forms.ChoiceField(
        choices=[
            ("random", "Random"),
            ("majority", "Majority"),
            ("protonet", "ProtoNet"),
            ("mtl", "MTL"),
            ("leopard", "LEOPARD"),
        ]
    )
    benchmark = forms.ChoiceField(choices=BASELINE_BENCHMARKS)
    train_split = forms.ChoiceField(choices=(), initial="train", required=False)
    eval_split = forms.ChoiceField(choices=(), initial="dev", required=False)
    select_split = forms.ChoiceField(
        choices=(),
        initial="dev",
        required=False,
        help_text="Its movies' mean accuracy picks the epoch kept.",
    )
    encoder = forms.CharField(
        max_length=500,
        required=False,
        help_text="Local model directory on the GPU worker. Blank: TOMLAB_BASELINE_ENCODER.",
    )
    init_from = forms.IntegerField(
        min_value=1, required=False, label="Start from run", help_text="LEOPARD: a ProtoNet run."
    )
    epochs = forms.IntegerField(min_value=1, required=False, help_text="Blank: 20 (LEOPARD 10).")
    seed = forms.IntegerField(min_value=0, required=False)
    device = forms.ChoiceField(choices=[("cuda", "cuda"), ("cpu", "cpu")], initial="cuda")
    name = forms.CharField(max_length=200, required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Each split says how many works it holds here, and the defaults are splits that
        # hold some: the paper's train/dev are refused on an item bank without them
        # (the demo's film is a test work), and a form should not start refused.
        counts: dict[tuple[str, str], int] = {
            (row["benchmark"], row["split"]): row["n"]
            for row in Work.objects.filter(benchmark__in=[b for b, _ in BASELINE_BENCHMARKS])
            .values("benchmark", "split")
            .annotate(n=Count("id"))
        }
        labels = dict(self.fields["benchmark"].choices)
        splits = [
            (
                split.value,
                f"{split.label} ("
                + ", ".join(f"{labels[b]}: {counts.get((b, split.value), 0)}" for b in labels)
                + ")",
            )
            for split in Split
        ]
        benchmark = self.fields["benchmark"].choices[0][0]
        held = [split.value for split in Split if counts.get((benchmark, split.value))]
        for name in ("train_split", "eval_split", "select_split"):
            self.fields[name].choices = splits
            if held and self.fields[name].initial not in held:
                self.fields[name].initial = held[0]

    def service_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        params = {k: data[k] for k in ("epochs", "seed", "device") if data[k] not in (None, "")}
        return {
            "method": data["method"],
            "benchmark": data["benchmark"],
            "train_split": data["train_split"],
            "eval_split": data["eval_split"],
            "select_split": data["select_split"],
            "encoder": data["encoder"],
            "init_from": data["init_from"],
            "params": params,
            "name": data["name"],
        }
