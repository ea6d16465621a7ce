"""The suite's flush (tests/suite_flush) leaves a database as Django's own flush does.

A transactional test's teardown calls ``flush``; the suite's keeps the content types and
permissions instead of deleting them and making them again, and sends ``post_migrate``
only where a receiver makes other rows. These tests hold it to Django's result, every
table compared, so a receiver added later that the suite's flush does not run fails here.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command, get_commands
from django.core.management.commands import flush as django_flush
from django.db import connection

from accounts.roles import RESEARCHER
from accounts.services import user_create_with_role
from benchmarks.models import Work
from tests.factories import WorkFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _flush(command) -> None:
    """As ``TransactionTestCase._fixture_teardown`` calls it."""
    call_command(
        command,
        verbosity=0,
        interactive=False,
        database="default",
        reset_sequences=False,
        allow_cascade=False,
        inhibit_post_migrate=False,
    )


def _state() -> dict:
    """Every table's row count, and the rows post_migrate makes by their natural keys."""
    counts = {}
    with connection.cursor() as cursor:
        for table in sorted(
            connection.introspection.django_table_names(only_existing=True, include_views=False)
        ):
            cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")
            counts[table] = cursor.fetchone()[0]
    return {
        "counts": counts,
        "content_types": sorted(ContentType.objects.values_list("app_label", "model")),
        "permissions": sorted(
            Permission.objects.values_list("content_type__app_label", "codename")
        ),
        "groups": {
            group.name: sorted(group.permissions.values_list("content_type__app_label", "codename"))
            for group in Group.objects.order_by("name")
        },
    }


def _write_some_rows() -> None:
    user_create_with_role(username="flushed", password="pw-flushed-1!", role="researcher")
    Group.objects.create(name="a group a test made")
    Group.objects.get(name=RESEARCHER).permissions.clear()
    WorkFactory()


def test_call_command_finds_the_suites_flush():
    assert get_commands()["flush"] == "tests.suite_flush"


def test_the_suites_flush_leaves_every_table_as_djangos_flush_does():
    _write_some_rows()
    _flush(django_flush.Command())
    djangos = _state()

    _write_some_rows()
    kept_ids = sorted(ContentType.objects.values_list("pk", flat=True))
    _flush("flush")
    ours = _state()

    assert ours == djangos
    # What the comparison rests on: the flush emptied the tables a test writes, and
    # post_migrate's rows are there, the researchers' permissions given again.
    assert ours["counts"]["auth_user"] == 0 and not Work.objects.exists()
    assert ours["counts"]["django_content_type"] > 50
    assert ours["counts"]["auth_permission"] > 200
    assert len(ours["groups"][RESEARCHER]) > 100
    assert "a group a test made" not in ours["groups"]
    # Kept, not made again: the content type cache's ids stay valid.
    assert sorted(ContentType.objects.values_list("pk", flat=True)) == kept_ids
