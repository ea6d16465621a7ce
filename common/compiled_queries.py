"""Querysets compiled once per database connection and run again with new values.

Building a queryset and compiling it to SQL costs far more CPU than running it: for the
rater's one-query scene page (five tables joined, a count subquery) Django spent about
1.5 ms building and compiling, 0.2 ms executing and 1.3 ms more setting up the select
list for turning rows into objects, against a 5 ms budget for the whole page (issue 17).
The SQL of such a query never changes, only its values do. :class:`CompiledQuery`
builds the queryset once with stand-in values, keeps the compiled SQL, the positions of
the stand-ins among its parameters, the row converters and the object layout, and then
only substitutes values, executes and builds the objects as Django's ``ModelIterable``
does (``select_related`` objects and annotations included), so callers get the same
model instances the queryset would give.

Compiled state belongs to one connection (its converters and its vendor's SQL), so it
is kept per connection wrapper: each thread has its own wrapper, and a wrapper keeps
its compiled queries across reconnects.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, router
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators
from django.db.transaction import TransactionManagementError

# Stand-ins that no real value equals: a string nobody can type into a URL, and a
# negative id (inside a 32-bit column's range: Django compiles a lookup with an
# out-of-range value to "no rows" instead of a parameter).
_SLOT_TEXT = "\x00compiled-query-slot-{}"
_SLOT_NUMBER = -2_000_000_000
_slot_numbers = itertools.count()


@contextmanager
def binding_cursor(connection: Any) -> Iterator[Any]:
    """``connection.cursor()``, binding its values on the server when the database can.

    Django binds values on the client with psycopg 3 (``server_side_binding`` off): each
    statement reaches PostgreSQL as new SQL text, to be parsed and planned again. Bound
    on the server, the text stays the same and psycopg prepares it once the connection
    has run it five times (``DATABASE_PREPARE_THRESHOLD``). On the rater's answer path
    that took PostgreSQL's CPU per scene from 3.4-5.0 to 1.3-1.5 ms in one process, and
    from 4.4-4.7 to 2.7-3.2 ms under load (issue 31). Only fixed, hot statements whose parameters
    all have a type (columns compared or written) use it; Django's own queries keep
    client binding, which the ORM needs for some expressions. The cursor is Django's
    wrapper as usual, so query counts and ``execute_wrapper`` see these statements.
    """
    if connection.vendor == "postgresql":
        connection.ensure_connection()
    raw = connection.connection if connection.vendor == "postgresql" else None
    factory = getattr(raw, "cursor_factory", None)
    binding = _server_binding_cursor()
    if raw is None or binding is None or raw.closed or issubclass(factory, binding):
        with connection.cursor() as cursor:
            yield cursor
        return
    raw.cursor_factory = binding
    try:
        cursor = connection.cursor()
    finally:
        raw.cursor_factory = factory
    with cursor:
        yield cursor


def update_where(model: type[Model], values: dict[str, Any], **where: Any) -> int:
    """``UPDATE`` ``model``'s rows where each field in ``where`` equals its value (``IS
    NULL`` for None), setting ``values``; returns the rows changed.

    What ``filter(**where).update(**values)`` does for plain field equality, without
    building a queryset (0.3-0.6 ms of CPU for the rater's per-scene updates) and
    bound on the server (:func:`binding_cursor`). No signals, as with ``update()``.
    """
    meta = model._meta
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name

    def field(name: str) -> Any:
        return meta.pk if name == "pk" else meta.get_field(name)

    sets, params = [], []
    for name, value in values.items():
        target = field(name)
        sets.append(f"{quote(target.column)} = %s")
        params.append(target.get_db_prep_save(value, connection))
    conditions = []
    for name, value in where.items():
        target = field(name)
        if value is None:
            conditions.append(f"{quote(target.column)} IS NULL")
        else:
            conditions.append(f"{quote(target.column)} = %s")
            params.append(target.get_db_prep_value(value, connection))
    sql = f"UPDATE {quote(meta.db_table)} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    with binding_cursor(connection) as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _server_binding_cursor() -> type | None:
    try:
        from django.db.backends.postgresql.base import ServerBindingCursor
    except ImportError:  # psycopg 2, or no psycopg at all
        return None
    return ServerBindingCursor


@dataclass
class _Compiled:
    sql: str
    params: list[Any]
    slots: dict[str, list[int]]  # slot name -> positions in ``params``
    compiler: Any
    converters: dict[int, Any]
    columns: int
    model: type[Model]
    model_columns: slice
    init_list: list[str]
    populators: list[Any]
    annotations: dict[str, int]
    for_update: bool


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class CompiledQuery:
    """``build(**slots)`` compiled once per connection; :meth:`first` runs it with values.

    ``slots`` names the values that change between runs and says their kind (``str`` or
    ``int``); ``build`` must use each of them in a filter, unchanged. The queryset may
    select related objects, defer columns, annotate, order, lock and slice; it must
    return model instances (not ``values()``).
    """

    def __init__(self, build: Callable[..., QuerySet], **slots: type) -> None:
        self._build = build
        self._kinds = slots
        self._by_connection: weakref.WeakKeyDictionary[Any, _Compiled] = weakref.WeakKeyDictionary()

    def _compile(self, connection: Any, using: str) -> _Compiled:
        stand_ins = {
            name: _SLOT_TEXT.format(name) if kind is str else _SLOT_NUMBER - next(_slot_numbers)
            for name, kind in self._kinds.items()
        }
        queryset = self._build(**stand_ins)
        compiler = queryset.query.get_compiler(using=using)
        sql, params = compiler.as_sql()
        params = list(params)
        slots = {
            name: [i for i, p in enumerate(params) if type(p) is type(v) and p == v]
            for name, v in stand_ins.items()
        }
        if missing := [name for name, positions in slots.items() if not positions]:
            raise ValueError(f"the compiled query does not use the slot(s) {missing}")
        select, klass_info = compiler.select, compiler.klass_info
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        return _Compiled(
            sql=sql,
            params=params,
            slots=slots,
            compiler=compiler,
            converters=compiler.get_converters([s[0] for s in select[: compiler.col_count]]),
            columns=compiler.col_count,
            model=klass_info["model"],
            model_columns=slice(start, end),
            init_list=[f[0].target.attname for f in select[start:end]],
            populators=get_related_populators(klass_info, select, using),
            annotations=dict(compiler.annotation_col_map),
            for_update=queryset.query.select_for_update,
        )

    def first(self, *, using: str = DEFAULT_DB_ALIAS, **values: Any) -> Model | None:
        """The first object the queryset gives with these slot values, or ``None``."""
        connection = connections[using]
        compiled = self._by_connection.get(connection)
        if compiled is None:
            compiled = self._by_connection[connection] = self._compile(connection, using)
        if (
            compiled.for_update
            and connection.features.has_select_for_update
            and connection.get_autocommit()
        ):
            # What Django's compiler checks on every run, checked here since it runs once.
            raise TransactionManagementError(
                "select_for_update cannot be used outside of a transaction."
            )
        for name, kind in self._kinds.items():
            if kind is int and not _INT64_MIN <= values[name] <= _INT64_MAX:
                # No 64-bit id column holds it: no row, as Django's own integer lookups
                # answer, where the raw parameter would overflow SQLite's INTEGER.
                return None
        params = list(compiled.params)
        for name, positions in compiled.slots.items():
            for position in positions:
                params[position] = values[name]
        with binding_cursor(connection) as cursor:
            cursor.execute(compiled.sql, params)
            row = cursor.fetchone()
        if row is None:
            return None
        row = row[: compiled.columns]
        if compiled.converters:
            (row,) = compiled.compiler.apply_converters([row], compiled.converters)
        obj = compiled.model.from_db(using, compiled.init_list, row[compiled.model_columns])
        for populator in compiled.populators:
            populator.populate(row, obj)
        for name, position in compiled.annotations.items():
            setattr(obj, name, row[position])
        return obj
