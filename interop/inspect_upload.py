"""Inspect logs as an upload source (the /data/ import pages and POST /api/imports/).

``benchmarks.uploads`` holds the registry of what can be uploaded; the item bank may not
import this app, so ``InteropConfig.ready()`` registers this source there. One upload
may hold several logs (several models, several tasks): each becomes its own run, all in
one transaction, as ``manage.py import_harness_log`` imports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.importers.base import ProgressCallback
from benchmarks.uploads import DATA, OPTION_LABELS, UploadOutcome, UploadSource
from modeling.runs.prediction_upload import predictions_upload_preview

from .importing import upload_outcome
from .inspect_import import LOG_SUFFIXES, inspect_logs_import


def inspect_upload_layout(folder: Path, files: list[Path], options: dict[str, Any]) -> Path:
    """Every uploaded log into the upload's data folder; the run reads them all."""
    data = folder / DATA
    data.mkdir(exist_ok=True)
    for path in files:
        path.replace(data / path.name)
    return data


def inspect_log_paths(path: Path) -> list[Path]:
    """The logs of a laid-out upload, in name order (one file: itself)."""
    if not path.is_dir():
        return [path]
    return sorted(
        (p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(LOG_SUFFIXES)),
        key=lambda p: p.name,
    )


def inspect_upload_run(
    path: Path, options: dict[str, Any], progress: ProgressCallback
) -> UploadOutcome:
    result = inspect_logs_import(
        paths=inspect_log_paths(path),
        name=options.get("name", ""),
        keep_unknown=options.get("keep_unknown") == "yes",
    )
    return upload_outcome(result, progress)


INSPECT_SOURCE = UploadSource(
    name="inspect",
    label="Inspect log",
    help="Logs written by Inspect (.eval or .json, several at once) for a task exported "
    "from ToMLab; each log becomes a run, correctness computed against the item bank.",
    extensions=LOG_SUFFIXES,
    options=("name", "keep_unknown"),
    layout=inspect_upload_layout,
    run=inspect_upload_run,
    preview=predictions_upload_preview,
    option_labels={
        "name": (
            OPTION_LABELS["name"][0],
            "Default: the task and the model. With several logs, each run is named "
            "this (or its task), then its model.",
        )
    },
)
