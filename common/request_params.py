"""Numbers from requests (path, query string, form fields): bounded ASCII digits only.

``int()`` is too generous for input: it accepts any Unicode decimal digit ("٣" is 3),
surrounding spaces, a sign and underscores, and it raises ``ValueError`` past Python's
4,300-digit limit, while ``str.isdigit()`` says yes to "²", which ``int()`` then refuses.
Each of those reached a view as a 500 (issue 10, item 5). Every number a view reads
from a request goes through :func:`parse_number`: 1 to 18 of the characters 0-9
(so it always fits a 64-bit database integer), nothing else, or :class:`BadNumber`
with a message that names the parameter.
"""

from __future__ import annotations

import re

MAX_DIGITS = 18  # 10**18 - 1 < 2**63: fits every integer column we have
_DIGITS = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")


class BadNumber(ValueError):
    """A request value that is not a whole number we accept; the message names it."""


def _shown(raw: str) -> str:
    # Enough of the value to recognise it, escaped (a NUL or a 5,000-digit string
    # must not end up verbatim in a page or a log line).
    return ascii(raw if len(raw) <= 24 else raw[:24] + "…")


def parse_number(raw: str | None, *, name: str, maximum: int = 10**MAX_DIGITS - 1) -> int:
    """``raw`` as a non-negative int, or :class:`BadNumber` naming ``name``."""
    if raw is None or raw == "":
        raise BadNumber(f"{name}: a number is required")
    if not _DIGITS.fullmatch(raw):
        raise BadNumber(
            f"{name}: expected a whole number of at most {MAX_DIGITS} digits 0-9, got {_shown(raw)}"
        )
    value = int(raw)
    if value > maximum:
        raise BadNumber(f"{name}: at most {maximum}, got {value}")
    return value


def optional_number(raw: str | None, *, name: str, maximum: int = 10**MAX_DIGITS - 1) -> int | None:
    """Like :func:`parse_number`, but absent or empty is ``None``."""
    if raw is None or raw == "":
        return None
    return parse_number(raw, name=name, maximum=maximum)


def number_list(raw: str, *, name: str) -> list[int]:
    """A comma-separated list of numbers ("3,5", spaces around items allowed)."""
    return [parse_number(part.strip(), name=name) for part in raw.split(",") if part.strip()]
