"""Exporters by format name: each writes one source format back from the item bank."""

from collections.abc import Callable
from pathlib import Path

from django.db.models import QuerySet
from django.utils.module_loading import import_string

# An exporter is a function export(works, out) -> number of records written, where
# ``works`` is a queryset of that benchmark's works and ``out`` a file or directory.
Exporter = Callable[[QuerySet, Path], int]

_REGISTRY: dict[str, str] = {
    "tom-in-amc": "benchmarks.exporters.tom_in_amc.export",
    "tvshowguess": "benchmarks.exporters.tvshowguess.export",
    "chartom-qa": "benchmarks.exporters.chartom_qa.export",
    "dyntom": "benchmarks.exporters.dyntom.export",
}


def exporter_formats() -> list[str]:
    return sorted(_REGISTRY)


def get_exporter(format_name: str) -> Exporter:
    try:
        return import_string(_REGISTRY[format_name])
    except KeyError:
        raise ValueError(
            f"unknown format {format_name!r}; choose one of {', '.join(exporter_formats())}"
        ) from None
