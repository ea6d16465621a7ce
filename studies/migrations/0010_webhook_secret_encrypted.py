"""Webhook signing keys at rest: the column becomes ciphertext only (``common.secrets``,
as backend API keys), and keys already stored in plaintext are encrypted in place."""

from django.db import migrations

import studies.models


def encrypt_stored_keys(apps, schema_editor):
    db = schema_editor.connection.alias  # the database migrated, not always the default
    from common.secrets import encrypt_secret, is_ciphertext

    Study = apps.get_model("studies", "Study")
    for pk, stored in Study.objects.using(db).exclude(webhook_secret="").values_list("pk", "webhook_secret"):
        if not is_ciphertext(stored):
            Study.objects.using(db).filter(pk=pk).update(webhook_secret=encrypt_secret(stored))


def decrypt_stored_keys(apps, schema_editor):
    db = schema_editor.connection.alias  # the database migrated, not always the default
    # Going back to the plaintext column: raw SQL, because the field class still
    # encrypts whatever the ORM writes at this point of the reversal.
    from common.secrets import decrypt_secret, is_ciphertext

    Study = apps.get_model("studies", "Study")
    table = schema_editor.quote_name(Study._meta.db_table)
    rows = list(Study.objects.using(db).exclude(webhook_secret="").values_list("pk", "webhook_secret"))
    with schema_editor.connection.cursor() as cursor:
        for pk, stored in rows:
            if is_ciphertext(stored):
                cursor.execute(
                    f"UPDATE {table} SET webhook_secret = %s WHERE id = %s",
                    [decrypt_secret(stored), pk],
                )


class Migration(migrations.Migration):
    dependencies = [("studies", "0009_scene_slots")]

    operations = [
        migrations.AlterField(
            model_name="study",
            name="webhook_secret",
            field=studies.models.WebhookSecretField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(encrypt_stored_keys, decrypt_stored_keys),
    ]
