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


# --- issue 26, item 11: public-link tokens, tracebacks, every handler -------------------


def _capture(handler: logging.Handler) -> tuple[io.StringIO, io.TextIOBase]:
    stream = io.StringIO()
    return stream, handler.setStream(stream)


def test_a_404_on_a_public_link_logs_the_path_without_the_token(client):
    handler = _console_handler()
    stream, old_stream = _capture(handler)
    token = secrets.token_urlsafe(16)
    try:
        response = client.get(f"/s/p/{token}/?PROLIFIC_PID=abc")
    finally:
        handler.setStream(old_stream)

    assert response.status_code == 404
    logged = stream.getvalue()
    assert "Not Found: /s/p/[token]/" in logged
    assert token not in logged


def test_an_error_record_is_redacted_in_its_traceback_too():
    """django.request's 500 records carry the path as an argument and, in the exception
    text of the traceback, wherever the view's error repeated it."""
    handler = _console_handler()
    stream, old_stream = _capture(handler)
    invite, public = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    try:
        try:
            raise ValueError(f"no study for /s/p/{public}/ (from /s/{invite}/consent/)")
        except ValueError:
            logging.getLogger("django.request").error(
                "Internal Server Error: %s", f"/s/p/{public}/", exc_info=True
            )
    finally:
        handler.setStream(old_stream)

    logged = stream.getvalue()
    assert "Internal Server Error: /s/p/[token]/" in logged
    assert "ValueError: no study for /s/p/[token]/ (from /s/[token]/consent/)" in logged
    assert public not in logged and invite not in logged


def test_tokens_in_query_strings_are_redacted():
    assert redact_tokens("GET /x/?token=Ab12Cd34&page=2") == "GET /x/?token=[token]&page=2"
    assert redact_tokens("/s/p/AbCdEfGh1234/?public_token=zz99") == (
        "/s/p/[token]/?public_token=[token]"
    )


def test_every_handler_in_logging_redacts_tokens_and_secrets():
    from django.conf import settings as live

    handlers = live.LOGGING["handlers"]
    assert handlers
    for name, config in handlers.items():
        assert {"redact_tokens", "redact_secrets"} <= set(config.get("filters", [])), name
    # gunicorn's error log (in its workers) goes through the same handlers.
    gunicorn = logging.getLogger("gunicorn.error")
    assert gunicorn.handlers and all(
        any(isinstance(f, RedactInviteTokens) for f in h.filters) for h in gunicorn.handlers
    )


def test_no_logger_django_configures_keeps_a_handler_that_does_not_redact():
    """Django's own handlers on the ``django`` logger (DEFAULT_LOGGING's console when DEBUG
    is on, mail_admins when it is off) printed a token-bearing 404 path raw beside the
    redacted line: LOGGING names that logger, so it has none and its records reach the
    root's redacting console. (Libraries that add handlers of their own when imported,
    torch's and transformers', log no request and are not Django's to configure.)"""
    from django.conf import settings as live

    from common.log_redaction import RedactSecrets

    names = {"django", *live.LOGGING["loggers"]}
    loggers = [logging.getLogger()] + [
        lg
        for name, lg in sorted(logging.Logger.manager.loggerDict.items())
        if isinstance(lg, logging.Logger) and (name in names or name.startswith("django."))
    ]
    plain = [
        (lg.name, type(h).__name__)
        for lg in loggers
        for h in lg.handlers
        # pytest's capture handlers write nowhere we ship.
        if not type(h).__module__.startswith("_pytest")
        if not (
            any(isinstance(f, RedactInviteTokens) for f in h.filters)
            and any(isinstance(f, RedactSecrets) for f in h.filters)
        )
    ]
    assert plain == []
    assert logging.getLogger("django").handlers == []
