"""Input and output shapes of the report API."""

from __future__ import annotations

from rest_framework import serializers


class ReportQuerySerializer(serializers.Serializer):
    """``?seed=0``: the bootstrap seed. The selection (runs, studies, include_excluded,
    samples) is read by ``reports.selection.selection_from_query``, as on the report page."""

    seed = serializers.IntegerField(required=False, default=0, min_value=0)


class TableSerializer(serializers.Serializer):
    key = serializers.CharField()
    title = serializers.CharField()
    note = serializers.CharField()
    columns = serializers.ListField(child=serializers.CharField())
    rows = serializers.ListField(child=serializers.DictField(), help_text="one object per row")


class ChartSerializer(serializers.Serializer):
    key = serializers.CharField()
    title = serializers.CharField()
    kind = serializers.ChoiceField(choices=("bar", "heatmap", "line"))
    table = serializers.CharField()
    x = serializers.CharField()
    series = serializers.ListField(child=serializers.CharField())
    error_low = serializers.ListField(child=serializers.CharField())
    error_high = serializers.ListField(child=serializers.CharField())
    y_label = serializers.CharField()


class ReportSerializer(serializers.Serializer):
    """``Report.as_json()``; TVShowGuess adds ``dependence``, ``reasoning``, ``evidence``."""

    benchmark = serializers.CharField()
    title = serializers.CharField()
    facts = serializers.DictField()
    tables = TableSerializer(many=True)
    charts = ChartSerializer(many=True)
