from django.db import migrations


class Migration(migrations.Migration):
    """DynToM's packed outcomes become every packed benchmark's (CharToM-QA too)."""

    dependencies = [("reports", "0005_replication_import")]

    operations = [migrations.RenameModel(old_name="DynToMRunOutcomes", new_name="PackedRun")]
