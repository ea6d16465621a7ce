"""A researcher's upload of book texts and a notes file, made into a note batch at once.

The importers read paths, so the uploads are written to a private temporary directory
first. Books and notes are imported in one transaction: a notes file that fails after
the books went in leaves no book behind, and no LLM step is queued (the steps are sent
on commit).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from modeling.models import Backend

from .books import book_text_import
from .models import NoteBatch
from .notes_import import note_batch_import

_UNSAFE = re.compile(r"[^\w.\- ]+")


class BatchUploadError(ValueError):
    """An upload refused; ``field`` is the form field the message belongs to."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _save(upload: UploadedFile, folder: Path, index: int) -> Path:
    # The browser's file name is kept (the importers look at its suffix and show it in
    # messages) but cannot leave its folder: no separators, no leading dots. One folder
    # per file, so two uploads of the same name do not overwrite each other.
    name = _UNSAFE.sub("_", Path(upload.name or "upload").name).lstrip(".") or "upload"
    path = folder / f"{index:02d}" / name
    path.parent.mkdir()
    with path.open("wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return path


def _message(exc: Exception, path: Path, shown: str) -> str:
    """The importer's message with the temporary path replaced by the uploaded name."""
    return str(exc).replace(str(path), shown)


def note_batch_upload(
    *,
    notes: UploadedFile,
    books: Sequence[UploadedFile] = (),
    book_title: str = "",
    name: str = "",
    backend: Backend | None = None,
    model: str = "",
    budget_tokens: int | None = None,
    created_by: AbstractBaseUser | None = None,
) -> NoteBatch:
    """Import the uploaded books, then the notes as a new batch; all or nothing.

    ``book_title`` names the book when exactly one is uploaded (else the Project
    Gutenberg header's title is used). Raises :class:`BatchUploadError` with the field
    ("books" or "notes") and the importer's message naming the file.
    """
    if book_title and len(books) != 1:
        raise BatchUploadError("book_title", "give a title only when uploading one book")
    with tempfile.TemporaryDirectory(prefix="chartom-upload-") as tmp:
        folder = Path(tmp)
        book_paths = [(_save(upload, folder, i), upload.name) for i, upload in enumerate(books)]
        notes_path = _save(notes, folder, len(book_paths))
        with transaction.atomic():
            for path, shown in book_paths:
                try:
                    book_text_import(path=path, title=book_title or None)
                except ValueError as exc:
                    raise BatchUploadError("books", _message(exc, path, shown)) from None
            try:
                return note_batch_import(
                    path=notes_path,
                    name=name or Path(notes.name or "notes").stem,
                    backend=backend,
                    model=model or (backend.default_model if backend else ""),
                    budget_tokens=budget_tokens,
                    created_by=created_by,
                    enqueue=True,
                )
            except ValueError as exc:
                raise BatchUploadError(
                    "notes", _message(exc, notes_path, notes.name or "notes")
                ) from None
