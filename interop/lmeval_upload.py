"""lm-evaluation-harness output as an upload source (the /data/ import pages and
``POST /api/imports/``).

One upload holds what ``lm_eval --log_samples --output_path OUT`` wrote: the
``samples_<task>_<date>.jsonl`` and ``results_<date>.json`` files themselves, or a zip
of ``OUT`` (several models, several tasks). Everything is laid out in the upload's data
folder (a zip unpacked into a folder of its own, only lm-eval's files, within the size
limits) and imported as ``manage.py import_harness_log --harness lm-eval`` imports it:
one run per task and model, in one transaction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings

from benchmarks.importers.base import ProgressCallback
from benchmarks.uploads import (
    DATA,
    OPTION_LABELS,
    UploadOutcome,
    UploadRefused,
    UploadSource,
    safe_name,
    zip_extract,
)
from modeling.runs.prediction_upload import predictions_upload_preview

from .importing import upload_outcome
from .lmeval_import import SIZE_LIMIT, lm_eval_file, lmeval_import

EXTENSIONS = (".jsonl", ".json", ".zip")


def lmeval_upload_layout(folder: Path, files: list[Path], options: dict[str, Any]) -> Path:
    """The uploaded files into the data folder, each zip unpacked into ``<zip name>/``."""
    data = folder / DATA
    data.mkdir(exist_ok=True)
    budget = settings.TOMLAB_UPLOAD_MAX_BYTES
    limit = settings.TOMLAB_IMPORT_MAX_BYTES[SIZE_LIMIT]
    for path in files:
        if path.suffix.lower() != ".zip":
            path.replace(data / path.name)
    for path in files:
        if path.suffix.lower() == ".zip":
            target = data / safe_name(path.stem)
            if target.exists():
                raise UploadRefused(
                    f"{path.name}: unpacks to {target.name}/, which another file took",
                    field="files",
                    file=path.name,
                )
            budget -= zip_extract(
                path,
                target,
                member_limit=lambda name: limit if lm_eval_file(name) else None,
                budget=budget,
            )
    return data


def lmeval_upload_clean(options: dict[str, Any]) -> dict[str, Any]:
    """The item map as an object (the form sends JSON text), refused here if malformed."""
    value = options.get("item_map")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise UploadRefused(f"not JSON: {exc}", field="item_map") from None
    if value is not None:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise UploadRefused(
                'expected {"<doc_id>": "<item key>", ...} (docs/researcher.md)', field="item_map"
            )
        options["item_map"] = value
    return options


def lmeval_upload_run(
    path: Path, options: dict[str, Any], progress: ProgressCallback
) -> UploadOutcome:
    result = lmeval_import(
        paths=[path],
        name=options.get("name", ""),
        model=options.get("model", ""),
        id_field=options.get("id_field", ""),
        item_map=options.get("item_map"),
        keep_unknown=options.get("keep_unknown") == "yes",
    )
    return upload_outcome(result, progress)


LM_EVAL_SOURCE = UploadSource(
    name="lm-eval",
    label="lm-eval samples",
    help="What lm-evaluation-harness wrote with --log_samples (samples_*.jsonl with the "
    "results_*.json beside them, or a .zip of the output folder) for a task exported from "
    "ToMLab; one run per task and model, correctness computed against the item bank.",
    extensions=EXTENSIONS,
    options=("name", "model", "keep_unknown", "id_field", "item_map"),
    layout=lmeval_upload_layout,
    run=lmeval_upload_run,
    # The first predictions of the runs, as an Inspect log's upload shows them.
    preview=predictions_upload_preview,
    clean=lmeval_upload_clean,
    option_labels={
        "name": (
            OPTION_LABELS["name"][0],
            "Default: the task and the model. With several tasks, each run is named this "
            "and its task, then its model.",
        ),
        "model": (
            OPTION_LABELS["model"][0],
            "Default: the model lm-eval names in results_*.json (pretrained=… or "
            "model=…, else the model type).",
        ),
    },
)
