import benchmarks.fields
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("benchmarks", "0002_dyntom_turns")]

    operations = [
        migrations.AddField(
            model_name="speakerannotation",
            name="guess_qualifiers",
            field=benchmarks.fields.BulkJSONField(blank=True, default=list),
        ),
    ]
