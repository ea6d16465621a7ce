"""Works and imports belong to a workspace (existing ones to "Default"); a work can be
published to every workspace (``shared``)."""

from django.db import migrations, models

from common.migration_ops import into_default_workspace


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_workspaces"),
        ("benchmarks", "0004_import_job_uploads"),
    ]

    operations = [
        *into_default_workspace("benchmarks", "Work", "ImportJob"),
        migrations.AddField(
            model_name="work", name="shared", field=models.BooleanField(default=False)
        ),
    ]
