"""The admin's import form: what ``manage.py import_benchmark`` takes, for the browser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django import forms

from .importers import importer_formats
from .models import Benchmark, Split

PATH_MAX = 4096  # PATH_MAX on Linux: a longer path is no path
PATH_INPUT = forms.TextInput(attrs={"size": 80})
MAPPING_MAX = 200_000  # characters of a field mapping written in the form
MAPPING_PLACEHOLDER = """{
  "id": "id",
  "context": "story",
  "question": "question",
  "options": "choices",
  "answer": "answer",
  "categories": {"ability": "ability"}
}"""


class BenchmarkImportForm(forms.Form):
    """A file or folder on the server, its format and split, and a books folder."""

    # A mapped import needs its mapping, name and version: the upload page and the
    # command take them, this form does not.
    format = forms.ChoiceField(
        choices=[(name, name) for name in importer_formats() if name != Benchmark.GENERIC]
    )
    path = forms.CharField(
        max_length=PATH_MAX,
        widget=PATH_INPUT,
        label="File or folder",
        help_text="A path on the server, as for manage.py import_benchmark.",
    )
    split = forms.ChoiceField(
        choices=[(s.value, s.label) for s in Split],
        required=False,
        help_text="Recorded on the imported works when the source does not say.",
    )
    books = forms.CharField(
        max_length=PATH_MAX,
        widget=PATH_INPUT,
        required=False,
        label="Books folder (CharToM-QA)",
        help_text="A folder of Project Gutenberg plain-text novels on the server. Items "
        "without context_1000/context_2000 get them cut from their book, found there by "
        "its title and author, or among the books already imported for construction.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("books", "").strip() and data.get("format") != Benchmark.CHARTOM_QA:
            self.add_error("books", "A books folder applies to chartom-qa imports.")
        return data

    def service_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        books = data["books"].strip()
        return {
            "format_name": data["format"],
            "path": Path(data["path"].strip()),
            "split": data["split"] or "",
            "books": Path(books) if books else None,
        }


# -- imports from uploaded files (/data/import/) ---------------------------------------


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one input (Django's documented recipe)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(d, initial) for d in data if d]
        return [single(data, initial)] if data else []


def _upload_format_choices() -> list[tuple[str, str]]:
    from .uploads import upload_sources

    return [(source.name, source.label) for source in upload_sources()]


class ImportUploadForm(forms.Form):
    """Files and the chosen format's options; the service checks which options apply."""

    format = forms.ChoiceField(choices=_upload_format_choices)
    files = MultipleFileField(label="Files", required=False)
    books = MultipleFileField(label="Books (.txt)", required=False)
    split = forms.ChoiceField(
        choices=[(s.value, s.label or "—") for s in Split], required=False, label="Split"
    )
    title = forms.CharField(max_length=255, required=False)
    stage = forms.CharField(max_length=100, required=False)
    name = forms.CharField(max_length=200, required=False)
    benchmark = forms.ChoiceField(
        choices=[("", "from each line"), *[(b.value, b.label) for b in Benchmark]],
        required=False,
    )
    model = forms.CharField(max_length=255, required=False)
    strict = forms.ChoiceField(choices=[("", "no"), ("yes", "yes")], required=False)
    version = forms.CharField(max_length=50, required=False)
    preset = forms.ChoiceField(choices=[], required=False)
    mapping = forms.CharField(
        required=False,
        strip=False,
        max_length=MAPPING_MAX,
        widget=forms.Textarea(
            attrs={
                "rows": 16,
                "cols": 90,
                "spellcheck": "false",
                "autocapitalize": "off",
                "class": "code",
                "placeholder": MAPPING_PLACEHOLDER,
            }
        ),
    )
    save_as = forms.CharField(max_length=100, required=False)
    keep_unknown = forms.ChoiceField(choices=[("", "no"), ("yes", "yes")], required=False)
    id_field = forms.CharField(max_length=100, required=False)
    item_map = forms.CharField(
        required=False,
        strip=False,
        max_length=2_000_000,
        widget=forms.Textarea(
            attrs={"rows": 6, "cols": 90, "spellcheck": "false", "class": "code"}
        ),
    )

    OPTION_FIELDS = (
        "title",
        "stage",
        "name",
        "version",
        "split",
        "benchmark",
        "model",
        "strict",
        "preset",
        "mapping",
        "save_as",
        "keep_unknown",
        "id_field",
        "item_map",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from .selectors import mapping_presets
        from .uploads import OPTION_LABELS

        super().__init__(*args, **kwargs)
        source = self.chosen_source()
        for name in OPTION_LABELS:
            label, help_text = source.option_label(name) if source else OPTION_LABELS[name]
            self.fields[name].label = label
            self.fields[name].help_text = help_text
        # Built in the request: the saved presets are the request's workspace's.
        self.presets = mapping_presets() if source and "preset" in source.options else []
        self.fields["preset"].choices = [
            ("", "None: write the mapping below"),
            *[
                (p["name"], f"{p['name']} (built in)" if p["builtin"] else p["name"])
                for p in self.presets
            ],
        ]

    def chosen_source(self):
        """The format chosen (bound or initial), or None."""
        from .uploads import UploadRefused, upload_source_get

        name = self.data.get("format") if self.is_bound else self.initial.get("format")
        try:
            return upload_source_get(name)
        except UploadRefused:
            return None

    def option_fields(self) -> list[forms.BoundField]:
        """The bound fields of the chosen format's options, in the form's order."""
        source = self.chosen_source()
        wanted = source.options if source else ()
        return [self[name] for name in self.OPTION_FIELDS if name in wanted]

    def service_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "format_name": data["format"],
            "files": data["files"],
            "books": data["books"],
            "options": {name: data.get(name) or "" for name in self.OPTION_FIELDS},
        }

    def mapping_field(self) -> forms.BoundField | None:
        """The mapping's textarea when the chosen format takes one (shown on its own)."""
        source = self.chosen_source()
        return self["mapping"] if source and "mapping" in source.options else None
