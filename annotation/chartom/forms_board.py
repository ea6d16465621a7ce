"""Forms of the CharToM-QA board: the researcher's new-batch upload, and reading list posts."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.http import QueryDict

from common.scoping import ScopedModelChoiceField
from modeling.models import Backend

from .workflow import WorkflowError

MAX_UPLOAD_BYTES = 50 * 1024 * 1024


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one input (Django's documented recipe for ``multiple``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(d, initial) for d in data if d]
        return [single(data, initial)] if data else []


def _size_checked(upload: Any) -> Any:
    if upload is not None and upload.size > MAX_UPLOAD_BYTES:
        raise forms.ValidationError(
            f"{upload.name} is {upload.size:,} bytes, over the {MAX_UPLOAD_BYTES:,}-byte limit"
        )
    return upload


class NoteBatchUploadForm(forms.Form):
    notes = forms.FileField(
        label="Notes file",
        help_text="CSV or JSONL: book, target character, underlined text, context, note, "
        "and optionally the note author's id (stored hashed).",
    )
    books = MultipleFileField(
        label="Book texts",
        required=False,
        help_text="Plain-text novels, one or several; the Project Gutenberg header and "
        "footer are removed. Not needed for books already imported.",
    )
    book_title = forms.CharField(
        max_length=255,
        required=False,
        help_text="Only with one book: its title, when the file's header has none.",
    )
    name = forms.CharField(
        max_length=200, required=False, help_text="Default: the notes file's name."
    )
    backend = ScopedModelChoiceField(queryset=Backend.objects.order_by("name"))
    model = forms.CharField(
        max_length=255, required=False, help_text="Default: the backend's default model."
    )
    budget_tokens = forms.IntegerField(
        min_value=1, required=False, label="Budget (tokens)", help_text="Stop before exceeding."
    )

    def clean_notes(self) -> Any:
        return _size_checked(self.cleaned_data.get("notes"))

    def clean_books(self) -> list[Any]:
        return [_size_checked(b) for b in self.cleaned_data.get("books") or []]

    def service_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "notes": data["notes"],
            "books": data["books"],
            "book_title": data["book_title"],
            "name": data["name"],
            "backend": data["backend"],
            "model": data["model"],
            "budget_tokens": data["budget_tokens"],
        }


def json_list(post: QueryDict, key: str, *, field: str) -> list[Any]:
    """``post[key]`` parsed as a JSON list; WorkflowError naming ``field`` if it is not one."""
    try:
        value = json.loads(post.get(key, ""))
    except (ValueError, RecursionError):
        # ValueError also covers an integer past Python's 4,300-digit limit, and
        # RecursionError a list nested thousands deep: neither is a JSONDecodeError.
        raise WorkflowError(f"{field}: not valid JSON") from None
    if not isinstance(value, list):
        raise WorkflowError(f"{field}: expected a list")
    return value


def lines(text: str) -> list[str]:
    """The non-blank lines of a textarea: the no-JavaScript way to send a list."""
    return [line for line in text.splitlines() if line.strip()]
