"""Model fields tuned for bulk imports."""

from django.db import models


class BulkJSONField(models.JSONField):
    """A JSONField that keeps PostgreSQL bulk inserts off Django's UNNEST path.

    Django 5.2 bulk-inserts through ``UNNEST(%s::jsonb[])``; psycopg then builds the
    array literal in Python, escaping every quote with a regex substitution, which
    made a 1,100-stage DynToM import spend most of its time there. Defining
    ``get_placeholder`` is Django's documented opt-out of UNNEST (see
    ``SQLInsertCompiler.assemble_as_sql``), so each value is bound on its own.
    """

    def get_placeholder(self, value, compiler, connection) -> str:
        return "%s"
