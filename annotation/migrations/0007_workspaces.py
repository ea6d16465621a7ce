"""Every row of these models belongs to a workspace; existing rows go to "Default"."""

from django.db import migrations

from common.migration_ops import into_default_workspace


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_workspaces"),
        ("annotation", "0006_qualification_retry_mode"),
    ]

    operations = into_default_workspace("annotation", "GenerationJob", "ValidationBatch", "NoteBatch", "QualificationSet", "JudgementSample")
