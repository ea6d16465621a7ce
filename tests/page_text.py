"""A page's text without its random tokens, for "this name is not on the page" checks.

A CSRF token or an invite link is 40-odd random letters and digits: now and then one
holds a short name ("bob" did, once in a full run), so a check that a name is absent
reads the page without them. Only the tokens' own places are blanked (the CSRF field
and header, the invite path), so a word anywhere else is still seen.
"""

from __future__ import annotations

import re

_TOKENS = (
    re.compile(r'(name="csrfmiddlewaretoken" value=")[^"]*'),
    re.compile(r'("X-CSRFToken": ")[^"]*'),
    re.compile(r"(/s/)[A-Za-z0-9_-]+"),
)


def without_tokens(text: str | bytes) -> str:
    """``text`` with the CSRF tokens and invite tokens blanked."""
    if isinstance(text, bytes):
        text = text.decode()
    for pattern in _TOKENS:
        text = pattern.sub(r"\1", text)
    return text
