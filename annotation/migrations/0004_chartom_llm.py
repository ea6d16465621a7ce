# Placeholder kept in the chain so parallel work can add operations without renumbering.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("annotation", "0003_chartom_construction")]

    operations: list = []
