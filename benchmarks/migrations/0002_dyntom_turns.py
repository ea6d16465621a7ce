from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("benchmarks", "0001_initial")]

    operations = []
