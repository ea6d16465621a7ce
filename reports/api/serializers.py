"""Input and output shapes of the report API."""

from __future__ import annotations

from rest_framework import serializers


class ReportQuerySerializer(serializers.Serializer):
    """``?runs=1,2&seed=0``: which runs (default: all of the benchmark) and the bootstrap seed."""

    runs = serializers.CharField(required=False, allow_blank=True, help_text="e.g. 3,5,8")
    seed = serializers.IntegerField(required=False, default=0, min_value=0)

    def validate_runs(self, value: str) -> list[int] | None:
        if not value.strip():
            return None
        try:
            return [int(part) for part in value.split(",") if part.strip()]
        except ValueError:
            raise serializers.ValidationError(
                "a comma-separated list of run ids, e.g. 3,5,8"
            ) from None


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
