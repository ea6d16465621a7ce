"""Book texts and the plot windows cut from them: CharToM-QA's ``context_1000``/``2000``.

The one copy of these rules, used by the CharToM-QA importer (``--books``: windows
for published items) and by the construction workflow (:mod:`annotation.chartom`,
windows for reader notes), so both cut the same window from the same book.

A book is read from a Project Gutenberg plain-text file: BOM and CRLF are undone and
the PG header and footer (licence included) are stripped. A window is that many tokens
of the book ending at the end of the underlined text, i.e. the plot up to that moment;
``context_0`` is the surrounding context given with the note. A published item's
``context_0`` ends where its note's underlined text ends, so its own text is the anchor
(:func:`item_plot_windows`).

Tokens are counted with ``settings.TOMLAB_PLOT_TOKENIZER``: ``"words"`` (words and
punctuation marks, see :class:`WordTokenizer`) or the path of a local
``tokenizer.json`` (or a directory holding one) read with the ``tokenizers`` library.
All offsets are Python ``str`` indices (code points), so accents, combining marks and
emoji count right.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings

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


def book_max_bytes() -> int:
    """The largest book file read (``TOMLAB_IMPORT_MAX_BYTES['chartom-book']``)."""
    limits: dict[str, int] = getattr(settings, "TOMLAB_IMPORT_MAX_BYTES", {})
    return int(limits.get("chartom-book", BOOK_MAX_BYTES))


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


def _letter(char: str) -> str:
    """A pattern for one letter: either case, with or without its accent."""
    base = "".join(
        c for c in unicodedata.normalize("NFD", char) if not unicodedata.combining(c)
    ).lower()
    variants = base + _accented().get(base, "") + char
    return f"[{re.escape(variants)}][{_MARKS}]*"


def fuzzy_pattern(fragment: str) -> re.Pattern[str]:
    """A pattern that finds ``fragment`` despite case, accents, quotes, dashes and spaces."""
    parts: list[str] = []
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
            parts.append(_letter(char))
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.IGNORECASE)


def words_pattern(fragment: str) -> re.Pattern[str] | None:
    """A pattern for the words of ``fragment`` in order, whatever stands between them.

    Punctuation and spacing are ignored (a copy that dropped an exclamation mark or
    changed ``"`` to ``“`` still matches), as are case and accents; None when the
    fragment has no word.
    """
    parts: list[str] = []
    gap = r"[\W_]+"
    for char in unicodedata.normalize("NFC", fragment):
        if unicodedata.combining(char):
            continue
        if char.isalpha():
            parts.append(_letter(char))
        elif char.isalnum():
            parts.append(re.escape(char))
        elif parts and parts[-1] != gap:
            parts.append(gap)
    while parts and parts[-1] == gap:
        parts.pop()
    return re.compile("".join(parts), re.IGNORECASE) if parts else None


def _exact_pattern(fragment: str) -> re.Pattern[str]:
    return re.compile(re.escape(fragment))


# How the underlined text is looked for, strictest first; the first way that finds it
# wins. Each entry: (how, the fragment's pattern, the pattern of lead-in + fragment).
_LOCATE_TIERS = (
    ("exactly", _exact_pattern, fuzzy_pattern),
    ("after normalising case, accents, quotes and spaces", fuzzy_pattern, fuzzy_pattern),
    ("word for word, ignoring punctuation", words_pattern, words_pattern),
)
_TRAILING_MARKS = re.compile(r"[^\w\s]+")


def _spans(pattern: re.Pattern[str] | None, text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)] if pattern else []


def underlined_locate(
    book_text: str, underlined: str, context: str = ""
) -> tuple[int | None, list[str]]:
    """Where ``underlined`` ends in the book, and warnings; ``None`` when not found.

    Exact first, then ignoring case, accents, quote and dash styles and spacing, then
    word for word ignoring punctuation (the end then takes in the book's punctuation
    after the last word when the fragment ends with some). When it occurs several
    times, the occurrence preceded by the context's own lead-in wins; else the first,
    with a warning.
    """
    if not underlined.strip():
        return None, ["the underlined text is empty"]
    found_by = next(
        (
            (tier, matches)
            for tier in _LOCATE_TIERS
            if (matches := _spans(tier[1](underlined), book_text))
        ),
        None,
    )
    if found_by is None:
        return None, ["the underlined text was not found in the book"]
    (how, pattern_of, lead_pattern_of), matches = found_by
    warnings: list[str] = []
    end = matches[0][1]
    if len(matches) > 1:
        at = context.find(underlined) if context else -1
        lead = context[max(0, at - 200) : at].strip() if at > 0 else ""
        found = None
        if any(c.isalnum() for c in lead):
            lead_pattern = lead_pattern_of(f"{lead} {underlined}")
            found = lead_pattern.search(book_text) if lead_pattern else None
        if found:
            end = found.end()
        else:
            warnings.append(
                f"the underlined text occurs {len(matches)} times in the book ({how}); "
                "the first is used"
            )
    if pattern_of is words_pattern and not underlined.rstrip()[-1].isalnum():
        trailing = _TRAILING_MARKS.match(book_text, end)
        end = trailing.end() if trailing else end
    return end, warnings


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


def item_anchor(context_0: str) -> str:
    """A published item's ``context_0`` without the ``"....."`` that shows a cut before it.

    The dataset's ``context_0`` is the plot up to the end of the note's underlined
    text (the paper's Tables 18-19 show it so), so its own text is what to find in the
    book: where it ends, the underlined text ends.
    """
    text = context_0.strip()
    if text.startswith(CUT_PREFIX.strip()):
        text = text[len(CUT_PREFIX.strip()) :]
    return text.strip()


def item_plot_windows(
    book_text: str, context_0: str, *, tokenizer: PlotTokenizer | None = None
) -> dict[str, Any]:
    """:func:`plot_windows` for a published item: the anchor is its ``context_0``."""
    return plot_windows(book_text, item_anchor(context_0), context_0, tokenizer=tokenizer)


# --- which book an item is from -----------------------------------------------------------

# The first 64 KB hold a Project Gutenberg header (or the first lines): enough to
# learn a file's title without reading the whole book.
TITLE_READ_BYTES = 64 * 1024
BOOK_SUFFIXES = (".txt",)
_ARTICLES = ("the", "a", "an")


class BookReadError(ValueError):
    """A book file that cannot be read; the message names the file."""


@dataclass(frozen=True)
class BookSource:
    """A book the windows may be cut from: its title, where it is, how to read its text.

    ``read`` returns the stripped text (no Project Gutenberg header or footer) or
    raises :class:`BookReadError`.
    """

    title: str
    origin: str
    read: Callable[[], str]


def _name_words(name: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(all words, title words, author words)`` of ``"Title by Author"``.

    Folded: case and accents dropped, punctuation and bracketed notes ("Dumas [père]")
    left out, and a leading article too.
    """
    folded = "".join(
        c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c)
    ).casefold()
    words = re.findall(r"[^\W_]+", re.sub(r"\[[^\]]*\]|\([^)]*\)", " ", folded))
    if len(words) > 1 and words[0] in _ARTICLES:
        words = words[1:]
    title, author = words, []
    if "by" in words[1:]:
        at = len(words) - 1 - words[::-1].index("by")
        title, author = words[:at], words[at + 1 :]
    return tuple(words), tuple(title), tuple(author)


def book_name_match(name: str, title: str) -> int:
    """How well a CharToM-QA ``book_name`` names a book titled ``title``; 0 = not at all.

    Case, accents, punctuation, a leading article and bracketed notes do not count.
    3: the same title and author; 2: the same title, and the authors share a surname
    ("Alexandre Dumas" / "Dumas"); 1: the same title where one side gives no author
    ("Father Goriot" / "Father Goriot by Honore de Balzac", or "Stand by Me" / "Stand
    by Me by Stephen King").
    """
    name_all, name_title, name_author = _name_words(name)
    book_all, book_title, book_author = _name_words(title)
    if not name_all or not book_all:
        return 0
    if name_title == book_title and name_author == book_author:
        return 3
    if name_title == book_title and name_author and book_author:
        surname = name_author[-1] in book_author or book_author[-1] in name_author
        return 2 if surname else 0
    if name_title == book_title or name_all == book_title or book_all == name_title:
        return 1
    return 0


def book_source_pick(name: str, sources: list[BookSource]) -> list[BookSource]:
    """The sources that best match ``name`` (several when it is ambiguous, none if none)."""
    scored = [(book_name_match(name, source.title), source) for source in sources]
    best = max((score for score, _ in scored), default=0)
    return [source for score, source in scored if best and score == best]


def _book_file_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > book_max_bytes():
            raise BookReadError(
                f"{path}: file is {size:,} bytes, over the {book_max_bytes():,}-byte limit for "
                "books (settings.TOMLAB_IMPORT_MAX_BYTES['chartom-book'])"
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise BookReadError(f"{path}: cannot read file: {exc.strerror or exc}") from None
    try:
        return gutenberg_strip(raw.decode("utf-8")).text
    except UnicodeDecodeError as exc:
        raise BookReadError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def book_folder_sources(folder: Path) -> tuple[list[BookSource], list[str]]:
    """The books of a folder (``*.txt``, not in subfolders) by title, and warnings.

    A file's title is its Project Gutenberg header's ``Title:`` + `` by <Author:>``,
    else its first line (+ a ``by ...`` line), as :func:`gutenberg_strip` finds it,
    read from the file's first 64 KB; the whole text is read only when an item needs
    it. Files that are too big or have no title are left out, with a warning.
    """
    sources: list[BookSource] = []
    warnings: list[str] = []
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in BOOK_SUFFIXES)
    for path in paths:
        try:
            if not path.is_file():
                continue
            size = path.stat().st_size
            if size > book_max_bytes():
                warnings.append(
                    f"{path}: left out: {size:,} bytes, over the {book_max_bytes():,}-byte "
                    "limit for books"
                )
                continue
            with path.open("rb") as handle:
                head = handle.read(TITLE_READ_BYTES).decode("utf-8", errors="ignore")
        except OSError as exc:
            warnings.append(f"{path}: left out: cannot read file: {exc.strerror or exc}")
            continue
        title = gutenberg_strip(head).title
        if not title:
            warnings.append(f"{path}: left out: no title found in its first lines")
            continue
        sources.append(
            BookSource(title=title, origin=path.name, read=functools.partial(_book_file_text, path))
        )
    return sources, warnings


def bank_book_sources() -> list[BookSource]:
    """The books already imported for CharToM-QA, from every app that keeps some.

    Asked through :data:`benchmarks.signals.book_sources_wanted` (the construction
    workflow answers with its ``BookText`` rows), so the item bank never imports the
    apps above it.
    """
    from .signals import book_sources_wanted

    sources: list[BookSource] = []
    for _receiver, answer in book_sources_wanted.send(sender=BookSource):
        sources.extend(answer or ())
    return sources
