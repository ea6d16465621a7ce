"""The one CSV writer every CSV export uses: cells that a spreadsheet would run as a
formula are written as text.

Spreadsheet programs evaluate a cell that begins with ``=``, ``+``, ``-`` or ``@``
(and, after their own trimming, a tab or a carriage return), so a rater's note or an
imported character name such as ``=HYPERLINK("http://…")`` would run when a
researcher opens the export. Following OWASP's "CSV Injection" advice, such a text
cell is prefixed with a single quote, which spreadsheets show as text and do not
evaluate: https://owasp.org/www-community/attacks/CSV_Injection

Numbers the app writes as numbers (``int``/``float``, e.g. a -0.5 correlation) are not
text and stay numbers: only ``str`` values are ever prefixed, so a negative number
that arrives as a string (an imported name "-1") is neutralised like any other text.

It lives in ``common`` because studies and reports both write CSVs and neither may
import the other (data flows one way).
"""

from __future__ import annotations

import csv
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

_T = TypeVar("_T")

# OWASP's list of characters that start a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class _Writable(Protocol):
    def write(self, text: str, /) -> Any: ...


def safe_cell(value: Any) -> Any:
    """``value`` ready for a CSV cell: text that would start a formula gets a ``'``."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _csv_cell(value: Any) -> Any:
    value = safe_cell(value)
    if isinstance(value, str) and "\r" in value:
        # Python's csv quotes a field only for the characters of its own line
        # terminator, so with "\n" a bare CR went out unquoted and split the row for
        # readers that take CR as a line break, starting a new line with whatever text
        # followed (an unprefixed "=..."). Line breaks inside a cell become "\n".
        value = value.replace("\r\n", "\n").replace("\r", "\n")
    return value


class SafeCSVWriter:
    """``csv.writer`` with every cell passed through :func:`safe_cell`.

    ``writerow`` returns what the underlying file's ``write`` returns, so a file-like
    whose ``write`` returns the text lets a caller stream line by line.
    """

    def __init__(self, file: _Writable, **fmtparams: Any) -> None:
        self._writer = csv.writer(file, **fmtparams)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([_csv_cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(file: _Writable, **fmtparams: Any) -> SafeCSVWriter:
    """The CSV writer for anything a person may open in a spreadsheet."""
    return SafeCSVWriter(file, **fmtparams)


class _Line:
    """A file-like whose ``write`` returns the text, so the writer yields line by line."""

    def write(self, text: str) -> str:
        return text


def csv_stream(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> Iterator[str]:
    """Safe CSV text, header first, one line per row as the rows arrive (for streaming)."""
    writer = csv_writer(_Line())
    yield writer.writerow(columns)
    for row in rows:
        yield writer.writerow([row[c] for c in columns])


_FIELD_LIMIT_LOCK = threading.Lock()


def read_with_field_limit(limit: int, read: Callable[[], _T]) -> _T:
    """``read()`` run with the csv module's cell limit at ``limit``, then put back.

    The limit is process-wide state: raising it for good would let every other CSV
    reader in the process (a study's choices import, an invite CSV) accept cells it
    promises to refuse. ``read`` must consume its reader fully (e.g. build a list).
    """
    with _FIELD_LIMIT_LOCK:
        previous = csv.field_size_limit(limit)
        try:
            return read()
        finally:
            csv.field_size_limit(previous)
