"""Forms for setting up multiple-choice studies (CharToM-QA, DynToM)."""

from __future__ import annotations

from django import forms
from django.db.models import Count

from benchmarks.models import Benchmark, DynToMQuestion, Work

from ..forms import NumberField
from ..models import Study
from . import services as cs


class ChoiceWorkField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Work) -> str:
        if obj.benchmark == Benchmark.CHARTOM_QA:
            return f"{obj.title} (CharToM-QA, {obj.n_items} questions)"
        return f"{obj.key} (DynToM stage, {obj.n_items} questions)"


class ChoiceStudyForm(forms.Form):
    name = forms.CharField(label="Study name", max_length=200)
    benchmark = forms.ChoiceField(
        choices=[
            (cs.CHARTOM, "CharToM-QA: read / not read, c = 0 then c = 2k (paper 6.3)"),
            (cs.DYNTOM, "DynToM: human baseline over whole stages (paper 4.1)"),
        ]
    )
    works = ChoiceWorkField(
        queryset=Work.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        help_text="Books (CharToM-QA) or stages (DynToM), all from the benchmark chosen above.",
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
        label="Participants per stage (DynToM)",
        min_value=1,
        max_value=50,
        required=False,
        initial=1,
        help_text="CharToM-QA always asks one reader and one non-reader per question.",
    )
    reveal = forms.ChoiceField(choices=Study.Reveal.choices, initial=Study.Reveal.AT_END)
    seed = NumberField(label="Seed", min_value=0, max_value=2**31 - 1, initial=0, required=False)
    instructions = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    consent = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["works"].queryset = (
            Work.objects.filter(benchmark__in=[Benchmark.CHARTOM_QA, Benchmark.DYNTOM])
            .annotate(
                n_items=Count("qa_items", distinct=True) + Count("stage__questions", distinct=True)
            )
            .order_by("benchmark", "key")
        )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if Study.objects.filter(name=name).exists():
            raise forms.ValidationError("A study with this name exists already.")
        return name

    def clean(self):
        data = super().clean()
        benchmark, works = data.get("benchmark"), data.get("works")
        if benchmark and works:
            wrong = [w.title for w in works if w.benchmark != benchmark]
            if wrong:
                self.add_error("works", f"Not {benchmark} works: {', '.join(wrong)}.")
        return data
