"""Migration operations shared by the apps' migrations (their history: change with care)."""

from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models


def _workspace_fk(*, null: bool) -> models.ForeignKey:
    return models.ForeignKey(
        null=null,
        on_delete=django.db.models.deletion.PROTECT,
        related_name="+",
        to="accounts.workspace",
    )


def into_default_workspace(
    app_label: str, *model_names: str
) -> list[migrations.operations.base.Operation]:
    """Give each model a ``workspace``, with every existing row in the "Default" one."""

    def fill(apps, schema_editor):
        db = schema_editor.connection.alias  # the database migrated, not always the default
        workspace_model = apps.get_model("accounts", "Workspace")
        default, _ = workspace_model.objects.using(db).get_or_create(
            slug="default", defaults={"name": "Default"}
        )
        for name in model_names:
            apps.get_model(app_label, name).objects.using(db).update(workspace=default)

    return [
        *(
            migrations.AddField(name.lower(), "workspace", _workspace_fk(null=True))
            for name in model_names
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        *(
            migrations.AlterField(name.lower(), "workspace", _workspace_fk(null=False))
            for name in model_names
        ),
    ]
