"""Write operations on the item bank: imports, and publishing from other apps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from common.queueing import job_tasks_register
from common.tasks import task_send_on_commit

from .exporters import get_exporter
from .importers import ImportDataError, ImportReport, get_importer
from .importers.base import ProgressCallback
from .importers.chartom_qa import record_parse
from .models import Benchmark, Character, ImportJob, QAItem, Work

IMPORT_TASK_NAME = "benchmarks.run_import_job"
job_tasks_register("benchmarks.importjob", IMPORT_TASK_NAME)


def benchmark_import(
    *,
    format_name: str,
    path: Path | str,
    split: str = "",
    progress: ProgressCallback | None = None,
    books: Path | None = None,
) -> ImportReport:
    """Import one source (file or directory) atomically and idempotently.

    ``books`` (CharToM-QA only) is a folder of Project Gutenberg texts: items without
    ``context_1000``/``context_2000`` get them cut from their book, found there by
    title and author or among the books already imported (the report's summary lines
    say how many did, and why the others did not). Raises
    :class:`~benchmarks.importers.ImportDataError` naming the file, record and field of
    the first problem found (or the books folder, when it is not there); nothing is
    written then. ``ValueError`` for an unknown format, or books for another format.
    """
    importer_class = get_importer(format_name)
    options: dict[str, Any] = {}
    if books is not None:
        if not importer_class.reads_books:
            raise ValueError(f"a books folder applies to chartom-qa imports, not {format_name}")
        options["books"] = Path(books)
    importer = importer_class(split=split, progress=progress, **options)
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

    task_send_on_commit(IMPORT_TASK_NAME, (job.pk,))
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


# -- publishing from the construction workflow ------------------------------------------


PUBLISH_SOURCE = "published"


@transaction.atomic
def qa_item_publish(record: dict[str, Any], *, revise: bool = False) -> QAItem:
    """Add one CharToM-QA record (the JSONL format's fields) to the item bank.

    The record is checked by the importer's own rules
    (:func:`benchmarks.importers.chartom_qa.record_parse`), so what is published
    exports and imports back unchanged. The book's work and the target character are
    made when missing (a work made here has no split; an existing one is left as it
    is); the item goes after the book's last one. Publishing a record again returns the
    stored item; a different record with the same book, character and question is
    refused, naming ``question``, unless ``revise`` is set: then the stored item takes
    the record's answer, contexts, bonus points and choices (its id, position and
    predictions stay). Raises :class:`ImportDataError` on bad input.
    """
    label = f"{record.get('book_name')!r} / {record.get('target_character')!r}"
    report = ImportReport()
    item = record_parse(record, path=PUBLISH_SOURCE, record=label, report=report)
    work, _ = Work.objects.get_or_create(
        benchmark=Benchmark.CHARTOM_QA,
        key=item.book_name,
        defaults={"title": item.book_name, "kind": Work.Kind.BOOK, "source": PUBLISH_SOURCE},
    )
    # The work row is the lock that orders concurrent publishes into one book, so two
    # items never take the same position.
    work = Work.objects.select_for_update().get(pk=work.pk)
    character = None
    if item.target_character:
        character = Character.objects.filter(work=work, name=item.target_character).first()
        if character is None:
            character = Character.objects.create(
                work=work,
                name=item.target_character,
                position=Character.objects.filter(work=work).count(),
                is_main=True,
            )
    row = dict(item.row)
    existing = QAItem.objects.filter(natural_key=row["natural_key"]).first()
    if existing is not None:
        same = existing.work_id == work.pk and existing.character_id == (
            character.pk if character else None
        )
        if same and revise:
            changed = [n for n, v in row.items() if getattr(existing, n) != v]
            for name in changed:
                setattr(existing, name, row[name])
            if changed:
                existing.save(update_fields=[*changed, "updated_at"])
            return existing
        same = same and all(getattr(existing, name) == value for name, value in row.items())
        if not same:
            raise ImportDataError(
                f"the item bank already has a different item (#{existing.pk}) with this "
                "book, character and question",
                path=PUBLISH_SOURCE,
                record=label,
                field="question",
            )
        return existing
    last = QAItem.objects.filter(work=work).order_by("-position").first()
    return QAItem.objects.create(
        work=work,
        character=character,
        position=last.position + 1 if last else 0,
        **row,
    )


def qa_item_directness_set(*, item: QAItem, directness: str) -> QAItem:
    """Label a CharToM-QA question direct or indirect (paper 6.4), or clear the label."""
    if directness not in ("", *QAItem.Directness.values):
        raise ValueError(f"directness must be direct, indirect or empty, not {directness!r}")
    item.directness = directness or None
    item.save(update_fields=["directness", "updated_at"])
    return item


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
