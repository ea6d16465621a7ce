"""A replication package as an upload format: the packages page and ``/data/import/``
queue it for a Celery worker (``benchmarks.uploads``), which unpacks it into the
upload's own folder, imports it with progress and deletes the folder at the end.

No dry run in the request: a package is one all-or-nothing transaction, a second
import of the same package creates nothing, and its checks alone (unpacking,
Frictionless, every item against the bank) can take minutes (issue 45, finding 7).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.urls import reverse

from benchmarks.importers import ImportReport
from benchmarks.importers.base import ProgressCallback
from benchmarks.uploads import UploadOutcome, UploadSource, layout_single

from .importing import package_file_check, package_import

PACKAGE_FORMAT = "replication-package"
UNPACKED = "unpacked"
_single = layout_single("replication package", (".zip",))


def package_upload_layout(folder: Path, files: list[Path], options: dict[str, Any]) -> Path:
    """The one .zip, refused in the request when its directory alone says so (not a
    zip, a zip bomb): only what passes is queued."""
    path = _single(folder, files, options)
    package_file_check(path)
    return path


def package_upload_run(
    path: Path, options: dict[str, Any], progress: ProgressCallback, *, user: Any = None
) -> UploadOutcome:
    result = package_import(
        path,
        user=user,
        strict=options.get("strict") == "yes",
        name=path.name,
        into=path.parent / UNPACKED,
        progress=progress,
    )
    report = ImportReport()
    report.created.update(result.counts)
    if not result.created:
        report.unchanged["Study"] = 1
    notes = list(result.messages)
    for name, differences in result.differences.items():
        if differences:
            report.warn(f"{name} differs from the packaged one: " + "; ".join(differences[:3]))
        else:
            notes.append(f"{name}: rebuilt here, equal to the packaged one")
    return UploadOutcome(
        report=report,
        notes=notes,
        links=[
            (f"Study #{result.study.pk}", reverse("studies:detail", args=[result.study.pk])),
            ("Replication packages", reverse("reports:package-index")),
        ],
    )


PACKAGE_SOURCE = UploadSource(
    name=PACKAGE_FORMAT,
    label="Replication package",
    help="A ToMLab replication package (.zip, from “Download replication package” or "
    "manage.py export_study): the study comes back closed, with its responses, runs and "
    "predictions. Imported on a background worker.",
    extensions=(".zip",),
    options=("strict",),
    layout=package_upload_layout,
    run=package_upload_run,
    preview=lambda path, options, outcome: [],
    dry_run=False,
)
