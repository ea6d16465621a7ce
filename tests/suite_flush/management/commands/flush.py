"""``flush`` for the suite: what a transactional test's teardown calls, made cheaper.

pytest-django (Django's ``TransactionTestCase``) empties every table after each test
that commits (live servers, Celery workers, subprocesses: about 140 a run), then sends
``post_migrate`` for every app so that the rows migrations make come back. Django's
``create_contenttypes`` and ``create_permissions`` then look up each of the ~100 models
(the content type cache is cleared) and insert the ~100 content types and ~400
permissions again: 77 ms of wall and 43 ms of the test's CPU a flush on PostgreSQL,
against 10 ms for the DELETEs alone (docs/benchmarks.md, issue 44).

Content types and permissions follow from the models alone, and no test changes them,
so this flush leaves those two tables as they are (their ids stay valid, as the content
type cache assumes) and sends ``post_migrate`` for the apps whose receivers make other
rows (``accounts``: the role groups and the researchers' permissions). A receiver added
later that makes rows elsewhere goes in ``RECEIVER_APPS``;
``tests/runtime/test_suite_flush.py`` compares this flush with Django's table by table,
so one missing fails there. Only the suite uses this app (config/settings/test.py).
"""

import contextlib
from importlib import import_module

from django.apps import apps
from django.core.management.color import no_style
from django.core.management.commands import flush
from django.db import connections
from django.db.models.signals import post_migrate

# Made by create_contenttypes and create_permissions from the models; kept.
KEPT_TABLES = frozenset({"django_content_type", "auth_permission"})
# The apps whose post_migrate receivers make rows in the tables the flush empties.
RECEIVER_APPS = ("accounts",)


class Command(flush.Command):
    def handle(self, **options) -> None:
        if options["interactive"]:
            # A person flushing a database by hand gets Django's flush, question included.
            return super().handle(**options)
        using = options["database"]
        connection = connections[using]
        for app_config in apps.get_app_configs():
            # As Django's flush does: receivers in an app's management module.
            with contextlib.suppress(ImportError):
                import_module(".management", app_config.name)
        tables = [
            table
            for table in connection.introspection.django_table_names(
                only_existing=True, include_views=False
            )
            if table not in KEPT_TABLES
        ]
        sql_list = connection.ops.sql_flush(
            no_style(),
            tables,
            reset_sequences=options.get("reset_sequences", True),
            allow_cascade=options.get("allow_cascade", False),
        )
        connection.ops.execute_sql_flush(sql_list)
        if sql_list and not options.get("inhibit_post_migrate", False):
            for label in RECEIVER_APPS:
                app_config = apps.get_app_config(label)
                post_migrate.send(
                    sender=app_config,
                    app_config=app_config,
                    verbosity=options["verbosity"],
                    interactive=False,
                    using=using,
                )
