"""Forms for the researcher's study pages."""

from __future__ import annotations

from typing import Any

from django import forms

from benchmarks.models import Character, Work
from common.request_params import BadNumber, parse_number

from .models import DEFAULT_TOM_TAGS, Study
from .scene.sampling import ALL, BY_GENRE, BY_SPEAKERS
from .selectors import works_for_studies

MAX_INVITES = 200


class NumberField(forms.IntegerField):
    """An IntegerField that reads its value with the request-number helper.

    Django's IntegerField goes through ``int()``, which takes any Unicode digit ("٣"),
    signs and spaces; every number from a request goes through one helper instead.
    """

    def to_python(self, value: Any) -> int | None:
        if value in self.empty_values:
            return None
        try:
            return parse_number(str(value).strip(), name=self.label or "number")
        except BadNumber as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class WorkField(forms.ModelMultipleChoiceField):
    """Works by primary key, each read with the request-number helper first: Django
    hands any digit string to the database, and one past 64 bits raises OverflowError
    on SQLite (a 500) instead of "not one of the available choices"."""

    def _check_values(self, value: Any) -> Any:
        for pk in value if isinstance(value, list | tuple) else [value]:
            try:
                parse_number(str(pk).strip(), name="works", maximum=2**63 - 1)
            except BadNumber:
                raise forms.ValidationError(
                    self.error_messages["invalid_choice"],
                    code="invalid_choice",
                    params={"value": pk},
                ) from None
        return super()._check_values(value)


class WorkChoiceField(WorkField):
    def label_from_instance(self, obj: Work) -> str:
        return f"{obj.title} ({obj.get_benchmark_display()}, {obj.n_test} test scenes)"


# Study fields the scene-study form sets as they are.
SCENE_SETTINGS = (
    "overlap",
    "min_seen",
    "min_unseen",
    "one_to_one",
    "reveal",
    "perturb_names",
    "open_join",
)


class StudyCreateForm(forms.Form):
    name = forms.CharField(label="Study name", max_length=200)
    works = WorkChoiceField(
        queryset=Work.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        help_text="All from one benchmark. A rater reads a whole work's history once.",
    )
    scenes = forms.ChoiceField(
        label="Test scenes",
        choices=[
            (ALL, "all masked test scenes"),
            (BY_GENRE, "a sample stratified by genre"),
            (BY_SPEAKERS, "a sample stratified by number of masked speakers"),
        ],
        initial=ALL,
    )
    per_stratum = NumberField(
        label="Scenes per stratum", min_value=1, required=False, help_text="for a sample"
    )
    seed = NumberField(
        min_value=0, max_value=2**31 - 1, initial=0, help_text="sampling and name seed"
    )
    overlap = NumberField(label="Raters per scene", min_value=1, max_value=50, initial=2)
    min_seen = NumberField(
        label="At least … who have seen the work", min_value=0, max_value=50, initial=0
    )
    min_unseen = NumberField(label="At least … who have not", min_value=0, max_value=50, initial=0)
    one_to_one = forms.BooleanField(
        label="One-to-one: two masked speakers of a scene cannot be the same character",
        required=False,
    )
    reveal = forms.ChoiceField(
        label="Show the answers", choices=Study.Reveal.choices, initial=Study.Reveal.AT_END
    )
    perturb_names = forms.BooleanField(
        label="Perturb names: show gender-matched common names (paper Appendix A)",
        required=False,
    )
    open_join = forms.BooleanField(
        label="Open to rater accounts: raters who log in may join from their home page "
        "(otherwise only invite links)",
        required=False,
    )
    tags = forms.CharField(
        label="ToM-dimension tags",
        widget=forms.Textarea(attrs={"rows": 11}),
        initial="\n".join(DEFAULT_TOM_TAGS),
        help_text="one per line (default: Table 3 of ToM-in-AMC)",
    )
    instructions = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False)
    consent = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)

    def __init__(self, *args: Any, study: Study | None = None, **kwargs: Any) -> None:
        """``study``: the draft being edited (its own name is not taken)."""
        super().__init__(*args, **kwargs)
        self.study = study
        self.fields["works"].queryset = works_for_studies()

    @classmethod
    def for_study(cls, study: Study, data: Any = None) -> StudyCreateForm:
        """The form for editing ``study``, filled with its settings."""
        sampling = study.sampling or {}
        initial = {
            "name": study.name,
            "works": [sw.work_id for sw in study.study_works.order_by("position")],
            "scenes": sampling.get("by", ALL) if sampling.get("mode") == "stratified" else ALL,
            "per_stratum": sampling.get("per_stratum"),
            "tags": "\n".join(study.tags),
            **{name: getattr(study, name) for name in (*SCENE_SETTINGS, "seed")},
            "instructions": study.instructions,
            "consent": study.consent,
        }
        return cls(data, initial=initial, study=study)

    def sampling_changed(self) -> bool:
        """Whether the scenes must be drawn again: a sampling setting differs from the
        study's (a new study always draws them)."""
        if self.study is None:
            return True
        works = sorted(w.pk for w in self.cleaned_data["works"])
        if works != sorted(self.initial["works"]):
            return True
        return any(
            self.cleaned_data[name] != self.initial.get(name)
            for name in ("scenes", "per_stratum", "seed")
        )

    def clean_name(self) -> str:
        from .participation.recruitment import study_name_taken

        name = self.cleaned_data["name"].strip()
        if study_name_taken(name, exclude_id=self.study.pk if self.study else None):
            raise forms.ValidationError("a study with this name exists already; choose another")
        return name

    def clean_tags(self) -> list[str]:
        tags = list(dict.fromkeys(_lines(self.cleaned_data["tags"])))
        if not tags:
            raise forms.ValidationError("give at least one tag")
        if too_long := [t for t in tags if len(t) > 60]:
            raise forms.ValidationError(f"tags are at most 60 characters: {too_long[0][:60]}…")
        return tags

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        works = data.get("works") or []
        if len({w.benchmark for w in works}) > 1:
            self.add_error("works", "choose works of one benchmark")
        if data.get("scenes") in (BY_GENRE, BY_SPEAKERS) and not data.get("per_stratum"):
            self.add_error("per_stratum", "a sample needs a number of scenes per stratum")
        overlap = data.get("overlap") or 0
        if (data.get("min_seen") or 0) + (data.get("min_unseen") or 0) > overlap:
            self.add_error("min_unseen", "the two minimums together exceed the raters per scene")
        return data

    def study_settings(self) -> dict[str, Any]:
        """Study fields for ``study_create``."""
        d = self.cleaned_data
        return {
            **{k: d[k] for k in SCENE_SETTINGS},
            "seed": d["seed"],
            "tags": d["tags"],
            "instructions": d["instructions"],
            "consent": d["consent"],
        }


class StudyTextsForm(forms.Form):
    instructions = forms.CharField(widget=forms.Textarea(attrs={"rows": 8}), required=False)
    consent = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False)


class InviteForm(forms.Form):
    count = NumberField(
        label="Number of links", min_value=1, max_value=MAX_INVITES, required=False, initial=1
    )
    labels = forms.CharField(
        label="Or one label per line",
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        help_text="who each link is for (e.g. a pseudonym); blank: rater 1, rater 2, …",
    )

    def labels_for(self, existing: int) -> list[str]:
        labels = _lines(self.cleaned_data.get("labels") or "")
        if labels:
            return [label[:200] for label in labels]
        return [f"rater {existing + i + 1}" for i in range(self.cleaned_data["count"])]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        labels = _lines(data.get("labels") or "")
        if not labels and not data.get("count"):
            raise forms.ValidationError("give a number of links or their labels")
        if len(labels) > MAX_INVITES:
            raise forms.ValidationError(f"at most {MAX_INVITES} links at a time")
        return data


class AliasForm(forms.Form):
    """One textarea per main character of a work: one alias per line."""

    def __init__(self, *args: Any, characters: list[Character], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.characters = characters
        for c in characters:
            self.fields[f"aliases_{c.pk}"] = forms.CharField(
                label=c.name,
                required=False,
                initial="\n".join(c.aliases),
                widget=forms.Textarea(attrs={"rows": 3}),
            )

    def aliases(self) -> list[tuple[Character, list[str]]]:
        return [(c, _lines(self.cleaned_data[f"aliases_{c.pk}"])) for c in self.characters]


class GenderForm(forms.Form):
    """The researcher's gender for each main character (used to match perturbed names).

    "guess" leaves a character to gender-guesser; any other choice is stored as a
    manual override.
    """

    GUESS = ""

    def __init__(self, *args: Any, characters: list[Character], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.characters = characters
        choices = [
            (self.GUESS, "guess from the name"),
            (Character.Gender.FEMALE, "female"),
            (Character.Gender.MALE, "male"),
            (Character.Gender.OTHER, "other (androgynous name)"),
        ]
        for c in characters:
            manual = c.gender_source == Character.GenderSource.MANUAL
            self.fields[f"gender_{c.pk}"] = forms.ChoiceField(
                label=c.name,
                choices=choices,
                required=False,
                initial=c.gender if manual else self.GUESS,
            )

    def overrides(self) -> list[tuple[Character, str]]:
        """(character, gender) for each new or changed manual override."""
        out = []
        for c in self.characters:
            chosen = self.cleaned_data.get(f"gender_{c.pk}") or self.GUESS
            manual = c.gender_source == Character.GenderSource.MANUAL
            if chosen != self.GUESS and (not manual or chosen != c.gender):
                out.append((c, chosen))
        return out
