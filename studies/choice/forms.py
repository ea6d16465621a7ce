"""Forms for setting up multiple-choice studies (CharToM-QA, DynToM, mapped benchmarks)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import Count

from benchmarks.models import Benchmark, DynToMQuestion, Work
from metrics.allocation import BALANCED, UNIFORM, WIDEST

from ..forms import NumberField, WorkField
from ..models import Study, StudyItem
from ..participation.recruitment import study_name_taken
from . import generic
from . import services as cs
from .allocation import (
    DEFAULT_MIN_PER_ITEM,
    DEFAULT_TARGET_POINTS,
    AllocationSpec,
    allocation_settings,
)
from .model_side import runs_of

MAX_CATEGORY_VALUE = 500


class ChoiceWorkField(WorkField):
    def label_from_instance(self, obj: Work) -> str:
        if obj.benchmark == Benchmark.CHARTOM_QA:
            return f"{obj.title} (CharToM-QA, {obj.n_items} questions)"
        if obj.benchmark == Benchmark.GENERIC:
            version = (obj.extra or {}).get("version")
            languages = ", ".join((obj.extra or {}).get("languages") or [])
            return (
                f"{obj.title}{f' v{version}' if version else ''} ({obj.n_items} mapped "
                f"items{f'; {languages}' if languages else ''})"
            )
        return f"{obj.key} (DynToM stage, {obj.n_items} questions)"


class SelectTextField(forms.CharField):
    """Text chosen from a list the form sets in ``__init__`` (a select box): any value is
    taken here and checked against the chosen benchmark by the form's ``clean``. No
    ``maxlength`` on the select (not an attribute it has); the length is still checked."""

    widget = forms.Select

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        return {}


class CategoryValuesField(forms.MultipleChoiceField):
    """Values of a mapped benchmark's category field. Which values exist depends on the
    benchmark and the field chosen in the same form, so the form's ``clean`` checks
    them (``generic.generic_sample``'s message names the unknown ones); this field only
    takes a list of short texts."""

    def valid_value(self, value: str) -> bool:
        return isinstance(value, str) and 0 < len(value) <= MAX_CATEGORY_VALUE


class ChoiceStudyForm(forms.Form):
    name = forms.CharField(label="Study name", max_length=200)
    benchmark = forms.ChoiceField(
        choices=[
            (cs.CHARTOM, "CharToM-QA: read / not read, c = 0 then c = 2k (paper 6.3)"),
            (cs.DYNTOM, "DynToM: human baseline over whole stages (paper 4.1)"),
            (cs.GENERIC, "A mapped benchmark: its multiple-choice items, drawn by category"),
        ]
    )
    works = ChoiceWorkField(
        queryset=Work.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        help_text="Books (CharToM-QA), stages (DynToM) or one mapped benchmark, all from the "
        "benchmark chosen above.",
    )
    questions = NumberField(
        label="Questions to sample (CharToM-QA)",
        min_value=1,
        max_value=5000,
        required=False,
        initial=cs.DEFAULT_QUESTIONS,
        help_text="Spread evenly over the books; the paper used 150 from 5 books.",
    )
    stage_percent = NumberField(
        label="Share of stages, % (DynToM)",
        min_value=1,
        max_value=100,
        required=False,
        initial=int(cs.DEFAULT_STAGE_FRACTION * 100),
        help_text="A seeded random share of the chosen stages; the paper used 30%.",
    )
    question_types = forms.MultipleChoiceField(
        label="Question types (DynToM)",
        choices=DynToMQuestion.QuestionType.choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="None ticked: every question of each stage.",
    )
    overlap = NumberField(
        label="Participants per stage (DynToM) or per item (mapped items)",
        min_value=1,
        max_value=50,
        required=False,
        initial=1,
        help_text="CharToM-QA always asks one reader and one non-reader per question.",
    )
    # -- a mapped benchmark (generic.GenericSpec) -------------------------------------
    # Choices (and the values offered) depend on the mapped benchmarks in the item bank:
    # set in __init__, checked against the chosen benchmark in clean().
    language = SelectTextField(
        label="Language (mapped items)",
        required=False,
        max_length=20,
        help_text="The language items are shown in; blank: the benchmark's first.",
    )
    category_field = SelectTextField(
        label="Sample by (mapped items)",
        required=False,
        max_length=100,
        help_text="A category field: every chosen value gets its share of the items.",
    )
    category_values = CategoryValuesField(
        label="Values to include",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every value of the field.",
    )
    per_category = NumberField(
        label="Items per value",
        min_value=1,
        max_value=generic.MAX_ITEMS,
        required=False,
        help_text="Each chosen value gets this many items.",
    )
    items_total = NumberField(
        label="Or items in all",
        min_value=1,
        max_value=generic.MAX_ITEMS,
        required=False,
        help_text="Shared among the values as evenly as their items allow. Neither: every "
        "item of the chosen values.",
    )
    items_per_participant = NumberField(
        label="Items per participant",
        min_value=1,
        max_value=generic.MAX_ITEMS,
        required=False,
        help_text="The batch one participant answers; blank: all the items.",
    )
    option_order = forms.ChoiceField(
        label="Option order",
        choices=[
            ("shuffled", "shuffled per participant"),
            ("fixed", "as in the benchmark"),
        ],
        initial="shuffled",
        required=False,
    )
    practice_items = NumberField(
        label="Practice items",
        min_value=0,
        max_value=20,
        required=False,
        initial=0,
        help_text="Drawn from the items left over; shown first, with the answer, never counted.",
    )
    attention_items = NumberField(
        label="Attention checks",
        min_value=0,
        max_value=20,
        required=False,
        initial=0,
        help_text="Drawn from the items left over; each tells the participant which option "
        "to choose, and failures feed the exclusion rule.",
    )
    practice_ids = forms.CharField(
        label="Practice items by id",
        required=False,
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Item ids, one a line or comma-separated (besides those drawn).",
    )
    attention_ids = forms.CharField(
        label="Attention checks by id",
        required=False,
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Item ids, one a line or comma-separated (besides those drawn).",
    )
    attention_instruction = forms.CharField(
        label="Attention-check instruction",
        required=False,
        max_length=500,
        initial=generic.DEFAULT_ATTENTION_INSTRUCTION,
        help_text="Shown under the check's question; {option} is the option to choose.",
    )
    # -- how a mapped benchmark's answers are allocated (AllocationSpec) -----
    allocation = forms.ChoiceField(
        label="Allocation of answers (mapped items)",
        choices=[
            (UNIFORM, "uniform: every item gets the same number of answers"),
            (BALANCED, "balanced by category: more answers where a stratum's estimate is widest"),
            (WIDEST, "widest comparison: more answers where human - model is least certain"),
        ],
        initial=UNIFORM,
        required=False,
        help_text="Every design spends the same budget: participants per item x test items "
        "answers in all. An adaptive design needs items per participant below the test items.",
    )
    stratum_field = SelectTextField(
        label="Strata (allocation)",
        required=False,
        max_length=100,
        help_text="The category field the answers are allocated by; blank: the field the "
        "items are drawn by, else the benchmark's first.",
    )
    min_per_item = NumberField(
        label="Phase one: answers per item",
        min_value=1,
        max_value=50,
        required=False,
        initial=DEFAULT_MIN_PER_ITEM,
        help_text="Every item gets this many answers before any design chooses; at most "
        "the participants per item.",
    )
    runs = forms.MultipleChoiceField(
        label="Runs to compare with (widest comparison)",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Runs on the chosen benchmark; their accuracy per item is read when the "
        "study goes live and stays fixed.",
    )
    target_points = NumberField(
        label="Target half-width, points",
        min_value=1,
        max_value=50,
        required=False,
        initial=int(DEFAULT_TARGET_POINTS),
        help_text="The study page counts the answers each stratum still needs to reach a "
        "95% interval of ± this many points.",
    )
    # The stored values are the scene study's; the words are this form's own.
    reveal = forms.ChoiceField(
        label="Show the gold",
        choices=[
            (Study.Reveal.AFTER_SCENE, "after each question (DynToM: after each stage)"),
            (Study.Reveal.AT_END, "at the end of the study"),
        ],
        initial=Study.Reveal.AT_END,
    )
    seed = NumberField(label="Seed", min_value=0, max_value=2**31 - 1, initial=0, required=False)
    instructions = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    consent = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)

    # The settings that draw the items, per benchmark (the other's are ignored).
    GENERIC_FIELDS = (
        "language",
        "category_field",
        "category_values",
        "per_category",
        "items_total",
        "items_per_participant",
        "option_order",
        "practice_items",
        "attention_items",
        "practice_ids",
        "attention_ids",
        "attention_instruction",
    )
    # Stored with the items but never a reason to draw them again.
    ALLOCATION_FIELDS = ("allocation", "stratum_field", "min_per_item", "runs", "target_points")
    SAMPLING = {
        cs.CHARTOM: ("benchmark", "seed", "questions"),
        cs.DYNTOM: ("benchmark", "seed", "stage_percent", "question_types"),
        cs.GENERIC: ("benchmark", "seed", *GENERIC_FIELDS),
    }

    def __init__(self, *args, study: Study | None = None, **kwargs) -> None:
        """``study``: the draft being edited (its own name is not taken)."""
        super().__init__(*args, **kwargs)
        self.study = study
        self.fields["works"].queryset = (
            Work.objects.filter(
                benchmark__in=[Benchmark.CHARTOM_QA, Benchmark.DYNTOM, Benchmark.GENERIC]
            )
            .annotate(
                n_items=Count("qa_items", distinct=True)
                + Count("stage__questions", distinct=True)
                + Count("mc_items", distinct=True)
            )
            .order_by("benchmark", "key")
        )
        # What each mapped benchmark offers: its languages, fields and their values.
        self.generic_facts = generic.generic_facts(
            list(Work.objects.filter(benchmark=Benchmark.GENERIC).order_by("key"))
        )
        languages = dict.fromkeys(lang for f in self.generic_facts for lang in f.languages)
        fields_ = dict.fromkeys(name for f in self.generic_facts for name in f.categories)
        self.fields["language"].widget.choices = [
            ("", "the benchmark's first"),
            *((lang, lang) for lang in languages),
        ]
        self.fields["category_field"].widget.choices = [
            ("", "nothing: draw from every item"),
            *((name, name) for name in fields_),
        ]
        self.fields["stratum_field"].widget.choices = [
            ("", "the field the items are drawn by"),
            *((name, name) for name in fields_),
        ]
        self.fields["runs"].choices = [
            (str(run_id), f"{label} · {facts.work.title}")
            for facts in self.generic_facts
            for run_id, label in runs_of(facts.work.pk)
        ]

    def generic_groups(self) -> list[dict[str, Any]]:
        """The category values each mapped benchmark offers, for the page's check boxes:
        per benchmark and field, each value with its items and whether it is ticked."""
        ticked = set(self["category_values"].value() or [])
        return [
            {
                "facts": facts,
                "fields": [
                    {
                        "name": name,
                        "values": [
                            {"value": v, "items": n, "checked": v in ticked}
                            for v, n in values.items()
                        ],
                    }
                    for name, values in facts.categories.items()
                ],
            }
            for facts in self.generic_facts
        ]

    @classmethod
    def for_study(cls, study: Study, data: Any = None) -> ChoiceStudyForm:
        """The form for editing ``study``, filled with its settings."""
        sampling = study.sampling or {}
        fraction = sampling.get("stage_fraction") or cs.DEFAULT_STAGE_FRACTION
        initial = {
            "name": study.name,
            "benchmark": study.benchmark,
            "works": [sw.work_id for sw in study.study_works.order_by("position")],
            # What the draw used: a blank field fell back to the paper's figure.
            "questions": sampling.get("questions") or cs.DEFAULT_QUESTIONS,
            "stage_percent": round(fraction * 100),
            "question_types": list(sampling.get("question_types") or []),
            "overlap": study.overlap,
            **(_generic_initial(sampling) if study.benchmark == cs.GENERIC else {}),
            "reveal": study.reveal,
            "seed": study.seed,
            "instructions": study.instructions,
            "consent": study.consent,
        }
        return cls(data, initial=initial, study=study)

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if study_name_taken(name, exclude_id=self.study.pk if self.study else None):
            raise forms.ValidationError("A study with this name exists already.")
        return name

    def sampling_changed(self) -> bool:
        """Whether the items must be drawn again (a new study always draws them)."""
        if self.study is None:
            return True
        d = self.cleaned_data
        if sorted(w.pk for w in d["works"]) != sorted(self.initial["works"]):
            return True
        return any(
            _same(d.get(name)) != _same(self.initial.get(name))
            for name in self.SAMPLING[d["benchmark"]]
        )

    def sample_args(self) -> dict[str, Any]:
        """How the items are drawn: ``cs.choice_items_sample``'s (and create's) arguments."""
        d = self.cleaned_data
        benchmark = d["benchmark"]
        return {
            "benchmark": benchmark,
            "works": list(d["works"]),
            "questions": d.get("questions") if benchmark == cs.CHARTOM else None,
            "stage_fraction": (
                (d.get("stage_percent") or 30) / 100 if benchmark == cs.DYNTOM else None
            ),
            "question_types": d.get("question_types") or None,
            "generic": self.generic_spec() if benchmark == cs.GENERIC else None,
            "seed": d.get("seed") or 0,
        }

    def generic_spec(self) -> generic.GenericSpec:
        """A mapped benchmark's settings as ``generic.generic_sample`` takes them."""
        d = self.cleaned_data
        return generic.GenericSpec(
            language=d.get("language") or "",
            category_field=d.get("category_field") or "",
            category_values=tuple(d.get("category_values") or ()),
            per_category=d.get("per_category"),
            items=d.get("items_total"),
            items_per_participant=d.get("items_per_participant"),
            shuffle_options=(d.get("option_order") or "shuffled") == "shuffled",
            practice=d.get("practice_items") or 0,
            attention=d.get("attention_items") or 0,
            practice_ids=generic.ids_parse(d.get("practice_ids") or ""),
            attention_ids=generic.ids_parse(d.get("attention_ids") or ""),
            attention_instruction=(d.get("attention_instruction") or "").strip()
            or generic.DEFAULT_ATTENTION_INSTRUCTION,
        )

    def allocation_spec(self) -> AllocationSpec:
        """How a mapped benchmark's answers are allocated, as the form gives it."""
        d = self.cleaned_data
        return AllocationSpec(
            design=d.get("allocation") or UNIFORM,
            stratum_field=d.get("stratum_field") or "",
            min_per_item=d.get("min_per_item") or DEFAULT_MIN_PER_ITEM,
            runs=tuple(int(r) for r in d.get("runs") or ()),
            target_points=float(d.get("target_points") or DEFAULT_TARGET_POINTS),
        )

    def study_settings(self) -> dict[str, Any]:
        """Study fields besides the items (``studies.services.study_update``)."""
        d = self.cleaned_data
        settings_: dict[str, Any] = {"reveal": d["reveal"]}
        if d["benchmark"] in (cs.DYNTOM, cs.GENERIC):
            settings_["overlap"] = d.get("overlap") or 1
        return settings_

    def clean(self):
        data = super().clean()
        benchmark, works = data.get("benchmark"), data.get("works")
        if benchmark and works:
            wrong = [w.title for w in works if w.benchmark != benchmark]
            if wrong:
                self.add_error("works", f"Not {benchmark} works: {', '.join(wrong)}.")
            elif benchmark == cs.GENERIC:
                self._generic_check(list(works))
        return data

    def _generic_check(self, works: list[Work]) -> None:
        """A mapped benchmark's settings, drawn once: a setting the benchmark cannot meet
        is an error on its own field (the draw is repeated when the study is made)."""
        if len(works) != 1:
            self.add_error("works", "Choose one mapped benchmark: a study covers one.")
            return
        if self.errors:
            return
        try:
            items, sampling = generic.generic_sample(
                work=works[0], spec=self.generic_spec(), seed=self.cleaned_data.get("seed") or 0
            )
            allocation_settings(
                self.allocation_spec(),
                work=works[0],
                sampling=sampling,
                overlap=self.cleaned_data.get("overlap") or 1,
                test_items=sum(1 for _, f in items if f["role"] == StudyItem.Role.TEST),
            )
        except generic.GenericSpecError as exc:
            name = {"items": "items_total", "practice": "practice_items"}.get(exc.field, exc.field)
            name = {"attention": "attention_items"}.get(name, name)
            self.add_error(name if name in self.fields else None, exc.reason)


def _generic_initial(sampling: dict[str, Any]) -> dict[str, Any]:
    """A generic study's form fields from its ``sampling`` (what the draw used)."""
    spec = generic.GenericSpec.from_sampling(sampling)
    return {
        "language": spec.language,
        "category_field": spec.category_field,
        "category_values": list(spec.category_values),
        "per_category": spec.per_category,
        "items_total": spec.items,
        "items_per_participant": spec.items_per_participant,
        "option_order": "shuffled" if spec.shuffle_options else "fixed",
        "practice_items": spec.practice,
        "attention_items": spec.attention,
        "practice_ids": "\n".join(spec.practice_ids),
        "attention_ids": "\n".join(spec.attention_ids),
        "attention_instruction": spec.attention_instruction,
        **_allocation_initial(sampling),
    }


def _allocation_initial(sampling: dict[str, Any]) -> dict[str, Any]:
    spec = AllocationSpec.from_sampling(sampling)
    return {
        "allocation": spec.design,
        "stratum_field": spec.stratum_field,
        "min_per_item": spec.min_per_item,
        "runs": [str(r) for r in spec.runs],
        "target_points": round(spec.target_points),
    }


def _same(value: Any) -> Any:
    """A setting as compared for "changed": blank or 0 is None, a ticked list unordered."""
    if isinstance(value, (list, tuple)):
        return sorted(value) or None
    return value or None


class InstructedItemForm(forms.Form):
    """An attention check the researcher writes on a mapped benchmark's study: the
    question, its options and the option participants are told to pick. Checked by
    ``generic.instructed_parse``, whose errors land on the field they name."""

    instructed_question = forms.CharField(
        label="Question",
        max_length=generic.INSTRUCTED_QUESTION_MAX,
        widget=forms.TextInput(attrs={"placeholder": "Select 'Iris' for this question."}),
        help_text="what participants read; say which option to pick",
    )
    instructed_options = forms.CharField(
        label="Options",
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "Anna\nIris\nMaya"}),
        help_text=f"one a line, {generic.INSTRUCTED_OPTIONS_MIN} to "
        f"{generic.INSTRUCTED_OPTIONS_MAX}; shown in a shuffled order when the study shuffles",
    )
    instructed_answer = forms.CharField(
        label="Instructed answer",
        max_length=generic.INSTRUCTED_OPTION_MAX,
        help_text="the option participants must pick: one of the options, as written",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        try:
            data["instructed"] = generic.instructed_parse(
                question=data["instructed_question"],
                options=data["instructed_options"],
                answer=data["instructed_answer"],
            )
        except generic.GenericSpecError as exc:
            self.add_error(exc.field if exc.field in self.fields else None, _capital(exc.reason))
        return data


def _capital(message: str) -> str:
    return message[:1].upper() + message[1:] + ("" if message.endswith(".") else ".")
