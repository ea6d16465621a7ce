"""Write operations on the item bank: imports, and publishing from other apps."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from .exporters import get_exporter
from .importers import ImportReport, get_importer
from .importers.base import ProgressCallback
from .models import Work


def benchmark_import(
    *,
    format_name: str,
    path: Path | str,
    split: str = "",
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Import one source (file or directory) atomically and idempotently.

    Raises :class:`~benchmarks.importers.ImportDataError` naming the file, record and
    field of the first problem found; nothing is written then.
    """
    importer = get_importer(format_name)(split=split, progress=progress)
    with transaction.atomic():
        return importer.run(Path(path))


def benchmark_export(*, format_name: str, out: Path | str, work_keys: list[str] | None = None) -> int:
    """Write the works of one benchmark back in their source format; returns records written."""
    works = Work.objects.filter(benchmark=format_name).order_by("key")
    if work_keys:
        works = works.filter(key__in=work_keys)
        missing = sorted(set(work_keys) - set(works.values_list("key", flat=True)))
        if missing:
            raise ValueError(f"no {format_name} work with key(s): {', '.join(missing)}")
    return get_exporter(format_name)(works, Path(out))
