"""Every row of these models belongs to a workspace; existing rows go to "Default"."""

from django.db import migrations

from common.migration_ops import into_default_workspace


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_workspaces"),
        ("reports", "0006_packed_run"),
    ]

    operations = into_default_workspace("reports", "ReportJob", "ReplicationImport")
