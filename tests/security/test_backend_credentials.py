"""Backend credentials: encryption at rest, the data migration of plaintext keys, key
rotation, redaction of secret-looking options, and the create_backend guard.
"""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection

from modeling.credentials import REDACTED, decrypt_secret, encrypt_secret, redact_secrets
from modeling.models import Backend
from tests.migration_steps import migration_editor

pytestmark = pytest.mark.django_db

KEY = "sk-proj-Abc123-live"


def _column(pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM modeling_backend WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def test_migration_encrypts_keys_left_in_plaintext():
    plain = Backend.objects.create(name="old", kind="openai")
    keyless = Backend.objects.create(name="none", kind="openai")
    done = Backend.objects.create(name="done", kind="openai", api_key=KEY)
    already = _column(done.pk)
    with connection.cursor() as cursor:  # what 0003 left behind: the key in the clear
        cursor.execute("UPDATE modeling_backend SET api_key = %s WHERE id = %s", [KEY, plain.pk])
    migration = importlib.import_module("modeling.migrations.0004_backend_secret")

    migration.encrypt_stored_keys(apps, migration_editor())

    assert _column(plain.pk).startswith("fernet:") and KEY not in _column(plain.pk)
    assert Backend.objects.get(pk=plain.pk).get_api_key() == KEY
    assert _column(keyless.pk) == ""
    assert _column(done.pk) == already  # not encrypted twice


def test_keys_survive_a_secret_key_rotation_listed_in_fallbacks(settings):
    settings.SECRET_KEY = "a" * 30 + "old-secret-key-with-enough-variety-123"
    stored = encrypt_secret(KEY)
    settings.SECRET_KEY = "b" * 30 + "new-secret-key-with-enough-variety-456"
    settings.SECRET_KEY_FALLBACKS = ["a" * 30 + "old-secret-key-with-enough-variety-123"]

    assert decrypt_secret(stored) == KEY
    assert decrypt_secret(encrypt_secret(KEY)) == KEY


def test_redaction_masks_secret_names_at_any_depth_and_any_case():
    options = {
        "headers": {"Authorization": "Bearer x1", "X-API-KEY": "x2", "cookie": "s=x3"},
        "apiKey": "x4",
        "OPENAI_API_KEY": "x5",
        "nested": [{"refresh_token": "x6"}, {"DB_PASSWORD": "x7"}, {"clientSecret": "x8"}],
        "proxy": "Basic eDk=",  # a credential by its value, whatever the name
        "max_new_tokens": 64,
        "tokenizer": "gpt2",
        "device": "cpu",
        "api_key": "",
    }

    redacted = redact_secrets(options)

    assert redacted["headers"] == {
        "Authorization": REDACTED,
        "X-API-KEY": REDACTED,
        "cookie": REDACTED,
    }
    assert (redacted["apiKey"], redacted["OPENAI_API_KEY"], redacted["proxy"]) == (REDACTED,) * 3
    assert redacted["nested"] == [
        {"refresh_token": REDACTED},
        {"DB_PASSWORD": REDACTED},
        {"clientSecret": REDACTED},
    ]
    # Ordinary settings stay readable, and an empty key says "none set".
    assert (redacted["max_new_tokens"], redacted["tokenizer"], redacted["device"]) == (
        64,
        "gpt2",
        "cpu",
    )
    assert redacted["api_key"] == ""
    assert options["headers"]["Authorization"] == "Bearer x1"  # a copy, not in place
    for n in range(1, 10):
        assert f"x{n}" not in repr(redacted)


def test_create_backend_refuses_a_key_given_as_the_variable_name():
    with pytest.raises(CommandError, match="--api-key-env: Give the name of an environment"):
        call_command("create_backend", "oops", "--kind", "openai", "--api-key-env", KEY)
    call_command("create_backend", "fine", "--kind", "openai", "--api-key-env", "OPENAI_API_KEY")

    assert not Backend.objects.filter(name="oops").exists()
    fine = Backend.objects.get(name="fine")
    assert (fine.api_key_env, fine.api_key) == ("OPENAI_API_KEY", "")
