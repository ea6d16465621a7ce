"""How much an annotator changed a text: edit distance and a readable word diff; and
the checks every text an annotator sends passes before it is stored or quoted.

Both measures work on Python ``str`` characters (code points), the same unit the
stored span offsets use, so an edit that adds one emoji counts 1 whatever its UTF-16
length.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any

from .workflow import WorkflowError

# How much of a refused value an error message quotes.
SHOWN_MAX = 200

# Words and the whitespace between them are both tokens, so the diff puts back the
# original spacing and line breaks exactly.
_TOKEN = re.compile(r"\s+|[^\s]+")


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between ``a`` and ``b`` (insert, delete, substitute; cost 1).

    Two rows of the dynamic-programming table over code points: O(len(a)·len(b)) time,
    O(min) memory. The common prefix and suffix are cut first, which makes the usual
    small edit of a long text cheap.
    """
    if a == b:
        return 0
    start = 0
    limit = min(len(a), len(b))
    while start < limit and a[start] == b[start]:
        start += 1
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a -= 1
        end_b -= 1
    a, b = a[start:end_a], b[start:end_b]
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(
                min(
                    previous[j] + 1,  # delete char_a
                    current[j - 1] + 1,  # insert char_b
                    previous[j - 1] + (char_a != char_b),
                )
            )
        previous = current
    return previous[-1]


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def unified_diff(a: str, b: str) -> str:
    """A word-level inline diff of ``a`` → ``b``: ``[-removed-]`` and ``{+added+}``.

    Unchanged words are kept as they are, so the diff reads as the new text with the
    changes marked (the style of ``git diff --word-diff=plain``). Empty when equal.
    """
    if a == b:
        return ""
    old, new = _tokens(a), _tokens(b)
    parts: list[str] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            parts.append("".join(old[i1:i2]))
            continue
        removed, added = "".join(old[i1:i2]), "".join(new[j1:j2])
        if removed:
            parts.append(f"[-{removed}-]")
        if added:
            parts.append(f"{{+{added}+}}")
    return "".join(parts)


def diff_segments(a: str, b: str) -> list[tuple[str, str]]:
    """The same word diff as ``(op, text)`` pairs, op in ``= - +``, for templates to mark up."""
    old, new = _tokens(a), _tokens(b)
    segments: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            segments.append(("=", "".join(old[i1:i2])))
            continue
        if i2 > i1:
            segments.append(("-", "".join(old[i1:i2])))
        if j2 > j1:
            segments.append(("+", "".join(new[j1:j2])))
    return segments


def shown(value: Any) -> str:
    """``value`` for an error message: its ``repr``, cut to :data:`SHOWN_MAX` characters.

    A 4,000-digit number or a pasted page must not come back whole in the message.
    """
    if isinstance(value, int) and value.bit_length() > 3 * SHOWN_MAX:
        # str() of an int past 4,300 digits raises; its size is what matters here.
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"a number of about {digits} digits"
    text = repr(value)
    return text if len(text) <= SHOWN_MAX else text[: SHOWN_MAX - 1] + "…"


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


def nul_refused(value: Any, *, field: str) -> Any:
    """``value`` unchanged, or a WorkflowError naming ``field`` if any text in it has a NUL.

    PostgreSQL stores no NUL character in a text or JSON column (the INSERT fails),
    and no one types one: it is refused, on every database, before anything is written.
    """
    if _has_nul(value):
        raise WorkflowError(f"{field}: contains a NUL character (\\x00), which cannot be stored")
    return value
