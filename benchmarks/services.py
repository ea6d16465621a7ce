"""Write operations on the item bank: imports, and publishing from other apps."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet, Value
from django.db.models.functions import Replace
from django.utils import timezone

from common.queueing import job_tasks_register
from common.scoping import scoped_to, workspace_of_new_rows
from common.tasks import task_send_on_commit

from . import selectors, uploads
from .exporters import get_exporter
from .importers import ImportDataError, ImportReport, get_importer
from .importers.base import ProgressCallback
from .importers.chartom_qa import record_parse
from .importers.generic import SUFFIXES as GENERIC_SUFFIXES
from .importers.generic import VERSION_RE as GENERIC_VERSION_RE
from .importers.generic import MappingError, benchmark_key, mapping_parse
from .importers.generic_presets import builtin_preset
from .importers.screenplay import SUFFIXES as SCREENPLAY_SUFFIXES
from .importers.screenplay import screenplay_import
from .models import Benchmark, Character, ImportJob, MappingPreset, QAItem, Work
from .uploads import UploadOutcome, UploadRefused, UploadSource

IMPORT_TASK_NAME = "benchmarks.run_import_job"
DEFAULT_VERSION = "1"  # a generic benchmark's version when none is given
job_tasks_register("benchmarks.importjob", IMPORT_TASK_NAME, page="benchmarks:import-job")


def benchmark_import(
    *,
    format_name: str,
    path: Path | str,
    split: str = "",
    progress: ProgressCallback | None = None,
    books: Path | None = None,
    mapping: dict[str, Any] | None = None,
    name: str | None = None,
    version: str | None = None,
) -> ImportReport:
    """Import one source (file or directory) atomically and idempotently.

    ``books`` (CharToM-QA only) is a folder of Project Gutenberg texts: items without
    ``context_1000``/``context_2000`` get them cut from their book, found there by
    title and author or among the books already imported (the report's summary lines
    say how many did, and why the others did not). ``mapping``, ``name`` and
    ``version`` (format ``generic`` only) say how to read the source and what to call
    the benchmark. Raises :class:`~benchmarks.importers.ImportDataError` naming the
    file, record and field of the first problem found (a generic import names every
    failing record: :class:`~benchmarks.importers.generic.RecordErrors`), or the books
    folder when it is not there; nothing is written then. ``ValueError`` for an unknown
    format, options another format takes, or a bad mapping, name or version.
    """
    importer_class = get_importer(format_name)
    options: dict[str, Any] = {}
    if books is not None:
        if not importer_class.reads_books:
            raise ValueError(f"a books folder applies to chartom-qa imports, not {format_name}")
        options["books"] = Path(books)
    if getattr(importer_class, "takes_mapping", False):
        if mapping is None or not name:
            raise ValueError(f"a {format_name} import needs a mapping and the benchmark's name")
        options.update(mapping=mapping, name=name, version=version or DEFAULT_VERSION)
    elif mapping is not None or name is not None or version is not None:
        raise ValueError(f"a mapping, name and version apply to generic imports, not {format_name}")
    importer = importer_class(split=split, progress=progress, **options)
    with _writing_own_works(), transaction.atomic():
        try:
            return importer.run(Path(path))
        except IntegrityError as exc:
            raise ImportDataError(_import_error(exc), path=Path(path)) from None


@contextmanager
def _writing_own_works() -> Iterator[None]:
    """An import reads and writes the works of the workspace it runs in (Default for a
    command), never one another workspace made, even published: such a work's natural
    key is taken, so the import stops with :func:`_import_error`'s reason."""
    with scoped_to(workspace_of_new_rows(), shared=False):
        yield


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


def import_job_create(
    *,
    format_name: str,
    path: Path | str,
    split: str = "",
    options: dict[str, Any] | None = None,
) -> ImportJob:
    """Queue an import for a Celery worker; the task is sent once the row is committed.

    ``options`` are a generic import's mapping, name and version.
    """
    get_importer(format_name)  # unknown formats fail here, not in the worker
    job = ImportJob.objects.create(
        format_name=format_name, path=str(path), split=split, options=options or {}
    )

    task_send_on_commit(IMPORT_TASK_NAME, (job.pk,))
    return job


def import_job_run(*, job_id: int) -> str:
    """Claim a queued job with one conditional UPDATE, run it, record the outcome.

    A job that a killed worker left "running" is claimed again when its message is
    redelivered (acks_late): the import is atomic, so nothing of the first try stayed.
    An upload's job (confirmed in the browser or the API) runs here too, in the request
    for small uploads and on the worker for large ones.
    """
    claimed = ImportJob.objects.filter(
        pk=job_id, status__in=[ImportJob.Status.QUEUED, ImportJob.Status.RUNNING]
    ).update(status=ImportJob.Status.RUNNING, started_at=timezone.now(), progress_done=0)
    if not claimed:
        return "skipped"
    job = ImportJob.objects.get(pk=job_id)
    # Imported as a member of the job's workspace: its new works are born there, and
    # no other workspace's unpublished work is read or changed.
    with scoped_to(job.workspace_id):
        return _import_job_claimed(job)


def _import_error(exc: Exception) -> str:
    if isinstance(exc, IntegrityError):
        # The natural keys are the server's: a work another workspace imported cannot
        # be imported again here, nor changed from here once published.
        return (
            "a work in this file is already in another workspace's item bank "
            "(there, it can be imported again or published for this one to read)"
        )
    return str(exc)


def _import_job_claimed(job: ImportJob) -> str:
    job_id = job.pk
    if job.upload:
        return _upload_job_run(job)
    done = 0

    def progress(n: int) -> None:
        # The import is one transaction, so a progress row written from inside it
        # would only become visible at commit; we count here and store it at the end.
        nonlocal done
        done += n

    generic = {k: job.options[k] for k in ("mapping", "name", "version") if k in job.options}
    try:
        report = benchmark_import(
            format_name=job.format_name,
            path=job.path,
            split=job.split,
            progress=progress,
            **generic,
        )
    except (ImportDataError, ValueError, IntegrityError) as exc:
        ImportJob.objects.filter(pk=job_id).update(
            status=ImportJob.Status.FAILED, error=_import_error(exc), finished_at=timezone.now()
        )
        return "failed"
    ImportJob.objects.filter(pk=job_id).update(
        status=ImportJob.Status.SUCCEEDED,
        report=report.as_dict(),
        progress_done=done,
        finished_at=timezone.now(),
    )
    return "succeeded"


# -- imports from uploaded files (the /data/ pages and POST /api/imports/) ---------------


class _DryRunDone(Exception):
    """Raised inside the dry run's transaction once its report is read: rolls it back."""


def _upload_execute(
    *,
    source: UploadSource,
    folder: Path,
    path: Path,
    options: dict[str, Any],
    progress,
    user: Any = None,
) -> UploadOutcome:
    """The source's import of ``path``, then upload paths taken out of ``Work.source``.

    DynToM records a new stage's folder as its source: in an upload that is a
    temporary folder, so it is stored relative to the upload (``trial50``).
    """
    with _writing_own_works():
        try:
            if source.dry_run:
                outcome = source.run(path, options, progress)
            else:
                outcome = source.run(path, options, progress, user=user)
        except IntegrityError as exc:
            raise ValueError(_import_error(exc)) from None
    prefix = f"{folder / uploads.DATA}/"
    Work.objects.filter(source__startswith=prefix).update(
        source=Replace("source", Value(prefix), Value(""))
    )
    return outcome


def _dry_run(
    source: UploadSource, folder: Path, path: Path, options: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """Import inside a transaction that is rolled back: the report, preview and records.

    The very import Confirm runs, so its counts are what Confirm will do (unless the
    item bank changes in between).
    """
    records = 0

    def progress(n: int) -> None:
        nonlocal records
        records += n

    result: dict[str, Any] = {}
    try:
        with transaction.atomic():
            outcome = _upload_execute(
                source=source, folder=folder, path=path, options=options, progress=progress
            )
            result["report"] = uploads.report_from(outcome, folder)
            result["preview"] = source.preview(path, options, outcome)
            raise _DryRunDone
    except _DryRunDone:
        pass
    return result["report"], result["preview"], records


def import_uploads_purge() -> list[str]:
    """Delete abandoned uploads (older than ``TOMLAB_UPLOAD_TTL_S``), not queued ones."""
    active = [ImportJob.Status.QUEUED, ImportJob.Status.RUNNING]

    def keep(upload_id: str) -> bool:
        return ImportJob.objects.filter(upload=upload_id, status__in=active).exists()

    gone = uploads.uploads_purge(keep=keep)
    if gone:
        ImportJob.objects.filter(upload__in=gone, status=ImportJob.Status.READY).update(
            status=ImportJob.Status.CANCELLED,
            error="the upload expired before it was confirmed (settings.TOMLAB_UPLOAD_TTL_S)",
            finished_at=timezone.now(),
        )
    return gone


def import_upload_start(
    *,
    user: Any,
    format_name: str,
    files: Sequence[uploads.FileLike],
    books: Sequence[uploads.FileLike] = (),
    options: dict[str, Any] | None = None,
) -> ImportJob:
    """Store an upload, lay it out and dry-run its import (the job waits for Confirm);
    or, for a source without a dry run, queue it for a worker at once.

    Raises :class:`~benchmarks.uploads.UploadRefused` naming the form field, or the
    file, record and field of the first problem; the upload is deleted then and
    nothing is written (no job either).
    """
    import_uploads_purge()
    source = uploads.upload_source_get(format_name)
    options = uploads.options_clean(source, options or {})
    upload = uploads.upload_store(source=source, files=files, books=books)

    def job_create(**fields: Any) -> ImportJob:
        return ImportJob.objects.create(
            format_name=source.name,
            path=str(path),
            split=options.get("split", ""),
            created_by=user,
            upload=upload.id,
            files=upload.files,
            upload_bytes=upload.size,
            options=options,
            **fields,
        )

    try:
        incoming = sorted((upload.folder / uploads.INCOMING).iterdir())
        path = source.layout(upload.folder, incoming, options)
        if not source.dry_run:
            with transaction.atomic():
                job = job_create(status=ImportJob.Status.QUEUED)
                task_send_on_commit(IMPORT_TASK_NAME, (job.pk,))
            return job
        report, preview, records = _dry_run(source, upload.folder, path, options)
    except ImportDataError as exc:
        uploads.upload_delete(upload.id)
        raise uploads.located(exc, upload.folder) from None
    except ValueError as exc:
        uploads.upload_delete(upload.id)
        raise UploadRefused(uploads.scrub(str(exc), upload.folder)) from None
    except BaseException:
        uploads.upload_delete(upload.id)
        raise
    if options.get("save_as"):
        # Saved once the mapping has read the whole upload without a failing record.
        preset, created = mapping_preset_save(
            name=options["save_as"], mapping=options["mapping"], user=user
        )
        report.setdefault("notes", []).append(
            f"The mapping was saved as the preset {preset.name!r}"
            + ("." if created else " (replacing the one of that name).")
        )
    return job_create(
        status=ImportJob.Status.READY, dry_run=report, preview=preview, progress_total=records
    )


def import_upload_background(job: ImportJob) -> bool:
    """Whether Confirm queues the job for a worker (over TOMLAB_IMPORT_BACKGROUND_BYTES;
    always for a source without a dry run)."""
    if job.upload and not _dry_runs(job.format_name):
        return True
    return job.upload_bytes > settings.TOMLAB_IMPORT_BACKGROUND_BYTES


def _dry_runs(format_name: str) -> bool:
    try:
        return uploads.upload_source_get(format_name).dry_run
    except UploadRefused:
        return True


def import_upload_confirm(*, job: ImportJob) -> ImportJob:
    """Import a dry-run upload: here when small, else queued for a worker.

    One conditional UPDATE takes the job from "ready", so a second Confirm (a double
    click, a second tab) is refused instead of importing twice.
    """
    background = import_upload_background(job)
    with transaction.atomic():
        taken = ImportJob.objects.filter(pk=job.pk, status=ImportJob.Status.READY).update(
            status=ImportJob.Status.QUEUED
        )
        if not taken:
            job.refresh_from_db()
            raise UploadRefused(
                f"this import is {job.get_status_display()}; only a dry run waiting for "
                "confirmation can be confirmed"
            )
        if background:
            task_send_on_commit(IMPORT_TASK_NAME, (job.pk,))
    if not background:
        import_job_run(job_id=job.pk)
    job.refresh_from_db()
    return job


def import_upload_cancel(*, job: ImportJob) -> ImportJob:
    """Cancel a dry run or a queued import and delete its files."""
    cancelled = ImportJob.objects.filter(
        pk=job.pk, status__in=[ImportJob.Status.READY, ImportJob.Status.QUEUED]
    ).update(status=ImportJob.Status.CANCELLED, finished_at=timezone.now())
    job.refresh_from_db()
    if not cancelled:
        raise UploadRefused(f"this import is {job.get_status_display()}; it cannot be cancelled")
    uploads.upload_delete(job.upload)
    return job


def import_job_progress(job: ImportJob) -> tuple[int, int]:
    """Records done and the total: from the upload's progress file while running (an
    import without a dry run learns its total there), else the row."""
    if job.status == ImportJob.Status.RUNNING and job.upload:
        read = uploads.progress_read(job.upload)
        if read is not None:
            done, total = read
            total = job.progress_total or total
            return (min(done, total) if total else done), total
    return job.progress_done, job.progress_total


def _upload_job_run(job: ImportJob) -> str:
    folder = uploads.upload_folder(job.upload)
    progress = uploads.ProgressFile(folder, total=job.progress_total)
    progress.flush()
    status, error, report = ImportJob.Status.FAILED, "", {}
    try:
        source = uploads.upload_source_get(job.format_name)
        with transaction.atomic():
            outcome = _upload_execute(
                source=source,
                folder=folder,
                path=Path(job.path),
                options=dict(job.options),
                progress=progress,
                user=job.created_by,
            )
        report = uploads.report_from(outcome, folder)
        status = ImportJob.Status.SUCCEEDED
    except ImportDataError as exc:
        error = str(uploads.located(exc, folder))
    except (UploadRefused, ValueError) as exc:
        error = uploads.scrub(str(exc), folder)
    except BaseException:
        error = "the import stopped on an internal error; nothing was written"
        raise
    finally:
        ImportJob.objects.filter(pk=job.pk, status=ImportJob.Status.RUNNING).update(
            status=status,
            error=error,
            report=report,
            progress_done=progress.done,
            progress_total=max(job.progress_total, progress.total),
            finished_at=timezone.now(),
        )
        uploads.upload_delete(job.upload)
    return status


def _benchmark_run(format_name: str):
    """The upload ``run`` of an item bank format: ``benchmark_import``, as the command."""

    def run(path: Path, options: dict[str, Any], progress: ProgressCallback) -> UploadOutcome:
        books = uploads.books_folder(path) if options.get("books") else None
        report = benchmark_import(
            format_name=format_name,
            path=path,
            split=options.get("split", ""),
            progress=progress,
            books=books,
        )
        return UploadOutcome(report=report)

    return run


def _generic_run(path: Path, options: dict[str, Any], progress: ProgressCallback) -> UploadOutcome:
    report = benchmark_import(
        format_name=Benchmark.GENERIC,
        path=path,
        split=options.get("split", ""),
        progress=progress,
        mapping=options["mapping"],
        name=options["name"],
        version=options.get("version") or DEFAULT_VERSION,
    )
    return UploadOutcome(report=report, refs={"work": getattr(report, "work_id", None)})


def _generic_options_clean(options: dict[str, Any]) -> dict[str, Any]:
    """A generic upload's options: the mapping written (JSON) or the preset's, checked
    key by key; the name, version and preset name to save as. Raises UploadRefused
    naming the form field."""
    out = dict(options)
    mapping = out.get("mapping")
    if mapping is None:
        if not out.get("preset"):
            raise UploadRefused("write a field mapping, or choose a preset", field="mapping")
        try:
            mapping = selectors.mapping_preset_get(out["preset"])
        except LookupError as exc:
            raise UploadRefused(str(exc.args[0]), field="preset") from None
    try:
        mapping_parse(mapping)
    except MappingError as exc:
        raise UploadRefused(str(exc), field="mapping") from None
    out["mapping"] = json.loads(mapping) if isinstance(mapping, str) else mapping
    version = out.get("version") or DEFAULT_VERSION
    if not GENERIC_VERSION_RE.match(version):
        raise UploadRefused(
            "letters, digits, '.', '_' or '-' (at most 50), e.g. 1.0", field="version"
        )
    out["version"] = version
    if benchmark_key(out["name"], version).startswith("@"):
        raise UploadRefused("a name with at least one letter or digit", field="name")
    if out.get("save_as") and builtin_preset(out["save_as"]):
        raise UploadRefused(
            f"{out['save_as']!r} is a built-in preset's name; choose another", field="save_as"
        )
    return out


def _screenplay_run(
    path: Path, options: dict[str, Any], progress: ProgressCallback
) -> UploadOutcome:
    report = screenplay_import(
        path=path, title=options.get("title"), split=options.get("split", ""), progress=progress
    )
    return UploadOutcome(report=report)


for _source in (
    UploadSource(
        name="screenplay",
        label="Screenplay",
        help="A raw screenplay (IMSDb plain text or Fountain), built into a ToM-in-AMC movie: "
        "scenes, the five main characters masked as P0, P1… in the test scenes.",
        extensions=SCREENPLAY_SUFFIXES,
        options=("title", "split"),
        layout=uploads.layout_screenplay,
        run=_screenplay_run,
        preview=uploads.preview_screenplay,
    ),
    UploadSource(
        name=Benchmark.TVSHOWGUESS,
        label="TVShowGuess",
        help="A show's <show>.raw (CSV No.,Scene,Answer) and, optionally, its .tsv of human "
        "annotations.",
        extensions=(".raw", ".tsv"),
        options=("split",),
        layout=uploads.layout_tvshowguess,
        run=_benchmark_run(Benchmark.TVSHOWGUESS),
        preview=uploads.preview_tvshowguess,
    ),
    UploadSource(
        name=Benchmark.DYNTOM,
        label="DynToM",
        help="A .zip of trialN/ folders (each with story.json and question_new.json), or one "
        "trial's story.json and question_new.json with its name.",
        extensions=(".zip", ".json"),
        options=("stage", "split"),
        layout=uploads.layout_dyntom,
        run=_benchmark_run(Benchmark.DYNTOM),
        preview=uploads.preview_dyntom,
    ),
    UploadSource(
        name=Benchmark.CHARTOM_QA,
        label="CharToM-QA",
        help="CharToM-QA JSONL, one question per line, with the books (.txt) to cut plot "
        "windows from when lines have no context_1000/context_2000.",
        extensions=(".jsonl",),
        options=("books", "split"),
        layout=uploads.layout_chartom,
        run=_benchmark_run(Benchmark.CHARTOM_QA),
        preview=uploads.preview_chartom,
    ),
    UploadSource(
        name=Benchmark.GENERIC,
        label="Other benchmark (field mapping)",
        help="Any multiple-choice benchmark, read through a field mapping that says which "
        "field holds the question, the options, the answer and the categories "
        "(docs/formats.md). JSON Lines, JSON, CSV/TSV or XLSX files, or a .zip of them; "
        "several files are read as one benchmark.",
        extensions=GENERIC_SUFFIXES,
        options=("name", "version", "preset", "mapping", "save_as", "split"),
        required=("name",),
        layout=uploads.layout_generic,
        run=_generic_run,
        preview=uploads.preview_generic,
        option_labels={
            "name": (
                "Benchmark name",
                "What the benchmark is called here (e.g. ToMBench); with the version, it "
                "names the item set.",
            )
        },
        clean=_generic_options_clean,
    ),
    UploadSource(
        name=Benchmark.TOM_IN_AMC,
        label="ToM-in-AMC",
        help="ToM-in-AMC JSON ({split: {movie: {chars, training_scenes, testing_scenes}}}).",
        extensions=(".json",),
        options=("split",),
        layout=uploads.layout_single("ToM-in-AMC", (".json",)),
        run=_benchmark_run(Benchmark.TOM_IN_AMC),
        preview=uploads.preview_tom_in_amc,
    ),
):
    uploads.upload_source_register(_source)


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


def benchmark_publish(*, works: QuerySet[Work], shared: bool = True) -> int:
    """Publish ``works`` (with their scenes, characters, items and questions) to every
    workspace, or take them back: the others read them and cannot change them. Only
    the owning workspace's works change (the caller's queryset is scoped); returns how
    many changed."""
    return (
        Work._base_manager.filter(pk__in=works.values("pk"))
        .exclude(shared=shared)
        .update(shared=shared)
    )


# -- field mappings saved as presets (the generic importer) -------------------------------


@transaction.atomic
def mapping_preset_save(
    *, name: str, mapping: dict[str, Any] | str, description: str = "", user: Any = None
) -> tuple[MappingPreset, bool]:
    """Save a field mapping as this workspace's preset ``name`` (replacing one of that
    name); returns it and whether it is new. The mapping is checked first
    (:class:`~benchmarks.importers.generic.MappingError` names the key); a built-in
    preset's name is refused (``ValueError``)."""
    name = " ".join(name.split())
    if not name or len(name) > MappingPreset._meta.get_field("name").max_length:
        raise ValueError("a preset's name: 1 to 100 characters")
    if builtin_preset(name):
        raise ValueError(f"{name!r} is a built-in preset's name")
    if isinstance(mapping, str):
        mapping = json.loads(mapping)
    mapping_parse(mapping)
    preset = MappingPreset.objects.filter(name=name).first()
    if preset is None:
        preset = MappingPreset.objects.create(
            name=name, mapping=mapping, description=description, created_by=user
        )
        return preset, True
    preset.mapping = mapping
    fields = ["mapping", "updated_at"]
    if description:
        preset.description = description
        fields.append("description")
    preset.save(update_fields=fields)
    return preset, False
