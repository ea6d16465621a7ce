"""Interrupted runs: a ``stopped`` status, the lease holder (host, PID, process start
time) so a resume takes over at once from a dead holder, and the ``received`` call
status with the reply's finish reason, stored the moment a reply arrives."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("modeling", "0002_run_lease_prediction_bulk_json")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="lease_holder_host",
            field=models.CharField(blank=True, default="", max_length=255),
        ),
        migrations.AddField(
            model_name="run",
            name="lease_holder_pid",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="lease_holder_started_at",
            field=models.DateTimeField(
                blank=True, help_text="start time of the holding process", null=True
            ),
        ),
        migrations.AddField(
            model_name="runcall",
            name="finish_reason",
            field=models.CharField(blank=True, default="", max_length=30),
        ),
        migrations.AlterField(
            model_name="run",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "queued"),
                    ("running", "running"),
                    ("succeeded", "succeeded"),
                    ("failed", "failed"),
                    ("cancelled", "cancelled"),
                    ("budget_exhausted", "stopped: budget exhausted"),
                    ("stopped", "stopped"),
                ],
                default="queued",
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="runcall",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "pending"),
                    ("received", "received"),
                    ("done", "done"),
                    ("error", "error"),
                ],
                default="pending",
                max_length=10,
            ),
        ),
    ]
