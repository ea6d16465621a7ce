"""A page's text without its per-render and random tokens.

- ``without_csrf``: the CSRF token is masked afresh on each render (the form field, the
  htmx header, the API's browsable page), so two renders of the same page compare equal
  only without it.
- ``without_tokens``: also the invite path. A token is 40-odd random letters and digits:
  now and then one holds a short name ("bob" did, once in a full run), so a check that a
  name is absent reads the page without them.

Only the tokens' own places are blanked, so a word anywhere else is still seen.
"""

from __future__ import annotations

import re

_CSRF = re.compile(r'(name="csrfmiddlewaretoken" value="|"X-CSRFToken": "|"csrfToken": ")[^"]*')
_INVITE = re.compile(r"(/s/)[A-Za-z0-9_-]+")


def _text(text: str | bytes) -> str:
    return text.decode() if isinstance(text, bytes) else text


def without_csrf(text: str | bytes) -> str:
    """``text`` with the CSRF token values blanked."""
    return _CSRF.sub(r"\1", _text(text))


def without_tokens(text: str | bytes) -> str:
    """``text`` with the CSRF tokens and invite tokens blanked."""
    return _INVITE.sub(r"\1", without_csrf(text))
