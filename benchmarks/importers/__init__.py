"""Importers by format name. Each module holds one format."""

from .base import BenchmarkImporter, ImportDataError, ImportReport

_REGISTRY: dict[str, str] = {
    "tom-in-amc": "benchmarks.importers.tom_in_amc.TomInAmcImporter",
    "tvshowguess": "benchmarks.importers.tvshowguess.TVShowGuessImporter",
    "chartom-qa": "benchmarks.importers.chartom_qa.CharToMQAImporter",
    "dyntom": "benchmarks.importers.dyntom.DynToMImporter",
    "screenplay": "benchmarks.importers.screenplay.ScreenplayImporter",
    "generic": "benchmarks.importers.generic.GenericImporter",
}


def importer_formats() -> list[str]:
    return sorted(_REGISTRY)


def register_importer(format_name: str, dotted_path: str) -> None:
    _REGISTRY[format_name] = dotted_path


def get_importer(format_name: str) -> type[BenchmarkImporter]:
    from django.utils.module_loading import import_string

    try:
        return import_string(_REGISTRY[format_name])
    except KeyError:
        raise ValueError(
            f"unknown format {format_name!r}; choose one of {', '.join(importer_formats())}"
        ) from None


__all__ = [
    "BenchmarkImporter",
    "ImportDataError",
    "ImportReport",
    "get_importer",
    "importer_formats",
    "register_importer",
]
