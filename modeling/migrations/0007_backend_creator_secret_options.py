"""Backends record their creator (who may edit them besides explicit holders of
``modeling.change_backend``), secret option values are encrypted in place like the
API key, and keys that servers echoed into stored errors are masked.
"""

import json
import os

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import modeling.credentials


def _backend_secrets(backend) -> list[str]:
    from modeling.backends.secrets import secret_parts
    from modeling.credentials import (
        CredentialUnreadable,
        decrypt_option_secrets,
        decrypt_secret,
        option_secret_values,
    )

    # The variable's value too, allowed or not: a worker that sent DJANGO_SECRET_KEY as
    # a bearer token may have stored it back from the server's answer.
    values = [os.environ.get(backend.api_key_env, "")] if backend.api_key_env else []
    try:
        values.append(decrypt_secret(backend.api_key))
    except CredentialUnreadable:
        pass
    try:
        values += option_secret_values(decrypt_option_secrets(backend.options or {}))
    except (CredentialUnreadable, ValueError):
        pass
    return [part for value in values if value for part in secret_parts(value)]


def encrypt_options_and_mask_errors(apps, schema_editor):
    db = schema_editor.connection.alias  # the database migrated, not always the default
    from common.log_redaction import mask_secrets
    from modeling.credentials import encrypt_option_secrets, option_secret_values

    Backend = apps.get_model("modeling", "Backend")
    Run = apps.get_model("modeling", "Run")
    RunCall = apps.get_model("modeling", "RunCall")
    secrets: dict[int, list[str]] = {}
    for backend in Backend.objects.using(db).all():
        # Read before encrypting: the plaintext option secrets are what servers echoed.
        plain = option_secret_values(backend.options or {})
        secrets[backend.pk] = [*_backend_secrets(backend), *plain]
        encrypted = encrypt_option_secrets(backend.options or {})
        if encrypted != backend.options:
            Backend.objects.using(db).filter(pk=backend.pk).update(options=encrypted)
    for model, backend_path in ((Run, "backend_id"), (RunCall, "run__backend_id")):
        rows = model.objects.using(db).exclude(error="").values_list("pk", backend_path, "error")
        for pk, backend_id, error in rows.iterator():
            masked = mask_secrets(error, secrets.get(backend_id, []))
            if masked != error:
                model.objects.using(db).filter(pk=pk).update(error=masked)


def decrypt_options(apps, schema_editor):
    db = schema_editor.connection.alias  # the database migrated, not always the default
    # Back to a plain JSON column: raw SQL, because the field class still encrypts
    # whatever the ORM writes at this point of the reversal (as in 0004).
    from modeling.credentials import decrypt_option_secrets

    Backend = apps.get_model("modeling", "Backend")
    table = schema_editor.quote_name(Backend._meta.db_table)
    cast = "CAST(%s AS jsonb)" if schema_editor.connection.vendor == "postgresql" else "%s"
    rows = list(Backend.objects.using(db).values_list("pk", "options"))
    with schema_editor.connection.cursor() as cursor:
        for pk, options in rows:
            plain = decrypt_option_secrets(options or {})
            if plain != options:
                cursor.execute(
                    f"UPDATE {table} SET options = {cast} WHERE id = %s", [json.dumps(plain), pk]
                )


class Migration(migrations.Migration):
    dependencies = [
        ("modeling", "0006_baselines_run_kind_metrics"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="backend",
            name="created_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="backend",
            name="options",
            field=modeling.credentials.EncryptedOptionsField(
                blank=True, default=dict, help_text="backend-specific settings"
            ),
        ),
        migrations.RunPython(encrypt_options_and_mask_errors, decrypt_options),
    ]
