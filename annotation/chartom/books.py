"""Book texts for CharToM-QA construction (stage 1), kept as :class:`BookText` rows.

A book is imported once from a Project Gutenberg plain-text file; each reader note then
gets its plot windows cut from it. The text rules (stripping the PG header and footer,
tokenizers, locating the underlined text, the windows) live in :mod:`benchmarks.books`,
below this app, so the CharToM-QA importer cuts the same windows for published items;
they are re-exported here for the construction code.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from django.db import transaction

from benchmarks.books import (
    BOOK_MAX_BYTES,
    CUT_PREFIX,
    WINDOW_SIZES,
    FileTokenizer,
    PlotTokenizer,
    StrippedText,
    WordTokenizer,
    book_max_bytes,
    fuzzy_pattern,
    gutenberg_strip,
    item_plot_windows,
    plot_tokenizer,
    plot_windows,
    text_tail,
    underlined_locate,
)

from .models import BookText

__all__ = [
    "BOOK_MAX_BYTES",
    "CUT_PREFIX",
    "WINDOW_SIZES",
    "BookImportError",
    "FileTokenizer",
    "PlotTokenizer",
    "StrippedText",
    "WordTokenizer",
    "book_max_bytes",
    "book_text_import",
    "fuzzy_pattern",
    "gutenberg_strip",
    "item_plot_windows",
    "plot_tokenizer",
    "plot_windows",
    "text_tail",
    "underlined_locate",
]

logger = logging.getLogger(__name__)


class BookImportError(ValueError):
    """A book text that cannot be imported; the message names the file."""


@transaction.atomic
def book_text_import(*, path: Path, title: str | None = None, replace: bool = False) -> BookText:
    """Import a Project Gutenberg plain-text book; idempotent by title.

    Importing the same text again changes nothing. Another text under a title already
    imported is refused unless ``replace``. Raises :class:`BookImportError` naming the
    file. Warnings (no markers, guessed title) are logged and kept on the returned
    object as ``import_warnings``.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise BookImportError(f"{path}: cannot read file: {exc.strerror or exc}") from None
    if size > book_max_bytes():
        raise BookImportError(
            f"{path}: file is {size:,} bytes, over the {book_max_bytes():,}-byte limit for books "
            "(settings.TOMLAB_IMPORT_MAX_BYTES['chartom-book'])"
        )
    try:
        raw = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BookImportError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    stripped = gutenberg_strip(raw)
    if not stripped.text.strip():
        raise BookImportError(f"{path}: no text left once the Project Gutenberg parts are removed")
    warnings = list(stripped.warnings)
    if title:  # a title given makes the guessed one moot
        warnings = [w for w in warnings if not w.startswith("no 'Title:' header")]
    title = " ".join((title or stripped.title or "").split())
    if not title:
        raise BookImportError(f"{path}: no title found; give one")
    if len(title) > BookText._meta.get_field("title").max_length:
        raise BookImportError(f"{path}: title longer than 255 characters")
    digest = hashlib.sha256(stripped.text.encode("utf-8")).hexdigest()
    book = BookText.objects.select_for_update().filter(title__iexact=title).first()
    if book is None:
        book = BookText.objects.create(
            title=title, text=stripped.text, source_name=path.name, sha256=digest
        )
    elif book.sha256 != digest:
        if not replace:
            raise BookImportError(
                f"{path}: a different text is already imported as {book.title!r} "
                f"(from {book.source_name or 'unknown'}); use replace to overwrite it"
            )
        book.text, book.sha256, book.source_name = stripped.text, digest, path.name
        book.save(update_fields=["text", "sha256", "source_name"])
    for warning in warnings:
        logger.warning("%s: %s", path.name, warning)
    book.import_warnings = warnings  # type: ignore[attr-defined]
    return book
