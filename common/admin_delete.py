"""The admin's delete confirmation, in a number of queries that does not grow with it.

Django's confirmation page (a delete view, or the "delete selected" action) lists every
row the delete would take with it, and every protected row that stops it, by its
``__str__``. Django selects only the foreign key that led to each row, so a
``__str__`` that follows another relation (a speaker instance names its scene, which
names its work) cost a query per row: deleting a work listed its speaker instances at
two queries each.

A model names the relations its ``__str__`` follows in ``str_relations``; each named
model's own ``str_relations`` are followed in turn, so a model declares only what its
own ``__str__`` reads. :func:`deleted_objects` selects them all with each batch of
rows it collects. ``tests/architecture/test_str_relations.py`` checks the declarations
against every row of the demo.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.contrib.admin.utils import NestedObjects, quote
from django.db import models, router
from django.db.models.constants import LOOKUP_SEP
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.text import capfirst

# Far deeper than any chain of names (a guess names its assignment, which names its
# study item, which names its scene, which names its work): only a cycle reaches it.
_MAX_DEPTH = 6


def str_select_related(model: type[models.Model], depth: int = 0) -> list[str]:
    """Every relation path ``str()`` of a ``model`` row follows, for ``select_related``."""
    if depth >= _MAX_DEPTH:
        return []
    paths: list[str] = []
    for path in getattr(model, "str_relations", ()):
        paths.append(path)
        target: Any = model
        for name in path.split(LOOKUP_SEP):
            target = target._meta.get_field(name).related_model
        paths += [f"{path}{LOOKUP_SEP}{sub}" for sub in str_select_related(target, depth + 1)]
    return list(dict.fromkeys(paths))


class StrRelatedNestedObjects(NestedObjects):
    """NestedObjects that selects, with each batch, the relations its rows' names read."""

    def related_objects(self, related_model: Any, related_fields: Any, objs: Any) -> Any:
        queryset = super().related_objects(related_model, related_fields, objs)
        paths = str_select_related(related_model)
        # select_related() with no names would follow every non-null foreign key.
        return queryset.select_related(*paths) if paths else queryset


def deleted_objects(
    objs: Sequence[models.Model], request: Any, admin_site: Any
) -> tuple[list[Any], dict[str, int], set[str], list[str]]:
    """Django's ``get_deleted_objects`` (django/contrib/admin/utils.py, 5.2) with
    :class:`StrRelatedNestedObjects` as its collector; the same four results."""
    objs = list(objs)
    if not objs:
        return [], {}, set(), []
    # The rows to delete are one object (the delete view) or the changelist's rows (the
    # action), which its list_select_related already names; the collector selects the rest.
    collector = StrRelatedNestedObjects(using=router.db_for_write(type(objs[0])), origin=objs)
    collector.collect(objs)
    perms_needed: set[str] = set()

    def format_callback(obj: models.Model) -> str:
        opts = obj._meta
        no_edit_link = f"{capfirst(opts.verbose_name)}: {obj}"
        if not admin_site.is_registered(type(obj)):
            return no_edit_link  # no admin of its own, or edited inline
        if not admin_site.get_model_admin(type(obj)).has_delete_permission(request, obj):
            perms_needed.add(opts.verbose_name)
        try:
            admin_url = reverse(
                f"{admin_site.name}:{opts.app_label}_{opts.model_name}_change",
                None,
                (quote(obj.pk),),
            )
        except NoReverseMatch:
            return no_edit_link
        return format_html('{}: <a href="{}">{}</a>', capfirst(opts.verbose_name), admin_url, obj)

    to_delete = collector.nested(format_callback)
    protected = [format_callback(obj) for obj in _in_order(collector.protected)]
    model_count = {
        model._meta.verbose_name_plural: len(rows) for model, rows in collector.model_objs.items()
    }
    return to_delete, model_count, perms_needed, protected


def _in_order(rows: Iterable[models.Model]) -> list[models.Model]:
    # Django lists protected rows in set order, which differs between processes.
    return sorted(rows, key=lambda row: (row._meta.label, row.pk))
