from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("modeling", "0002_run_lease_prediction_bulk_json")]

    operations = []
