"""Workspaces, memberships and their log; one-time passwords to change.

Every existing researcher and annotator becomes a member of one "Default" workspace
(the other apps' migrations move every existing row into it). Annotators keep their
role; researchers become its managers, since every researcher could add users before.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def default_workspace(apps, schema_editor):
    db = schema_editor.connection.alias  # the database migrated, not always the default
    workspace_model = apps.get_model("accounts", "Workspace")
    membership_model = apps.get_model("accounts", "Membership")
    group_model = apps.get_model("auth", "Group")
    workspace, _ = workspace_model.objects.using(db).get_or_create(
        slug="default", defaults={"name": "Default"}
    )
    for group_name, role in (("researcher", "manager"), ("annotator", "annotator")):
        group = group_model.objects.using(db).filter(name=group_name).first()
        if group is None:
            continue
        for user in group.user_set.order_by("pk"):
            membership_model.objects.using(db).get_or_create(
                workspace=workspace, user=user, defaults={"role": role}
            )


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Workspace",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100, unique=True)),
                ("slug", models.SlugField(max_length=60, unique=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={"ordering": ["name", "pk"]},
        ),
        migrations.CreateModel(
            name="Membership",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "role",
                    models.CharField(
                        choices=[
                            ("manager", "manager"),
                            ("researcher", "researcher"),
                            ("annotator", "annotator"),
                            ("viewer", "viewer"),
                        ],
                        max_length=20,
                    ),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="memberships",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "workspace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="memberships",
                        to="accounts.workspace",
                    ),
                ),
            ],
            options={
                "ordering": ["workspace__name", "user__username"],
                "constraints": [
                    models.UniqueConstraint(fields=("workspace", "user"), name="membership_once")
                ],
            },
        ),
        migrations.CreateModel(
            name="MembershipEvent",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("username", models.CharField(max_length=150)),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("added", "added"),
                            ("role_changed", "role changed"),
                            ("removed", "removed"),
                        ],
                        max_length=20,
                    ),
                ),
                ("role_before", models.CharField(blank=True, default="", max_length=20)),
                ("role_after", models.CharField(blank=True, default="", max_length=20)),
                ("by_username", models.CharField(blank=True, default="", max_length=150)),
                ("at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "by",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "workspace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="accounts.workspace",
                    ),
                ),
            ],
            options={"ordering": ["-at", "-pk"]},
        ),
        migrations.CreateModel(
            name="PasswordChangeRequired",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("since", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="password_change_required",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.RunPython(default_workspace, migrations.RunPython.noop),
    ]
