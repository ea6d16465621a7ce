"""Backends and runs belong to a workspace (existing ones to "Default"); a backend's
name is unique within its workspace; prompt templates are the built-in library
(no workspace, read by all) or a workspace's own revisions."""

import django.db.models.deletion
from django.db import migrations, models

from common.migration_ops import into_default_workspace


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_workspaces"),
        ("modeling", "0009_prediction_indexes_where_set"),
    ]

    operations = [
        *into_default_workspace("modeling", "Backend", "Run"),
        migrations.AlterField(
            model_name="backend", name="name", field=models.SlugField(max_length=100)
        ),
        migrations.AddConstraint(
            model_name="backend",
            constraint=models.UniqueConstraint(
                fields=("workspace", "name"), name="backend_name_in_workspace"
            ),
        ),
        migrations.AddField(
            model_name="prompttemplate",
            name="workspace",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="accounts.workspace",
            ),
        ),
    ]
