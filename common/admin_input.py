"""The admin site, hardened against malformed form and query values.

The URL walk (tests/security/test_url_walk.py) found two places where Django's admin
answers odd input with a 500 rather than a form error:

- an autocomplete widget (``autocomplete_fields``) filters the database with the
  submitted value to show the current choice, so ``?work=²`` on an add page, or a
  POST with a non-numeric id, raised ``ValueError`` while rendering;
- ``forms.JSONField`` turns only ``JSONDecodeError`` into a form error, while a
  5,000-digit number in the JSON raises ``ValueError`` (Python's int digit limit).

Rather than patching each app's admin, the default site (``INSTALLED_APPS`` names
``InputSafeAdminConfig`` in place of ``django.contrib.admin``) mixes
:class:`InputSafeAdminMixin` into every ModelAdmin and inline it registers, so admins
added later are covered too.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.contrib.admin.widgets import AutocompleteSelect, AutocompleteSelectMultiple
from django.core.exceptions import ValidationError
from django.db import models
from django.forms.fields import InvalidJSONInput

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


class InputSafeAdminMixin:
    """Form fields that turn malformed input into form errors (ModelAdmin and inlines)."""

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
