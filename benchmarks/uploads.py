"""Imports from uploaded files: the registry of sources, storage, layout and previews.

The browser's ``/data/`` pages and ``POST /api/imports/`` take files, not server paths.
Each format people can upload is an :class:`UploadSource`: its accepted files and
options, a ``layout`` that puts the uploaded files where its importer expects them
(a ``.raw`` and its ``.tsv`` side by side, DynToM trials as ``trialN/`` folders), a
``run`` that imports the laid-out path (the same importer, limits and transaction as
``manage.py import_benchmark``) and a ``preview`` that renders the first imported
records as plain dicts. ``benchmarks.services`` registers the item bank's formats;
``modeling`` registers "predictions" from its ``AppConfig.ready()`` (this app may not
import modeling).

An upload lives in ``DATA_DIR/uploads/<unguessable id>/`` (``in/`` the files as sent,
under safe names; ``data/`` the layout; ``books/``; ``progress.json``) until its import
ends or is cancelled; abandoned ones are purged after ``TOMLAB_UPLOAD_TTL_S``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
import time
import unicodedata
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from django.conf import settings

from .importers import ImportDataError
from .importers.base import ProgressCallback
from .importers.dyntom import QUESTIONS_FILE, STORY_FILE
from .importers.generic_preview import PREVIEW_ITEMS, item_preview
from .models import (
    Benchmark,
    DynToMStage,
    MCItem,
    QAItem,
    Scene,
    SpeakerInstance,
    Split,
    Work,
)

UPLOADS_DIR = "uploads"
INCOMING, DATA, BOOKS = "in", "data", "books"
PROGRESS_FILE = "progress.json"
UPLOAD_ID_RE = re.compile(r"^[A-Za-z0-9_-]{20,64}$")
NAME_MAX = 120  # characters of a stored file name
ZIP_MAX_MEMBERS = 20_000  # the DynToM release has ~1,100 trials of 2 files
PREVIEW_RECORDS = 3
PREVIEW_LINES = 14  # lines of a scene shown in the preview
COPY_CHUNK = 1024 * 1024
# Files a Mac or Windows zip tool adds that no importer reads.
ZIP_JUNK = ("__MACOSX/", ".DS_Store", "Thumbs.db", "desktop.ini")


class UploadRefused(Exception):
    """An upload that cannot be imported, located: the form field, or file/record/field."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        file: str | None = None,
        record: str | int | None = None,
        errors: Sequence[UploadRefused] = (),
        error_count: int = 0,
        details: dict[str, Any] | None = None,
    ) -> None:
        self.message = message
        self.field = field
        self.file = file
        self.record = record
        # A mapped import refuses every failing record at once (the first ERRORS_LISTED
        # of ``error_count``), and says what the others parsed to (``details``).
        self.errors = list(errors)
        self.error_count = error_count or len(self.errors) or 1
        self.details = details or {}
        super().__init__(str(self))

    def __str__(self) -> str:
        where = [str(part) for part in (self.file, self.record and f"record {self.record}") if part]
        if self.field and self.file:
            where.append(f"field {self.field!r}")
        return ": ".join([*where, self.message])

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "record": None if self.record is None else str(self.record),
            "field": self.field,
            "message": self.message,
        }

    def as_dicts(self) -> list[dict[str, Any]]:
        """Every located error: this one alone, or each failing record listed."""
        return [error.as_dict() for error in self.errors] or [self.as_dict()]


class FileLike(Protocol):
    """What an upload needs of Django's ``UploadedFile``."""

    name: str | None
    size: int | None

    def chunks(self, chunk_size: int | None = ...) -> Iterable[bytes]: ...


@dataclass
class UploadOutcome:
    """What one import of an upload did: its report, notes to show, what previews need."""

    report: Any  # an ImportReport (counts, warnings, maybe notes)
    notes: list[str] = field(default_factory=list)
    refs: dict[str, Any] = field(default_factory=dict)
    # (label, URL) of what the import made, shown with its report (a study it became).
    links: list[tuple[str, str]] = field(default_factory=list)


# The options a source may take, by name: label and help text (form and API).
OPTION_LABELS: dict[str, tuple[str, str]] = {
    "split": ("Split", "Recorded on the imported works when the source does not say."),
    "title": ("Title", "The movie's title (default: the script's title page, else the file name)."),
    "stage": (
        "Stage name",
        "For a story.json + question_new.json pair: the trial folder's name (e.g. trial50).",
    ),
    "books": (
        "Books",
        "Project Gutenberg plain-text novels: items without context_1000/context_2000 get "
        "them cut from their book.",
    ),
    "name": ("Run name", "The imported runs' name (CharToM-QA runs get the task appended)."),
    "benchmark": (
        "Benchmark",
        "For lines without a benchmark field; other benchmarks' lines are skipped.",
    ),
    "model": ("Model", "For lines without a model field; other models' lines are skipped."),
    "strict": (
        "Strict",
        "yes: refuse the package if a rebuilt report differs from the packaged one.",
    ),
    "version": (
        "Version",
        "The benchmark's version (default 1): a new version is a new item set, as 1.0 and "
        "1.1 of a built-in benchmark are.",
    ),
    "preset": (
        "Mapping preset",
        "A saved field mapping: it fills the mapping below, which you can then change.",
    ),
    "mapping": (
        "Field mapping (JSON)",
        "Which source field holds the question, the options, the answer… (docs/formats.md, "
        '"Other benchmarks"). Empty: the preset\'s mapping as saved.',
    ),
    "keep_unknown": (
        "Keep unknown samples aside",
        "yes: samples whose id is no item of this server are listed on the run and left "
        "out; no (default): the import is refused and names them.",
    ),
    "id_field": (
        "Doc id field",
        "The doc field that holds the ToMLab item key (default id, as ToMLab exports it).",
    ),
    "item_map": (
        "Doc to item map (JSON)",
        'For a task ToMLab did not export: {"<doc_id>": "<item key>", …} (docs/researcher.md).',
    ),
    "save_as": (
        "Save this mapping as",
        "A preset name: the mapping is saved for this workspace when the dry run succeeds "
        "(an existing preset of that name is replaced).",
    ),
}
YES = ("yes", "true", "on", "1")
OPTION_MAX = {
    "title": 255,
    "stage": 100,
    "name": 200,
    "model": 255,
    "version": 50,
    "preset": 100,
    "save_as": 100,
    "mapping": 200_000,
    "id_field": 100,
    "item_map": 2_000_000,
}
# Options taken as written: a mapping's JSON keeps its spaces and line breaks.
RAW_OPTIONS = ("mapping", "item_map")


@dataclass(frozen=True)
class UploadSource:
    """One format people can upload."""

    name: str
    label: str
    help: str
    extensions: tuple[str, ...]  # accepted suffixes of the main files, lower case
    options: tuple[str, ...]  # names in OPTION_LABELS the form shows for it
    layout: Callable[[Path, list[Path], dict[str, Any]], Path]
    run: Callable[[Path, dict[str, Any], ProgressCallback], UploadOutcome]
    preview: Callable[[Path, dict[str, Any], UploadOutcome], list[dict[str, Any]]]
    book_extensions: tuple[str, ...] = (".txt",)
    required: tuple[str, ...] = ()  # options that must be given
    # False: no dry run in the request; the upload is queued for a worker at once (a
    # replication package: one all-or-nothing transaction whose checks alone can take
    # minutes). ``run`` then also gets ``user=`` (the job's creator).
    dry_run: bool = True
    # Labels and help of options that mean something else for this source (a generic
    # import's "name" is the benchmark's, not a run's).
    option_labels: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Checks the cleaned options as a whole and fills in what follows from them (a
    # preset's mapping); raises UploadRefused naming the field.
    clean: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def option_label(self, name: str) -> tuple[str, str]:
        return self.option_labels.get(name) or OPTION_LABELS[name]

    @property
    def accept(self) -> str:
        return ",".join(self.extensions)


_SOURCES: dict[str, UploadSource] = {}


def upload_source_register(source: UploadSource) -> None:
    """Add (or replace) a format; called at import time by the app that owns it."""
    _SOURCES[source.name] = source


def upload_sources() -> list[UploadSource]:
    """The registered formats, by label."""
    return sorted(_SOURCES.values(), key=lambda source: source.label.casefold())


def upload_source_get(name: Any) -> UploadSource:
    if not isinstance(name, str) or name not in _SOURCES:
        choices = ", ".join(_SOURCES)
        raise UploadRefused(f"choose a format: {choices}", field="format")
    return _SOURCES[name]


def options_clean(source: UploadSource, raw: dict[str, Any]) -> dict[str, Any]:
    """The options ``source`` takes, stripped and checked; others must be empty."""
    out: dict[str, Any] = {}
    for name in RAW_OPTIONS:
        value = raw.get(name)
        if value is None or (isinstance(value, str) and not value.strip()) or value == {}:
            continue
        if name not in source.options:
            raise UploadRefused(f"a {source.label} import takes no {name}", field=name)
        if isinstance(value, str):
            if "\x00" in value:
                raise UploadRefused("contains a NUL character", field=name)
            if len(value) > OPTION_MAX[name]:
                raise UploadRefused(f"at most {OPTION_MAX[name]:,} characters", field=name)
        out[name] = value
    for name in OPTION_LABELS:
        if name == "books" or name in RAW_OPTIONS:
            continue
        value = raw.get(name)
        value = "" if value is None else str(value)
        if "\x00" in value:
            raise UploadRefused("contains a NUL character", field=name)
        value = " ".join(value.split())
        if not value:
            continue
        if name not in source.options:
            raise UploadRefused(f"a {source.label} import takes no {name}", field=name)
        limit = OPTION_MAX.get(name)
        if limit and len(value) > limit:
            raise UploadRefused(f"at most {limit} characters", field=name)
        if name == "split" and value not in Split.values:
            raise UploadRefused(
                f"choose one of {', '.join(v for v in Split.values if v)}", field=name
            )
        if name == "benchmark" and value not in Benchmark.values:
            raise UploadRefused(f"choose one of {', '.join(Benchmark.values)}", field=name)
        if name in ("strict", "keep_unknown"):
            if value.lower() not in (*YES, "no", "false", "off", "0"):
                raise UploadRefused("yes or no", field=name)
            if value.lower() not in YES:
                continue
            value = "yes"
        out[name] = value
    for name in source.required:
        if not out.get(name):
            label = source.option_label(name)[0].lower()
            article = "an" if source.label[:1].lower() in "aeiou" else "a"
            raise UploadRefused(f"{article} {source.label} import needs a {label}", field=name)
    if source.clean is not None:
        out = source.clean(out)
    return out


# -- storage --------------------------------------------------------------------------


def uploads_root() -> Path:
    return Path(settings.DATA_DIR) / UPLOADS_DIR


def upload_folder(upload_id: str) -> Path:
    """The folder of an upload; the id is checked so no path can be smuggled in."""
    if not UPLOAD_ID_RE.match(upload_id or ""):
        raise ValueError(f"not an upload id: {upload_id!r}")
    return uploads_root() / upload_id


def upload_delete(upload_id: str) -> None:
    if upload_id:
        shutil.rmtree(upload_folder(upload_id), ignore_errors=True)


def safe_name(name: str | None) -> str:
    """A file name safe to store and show: its last path part, plain characters only."""
    name = unicodedata.normalize("NFKC", str(name or "")).replace("\\", "/").split("/")[-1]
    name = re.sub(r"[^\w.\- ]", "_", name, flags=re.ASCII).strip(" .")
    stem, dot, suffix = name.rpartition(".")
    if len(name) > NAME_MAX:
        suffix = suffix[:16] if dot else ""
        name = (stem if dot else name)[: NAME_MAX - len(suffix) - 1] + (f".{suffix}" if dot else "")
    return name or "file"


def _limit(name: str) -> int:
    return settings.TOMLAB_IMPORT_MAX_BYTES[name]


@dataclass
class Upload:
    id: str
    folder: Path
    files: list[str]
    size: int


def upload_store(
    *, source: UploadSource, files: Sequence[FileLike], books: Sequence[FileLike]
) -> Upload:
    """Write the uploaded files under a new folder with safe names; checks sizes first.

    Each file's suffix must be one the source accepts; the upload's total is bounded by
    ``TOMLAB_UPLOAD_MAX_BYTES`` (counted while writing, not trusted from the request).
    The folder is removed again when anything is refused.
    """
    if not files:
        raise UploadRefused("choose at least one file", field="files")
    if books and "books" not in source.options:
        raise UploadRefused(f"a {source.label} import takes no books", field="books")
    upload_id = secrets.token_urlsafe(24)
    folder = upload_folder(upload_id)
    (folder / INCOMING).mkdir(parents=True)
    try:
        total = 0
        names: list[str] = []
        for kind, group, suffixes in (
            ("files", files, source.extensions),
            ("books", books, source.book_extensions),
        ):
            target = folder / (INCOMING if kind == "files" else BOOKS)
            target.mkdir(exist_ok=True)
            for upload in group:
                name = safe_name(upload.name)
                if not name.lower().endswith(suffixes):
                    raise UploadRefused(
                        f"{name}: a {source.label} import takes {', '.join(suffixes)} files",
                        field=kind,
                        file=name,
                    )
                if (target / name).exists():
                    raise UploadRefused(f"two files named {name}", field=kind, file=name)
                total = _write(upload, target / name, name=name, kind=kind, total=total)
                names.append(name if kind == "files" else f"books/{name}")
        return Upload(id=upload_id, folder=folder, files=names, size=total)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _write(upload: FileLike, path: Path, *, name: str, kind: str, total: int) -> int:
    limit = settings.TOMLAB_UPLOAD_MAX_BYTES
    with path.open("xb") as out:
        for chunk in upload.chunks():
            total += len(chunk)
            if total > limit:
                raise UploadRefused(
                    f"the upload is over the {limit:,}-byte limit "
                    "(settings.TOMLAB_UPLOAD_MAX_BYTES)",
                    field=kind,
                    file=name,
                )
            out.write(chunk)
    return total


def uploads_purge(*, now: float | None = None, keep: Callable[[str], bool]) -> list[str]:
    """Delete upload folders older than ``TOMLAB_UPLOAD_TTL_S``; ``keep(id)`` spares one.

    Returns the ids deleted. Called on each new upload, so abandoned dry runs do not
    pile up without a periodic task.
    """
    root = uploads_root()
    if not root.is_dir():
        return []
    cutoff = (now or time.time()) - settings.TOMLAB_UPLOAD_TTL_S
    gone = []
    for entry in root.iterdir():
        try:
            old = entry.stat().st_mtime < cutoff
        except OSError:
            continue
        if old and UPLOAD_ID_RE.match(entry.name) and not keep(entry.name):
            shutil.rmtree(entry, ignore_errors=True)
            gone.append(entry.name)
    return gone


# -- progress across processes ---------------------------------------------------------


class ProgressFile:
    """Records done, written to ``progress.json`` in the upload folder as they go.

    The import is one transaction, so progress written to the database inside it is
    seen by nobody until commit; a small file is seen by the web process at once, on
    SQLite and PostgreSQL alike, and goes with the folder. Written at most every
    ``every_s`` seconds (and at the end), replaced atomically so a reader never sees
    half a file.
    """

    def __init__(self, folder: Path, *, total: int, every_s: float = 0.5) -> None:
        self.path = folder / PROGRESS_FILE
        self.total = total
        self.done = 0
        self.every_s = every_s
        self._last = 0.0

    def set_total(self, total: int) -> None:
        """For an import that learns its size only once it has begun (a package)."""
        self.total = total
        self.flush()

    def __call__(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            self.flush()

    def flush(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps({"done": self.done, "total": self.total}))
            os.replace(tmp, self.path)
        except OSError:
            pass  # the folder went (cancelled); progress is a courtesy


def progress_read(upload_id: str) -> tuple[int, int] | None:
    """Records done so far by the running import of an upload, and its total; or None."""
    try:
        data = json.loads((upload_folder(upload_id) / PROGRESS_FILE).read_text())
        return int(data["done"]), int(data["total"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


# -- messages without server paths -----------------------------------------------------


def scrub(text: str, folder: Path) -> str:
    """``text`` with the upload folder's path taken out: people see their file names."""
    for base in (folder / DATA, folder / BOOKS, folder / INCOMING, folder):
        text = text.replace(f"{base}{os.sep}", "").replace(str(base), ".")
    return text


def located(exc: ImportDataError, folder: Path) -> UploadRefused:
    """The importer's error as the upload's, paths taken out; with every failing record
    when the importer collected them (a mapped import)."""
    errors = [
        UploadRefused(
            scrub(error.message, folder),
            file=scrub(error.path, folder),
            record=error.record,
            field=error.field,
        )
        for error in getattr(exc, "errors", ())
    ]
    details = getattr(exc, "details", None)
    if details:
        details = json.loads(scrub(json.dumps(details), folder))
    return UploadRefused(
        scrub(exc.message, folder),
        file=scrub(exc.path, folder),
        record=exc.record,
        field=exc.field,
        errors=errors,
        error_count=getattr(exc, "total", 0),
        details=details,
    )


def report_from(outcome: UploadOutcome, folder: Path) -> dict[str, Any]:
    """An import's report as JSON: counts per kind, warnings and notes, paths scrubbed."""
    data = outcome.report.as_dict()
    kinds = sorted(set(data["created"]) | set(data["updated"]) | set(data["unchanged"]))
    return {
        "counts": [
            {
                "kind": kind,
                "created": data["created"].get(kind, 0),
                "updated": data["updated"].get(kind, 0),
                "unchanged": data["unchanged"].get(kind, 0),
            }
            for kind in kinds
        ],
        "warnings": [scrub(w, folder) for w in data["warnings"]],
        "notes": [scrub(n, folder) for n in [*data.get("notes", []), *outcome.notes]],
        "links": [{"label": label, "url": url} for label, url in outcome.links],
        # A mapped import's picture of its sources: fields found, counts by category.
        **{
            key: json.loads(scrub(json.dumps(data[key]), folder))
            for key in ("fields", "categories")
            if data.get(key)
        },
    }


# -- layouts of the item bank's formats ------------------------------------------------


def _move(files: list[Path], folder: Path) -> list[Path]:
    data = folder / DATA
    data.mkdir(exist_ok=True)
    moved = []
    for path in files:
        target = data / path.name
        path.replace(target)
        moved.append(target)
    return moved


def _one(files: list[Path], label: str, suffixes: tuple[str, ...]) -> Path:
    main = [p for p in files if p.name.lower().endswith(suffixes)]
    if len(main) != 1 or len(files) != 1:
        raise UploadRefused(
            f"a {label} import takes one {'/'.join(suffixes)} file, not {len(files)} files",
            field="files",
        )
    return main[0]


def layout_single(label: str, suffixes: tuple[str, ...]) -> Callable[..., Path]:
    def layout(folder: Path, files: list[Path], options: dict[str, Any]) -> Path:
        return _move([_one(files, label, suffixes)], folder)[0]

    return layout


def layout_screenplay(folder: Path, files: list[Path], options: dict[str, Any]) -> Path:
    if options.get("title") and len(files) > 1:
        raise UploadRefused("a title names one movie; upload one script with it", field="title")
    moved = _move(files, folder)
    return moved[0] if len(moved) == 1 else folder / DATA


def layout_tvshowguess(folder: Path, files: list[Path], options: dict[str, Any]) -> Path:
    raws = [p for p in files if p.suffix.lower() == ".raw"]
    sheets = [p for p in files if p.suffix.lower() == ".tsv"]
    if len(raws) != 1 or len(sheets) > 1:
        raise UploadRefused(
            "a TVShowGuess import takes one .raw file and at most one .tsv (its annotations)",
            field="files",
        )
    (raw,) = _move(raws, folder)
    if raw.suffix != ".raw":  # the importer wants the suffix as written in lower case
        raw = raw.replace(raw.with_suffix(".raw"))
    if sheets:
        # The importer reads <show>.tsv beside <show>.raw, whatever the sheet was called.
        sheets[0].replace(raw.with_suffix(".tsv"))
    return raw


def dyntom_member_limit(name: str) -> int | None:
    """The size limit of a file in a DynToM trial, None for a file no importer reads."""
    if name == STORY_FILE:
        return _limit("dyntom-story")
    if name == QUESTIONS_FILE:
        return _limit("dyntom-questions")
    return None


def layout_dyntom(folder: Path, files: list[Path], options: dict[str, Any]) -> Path:
    data = folder / DATA
    data.mkdir(exist_ok=True)
    zips = [p for p in files if p.suffix.lower() == ".zip"]
    loose = [p for p in files if p.suffix.lower() != ".zip"]
    budget = settings.TOMLAB_UPLOAD_MAX_BYTES
    for archive in zips:
        budget -= zip_extract(archive, data, member_limit=dyntom_member_limit, budget=budget)
    if loose:
        names = sorted(p.name for p in loose)
        if names != sorted([STORY_FILE, QUESTIONS_FILE]):
            raise UploadRefused(
                f"besides .zip files, a DynToM import takes one {STORY_FILE} and one "
                f"{QUESTIONS_FILE} (one trial); got {', '.join(names)}",
                field="files",
            )
        stage = options.get("stage", "")
        if not stage:
            raise UploadRefused(
                f"name the trial of this {STORY_FILE} + {QUESTIONS_FILE} (e.g. trial50)",
                field="stage",
            )
        trial = data / safe_name(stage)
        if trial.exists():
            raise UploadRefused(f"a .zip has a trial named {trial.name} too", field="stage")
        trial.mkdir()
        for path in loose:
            path.replace(trial / path.name)
    elif not any(data.iterdir()):
        raise UploadRefused(
            f"no {STORY_FILE} or {QUESTIONS_FILE} in the .zip (expected trialN/ folders)",
            field="files",
            file=", ".join(p.name for p in zips),
        )
    elif options.get("stage"):
        raise UploadRefused(
            "a stage name is for a story.json + question_new.json pair", field="stage"
        )
    return dyntom_root(data)


def dyntom_root(path: Path) -> Path:
    """Down through folders that only wrap the trials (``dyntom/trial50/...``)."""
    while True:
        if (path / STORY_FILE).exists() or (path / QUESTIONS_FILE).exists():
            return path
        dirs = [p for p in path.iterdir() if p.is_dir()]
        files = [p for p in path.iterdir() if not p.is_dir()]
        if len(dirs) != 1 or files:
            return path
        inner = dirs[0]
        if (inner / STORY_FILE).exists() or (inner / QUESTIONS_FILE).exists():
            return path
        path = inner


def zip_extract(
    archive: Path, dest: Path, *, member_limit: Callable[[str], int | None], budget: int
) -> int:
    """Unpack the files of ``archive`` that an importer reads; returns the bytes written.

    Refused before anything is written: absolute paths, ``..``, links, more than
    ``ZIP_MAX_MEMBERS`` members, a member over its file kind's limit, a total over
    ``budget``. While writing, the bytes actually inflated are counted too, so a
    member whose header understates its size (a zip bomb) is stopped at the limit.
    """
    name = archive.name
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise UploadRefused(
            f"not a readable .zip archive ({exc})", file=name, field="files"
        ) from None
    with zf:
        members = zf.infolist()
        if len(members) > ZIP_MAX_MEMBERS:
            raise UploadRefused(
                f"{len(members):,} members, over the limit of {ZIP_MAX_MEMBERS:,}", file=name
            )
        wanted: list[tuple[zipfile.ZipInfo, tuple[str, ...], int]] = []
        total = 0
        for info in members:
            parts = _member_parts(info, archive=name)
            if parts is None:
                continue
            limit = member_limit(parts[-1])
            if limit is None:
                continue  # a README, a notebook…: no importer reads it
            if info.file_size > limit:
                raise UploadRefused(
                    f"{info.file_size:,} bytes unpacked, over the {limit:,}-byte limit for "
                    "this kind of file (settings.TOMLAB_IMPORT_MAX_BYTES)",
                    file=f"{name}: {info.filename}",
                )
            total += info.file_size
            if total > budget:
                raise UploadRefused(
                    f"over {budget:,} bytes unpacked (settings.TOMLAB_UPLOAD_MAX_BYTES)",
                    file=name,
                )
            wanted.append((info, parts, limit))
        written = 0
        for info, parts, limit in wanted:
            target = dest.joinpath(*parts)
            if target.exists():
                raise UploadRefused(f"{'/'.join(parts)} is given twice", file=name)
            target.parent.mkdir(parents=True, exist_ok=True)
            size = 0
            try:
                with zf.open(info) as src, target.open("xb") as out:
                    while chunk := src.read(COPY_CHUNK):
                        size += len(chunk)
                        if size > min(limit, info.file_size) or written + size > budget:
                            raise UploadRefused(
                                "unpacks to more bytes than its header says",
                                file=f"{name}: {info.filename}",
                            )
                        out.write(chunk)
            except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, ValueError) as exc:
                raise UploadRefused(
                    f"cannot unpack: {exc}", file=f"{name}: {info.filename}"
                ) from None
            written += size
        return written


def _member_parts(info: zipfile.ZipInfo, *, archive: str) -> tuple[str, ...] | None:
    """The member's path parts, None to skip it; refuses unsafe names and links."""
    raw = info.filename
    where = f"{archive}: {raw[:200]!r}"
    if "\x00" in raw:
        raise UploadRefused("member name with a NUL character", file=where)
    if raw.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", raw) or "\\" in raw:
        raise UploadRefused("absolute or Windows path in the archive", file=where)
    parts = PurePosixPath(raw).parts
    if ".." in parts:
        raise UploadRefused("path with '..' in the archive", file=where)
    if stat.S_ISLNK(info.external_attr >> 16):
        raise UploadRefused("symbolic link in the archive", file=where)
    if info.is_dir() or not parts:
        return None
    if raw.startswith(ZIP_JUNK[0]) or parts[-1] in ZIP_JUNK or parts[-1].startswith("._"):
        return None
    safe = tuple(safe_name(p) for p in parts if p not in ("", "."))
    return safe or None


def layout_generic(folder: Path, files: list[Path], options: dict[str, Any]) -> Path:
    """One file (a .zip included) is imported as it is; several as a folder, each file a
    source (its name can become a category: ``$file``)."""
    moved = _move(files, folder)
    return moved[0] if len(moved) == 1 else folder / DATA


def layout_chartom(folder: Path, files: list[Path], options: dict[str, Any]) -> Path:
    path = _move([_one(files, "CharToM-QA", (".jsonl",))], folder)[0]
    if (folder / BOOKS).is_dir() and any((folder / BOOKS).iterdir()):
        options["books"] = True  # the run finds them with books_folder()
    return path


def books_folder(path: Path) -> Path:
    """The books uploaded with the file laid out at ``path`` (``<upload>/data/<file>``)."""
    return path.parent.parent / BOOKS


# -- previews --------------------------------------------------------------------------


def scene_preview(scene: Scene) -> dict[str, Any]:
    """A scene as a rater reads it: masked speakers (P0…), its first lines, the answers."""
    instances = list(
        SpeakerInstance.objects.filter(scene=scene)
        .select_related("gold_character")
        .order_by("code")
    )
    lines = [
        {
            "speaker": "" if line.get("type") == "scene" else str(line.get("title") or ""),
            "text": str(line.get("text") or ""),
        }
        for line in (scene.lines or [])[:PREVIEW_LINES]
        if line.get("text") or line.get("type") != "scene"
    ]
    return {
        "kind": "scene",
        "title": f"{scene.work.title} · {scene.source_id}",
        "heading": scene.heading,
        "part": scene.part,
        "lines": lines,
        "more_lines": max(0, len(scene.lines or []) - PREVIEW_LINES),
        "masked": [
            {
                "code": i.code,
                "answer": i.gold_character.name if i.gold_character else "",
                "candidates": list(i.candidates),
            }
            for i in instances
        ],
    }


def scenes_preview(works: Iterable[Work]) -> list[dict[str, Any]]:
    """The first scenes with masked speakers of ``works`` (testing scenes first)."""
    out: list[dict[str, Any]] = []
    for work in works:
        scenes = (
            Scene.objects.filter(work=work, instances__isnull=False)
            .select_related("work")
            .distinct()
            .order_by("position")[:PREVIEW_RECORDS]
        )
        scenes = list(scenes) or list(
            Scene.objects.filter(work=work).select_related("work").order_by("position")[:1]
        )
        out.extend(scene_preview(s) for s in scenes)
        if len(out) >= PREVIEW_RECORDS:
            break
    return out[:PREVIEW_RECORDS]


def preview_screenplay(
    path: Path, options: dict[str, Any], outcome: UploadOutcome
) -> list[dict[str, Any]]:
    names = [p.name for p in ([path] if path.is_file() else sorted(path.iterdir()))]
    works = Work.objects.filter(benchmark=Benchmark.TOM_IN_AMC, source__in=names).order_by("key")
    return scenes_preview(works)


def preview_tom_in_amc(
    path: Path, options: dict[str, Any], outcome: UploadOutcome
) -> list[dict[str, Any]]:
    works = Work.objects.filter(benchmark=Benchmark.TOM_IN_AMC, source=path.name).order_by("key")
    return scenes_preview(works[:PREVIEW_RECORDS])


def preview_tvshowguess(
    path: Path, options: dict[str, Any], outcome: UploadOutcome
) -> list[dict[str, Any]]:
    works = Work.objects.filter(benchmark=Benchmark.TVSHOWGUESS, key=path.stem)
    return scenes_preview(works)


def preview_dyntom(
    path: Path, options: dict[str, Any], outcome: UploadOutcome
) -> list[dict[str, Any]]:
    if (path / STORY_FILE).exists():
        keys = [path.name]
    else:
        keys = sorted(p.name for p in path.iterdir() if p.is_dir())
    stages = (
        DynToMStage.objects.filter(work__benchmark=Benchmark.DYNTOM, work__key__in=keys)
        .select_related("work")
        .order_by("work__key")[:2]
    )
    out = []
    for stage in stages:
        scenario = stage.scenarios.order_by("number").first()
        out.append(
            {
                "kind": "stage",
                "title": stage.work.title,
                "main_character": stage.main_character,
                "location": stage.location,
                "scenario_count": stage.scenario_count,
                "scenario": {
                    "key": scenario.key,
                    "background": scenario.background,
                    "dialogue": [
                        {"speaker": str(t.get("speaker", "")), "text": str(t.get("text", ""))}
                        for t in (scenario.dialogue or [])[:6]
                    ],
                }
                if scenario
                else None,
                "question_count": stage.questions.count(),
                "questions": [
                    {
                        "key": q.key,
                        "type": q.question_type,
                        "mental_state": q.mental_state,
                        "text": q.text,
                        "options": [str(o) for o in q.options],
                        "gold": q.gold_letter,
                    }
                    for q in stage.questions.order_by("position")[:3]
                ],
            }
        )
    return out


def preview_chartom(
    path: Path, options: dict[str, Any], outcome: UploadOutcome
) -> list[dict[str, Any]]:
    items = (
        QAItem.objects.filter(work__benchmark=Benchmark.CHARTOM_QA, work__source=path.name)
        .select_related("work", "character")
        .order_by("work__key", "position")[:PREVIEW_RECORDS]
    )
    return [
        {
            "kind": "qa-item",
            "title": item.work.title,
            "character": item.character.name if item.character else "",
            "dimension": item.dimension,
            "question": item.question,
            "answer": item.answer,
            "choices": [str(c) for c in item.misleading_choices],
            "bonus_points": [str(b) for b in item.bonus_points],
            "context": (item.context_1000 or item.context_0 or "")[:400],
        }
        for item in items
    ]


def preview_generic(
    path: Path, options: dict[str, Any], outcome: UploadOutcome
) -> list[dict[str, Any]]:
    """The first items of a mapped import as stored: texts per language, keyed options."""
    items = list(
        MCItem.objects.filter(work_id=outcome.refs.get("work"))
        .select_related("work")
        .order_by("position")[:PREVIEW_ITEMS]
    )
    return [
        item_preview(
            {
                "item_id": item.item_id,
                # The work's language order: a database may reorder a JSON object's keys.
                "texts": {
                    language: item.texts[language]
                    for language in [*item.work.extra.get("languages", []), *item.texts]
                    if language in item.texts
                },
                "answers": item.answers,
                "categories": item.categories,
                "metadata": item.metadata,
            }
        )
        for item in items
    ]
