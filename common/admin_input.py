"""The admin site, hardened against malformed form and query values.

The URL walk (tests/security/test_url_walk.py) found two places where Django's admin
answers odd input with a 500 rather than a form error:

- an autocomplete widget (``autocomplete_fields``) filters the database with the
  submitted value to show the current choice, so ``?work=²`` on an add page, or a
  POST with a non-numeric id, raised ``ValueError`` while rendering;
- ``forms.JSONField`` turns only ``JSONDecodeError`` into a form error, while a
  5,000-digit number in the JSON raises ``ValueError`` (Python's int digit limit).

It also keeps secrets out of changelist queries. A column whose field is marked
``holds_secrets`` (an encrypted API key, options that hold tokens and headers) must
answer nothing about its contents, or the changelist becomes an oracle:
``?api_key__gte=sk-M`` answered "1 backend"/"0 backends", and
``?options__headers__Authorization__startswith=Bearer%20sk-O`` recovered a header's
key one character at a time. So no filter (any lookup, key transform, ``has_key``),
``?o=`` ordering or search field may reach such a field, from its own model or across
relations: filters and orderings are refused with a 400, search fields are left out.

Rather than patching each app's admin, the default site (``INSTALLED_APPS`` names
``InputSafeAdminConfig`` in place of ``django.contrib.admin``) mixes
:class:`InputSafeAdminMixin` into every ModelAdmin and inline it registers, so admins
added later are covered too.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django import forms
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.admin.views.main import ChangeList
from django.contrib.admin.widgets import AutocompleteSelect, AutocompleteSelectMultiple
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django.db.models.constants import LOOKUP_SEP
from django.forms.fields import InvalidJSONInput

from .admin_delete import deleted_objects

_BIGINT = 2**63


class SafeJSONFormField(forms.JSONField):
    """``forms.JSONField`` whose every parse failure is a validation error."""

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except ValueError:  # e.g. an integer past Python's 4,300-digit limit
            raise ValidationError(self.error_messages["invalid"], code="invalid") from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        try:
            return super().bound_data(data, initial)
        except ValueError:
            return InvalidJSONInput(data)


class _SafeAutocompleteMixin:
    """Show only submitted values that can be ids at all; the form reports the rest."""

    def optgroups(self, name: str, value: list[str], attr: Any = None) -> Any:
        remote = self.field.remote_field  # type: ignore[attr-defined]
        target = remote.model._meta.get_field(
            getattr(remote, "field_name", None) or remote.model._meta.pk.name
        )
        kept = []
        for v in value:
            try:
                python = target.to_python(v)
            except ValidationError:
                continue
            if isinstance(python, int) and not -_BIGINT <= python < _BIGINT:
                continue  # past any integer column: the database would overflow
            kept.append(v)
        return super().optgroups(name, kept, attr)  # type: ignore[misc]


class SafeAutocompleteSelect(_SafeAutocompleteMixin, AutocompleteSelect):
    pass


class SafeAutocompleteSelectMultiple(_SafeAutocompleteMixin, AutocompleteSelectMultiple):
    pass


def reaches_secret(model: type[models.Model], path: str) -> bool:
    """Whether the lookup, ordering or search ``path`` from ``model`` touches a field
    marked ``holds_secrets`` (``api_key__startswith``, ``options__headers__x``,
    ``-backend__options``, ``runs__backend__api_key``…)."""
    opts = model._meta
    for part in path.lstrip("-^=@").split(LOOKUP_SEP):
        try:
            field = opts.pk if part == "pk" else opts.get_field(part)
        except FieldDoesNotExist:
            return False  # a lookup or transform of the last field: checked already
        if getattr(field, "holds_secrets", False):
            return True
        if not field.is_relation or field.related_model is None:
            return False
        opts = field.related_model._meta
    return False


@lru_cache(maxsize=1)
def secret_field_names() -> frozenset[str]:
    """Names of the fields marked ``holds_secrets`` on any installed model."""
    return frozenset(
        field.name
        for model in apps.get_models()
        for field in model._meta.get_fields()
        if getattr(field, "holds_secrets", False)
    )


def names_secret(model: type[models.Model], path: str) -> bool:
    """Whether ``path`` reaches a secret field, or names one anywhere in it (a lookup
    such as ``?api_key__gte=`` on a model without the field must not answer either)."""
    parts = set(path.lstrip("-^=@").split(LOOKUP_SEP))
    return bool(parts & secret_field_names()) or reaches_secret(model, path)


class SecretSafeChangeList(ChangeList):
    """Refuses ``?o=`` on a column whose ordering reaches a secret field."""

    def get_ordering_field(self, field_name: Any) -> Any:
        order_field = super().get_ordering_field(field_name)
        if isinstance(order_field, str) and reaches_secret(self.model, order_field):
            raise DisallowedModelAdminLookup(f"Ordering by {order_field} is not allowed")
        if hasattr(order_field, "resolve_expression") and any(
            reaches_secret(self.model, ref) for ref in _field_refs(order_field)
        ):
            raise DisallowedModelAdminLookup("Ordering by a secret is not allowed")
        return order_field


def _field_refs(expression: Any) -> list[str]:
    refs = [expression.name] if isinstance(getattr(expression, "name", None), str) else []
    for source in getattr(expression, "get_source_expressions", list)():
        if source is not None:
            refs += _field_refs(source)
    return refs


class InputSafeAdminMixin:
    """Form fields that turn malformed input into form errors (ModelAdmin and inlines),
    changelists that answer nothing about a secret field, and a delete confirmation
    whose queries do not grow with the rows it lists (common.admin_delete)."""

    def get_deleted_objects(self, objs: Any, request: Any) -> Any:
        return deleted_objects(objs, request, self.admin_site)  # type: ignore[attr-defined]

    def lookup_allowed(self, lookup: str, value: str, request: Any = None) -> bool:
        if names_secret(self.model, lookup):  # type: ignore[attr-defined]
            return False  # the changelist answers 400 (DisallowedModelAdminLookup)
        return super().lookup_allowed(lookup, value, request)  # type: ignore[misc]

    def get_readonly_fields(self, request: Any, obj: Any = None) -> Any:
        # A row's workspace is where it was made: the admin never moves it (into a
        # workspace its editor is not a member of, say). Admin lists are scoped by the
        # models' managers (common.scoping).
        fields = tuple(super().get_readonly_fields(request, obj))  # type: ignore[misc]
        if _owns_workspace(self.model) and "workspace" not in fields:  # type: ignore[attr-defined]
            return (*fields, "workspace")
        return fields

    def get_search_fields(self, request: Any) -> Any:
        fields = super().get_search_fields(request)  # type: ignore[misc]
        return [f for f in fields if not reaches_secret(self.model, f)]  # type: ignore[attr-defined]

    def get_changelist(self, request: Any, **kwargs: Any) -> type[ChangeList]:
        changelist = super().get_changelist(request, **kwargs)  # type: ignore[misc]
        if issubclass(changelist, SecretSafeChangeList):
            return changelist
        if changelist is ChangeList:
            return SecretSafeChangeList
        return type("SecretSafe" + changelist.__name__, (SecretSafeChangeList, changelist), {})

    def formfield_for_dbfield(self, db_field: models.Field, request: Any, **kwargs: Any) -> Any:
        if isinstance(db_field, models.JSONField):
            kwargs.setdefault("form_class", SafeJSONFormField)
        return super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]

    def formfield_for_foreignkey(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        if "widget" not in kwargs and db_field.name in self.get_autocomplete_fields(request):  # type: ignore[attr-defined]
            kwargs["widget"] = SafeAutocompleteSelect(
                db_field,
                self.admin_site,  # type: ignore[attr-defined]
                using=kwargs.get("using"),
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]

    def formfield_for_manytomany(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        if "widget" not in kwargs and db_field.name in self.get_autocomplete_fields(request):  # type: ignore[attr-defined]
            kwargs["widget"] = SafeAutocompleteSelectMultiple(
                db_field,
                self.admin_site,  # type: ignore[attr-defined]
                using=kwargs.get("using"),
            )
        return super().formfield_for_manytomany(db_field, request, **kwargs)  # type: ignore[misc]


def _owns_workspace(model: type[models.Model]) -> bool:
    return any(f.name == "workspace" for f in model._meta.concrete_fields)


def _input_safe(cls: type) -> type:
    if issubclass(cls, InputSafeAdminMixin):
        return cls
    return type(cls.__name__, (InputSafeAdminMixin, cls), {"__module__": cls.__module__})


class InputSafeAdminSite(admin.AdminSite):
    """The default admin site; every registered admin (and its inlines) is input-safe."""

    def register(self, model_or_iterable: Any, admin_class: Any = None, **options: Any) -> None:
        safe = _input_safe(admin_class or admin.ModelAdmin)
        if safe.inlines:
            safe.inlines = [_input_safe(inline) for inline in safe.inlines]
        super().register(model_or_iterable, safe, **options)


class InputSafeAdminConfig(AdminConfig):
    default_site = "common.admin_input.InputSafeAdminSite"
