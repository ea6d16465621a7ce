"""PostgreSQL for the suite: Django's own backend, but a transactional test's teardown
empties the tables with DELETE instead of TRUNCATE.

pytest-django flushes every table after each transactional test (live servers, Celery
workers, subprocesses: 140 of the suite's tests). PostgreSQL's TRUNCATE of the ~90
tables makes new files for each one: 330-350 ms on an idle machine and 450-800 ms under
the suite's load, against 12 ms for DELETE on tables a test left nearly empty
(docs/benchmarks.md, issue 44). Django's foreign keys on PostgreSQL are DEFERRABLE
INITIALLY DEFERRED and the flush runs in one transaction, so the order of the DELETEs
does not matter. Only the suite uses this engine (config/settings/test.py); tests that
ask whether they run on PostgreSQL read ``connection.vendor``, which stays "postgresql".
"""

from django.db.backends.postgresql import base, operations


class DatabaseOperations(operations.DatabaseOperations):
    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade:
            # TRUNCATE restarts the identities and cascades in one statement.
            return super().sql_flush(
                style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        return [
            f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};"
            for table in tables
        ]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
