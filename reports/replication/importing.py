"""Turn a replication package back into a study, its responses, runs and predictions.

``package_import`` validates the package with Frictionless, checks every item against
the bank (or imports the bundled items first), and writes everything in one
transaction: a package refused for any reason writes nothing. The study comes back
closed, under its own name, with its source in ``ReplicationImport``; a second import of
the same package (same ``package_id``) creates nothing. After the import the reports
are built again and compared with the packaged JSON (``report_differences``).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import secrets
import shutil
import tempfile
import time
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction

from benchmarks.importers import ImportDataError
from benchmarks.importers.base import MAX_JSON_DEPTH, ProgressCallback, json_value_check
from benchmarks.models import SpeakerInstance, Work
from benchmarks.services import benchmark_import
from common.csv_safe import read_with_field_limit
from modeling.models import Prediction, PromptTemplate, Run, RunCall
from studies.choice.generic import instructed_parse
from studies.choice.services import dyntom_gold_index
from studies.errors import StudyError
from studies.models import (
    Assignment,
    ChoiceAnswer,
    Familiarity,
    Guess,
    Participant,
    Study,
    StudyItem,
    StudyTextVersion,
    StudyWork,
    WorkSession,
)

from ..models import ReplicationImport
from .exporting import FORMAT, STUDY_REF, STUDY_SETTINGS
from .items import items_resolve
from .reports import REPORT_FILES, report_differences, report_normalise, reports_build
from .tables import CELL_LIMIT, TABLES, TableError, decimal_or_zero, table_read

# Uncompressed, all files together: a study with every CharToM-QA item bundled is about
# 40 MB; 600 MB unpacked held a web thread for 5 minutes (issue 45, finding 7).
MAX_BYTES_DEFAULT = 256 * 1024**2
MAX_FILES = 10_000
# A member over 1 MB that unpacks to more than this many times its packed size is a zip
# bomb, not data (CSV and JSON pack 5-20 times).
MAX_RATIO = 100
_RATIO_FLOOR = 1024**2


class PackageError(ValueError):
    """The package is refused; the message names the file, row, item or field."""


@dataclass
class ImportResult:
    study: Study
    created: bool
    package_id: str
    messages: list[str] = field(default_factory=list)
    # report file -> differences from the packaged JSON ([]: equal)
    differences: dict[str, list[str]] = field(default_factory=dict)
    # rows created, by kind ("Participant": 4): empty when nothing was created
    counts: dict[str, int] = field(default_factory=dict)
    reports: dict[str, Any] = field(default_factory=dict)


def max_bytes() -> int:
    return int(getattr(settings, "REPLICATION_MAX_BYTES", MAX_BYTES_DEFAULT))


# A package whose checks and writing take longer than this is stopped (and nothing is
# kept): a worker's slot is not held for hours by one upload.
MAX_SECONDS_DEFAULT = 900


class _Deadline:
    def __init__(self, name: str) -> None:
        self.name = name
        self.limit = float(getattr(settings, "REPLICATION_MAX_SECONDS", MAX_SECONDS_DEFAULT))
        self.ends = time.monotonic() + self.limit

    def check(self) -> None:
        if time.monotonic() > self.ends:
            raise PackageError(
                f"{self.name}: the import took over {self.limit:g} s "
                "(REPLICATION_MAX_SECONDS) and was stopped; nothing was written"
            )


@contextmanager
def package_unpacked(path: Path, name: str = "", into: Path | None = None) -> Iterator[Path]:
    """The package's files in a temporary folder, or in ``into`` (removed on leaving).

    An upload unpacks into its own folder (``DATA_DIR/uploads/<id>/``), which goes
    with the upload whatever happens to the process; the command's temporary folders
    that a killed process left are removed when a worker starts
    (:func:`stale_unpacked_purge`).

    Refuses what is not a zip, a member outside the folder (an absolute path, ``..``,
    a link), too many files, more than ``REPLICATION_MAX_BYTES`` unpacked (checked from
    the zip's directory before anything is written; zipfile stops a member that unpacks
    past its declared size) or a member packed over ``MAX_RATIO`` times.
    """
    name = name or Path(path).name
    archive = _archive(path, name)
    with archive, _unpack_folder(into) as tmp:
        members = package_members_check(archive, name)
        root = Path(tmp)
        files = {m.filename.rstrip("/") for m in members if not m.is_dir()}
        for member in members:
            member_path = PurePosixPath(member.filename)
            unsafe = (
                member_path.is_absolute() or ".." in member_path.parts or "\\" in member.filename
            )
            is_link = (member.external_attr >> 16) & 0o170000 == 0o120000
            if unsafe or is_link:
                raise PackageError(f"{name}: unsafe member {member.filename!r}")
            if clash := next((str(p) for p in member_path.parents if str(p) in files), None):
                raise PackageError(
                    f"{name}: {clash!r} is both a file and the folder of {member.filename!r}"
                )
            if member.is_dir():
                continue
            target = root / member_path
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink)
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError) as exc:
                # A bad CRC, a truncated or encrypted member, an unknown compression.
                raise PackageError(
                    f"{name}: member {member.filename!r} cannot be unpacked ({exc})"
                ) from None
        yield root


def _archive(path: Path | str, name: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise PackageError(f"{name}: not a zip file ({exc})") from None


def package_members_check(archive: zipfile.ZipFile, name: str) -> list[zipfile.ZipInfo]:
    """The zip's members, refused from its directory alone (nothing is unpacked, so an
    upload is checked in the request): too many files, too many bytes unpacked, a
    member packed over ``MAX_RATIO`` times."""
    members = archive.infolist()
    if len(members) > MAX_FILES:
        raise PackageError(f"{name}: {len(members)} files, over {MAX_FILES}")
    total = sum(m.file_size for m in members)
    if total > max_bytes():
        raise PackageError(f"{name}: {total:,} bytes unpacked, over the {max_bytes():,}-byte limit")
    for member in members:
        packed = max(member.compress_size, 1)
        if member.file_size > _RATIO_FLOOR and member.file_size / packed > MAX_RATIO:
            raise PackageError(
                f"{name}: member {member.filename!r} unpacks {member.file_size // packed}"
                f" times its size (over {MAX_RATIO}): refused as a zip bomb"
            )
    return members


def package_file_check(path: Path, name: str = "") -> None:
    """What ``package_unpacked`` refuses before unpacking, without unpacking."""
    with _archive(path, name or path.name) as archive:
        package_members_check(archive, name or path.name)


UNPACK_PREFIX = "tomlab-import-"


@contextmanager
def _unpack_folder(into: Path | None) -> Iterator[str]:
    if into is None:
        with tempfile.TemporaryDirectory(prefix=UNPACK_PREFIX) as tmp:
            yield tmp
        return
    # A redelivered job finds what its killed first try unpacked: start clean.
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    try:
        yield str(into)
    finally:
        shutil.rmtree(into, ignore_errors=True)


def stale_unpacked_purge(*, older_than_s: float) -> list[str]:
    """Remove the temporary folders of package imports that a killed process left
    (older than ``older_than_s``: a running import's own folder is younger)."""
    root = Path(tempfile.gettempdir())
    cutoff = time.time() - older_than_s
    gone = []
    for entry in root.glob(f"{UNPACK_PREFIX}*"):
        try:
            if entry.is_dir() and not entry.is_symlink() and entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
                gone.append(entry.name)
        except OSError:
            continue
    return gone


# Descriptor properties Frictionless follows to another file: a URL there made the server
# send a GET wherever the package said (issue 45, finding 6).
_REFERENCES = ("schema", "dialect", "profile", "$schema")


def _refuse_references_elsewhere(root: Path, owner: dict[str, Any], where: str) -> None:
    """Packages are read offline: a ``schema``, ``dialect`` or ``profile`` that is a URL,
    or a path outside the package, is refused (a profile may be one of the standard
    names, which Frictionless validates against its own copy)."""
    for key in _REFERENCES:
        value = owner.get(key)
        if not isinstance(value, str):
            continue
        if "://" in value or value.startswith("//"):
            raise PackageError(
                f"datapackage.json{where}: {key} {value!r} is a remote reference; packages "
                "are read offline, from their own files"
            )
        if "/" in value or "\\" in value or value.endswith(".json"):
            member = PurePosixPath(value)
            if member.is_absolute() or ".." in member.parts or not (root / member).is_file():
                raise PackageError(
                    f"datapackage.json{where}: {key} {value!r} is not a file in the package"
                )


def _frictionless_report(descriptor: Path) -> Any:
    # Importing Frictionless's CSV parser sets the csv module's cell limit for the whole
    # process (to 2 GB); inside read_with_field_limit the default comes back afterwards.
    from frictionless import validate

    return validate(str(descriptor))


def package_validate(root: Path) -> int:
    """Frictionless validation of ``datapackage.json`` (Table Schemas, files present,
    each file's hash); returns the rows of its tables."""
    descriptor = root / "datapackage.json"
    if not descriptor.is_file():
        raise PackageError("the package has no datapackage.json")
    data = _read_json(root, "datapackage.json")
    resources = data.get("resources") if isinstance(data, dict) else None
    if not isinstance(resources, list) or not resources:
        raise PackageError("datapackage.json: no resources listed")
    _refuse_references_elsewhere(root, data, "")
    for n, resource in enumerate(resources, start=1):
        if isinstance(resource, dict):
            _refuse_references_elsewhere(root, resource, f" resource {n}")
    for n, resource in enumerate(resources, start=1):
        # Only files inside the package: Frictionless would otherwise open a URL or a
        # path elsewhere on this server while validating.
        where = resource.get("path") if isinstance(resource, dict) else None
        member = PurePosixPath(where) if isinstance(where, str) else None
        if (
            member is None
            or "://" in where
            or member.is_absolute()
            or ".." in member.parts
            or not (root / member).is_file()
        ):
            raise PackageError(
                f"datapackage.json resource {n}: path {where!r} is not a file in the package"
            )
        _check_hash(root / member, where, resource.get("hash"))
    try:
        report = read_with_field_limit(CELL_LIMIT, lambda: _frictionless_report(descriptor))
    except Exception as exc:  # Frictionless raises on descriptors it cannot read at all
        raise PackageError(f"datapackage.json: {exc}") from None
    if report.valid:
        # The rows the import reads (responses.csv is the export's own view, not read).
        tables = {
            r.get("name")
            for r in resources
            if isinstance(r, dict) and r.get("path") in {f"data/{t}.csv" for t in TABLES}
        }
        return sum(
            int((task.stats or {}).get("rows") or 0) for task in report.tasks if task.name in tables
        )
    problems = []
    for task in report.tasks:
        for error in task.errors:
            where = task.name or "datapackage.json"
            row = getattr(error, "row_number", None)
            column = getattr(error, "field_name", None)
            place = ", ".join(
                p
                for p in (where, f"row {row}" if row else "", f"column {column}" if column else "")
                if p
            )
            problems.append(f"{place}: {error.message}")
    for error in report.errors:
        problems.append(f"datapackage.json: {error.message}")
    shown = "; ".join(problems[:5]) + (
        f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    )
    raise PackageError(f"the package is not a valid data package: {shown}")


_HASH = re.compile(r"sha256:([0-9a-f]{64})")


def _check_hash(path: Path, member: str, declared: Any) -> None:
    """Every file carries its SHA-256 in ``datapackage.json`` (the export writes it), so
    a cell edited after export is refused, not imported as if the study had said it."""
    match = _HASH.fullmatch(declared) if isinstance(declared, str) else None
    if match is None:
        raise PackageError(
            f'datapackage.json: {member} has no hash ("sha256:…"); this ToMLab imports '
            "only packages whose every file carries its hash"
        )
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for chunk in iter(lambda: source.read(1024 * 1024), b""):
            digest.update(chunk)
    if digest.hexdigest() != match[1]:
        raise PackageError(
            f"{member}: its contents do not match its hash in datapackage.json "
            "(the file was changed after export)"
        )


def _read_json(root: Path, name: str) -> Any:
    try:
        value = json.loads((root / name).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PackageError(f"the package has no {name}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PackageError(f"{name}: not JSON ({exc})") from None
    except RecursionError:
        raise PackageError(f"{name}: nested too deep (over {MAX_JSON_DEPTH} levels)") from None
    _check_json(value, name)
    return value


def _check_json(value: Any, name: str) -> None:
    """Refuse what the database or the code behind would fail on (the importers' own
    check): nesting deeper than ``MAX_JSON_DEPTH``, a NUL, a number outside 64 bits."""
    try:
        json_value_check(value, path=name, int64=True)
    except ImportDataError as exc:
        raise PackageError(str(exc)) from None


class _Tables:
    """Reads the package's tables for the import, telling ``progress`` each table's rows
    once the import has moved on to the next one (so they are written)."""

    def __init__(self, root: Path, progress: ProgressCallback, deadline: _Deadline) -> None:
        self.root = root
        self.progress = progress
        self.deadline = deadline
        self._pending = 0

    def read(self, name: str) -> list[dict[str, Any]]:
        self.done()
        self.deadline.check()
        rows = _table(self.root, name)
        self._pending = len(rows)
        return rows

    def done(self) -> None:
        if self._pending:
            self.progress(self._pending)
            self._pending = 0


def _table(root: Path, name: str) -> list[dict[str, Any]]:
    path = root / "data" / f"{name}.csv"
    if not path.is_file():
        raise PackageError(f"the package has no data/{name}.csv")
    data = path.read_bytes()
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise PackageError(f"data/{name}.csv: line {line} holds a NUL character")
    try:
        return table_read(name, data)
    except (TableError, UnicodeDecodeError) as exc:
        raise PackageError(str(exc)) from None
    except csv.Error as exc:
        raise PackageError(f"data/{name}.csv: {exc}") from None


def package_import(
    path: Path | str,
    *,
    user=None,
    strict: bool = False,
    name: str = "",
    into: Path | None = None,
    progress: ProgressCallback | None = None,
) -> ImportResult:
    """Import the package at ``path``; see the module docstring.

    Raises ``PackageError`` naming what is wrong (nothing is written). ``strict``: a
    rebuilt report that differs from the packaged one refuses the import too. ``name``:
    the file's name as its owner knows it (an upload's), for messages and the record.
    ``into``: the folder to unpack in (created, removed after). ``progress`` is told
    the rows of each table once they are written, and (``set_total``, where it has
    one) the package's rows once validated.
    """
    path = Path(path)
    name = name or path.name
    progress = progress or (lambda n: None)
    deadline = _Deadline(name)
    with package_unpacked(path, name, into) as root:
        deadline.check()
        rows = package_validate(root)
        deadline.check()
        if set_total := getattr(progress, "set_total", None):
            set_total(rows)
        manifest = _read_json(root, "manifest.json")
        if not isinstance(manifest, dict):
            raise PackageError("manifest.json: not a JSON object")
        if manifest.get("format") != FORMAT:
            raise PackageError(
                f"manifest.json: format {manifest.get('format')!r}; this ToMLab reads {FORMAT!r}"
            )
        package_id = str(manifest.get("package_id") or "")
        if not package_id:
            raise PackageError("manifest.json: no package_id")
        existing = ReplicationImport.objects.filter(package_id=package_id).select_related("study")
        if (previous := existing.first()) is not None:
            return ImportResult(
                study=previous.study,
                created=False,
                package_id=package_id,
                messages=[
                    f"package {package_id} was already imported as study #{previous.study_id} "
                    f"({previous.study.name}) on {previous.imported_at:%Y-%m-%d %H:%M}: "
                    "nothing created"
                ],
            )
        packaged = {report: _read_json(root, f"reports/{report}") for report in REPORT_FILES}
        try:
            with transaction.atomic():
                return _import(
                    root,
                    manifest,
                    name,
                    packaged,
                    user=user,
                    strict=strict,
                    progress=progress,
                    deadline=deadline,
                )
        except PackageError:
            raise
        except (IntegrityError, DjangoValidationError, ValueError, TypeError, KeyError) as exc:
            # Rows that passed the schemas but not the database (a duplicate item, a
            # setting of the wrong shape): refused like any other problem, nothing kept.
            raise PackageError(
                f"the package's rows do not fit this database: {type(exc).__name__}: {exc}"
            ) from None


def _import(
    root: Path,
    manifest: dict[str, Any],
    name: str,
    packaged: dict[str, Any],
    *,
    user,
    strict: bool,
    progress: ProgressCallback,
    deadline: _Deadline,
) -> ImportResult:
    """Write the package and compare the rebuilt reports (inside the caller's transaction)."""
    tables = _Tables(root, progress, deadline)
    result = _write(root, manifest, name, user=user, tables=tables)
    tables.done()
    deadline.check()
    rebuilt = reports_build(
        result.study.benchmark, run_ids=result.run_ids, study_id=result.study.pk
    )
    for report_name, data in rebuilt.items():
        normalised = report_normalise(
            data, runs=result.run_names, study=(result.study.pk, STUDY_REF)
        )
        result.import_result.reports[report_name] = normalised
        result.import_result.differences[report_name] = report_differences(
            packaged[report_name], normalised
        )
    differing = {k: v for k, v in result.import_result.differences.items() if v}
    if differing and strict:
        first = next(iter(differing.items()))
        raise PackageError(
            f"the rebuilt {first[0]} differs from the package's: {'; '.join(first[1][:3])}"
        )
    result.record.report_differences = result.import_result.differences
    result.record.save(update_fields=["report_differences"])
    return result.import_result


def _refuse_score(table: str, index: int, stored: bool, expected: bool) -> None:
    # Rows as Frictionless numbers them: the header is row 1.
    raise PackageError(
        f"{table}.csv row {index + 2}: correct is {str(stored).lower()}, but this item "
        f"bank's gold makes the answer {'right' if expected else 'wrong'}; the package "
        "does not score its own answers"
    )


def _scores_check_guesses(guesses: list[Guess]) -> None:
    """Each scored guess is scored again against the bank's gold, as a submit scores it
    (``studies.scene.services``): a package cannot bring answers marked right."""
    gold = dict(
        SpeakerInstance.objects.filter(pk__in={g.instance_id for g in guesses}).values_list(
            "pk", "gold_character__name"
        )
    )
    for index, guess in enumerate(guesses):
        if guess.correct is None:
            continue
        expected = (
            not guess.cant_tell
            and (guess.answer or "").casefold() == (gold.get(guess.instance_id) or "").casefold()
        )
        if guess.correct != expected:
            _refuse_score("guesses", index, guess.correct, expected)


def _instructed_item(study: Study, row: dict[str, Any], study_work) -> StudyItem:
    """A written check of ``study_items.csv``, its content checked as the page checks it."""
    data = row.get("instructed") or {}
    try:
        answer = (data.get("options") or [])[data.get("answer")]
        content = instructed_parse(
            question=data.get("question") or "", options=data.get("options") or [], answer=answer
        )
    except (AttributeError, IndexError, TypeError, StudyError) as exc:
        raise PackageError(
            f"study_items.csv {row['study_item']}: not a written check ({exc})"
        ) from None
    if row["role"] != StudyItem.Role.ATTENTION:
        raise PackageError(
            f"study_items.csv {row['study_item']}: a written check is an attention check"
        )
    return StudyItem.objects.create(
        study=study,
        study_work=study_work(row, "study_items"),
        position=row["position"],
        role=row["role"],
        held_back=bool(row["held_back"]),
        instructed=content,
    )


def _scores_check_choices(choices: list[ChoiceAnswer]) -> None:
    """As the choice studies score them: option 0 of a CharToM-QA item, the gold letter's
    option of a DynToM question, one of a mapped item's correct options."""
    for index, choice in enumerate(choices):
        if choice.correct is None:
            continue
        if choice.question is not None:
            expected = choice.option == dyntom_gold_index(choice.question)
        elif choice.mc_item is not None:
            expected = choice.option in (choice.mc_item.answers or [])
        elif choice.assignment.study_item.instructed:
            expected = choice.option == choice.assignment.study_item.instructed.get("answer")
        else:
            expected = choice.option == 0
        if choice.correct != expected:
            _refuse_score("choices", index, choice.correct, expected)


@dataclass
class _Written:
    import_result: ImportResult
    record: ReplicationImport
    run_ids: list[int]
    run_names: dict[int, tuple[str, str]]

    @property
    def study(self) -> Study:
        return self.import_result.study


def _items(
    root: Path, manifest: dict[str, Any], tables: _Tables
) -> tuple[dict[str, Any], list[str]]:
    """The package's items in the bank, importing the bundled ones when some are
    missing; ``PackageError`` naming every item or field that differs."""
    rows = tables.read("items")
    found, problems = items_resolve(rows)
    messages: list[str] = []
    differ = [p for p in problems if "is not in this item bank" not in p]
    bundle = root / "items"
    if problems and not differ and bundle.is_dir():
        for folder in sorted(p for p in bundle.iterdir() if p.is_dir()):
            try:
                report = benchmark_import(format_name=folder.name, path=folder)
            except (ImportDataError, ValueError) as exc:
                raise PackageError(f"items/{folder.name}: {exc}") from None
            messages.append(
                f"imported the bundled {folder.name} items: " + "; ".join(report.summary_lines())
            )
        found, problems = items_resolve(rows)
    if problems:
        shown = "; ".join(problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        hint = "" if bundle.is_dir() else " Export the package with --with-items to carry them."
        raise PackageError(f"items refused: {shown}{more}.{hint if not differ else ''}")
    return found, messages


def _work(benchmark: str, key: str) -> Work:
    work = Work.objects.filter(benchmark=benchmark, key=key).first()
    if work is None:
        raise PackageError(f"{benchmark} work {key!r} is not in this item bank")
    return work


def _template(row: dict[str, Any]) -> PromptTemplate:
    """The bank's template of this name and version when its text is the package's;
    a template of that name and version with other text is refused."""
    fields = ("system", "user", "output_format")
    existing = PromptTemplate.objects.filter(name=row["name"], version=row["version"]).first()
    if existing is None:
        return PromptTemplate.objects.create(
            **{k: row[k] for k in ("name", "version", "benchmark", "method", "system", "user")},
            fields=row["fields"] or [],
            output_format=row["output_format"],
            notes=row["notes"],
            is_active=False,
        )
    for name in fields:
        if getattr(existing, name) != row[name]:
            raise PackageError(
                f"templates.csv {row['template']}: prompt template {row['name']} "
                f"v{row['version']} exists here with another {name} text"
            )
    return existing


def _write(
    root: Path, manifest: dict[str, Any], source_name: str, *, user, tables: _Tables
) -> _Written:
    found, messages = _items(root, manifest, tables)

    def item(ref: str, table: str) -> Any:
        if ref not in found:
            raise PackageError(f"{table}.csv: item {ref!r} is not in items.csv")
        return found[ref]

    doc = _read_json(root, "study.json")
    if not isinstance(doc, dict) or not doc.get("name") or not doc.get("benchmark"):
        raise PackageError("study.json: not a study (an object with its name and benchmark)")
    settings_ = {k: doc[k] for k in STUDY_SETTINGS if k in doc and k != "created_at"}
    settings_.update(status=Study.Status.CLOSED, imported=False, open_join=False)
    if settings_.get("design_applied_at"):
        settings_["design_applied_at"] = datetime.fromisoformat(settings_["design_applied_at"])
    study = Study.objects.create(**settings_)
    if doc.get("created_at"):
        Study.objects.filter(pk=study.pk).update(
            created_at=datetime.fromisoformat(doc["created_at"])
        )
    for row in tables.read("text_versions"):
        version = StudyTextVersion.objects.create(
            study=study,
            kind=row["kind"],
            version=row["version"],
            content=json.loads(row["content"]),
        )
        if row["created_at"] is not None:
            StudyTextVersion.objects.filter(pk=version.pk).update(created_at=row["created_at"])
    works: dict[tuple[str, str], StudyWork] = {}
    for row in tables.read("study_works"):
        works[(row["benchmark"], row["work"])] = StudyWork.objects.create(
            study=study,
            work=_work(row["benchmark"], row["work"]),
            position=row["position"],
            name_map=row["name_map"] or {},
        )

    def study_work(row: dict[str, Any], table: str) -> StudyWork:
        key = (row["benchmark"], row["work"])
        if key not in works:
            raise PackageError(f"{table}.csv: work {row['work']!r} is not one of the study's")
        return works[key]

    study_items: dict[str, StudyItem] = {}
    for row in tables.read("study_items"):
        if row["kind"] == "instructed":  # a check the researcher wrote: no bank item
            study_items[row["study_item"]] = _instructed_item(study, row, study_work)
            continue
        target = item(row["item"], "study_items")
        kind = {"scene": "scene", "qa": "qa_item", "stage": "stage", "mc": "mc_item"}.get(
            row["kind"]
        )
        if kind is None:
            raise PackageError(f"study_items.csv {row['study_item']}: unknown kind {row['kind']!r}")
        study_items[row["study_item"]] = StudyItem.objects.create(
            study=study,
            study_work=study_work(row, "study_items"),
            position=row["position"],
            role=row["role"],
            held_back=bool(row["held_back"]),
            question_ids=[item(q, "study_items").pk for q in row["question_items"] or []],
            leaks=row["leaks"] or [],
            **{kind: target},
        )

    participants: dict[str, Participant] = {}
    for row in tables.read("participants"):
        fields = {
            name: row[name]
            for name, _ in TABLES["participants"]
            if name not in ("participant", "status", "created_at")
            and not name.startswith("platform_")
        }
        platform = {
            k: row[f"platform_{k}"]
            for k in ("participant", "study", "session")
            if row[f"platform_{k}"]
        }
        for name in ("exit_answers",):
            fields[name] = fields[name] or {}
        for name in ("sitting_start", "released_count"):
            fields[name] = fields[name] or 0
        for name in ("via_public_link",):
            fields[name] = bool(fields[name])
        p = Participant.objects.create(
            study=study,
            token=secrets.token_urlsafe(32),
            label=row["participant"],
            platform_ids=platform,
            **fields,
        )
        Participant.objects.filter(pk=p.pk).update(created_at=row["created_at"])
        participants[row["participant"]] = p

    def participant(ref: str, table: str) -> Participant:
        if ref not in participants:
            raise PackageError(f"{table}.csv: participant {ref!r} is not in participants.csv")
        return participants[ref]

    for row in tables.read("familiarities"):
        f = Familiarity.objects.create(
            participant=participant(row["participant"], "familiarities"),
            work=_work(row["benchmark"], row["work"]),
            seen=bool(row["seen"]),
        )
        Familiarity.objects.filter(pk=f.pk).update(declared_at=row["declared_at"])
    sessions: dict[str, WorkSession] = {}
    for row in tables.read("sessions"):
        s = WorkSession.objects.create(
            participant=participant(row["participant"], "sessions"),
            study_work=study_work(row, "sessions"),
            seen=bool(row["seen"]),
            seed=row["seed"] or 0,
            history_confirmed_at=row["history_confirmed_at"],
            history_views=row["history_views"] or 0,
            finished_at=row["finished_at"],
        )
        WorkSession.objects.filter(pk=s.pk).update(started_at=row["started_at"])
        sessions[row["session"]] = s
    assignments: dict[str, Assignment] = {}
    for row in tables.read("assignments"):
        if row["session"] not in sessions or row["study_item"] not in study_items:
            raise PackageError(
                f"assignments.csv {row['assignment']}: unknown session or study item"
            )
        values = {name: row[name] for name, _ in TABLES["assignments"][4:] if name != "assigned_at"}
        values["active_ms"] = values["active_ms"] or 0
        values["version"] = values["version"] or {}
        a = Assignment.objects.create(
            participant=participant(row["participant"], "assignments"),
            session=sessions[row["session"]],
            study_item=study_items[row["study_item"]],
            **values,
        )
        Assignment.objects.filter(pk=a.pk).update(assigned_at=row["assigned_at"])
        assignments[row["assignment"]] = a

    def assignment(ref: str, table: str) -> Assignment:
        if ref not in assignments:
            raise PackageError(f"{table}.csv: assignment {ref!r} is not in assignments.csv")
        return assignments[ref]

    guesses = [
        Guess(
            assignment=assignment(row["assignment"], "guesses"),
            instance=item(row["item"], "guesses"),
            answer=row["answer"],
            cant_tell=bool(row["cant_tell"]),
            correct=row["correct"],
            tags=row["tags"] or [],
            evidence=row["evidence"],
        )
        for row in tables.read("guesses")
    ]
    _scores_check_guesses(guesses)
    Guess.objects.bulk_create(guesses, batch_size=1000)
    choices = []
    for row in tables.read("choices"):
        owner = assignment(row["assignment"], "choices")
        if row["item"] == "" and owner.study_item.instructed:
            field, target = "", None  # a pick of a written check: no bank item
        else:
            target = item(row["item"], "choices")
            field = {"qaitem": "qa_item", "mcitem": "mc_item", "dyntomquestion": "question"}.get(
                target._meta.model_name
            )
        if field is None:
            raise PackageError(
                f"choices.csv: item {row['item']!r} is not a multiple-choice question"
            )
        choices.append(
            ChoiceAnswer(
                assignment=owner,
                **({field: target} if field else {}),
                **{name: row[name] for name, _ in TABLES["choices"][2:]},
            )
        )
    _scores_check_choices(choices)
    # One by one: a pick's id orders the report's reading of them, so ids must follow
    # the package's order on every database.
    for choice in choices:
        choice.save()

    templates = {row["template"]: _template(row) for row in tables.read("templates")}
    runs: dict[str, Run] = {}
    run_names: dict[int, tuple[str, str]] = {}
    backend_kinds: dict[str, dict[str, Any]] = {}
    for row in tables.read("runs"):
        values = {
            name: row[name]
            for name in (
                "name",
                "kind",
                "benchmark",
                "method",
                "model",
                "status",
                "error",
                "total_calls",
                "done_calls",
                "error_calls",
                "prompt_tokens",
                "completion_tokens",
                "budget_tokens",
                "started_at",
                "finished_at",
            )
        }
        for name in (
            "total_calls",
            "done_calls",
            "error_calls",
            "prompt_tokens",
            "completion_tokens",
        ):
            values[name] = values[name] or 0
        if row["template"] and row["template"] not in templates:
            raise PackageError(
                f"runs.csv {row['run']}: template {row['template']!r} not in templates.csv"
            )
        run = Run.objects.create(
            **values,
            template=templates.get(row["template"]) if row["template"] else None,
            params=row["params"] or {},
            selection=row["selection"] or {},
            metrics=row["metrics"] or [],
            cost=decimal_or_zero(row["cost"]),
            budget_cost=Decimal(row["budget_cost"]) if row["budget_cost"] else None,
            # Predictions made elsewhere: this install never called the model.
            imported=True,
            created_by=user,
        )
        Run.objects.filter(pk=run.pk).update(created_at=row["created_at"])
        runs[row["run"]] = run
        run_names[run.pk] = (row["run"], row["name"])
        backend_kinds[row["run"]] = {"id": run.pk, "backend_kind": row["backend_kind"]}

    def run_of(ref: str, table: str) -> Run:
        if ref not in runs:
            raise PackageError(f"{table}.csv: run {ref!r} is not in runs.csv")
        return runs[ref]

    calls: dict[str, RunCall] = {}
    call_rows = tables.read("calls")
    call_objects = []
    for row in call_rows:
        values = {name: row[name] for name, _ in TABLES["calls"][2:]}
        for name in ("sample_index", "prompt_tokens", "completion_tokens", "latency_ms"):
            values[name] = values[name] or 0
        values["from_cache"] = bool(values["from_cache"])
        values["cost"] = decimal_or_zero(values["cost"])
        call_objects.append(RunCall(run=run_of(row["run"], "calls"), **values))
    for row, call in zip(
        call_rows, RunCall.objects.bulk_create(call_objects, batch_size=1000), strict=True
    ):
        calls[row["call"]] = call
    predictions = []
    for row in tables.read("predictions"):
        target = item(row["item"], "predictions")
        model_name = target._meta.model_name
        ref = {
            "dyntomquestion": "dyntom_question",
            "qaitem": "qa_item",
            "speakerinstance": "speaker_instance",
            "mcitem": "mc_item",
        }.get(model_name)
        if ref is None:
            raise PackageError(
                f"predictions.csv: item {row['item']!r} is not a question or speaker"
            )
        values = {name: row[name] for name, _ in TABLES["predictions"][4:] if name != "created_at"}
        for name in ("prompt_tokens", "completion_tokens", "latency_ms"):
            values[name] = values[name] or 0
        values["details"] = values["details"] or {}
        values["params"] = values["params"] or {}
        if row["call"] and row["call"] not in calls:
            raise PackageError(f"predictions.csv: call {row['call']!r} is not in calls.csv")
        predictions.append(
            Prediction(
                run=run_of(row["run"], "predictions"),
                call=calls.get(row["call"]) if row["call"] else None,
                sample_index=row["sample_index"] or 0,
                **{ref: target},
                **values,
            )
        )
    # bulk_create keeps the list's order in the ids it gives (SQLite and PostgreSQL):
    # the DynToM tables read a run's predictions in id order.
    Prediction.objects.bulk_create(predictions, batch_size=1000)

    record = ReplicationImport.objects.create(
        package_id=manifest["package_id"],
        source_name=source_name[:255],
        exported_at=str(manifest.get("exported_at", ""))[:40],
        app_version=str(manifest.get("app_version", ""))[:40],
        study=study,
        runs=backend_kinds,
        imported_by=user,
    )
    counts = {
        "participants": len(participants),
        "responses": len(assignments),
        "answers": len(guesses) + len(choices),
        "runs": len(runs),
        "predictions": len(predictions),
    }
    messages.append(
        f"created study #{study.pk} {study.name!r} (closed, from package "
        f"{manifest['package_id']}): " + ", ".join(f"{v} {k}" for k, v in counts.items())
    )
    created = {
        "Study": 1,
        "Participant": len(participants),
        "Assignment": len(assignments),
        "Guess": len(guesses),
        "ChoiceAnswer": len(choices),
        "Run": len(runs),
        "RunCall": len(calls),
        "Prediction": len(predictions),
    }
    return _Written(
        import_result=ImportResult(
            study=study,
            created=True,
            package_id=manifest["package_id"],
            messages=messages,
            counts={kind: n for kind, n in created.items() if n},
        ),
        record=record,
        run_ids=[r.pk for r in runs.values()],
        run_names=run_names,
    )
