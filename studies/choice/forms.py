"""Forms for setting up multiple-choice studies (CharToM-QA, DynToM)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import Count

from benchmarks.models import Benchmark, DynToMQuestion, Work

from ..forms import NumberField, WorkField
from ..models import Study
from ..participation.recruitment import study_name_taken
from . import services as cs


class ChoiceWorkField(WorkField):
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
    SAMPLING = {
        cs.CHARTOM: ("benchmark", "seed", "questions"),
        cs.DYNTOM: ("benchmark", "seed", "stage_percent", "question_types"),
    }

    def __init__(self, *args, study: Study | None = None, **kwargs) -> None:
        """``study``: the draft being edited (its own name is not taken)."""
        super().__init__(*args, **kwargs)
        self.study = study
        self.fields["works"].queryset = (
            Work.objects.filter(benchmark__in=[Benchmark.CHARTOM_QA, Benchmark.DYNTOM])
            .annotate(
                n_items=Count("qa_items", distinct=True) + Count("stage__questions", distinct=True)
            )
            .order_by("benchmark", "key")
        )

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
            "seed": d.get("seed") or 0,
        }

    def study_settings(self) -> dict[str, Any]:
        """Study fields besides the items (``studies.services.study_update``)."""
        d = self.cleaned_data
        settings_: dict[str, Any] = {"reveal": d["reveal"]}
        if d["benchmark"] == cs.DYNTOM:
            settings_["overlap"] = d.get("overlap") or 1
        return settings_

    def clean(self):
        data = super().clean()
        benchmark, works = data.get("benchmark"), data.get("works")
        if benchmark and works:
            wrong = [w.title for w in works if w.benchmark != benchmark]
            if wrong:
                self.add_error("works", f"Not {benchmark} works: {', '.join(wrong)}.")
        return data


def _same(value: Any) -> Any:
    """A setting as compared for "changed": blank or 0 is None, a ticked list unordered."""
    if isinstance(value, (list, tuple)):
        return sorted(value) or None
    return value or None
