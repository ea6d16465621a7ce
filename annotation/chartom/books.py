"""Book texts and the plot windows cut from them (CharToM-QA stage 1).

A book is imported once from a Project Gutenberg plain-text file: BOM and CRLF are
undone and the PG header and footer (licence included) are stripped. Each reader note
then gets three plot windows: ``context_0`` is the surrounding context given with the
note; ``context_1000`` and ``context_2000`` are that many tokens of the book ending at
the end of the underlined text, i.e. the plot up to that moment.

Tokens are counted with ``settings.TOMLAB_PLOT_TOKENIZER``: ``"words"`` (words and
punctuation marks, see :class:`WordTokenizer`) or the path of a local
``tokenizer.json`` (or a directory holding one) read with the ``tokenizers`` library.
All offsets are Python ``str`` indices (code points), so accents, combining marks and
emoji count right.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction

from .models import BookText

logger = logging.getLogger(__name__)

# A PG text is a few MB at most (Monte Cristo is 2.7 MB); refuse anything far larger
# before reading it. Override with TOMLAB_IMPORT_MAX_BYTES="chartom-book=...".
BOOK_MAX_BYTES = 20 * 1024 * 1024
WINDOW_SIZES = (1000, 2000)
CUT_PREFIX = "..... "  # how the published items' contexts show that text came before

START_MARKER = re.compile(
    r"^\s*\*{3}\s*START OF (?:THE |THIS )?PROJECT GUTENBERG E-?(?:BOOK|TEXT)\b.*$",
    re.IGNORECASE | re.MULTILINE,
)
END_MARKER = re.compile(
    r"^\s*\*{3}\s*END OF (?:THE |THIS )?PROJECT GUTENBERG E-?(?:BOOK|TEXT)\b.*$",
    re.IGNORECASE | re.MULTILINE,
)
# Older texts close the story with this line just before the end marker (or instead).
END_LINE = re.compile(
    r"^\s*End of (?:the )?Project Gutenberg'?s? .*$", re.IGNORECASE | re.MULTILINE
)
PRODUCED_BY = re.compile(r"\A\s*(?:Produced|Prepared|Transcribed) by [^\n]*(?:\n[^\n]+)*\n")
HEADER_FIELD = re.compile(r"^(Title|Author):\s*(.+?)\s*$", re.MULTILINE)
SMALL_WORDS = {"a", "an", "and", "at", "de", "du", "for", "in", "la", "le", "of", "on", "the"}


class BookImportError(ValueError):
    """A book text that cannot be imported; the message names the file."""


@dataclass
class StrippedText:
    text: str
    title: str | None
    warnings: list[str] = field(default_factory=list)


def _title_case(line: str) -> str:
    if line != line.upper():
        return line
    words = line.lower().split()
    return " ".join(
        w if i and w in SMALL_WORDS else w[:1].upper() + w[1:] for i, w in enumerate(words)
    )


def _author_clean(author: str) -> str:
    # "Alexandre Dumas [père]": the bracketed note is the transcriber's, not the name.
    return " ".join(re.sub(r"\[[^\]]*\]", " ", author).split())


def gutenberg_strip(raw: str) -> StrippedText:
    """Undo BOM and CRLF, strip the PG header and footer, find the book's title.

    The title is the header's ``Title:`` (+ `` by <Author:>``); a text without a
    header gets its first line (+ a ``by ...`` line right after it), with a warning.
    A text without markers is kept whole, with a warning.
    """
    text = raw.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    warnings: list[str] = []
    start = START_MARKER.search(text)
    header = text[: start.start()] if start else ""
    fields = {m.group(1).lower(): m.group(2) for m in HEADER_FIELD.finditer(header)}
    if start:
        text = text[start.end() :]
    end = END_MARKER.search(text)
    if end:
        text = text[: end.start()]
    closing = None
    for closing in END_LINE.finditer(text):  # noqa: B007 - the last one is wanted
        pass
    # Before an end marker only a short tail may follow it; without one, the licence does.
    if closing is not None and (not end or len(text) - closing.end() < 2000):
        text = text[: closing.start()]
    if not start and not end:
        warnings.append("no Project Gutenberg start/end markers found; the text is kept whole")
    elif not start or not end:
        warnings.append(f"only the Project Gutenberg {'end' if start is None else 'start'} marker")
    text = PRODUCED_BY.sub("", text.lstrip("\n"), count=1).strip("\n")
    title = None
    if "title" in fields:
        title = fields["title"]
        if fields.get("author"):
            title += f" by {_author_clean(fields['author'])}"
    else:
        lines = [line.strip() for line in text.split("\n") if line.strip()][:2]
        if lines:
            title = _title_case(lines[0])
            if len(lines) > 1 and lines[1].lower().startswith("by "):
                title += f" by {_author_clean(lines[1][3:])}"
            warnings.append(f"no 'Title:' header; title taken from the first line: {title!r}")
    return StrippedText(text=text, title=title, warnings=warnings)


def _max_bytes() -> int:
    limits: dict[str, int] = getattr(settings, "TOMLAB_IMPORT_MAX_BYTES", {})
    return int(limits.get("chartom-book", BOOK_MAX_BYTES))


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
    if size > _max_bytes():
        raise BookImportError(
            f"{path}: file is {size:,} bytes, over the {_max_bytes():,}-byte limit for books "
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


# --- tokenizers ------------------------------------------------------------------------


class PlotTokenizer(Protocol):
    name: str

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Token (start, end) offsets into ``text``, as str indices, in order."""
        ...


# Combining marks, variation selectors and skin tones stay with the character before;
# a zero-width joiner glues emoji into one (a family is one token, not five).
_MARKS = (
    "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f\ufe0f\U0001f3fb-\U0001f3ff"
)
_SYMBOL = rf"[^\w\s{_MARKS}\u200d][{_MARKS}]*"
WORD_TOKEN = re.compile(rf"\w[\w{_MARKS}]*|{_SYMBOL}(?:\u200d{_SYMBOL})*")


class WordTokenizer:
    """Words and single punctuation marks: no download, close to how people count."""

    name = "words"

    def spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in WORD_TOKEN.finditer(text)]


class FileTokenizer:
    """A ``tokenizers`` tokenizer read from a local file (its offsets are str indices)."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        if path.is_dir():
            path = path / "tokenizer.json"
        try:
            self._tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the library raises a bare Exception for bad files
            raise ValueError(f"cannot read tokenizer {path}: {exc}") from None
        self.name = f"tokenizers:{path}"

    def spans(self, text: str) -> list[tuple[int, int]]:
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return [(start, end) for start, end in encoding.offsets if end > start]


@functools.lru_cache(maxsize=4)
def _file_tokenizer(path: str) -> FileTokenizer:
    return FileTokenizer(Path(path))


def plot_tokenizer(spec: str | None = None) -> PlotTokenizer:
    """The tokenizer named by ``spec`` (default ``settings.TOMLAB_PLOT_TOKENIZER``)."""
    spec = spec if spec is not None else getattr(settings, "TOMLAB_PLOT_TOKENIZER", "words")
    if not spec or spec == "words":
        return WordTokenizer()
    return _file_tokenizer(spec)


def text_tail(text: str, end: int, tokens: int, tokenizer: PlotTokenizer) -> tuple[str, bool]:
    """The last ``tokens`` tokens of ``text[:end]`` and whether anything came before.

    Only a window of characters before ``end`` is tokenized, widened until it holds
    one token more than asked (that first one may be cut by the window's edge).
    """
    width = tokens * 8 + 64
    while True:
        start = max(0, end - width)
        spans = tokenizer.spans(text[start:end])
        if len(spans) > tokens or start == 0:
            break
        width *= 2
    if len(spans) <= tokens:
        return text[start:end].lstrip(), False
    first = start + spans[-tokens][0]
    return text[first:end], bool(text[:first].strip())


# --- locating the underlined text -------------------------------------------------------

_QUOTES = {
    '"': "\u0022\u201c\u201d\u201e\u00ab\u00bb\u2033",
    "'": "\u0027\u2018\u2019\u201a`\u00b4\u2032",
}
_DASHES = "-\u2010\u2011\u2012\u2013\u2014\u2015"


@functools.lru_cache(maxsize=1)
def _accented() -> dict[str, str]:
    """Base letter -> the precomposed Latin letters that decompose to it."""
    table: dict[str, str] = {}
    for code in range(0xC0, 0x250):
        char = chr(code)
        base = "".join(
            c for c in unicodedata.normalize("NFD", char) if not unicodedata.combining(c)
        )
        if len(base) == 1 and base.isascii() and base.isalpha() and base != char:
            table.setdefault(base.lower(), "")
            table[base.lower()] += char.lower() + char.upper()
    return table


def fuzzy_pattern(fragment: str) -> re.Pattern[str]:
    """A pattern that finds ``fragment`` despite case, accents, quotes, dashes and spaces."""
    parts: list[str] = []
    marks = f"[{_MARKS}]*"
    for char in unicodedata.normalize("NFC", fragment.strip()):
        if char.isspace():
            if parts and parts[-1] != r"\s+":
                parts.append(r"\s+")
            continue
        if unicodedata.combining(char):
            continue
        quote = next((q for q in _QUOTES.values() if char in q), None)
        if quote:
            parts.append(f"[{re.escape(quote)}]")
        elif char in _DASHES:
            parts.append(f"[{re.escape(_DASHES)}]+")
        elif char.isalpha():
            base = "".join(
                c for c in unicodedata.normalize("NFD", char) if not unicodedata.combining(c)
            ).lower()
            variants = base + _accented().get(base, "") + char
            parts.append(f"[{re.escape(variants)}]{marks}")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.IGNORECASE)


def underlined_locate(
    book_text: str, underlined: str, context: str = ""
) -> tuple[int | None, list[str]]:
    """Where ``underlined`` ends in the book, and warnings; ``None`` when not found.

    Exact first, then ignoring case, accents, quote and dash styles and spacing. When
    it occurs several times, the occurrence preceded by the context's own lead-in wins;
    else the first, with a warning.
    """
    warnings: list[str] = []
    if not underlined.strip():
        return None, ["the underlined text is empty"]
    matches = [(m.start(), m.end()) for m in re.finditer(re.escape(underlined), book_text)]
    how = "exactly"
    if not matches:
        pattern = fuzzy_pattern(underlined)
        matches = [m.span() for m in pattern.finditer(book_text)]
        how = "after normalising case, accents, quotes and spaces"
    if not matches:
        return None, ["the underlined text was not found in the book"]
    if len(matches) > 1:
        at = context.find(underlined) if context else -1
        lead = context[max(0, at - 200) : at].strip() if at > 0 else ""
        if lead:
            found = fuzzy_pattern(f"{lead} {underlined}").search(book_text)
            if found:
                return found.end(), warnings
        warnings.append(
            f"the underlined text occurs {len(matches)} times in the book ({how}); "
            "the first is used"
        )
    return matches[0][1], warnings


def plot_windows(
    book_text: str,
    underlined: str,
    context: str,
    *,
    tokenizer: PlotTokenizer | None = None,
) -> dict[str, Any]:
    """The note's windows: ``context_0``, ``context_1000``, ``context_2000``.

    Also ``book_offset`` (where the underlined text ends, or None) and ``warnings``.
    A window is the plot up to the end of the underlined text, prefixed with
    ``"..... "`` when text came before it; None (with a warning) when the underlined
    text cannot be located in the book.
    """
    tokenizer = tokenizer or plot_tokenizer()
    offset, warnings = underlined_locate(book_text, underlined, context)
    windows: dict[str, Any] = {"context_0": context, "book_offset": offset, "warnings": warnings}
    for size in WINDOW_SIZES:
        if offset is None:
            windows[f"context_{size}"] = None
            continue
        tail, cut = text_tail(book_text, offset, size, tokenizer)
        windows[f"context_{size}"] = f"{CUT_PREFIX}{tail}" if cut else tail
    return windows
