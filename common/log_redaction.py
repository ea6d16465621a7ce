"""A logging filter that keeps invite tokens out of the logs.

An invite token is a rater's only credential (``/s/<token>/``), and Django logs request
paths on its own: ``django.request`` writes "Not Found: /s/<token>/..." for a 404 and
``django.server`` writes the request line. The filter sits on the handler, so every
logger's records are redacted however they were formatted.
"""

import logging
import re

_TOKEN_PATH = re.compile(r"(/s/)(?!join/)[A-Za-z0-9_-]{8,}")


def redact_tokens(text: str) -> str:
    """``/s/<token>/scenes/3/`` -> ``/s/[token]/scenes/3/``; join links keep their study id."""
    return _TOKEN_PATH.sub(r"\1[token]", text)


class RedactInviteTokens(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_tokens(message)
        if redacted != message:
            # Freeze the redacted text: the handler formats msg % args again otherwise.
            record.msg, record.args = redacted, None
        return True
