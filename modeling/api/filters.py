"""Query-string filters for the model runs API."""

from __future__ import annotations

import django_filters

from modeling.models import Prediction, PromptTemplate, Run


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
