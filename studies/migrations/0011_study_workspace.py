"""Every row of these models belongs to a workspace; existing rows go to "Default"."""

from django.db import migrations

from common.migration_ops import into_default_workspace


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_workspaces"),
        ("studies", "0010_webhook_secret_encrypted"),
    ]

    operations = into_default_workspace("studies", "Study")
