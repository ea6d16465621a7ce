"""The admin's import form: what ``manage.py import_benchmark`` takes, for the browser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django import forms

from .importers import importer_formats
from .models import Benchmark, Split

PATH_MAX = 4096  # PATH_MAX on Linux: a longer path is no path
PATH_INPUT = forms.TextInput(attrs={"size": 80})


class BenchmarkImportForm(forms.Form):
    """A file or folder on the server, its format and split, and a books folder."""

    format = forms.ChoiceField(choices=[(name, name) for name in importer_formats()])
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
