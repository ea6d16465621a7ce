"""Prediction indexes: one on (run, parse_status, id) for the two on run, and item
references indexed only where set.

Each prediction row updated ten indexes, three of them for item references that are
NULL in two of every three rows. The item indexes become partial (where set), and
(run, parse_status, id) replaces both (run) and (run, parse_status): it serves every
lookup by run, and the reports' per-run count, unparseable count and highest id come
from the index alone.

The old indexes are dropped by name, not through ``AlterField``: on SQLite that would
rebuild the whole prediction table once per field.
"""

import django.db.models.deletion
from django.db import migrations, models

FIELDS = ("run", "dyntom_question", "qa_item", "speaker_instance")


def _single_column_indexes(schema_editor, model, column: str) -> list[str]:
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(
            cursor, model._meta.db_table
        )
    return sorted(
        name
        for name, info in constraints.items()
        if info["index"]
        and not info["unique"]
        and not info["primary_key"]
        and info["columns"] == [column]
        and not name.startswith("prediction_")  # the partial ones made above
    )


def drop_field_indexes(apps, schema_editor) -> None:
    model = apps.get_model("modeling", "Prediction")
    for field in FIELDS:
        column = model._meta.get_field(field).column
        for name in _single_column_indexes(schema_editor, model, column):
            schema_editor.execute(schema_editor._delete_index_sql(model, name))


def create_field_indexes(apps, schema_editor) -> None:
    model = apps.get_model("modeling", "Prediction")
    for field in FIELDS:
        schema_editor.execute(
            schema_editor._create_index_sql(model, fields=[model._meta.get_field(field)])
        )


# (field, index name, model it references) of the item references.
ITEMS = (
    ("dyntom_question", "prediction_dyntom_set", "benchmarks.dyntomquestion"),
    ("qa_item", "prediction_qa_item_set", "benchmarks.qaitem"),
    ("speaker_instance", "prediction_instance_set", "benchmarks.speakerinstance"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0004_import_job_uploads"),
        ("modeling", "0008_backend_disabled_and_last_test"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="prediction",
            index=models.Index(fields=["run", "parse_status", "id"], name="prediction_run_status"),
        ),
        migrations.RemoveIndex(model_name="prediction", name="modeling_pr_run_id_6338cd_idx"),
        *(
            migrations.AddIndex(
                model_name="prediction",
                index=models.Index(
                    condition=models.Q((f"{field}__isnull", False)), fields=[field], name=name
                ),
            )
            for field, name, _ in ITEMS
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                *(
                    migrations.AlterField(
                        model_name="prediction",
                        name=field,
                        field=models.ForeignKey(
                            blank=True,
                            db_index=False,
                            null=True,
                            on_delete=django.db.models.deletion.CASCADE,
                            related_name="predictions",
                            to=to,
                        ),
                    )
                    for field, _, to in ITEMS
                ),
                migrations.AlterField(
                    model_name="prediction",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="predictions",
                        to="modeling.run",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunPython(drop_field_indexes, create_field_indexes),
            ],
        ),
    ]
