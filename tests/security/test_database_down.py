"""While the database cannot be reached, pages answer 503 with Retry-After, not 500
(issue 45, finding 10: rater pages answered 500 while PostgreSQL was down)."""

from __future__ import annotations

import socket

from django.db import connections
from django.test import Client


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_rater_page_answers_503_with_retry_after_while_the_database_is_down(
    django_db_setup, django_db_blocker
):
    client = Client(raise_request_exception=False)
    connection = connections["default"]
    with django_db_blocker.unblock():
        connection.close()
        original = dict(connection.settings_dict)
        if connection.vendor == "sqlite":
            connection.settings_dict["NAME"] = "/nonexistent-folder/tomlab.sqlite3"
        else:
            connection.settings_dict.update(HOST="127.0.0.1", PORT=_dead_port())
        try:
            response = client.get("/s/" + "x" * 43 + "/")
        finally:
            connection.close()
            connection.settings_dict.clear()
            connection.settings_dict.update(original)

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "nothing you sent was lost" in response.content.decode()
