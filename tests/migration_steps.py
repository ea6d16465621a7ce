"""Calling a data migration's function directly, as a test of its step."""

from types import SimpleNamespace

from django.db import connection


def migration_editor() -> SimpleNamespace:
    """What our data migrations read of their schema editor: the connection being
    migrated (they write through ``.using(its alias)``)."""
    return SimpleNamespace(connection=connection)
