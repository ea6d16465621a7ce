"""Invite tokens never reach the logs, whichever logger writes the request path."""

import io
import logging
import secrets

import pytest

from common.log_redaction import RedactInviteTokens, redact_tokens

pytestmark = pytest.mark.django_db


def _console_handler() -> logging.Handler:
    for handler in logging.getLogger().handlers:
        if any(isinstance(f, RedactInviteTokens) for f in handler.filters):
            return handler
    raise AssertionError("the root console handler has no token-redacting filter")


def test_a_404_on_an_unknown_token_logs_the_path_without_the_token(client):
    handler = _console_handler()
    stream = io.StringIO()
    old_stream = handler.setStream(stream)
    token = secrets.token_urlsafe(32)
    try:
        response = client.get(f"/s/{token}/")
    finally:
        handler.setStream(old_stream)
    assert response.status_code == 404
    logged = stream.getvalue()
    assert "/s/[token]/" in logged
    assert token not in logged


def test_redaction_keeps_join_links_and_other_paths():
    assert redact_tokens("GET /s/join/12/ 302") == "GET /s/join/12/ 302"
    assert redact_tokens("GET /studies/3/ 200") == "GET /studies/3/ 200"
    assert redact_tokens('"GET /s/Ab-_9xYz12345678/ HTTP/1.1" 200') == (
        '"GET /s/[token]/ HTTP/1.1" 200'
    )


def test_the_development_servers_request_lines_go_through_the_redacting_handler():
    handlers = logging.getLogger("django.server").handlers
    assert handlers, "django.server has no handler of its own"
    assert all(any(isinstance(f, RedactInviteTokens) for f in h.filters) for h in handlers)
