"""Backend API keys at rest: the column becomes ciphertext only, and keys already stored
in plaintext are encrypted in place (a Fernet key derived from SECRET_KEY).

``api_key_env`` gains a validator so that a key pasted where its variable's name
belongs is refused rather than shown on every page.
"""

import django.core.validators
from django.db import migrations, models

import modeling.credentials


def encrypt_stored_keys(apps, schema_editor):
    db = schema_editor.connection.alias  # the database migrated, not always the default
    from modeling.credentials import encrypt_secret, is_ciphertext

    Backend = apps.get_model("modeling", "Backend")
    for pk, stored in Backend.objects.using(db).exclude(api_key="").values_list("pk", "api_key"):
        if not is_ciphertext(stored):
            Backend.objects.using(db).filter(pk=pk).update(api_key=encrypt_secret(stored))


def decrypt_stored_keys(apps, schema_editor):
    db = schema_editor.connection.alias  # the database migrated, not always the default
    # Going back to the plaintext column: raw SQL, because the field class still
    # encrypts whatever the ORM writes at this point of the reversal.
    from modeling.credentials import decrypt_secret, is_ciphertext

    Backend = apps.get_model("modeling", "Backend")
    table = schema_editor.quote_name(Backend._meta.db_table)
    rows = list(Backend.objects.using(db).exclude(api_key="").values_list("pk", "api_key"))
    with schema_editor.connection.cursor() as cursor:
        for pk, stored in rows:
            if is_ciphertext(stored):
                cursor.execute(
                    f"UPDATE {table} SET api_key = %s WHERE id = %s", [decrypt_secret(stored), pk]
                )


class Migration(migrations.Migration):
    dependencies = [("modeling", "0003_run_lease_holder")]

    operations = [
        migrations.AlterField(
            model_name="backend",
            name="api_key",
            field=modeling.credentials.EncryptedSecretField(blank=True, default="", editable=False),
        ),
        migrations.AlterField(
            model_name="backend",
            name="api_key_env",
            field=models.CharField(
                blank=True,
                default="",
                help_text="environment variable with the key",
                max_length=100,
                validators=[
                    django.core.validators.RegexValidator(
                        "^[A-Za-z_][A-Za-z0-9_]*$",
                        "Give the name of an environment variable (letters, digits, _), "
                        "not the key itself.",
                    )
                ],
            ),
        ),
        migrations.RunPython(encrypt_stored_keys, decrypt_stored_keys),
    ]
