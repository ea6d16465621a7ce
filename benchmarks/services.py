"""Write operations on the item bank: imports, and publishing from other apps."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction
from django.utils import timezone

from .exporters import get_exporter
from .importers import ImportDataError, ImportReport, get_importer
from .importers.base import ProgressCallback
from .models import ImportJob, Work


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


def benchmark_export(
    *, format_name: str, out: Path | str, work_keys: list[str] | None = None
) -> int:
    """Write the works of one benchmark back in their source format; returns records written."""
    works = Work.objects.filter(benchmark=format_name).order_by("key")
    if work_keys:
        works = works.filter(key__in=work_keys)
        missing = sorted(set(work_keys) - set(works.values_list("key", flat=True)))
        if missing:
            raise ValueError(f"no {format_name} work with key(s): {', '.join(missing)}")
    return get_exporter(format_name)(works, Path(out))


def import_job_create(*, format_name: str, path: Path | str, split: str = "") -> ImportJob:
    """Queue an import for a Celery worker; the task is sent once the row is committed."""
    get_importer(format_name)  # unknown formats fail here, not in the worker
    job = ImportJob.objects.create(format_name=format_name, path=str(path), split=split)

    def enqueue() -> None:
        from .tasks import run_import_job

        run_import_job.delay(job.pk)

    transaction.on_commit(enqueue)
    return job


def import_job_run(*, job_id: int) -> str:
    """Claim a queued job with one conditional UPDATE, run it, record the outcome.

    A job that a killed worker left "running" is claimed again when its message is
    redelivered (acks_late): the import is atomic, so nothing of the first try stayed.
    """
    claimed = ImportJob.objects.filter(
        pk=job_id, status__in=[ImportJob.Status.QUEUED, ImportJob.Status.RUNNING]
    ).update(status=ImportJob.Status.RUNNING, started_at=timezone.now(), progress_done=0)
    if not claimed:
        return "skipped"
    job = ImportJob.objects.get(pk=job_id)
    done = 0

    def progress(n: int) -> None:
        # The import is one transaction, so a progress row written from inside it
        # would only become visible at commit; we count here and store it at the end.
        nonlocal done
        done += n

    try:
        report = benchmark_import(
            format_name=job.format_name, path=job.path, split=job.split, progress=progress
        )
    except (ImportDataError, ValueError) as exc:
        ImportJob.objects.filter(pk=job_id).update(
            status=ImportJob.Status.FAILED, error=str(exc), finished_at=timezone.now()
        )
        return "failed"
    ImportJob.objects.filter(pk=job_id).update(
        status=ImportJob.Status.SUCCEEDED,
        report=report.as_dict(),
        progress_done=done,
        finished_at=timezone.now(),
    )
    return "succeeded"


# -- character aliases and gender, edited by researchers (studies' leak check, names) ---


def character_aliases_set(*, character, aliases: list[str]):
    """Replace a character's aliases (nicknames the leak check and name perturbation use).

    Blank entries and repeats (case-insensitive) are dropped; the order is kept.
    """
    seen: set[str] = set()
    cleaned = []
    for alias in aliases:
        alias = " ".join(alias.split())[:255]
        if alias and alias.casefold() not in seen and alias.casefold() != character.name.casefold():
            seen.add(alias.casefold())
            cleaned.append(alias)
    character.aliases = cleaned
    character.save(update_fields=["aliases", "updated_at"])
    return character


def character_gender_set(*, character, gender: str):
    """A researcher's gender for a character; ``gender_source`` becomes "manual"."""
    from .models import Character

    if gender not in Character.Gender.values:
        raise ValueError(f"unknown gender {gender!r}")
    character.gender = gender
    character.gender_source = Character.GenderSource.MANUAL
    character.save(update_fields=["gender", "gender_source", "updated_at"])
    return character
