"""Logging filters for expected refusals."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied


class NoTracebackForDenials(logging.Filter):
    """Drop the traceback Django attaches to a raised ``PermissionDenied`` (a 403 is an
    expected answer, not a crash); the "Forbidden: /path" line itself stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], PermissionDenied):
            record.exc_info = None
            record.exc_text = None
        return True
