"""Query-string filters for the model runs API, and the guard in front of them."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend
from rest_framework.request import Request

from common.admin_input import names_secret
from modeling.models import Prediction, PromptTemplate, Run

_ORDERING_PARAMS = ("ordering", "order_by", "o", "sort")


def _names_secret(model: type, path: str) -> bool:
    # Columns marked holds_secrets, reached or only named: a parameter naming one is
    # refused on every endpoint, whether or not that endpoint's model has it.
    return names_secret(model, path.strip())


class NoSecretLookups(BaseFilterBackend):
    """A 400 for any filter or ordering on a secret column (``api_key``, ``options``),
    directly or through a relation (``backend__options__headers``).

    The filter sets below name only harmless fields, and unknown parameters are
    ignored anyway; refusing these outright keeps it so when a filter set grows.
    """

    def filter_queryset(self, request: Request, queryset: QuerySet, view: object) -> QuerySet:
        model = queryset.model
        for name, values in request.query_params.lists():
            refused = _names_secret(model, name) or (
                name in _ORDERING_PARAMS
                and any(_names_secret(model, part) for value in values for part in value.split(","))
            )
            if refused:
                raise ValidationError({name: ["API keys and backend options cannot be queried."]})
        return queryset


class PromptTemplateFilter(django_filters.FilterSet):
    class Meta:
        model = PromptTemplate
        fields = ("benchmark", "method", "name", "is_active")


class RunFilter(django_filters.FilterSet):
    # By name, as a new run names its backend; an unknown name just matches nothing.
    backend = django_filters.CharFilter(field_name="backend__name", label="Backend name")

    class Meta:
        model = Run
        fields = ("benchmark", "method", "status", "backend")


class PredictionFilter(django_filters.FilterSet):
    class Meta:
        model = Prediction
        fields = ("parse_status", "correct", "sample_index")
