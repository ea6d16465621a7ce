"""Inspect logs (``.eval`` or ``.json``) imported as runs.

Each log is read by Inspect itself (``inspect_ai.log.read_eval_log``), never by hand, so
every log format Inspect writes loads. Every sample of every epoch becomes one
prediction of one imported run per log (``method="inspect"``, the log's model), its
item named by the sample's id (an item key, :mod:`.keys`), its epoch kept apart as the
prediction's ``sample_index``.

The answer scored: where Inspect's ``choice()`` scorer scored the sample, the letters it
read (in the item's own option order, empty when the model gave none), so ToMLab's
accuracy is the log's; otherwise (our plain prompt, any other scorer) the completion,
read by our own reply parser. Correctness is always ToMLab's, against the item bank's
gold; Inspect's own score stays beside each prediction (``details["extra"]``).

All logs of one call import in one transaction: a bad log (unreadable, written without
samples, a task whose ids are not ours) imports nothing and the error names its file.
The log's eval id is the run's ``origin_id``, so a log imported again, under any name,
adds nothing.
"""

from __future__ import annotations

import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction

from benchmarks.importers.base import ImportDataError, ImportReport, input_size_check
from benchmarks.models import Benchmark, DynToMQuestion, MCItem
from modeling.runs.prediction_import import (
    MODEL_MAX,
    NAME_MAX,
    READ_REPLY,
    PredictionLine,
    import_lines,
    prediction_values,
)

from .importing import (
    INSPECT_ORIGIN,
    UNKNOWN_KEPT,
    UNKNOWN_SHOWN,
    HarnessImportResult,
    unknown_refusal,
)
from .keys import parse_item_key

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

METHOD = "inspect"
LOG_SUFFIXES = (".eval", ".json")
# The scorer whose answer is the letters Inspect read (inspect_ai.scorer.choice).
CHOICE_SCORER = "choice"
# Inspect's score values for right, wrong and no answer (inspect_ai.scorer CORRECT...).
SCORE_VERDICTS = {"C": True, "I": False, "N": False}
# Sampling settings kept with each prediction. The rest of Inspect's generate config
# (extra headers and bodies, retries…) says nothing about the answers and may hold secrets.
GENERATE_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "stop_seqs",
    "num_choices",
    "reasoning_effort",
    "reasoning_tokens",
)
# What read_eval_log raises on a file that is no log: a truncated zip ("EOCD not
# found", ValueError), JSON that is no EvalLog (pydantic's ValidationError is a
# ValueError), a zip without Inspect's members (KeyError).
_READ_ERRORS = (OSError, ValueError, KeyError, EOFError, RecursionError, zipfile.BadZipFile)
# A .eval log is a zip of JSON files: bounded unpacked as well as packed, so a small
# upload cannot unpack into gigabytes in the reader's memory.
UNPACKED_FACTOR = 4
ZIP_MAX_MEMBERS = 100_000
_ERROR_CHARS = 300


@dataclass
class _Log:
    """One log, read and checked: its lines and provenance, ready to write."""

    path: Path
    task: str
    model: str
    origin_id: str
    lines: list[PredictionLine]
    provenance: dict[str, Any]
    unknown: list[str]


@transaction.atomic
def inspect_logs_import(
    *, paths: list[Path], name: str = "", keep_unknown: bool = False
) -> HarnessImportResult:
    """Import Inspect logs as imported runs, one per log (and benchmark).

    ``name`` names the run of a single log; with several logs each run is named
    ``"<name or task> · <model>"``. ``keep_unknown`` sets aside samples whose ids name
    no item here (listed in the result and on the run) instead of refusing the log.
    Raises :class:`~benchmarks.importers.ImportDataError` naming the file; nothing is
    written then. Every log is read and checked before anything is written.
    """
    if not paths:
        raise ValueError("no Inspect log to import")
    name = " ".join(name.split())
    if len(name) > NAME_MAX:
        raise ValueError(f"the run name is too long (at most {NAME_MAX} characters)")
    report = ImportReport()
    logs = [_log_read(Path(path), report, keep_unknown=keep_unknown) for path in paths]
    result = HarnessImportResult(runs=[], report=report)
    for log, run_name in zip(logs, _run_names(logs, name), strict=True):
        result.runs.extend(
            import_lines(
                path=log.path,
                name=run_name,
                lines=log.lines,
                report=report,
                provenance=log.provenance,
            )
        )
        result.unknown.extend(log.unknown)
    return result


def _run_names(logs: list[_Log], name: str) -> list[str]:
    if len(logs) == 1 and name:
        return [name]
    bases = [(name or log.task, f" · {log.model}") for log in logs]
    repeated = Counter(bases)
    names = []
    for log, (head, tail) in zip(logs, bases, strict=True):
        if repeated[(head, tail)] > 1:
            # Two logs of the same task and model (two runs of it): told apart by eval id.
            tail += f" · {log.origin_id[:8] or log.path.stem}"
        names.append((head[: max(NAME_MAX - len(tail), 20)] + tail)[:NAME_MAX])
    return names


# --- reading -------------------------------------------------------------------------


def _log_read(path: Path, report: ImportReport, *, keep_unknown: bool) -> _Log:
    if path.is_dir():
        raise ImportDataError("is a folder, not an Inspect log (.eval or .json)", path=path)
    if not path.name.lower().endswith(LOG_SUFFIXES):
        raise ImportDataError("not an Inspect log: expected a .eval or .json file", path=path)
    input_size_check(path, limit="inspect-log")
    _unpacked_check(path)
    # Imported here: Inspect takes a second to import, which no other request should pay.
    from inspect_ai.log import read_eval_log

    try:
        log = read_eval_log(str(path))
    except _READ_ERRORS as exc:
        detail = " ".join(str(exc).split())[:_ERROR_CHARS] or type(exc).__name__
        raise ImportDataError(f"not an Inspect log: {detail}", path=path) from None
    samples = list(log.samples or [])
    if not samples:
        if log.status == "success" or log.eval.config.log_samples is False:
            message = (
                "the log holds no samples: it was written with --no-log-samples "
                "(log_samples=False). Run the eval again without that option; ToMLab "
                "imports the samples"
            )
        else:
            message = f"the eval ended ({log.status}) before any sample was logged"
        raise ImportDataError(message, path=path, field="samples")
    if log.status != "success":
        error = f": {' '.join(log.error.message.split())[:_ERROR_CHARS]}" if log.error else ""
        report.warn(
            f"{path}: the eval did not finish (status {log.status}{error}); the samples "
            "it logged were imported"
        )

    keys = [_sample_key(sample) for sample in samples]
    here = _items_here({key for key in keys if key is not None})
    unknown_ids = list(
        dict.fromkeys(
            sample.id for sample, key in zip(samples, keys, strict=True) if key not in here
        )
    )
    if unknown_ids and not keep_unknown:
        raise unknown_refusal(path, unknown_ids)
    if all(key not in here for key in keys):
        shown = ", ".join(repr(i) for i in unknown_ids[:UNKNOWN_SHOWN])
        raise ImportDataError(
            f"no sample of this log is an item here (ids {shown}); export the task from "
            "ToMLab, whose sample ids are item keys",
            path=path,
            field="id",
        )

    params = _generate_params(log)
    lines = []
    errored = 0
    for number, (sample, key) in enumerate(zip(samples, keys, strict=True), start=1):
        if key not in here:
            continue
        if sample.error is not None:
            # Inspect leaves a sample that failed out of its metrics; so do we.
            errored += 1
            continue
        lines.append(_line(number, sample, key, log, params))
    if errored:
        report.warn(f"{path}: {errored} sample(s) ended in an error and were left out")
    if not lines:
        raise ImportDataError(
            "every sample of this log ended in an error; nothing to import", path=path
        )
    unknown = [str(i) for i in unknown_ids]
    provenance = _provenance(log, params)
    if unknown:
        provenance["unknown_samples"] = unknown[:UNKNOWN_KEPT]
    return _Log(
        path=path,
        task=log.eval.task,
        model=log.eval.model[:MODEL_MAX],
        origin_id=log.eval.eval_id,
        lines=lines,
        provenance=provenance,
        unknown=unknown,
    )


def _unpacked_check(path: Path) -> None:
    """Refuse a .eval whose members unpack past ``UNPACKED_FACTOR`` times the size limit."""
    if not zipfile.is_zipfile(path):
        return  # a .json log, or not a zip: the reader says what is wrong
    limit = settings.TOMLAB_IMPORT_MAX_BYTES["inspect-log"] * UNPACKED_FACTOR
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ImportDataError(f"not an Inspect log: {exc}", path=path) from None
    unpacked = sum(member.file_size for member in members)
    if len(members) > ZIP_MAX_MEMBERS or unpacked > limit:
        raise ImportDataError(
            f"the log unpacks to {unpacked:,} bytes in {len(members):,} files, over the "
            f"{limit:,}-byte limit ({UNPACKED_FACTOR} x TOMLAB_IMPORT_MAX_BYTES['inspect-log'])",
            path=path,
        )


def _sample_key(sample: EvalSample) -> tuple[str, str, str] | None:
    """Our item key: the sample's id, else the key our export wrote into its metadata
    (a task that renumbered the samples)."""
    return parse_item_key(sample.id) or parse_item_key((sample.metadata or {}).get("tomlab_key"))


def _items_here(keys: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """The keys among ``keys`` that name an item of this server (a query per benchmark)."""
    here: set[tuple[str, str, str]] = set()
    generic = [k for k in keys if k[0] == Benchmark.GENERIC]
    if generic:
        rows = MCItem.objects.filter(
            work__benchmark=Benchmark.GENERIC,
            work__key__in={k[1] for k in generic},
            item_id__in={k[2] for k in generic},
        ).values_list("work__key", "item_id")
        here |= {(Benchmark.GENERIC, work, item) for work, item in rows}
    dyntom = [k for k in keys if k[0] == Benchmark.DYNTOM]
    if dyntom:
        rows = DynToMQuestion.objects.filter(
            stage__work__benchmark=Benchmark.DYNTOM,
            stage__work__key__in={k[1] for k in dyntom},
            key__in={k[2] for k in dyntom},
        ).values_list("stage__work__key", "key")
        here |= {(Benchmark.DYNTOM, work, item) for work, item in rows}
    return here & keys


def _line(
    number: int,
    sample: EvalSample,
    key: tuple[str, str, str],
    log: EvalLog,
    params: dict[str, Any],
) -> PredictionLine:
    benchmark, work, item = key
    completion = sample.output.completion if sample.output else ""
    scores = sample.scores or {}
    choice = scores.get(CHOICE_SCORER)
    score = choice or next(iter(scores.values()), None)
    if choice is not None:
        answer: Any = choice.answer or ""
    elif completion.strip():
        answer = READ_REPLY
    else:
        answer = ""  # an empty reply: nothing to read, unparseable as in our own runs
    usage = (sample.model_usage or {}).get(log.eval.model) or (
        sample.output.usage if sample.output else None
    )
    seconds = sample.working_time if sample.working_time is not None else sample.total_time
    metadata = sample.metadata or {}
    language = metadata.get("language")
    template = metadata.get("template")
    extra: dict[str, Any] = {
        "epoch": sample.epoch,
        "inspect_score": score.value if score else None,
        "inspect_answer": score.answer if score else None,
    }
    if parse_item_key(sample.id) is None:
        extra["inspect_id"] = sample.id
    values = prediction_values(
        answer=answer,
        raw_output=completion,
        params=params,
        template_version=template if isinstance(template, str) else "",
        prompt_tokens=usage.input_tokens if usage else 0,
        completion_tokens=usage.output_tokens if usage else 0,
        latency_ms=round(seconds * 1000) if seconds else 0,
        extra=extra,
        language=language if benchmark == Benchmark.GENERIC and isinstance(language, str) else None,
        # Inspect's verdict on the same letters: a disagreement with the item bank's gold
        # (an item edited since the export) is reported as a predictions file's claim is.
        claimed_correct=SCORE_VERDICTS.get(choice.value) if choice is not None else None,
    )
    return PredictionLine(
        number=number,
        benchmark=benchmark,
        model=log.eval.model[:MODEL_MAX],
        method=METHOD,
        sample_index=sample.epoch - 1,
        ref=(work, item),
        values=values,
    )


def _generate_params(log: EvalLog) -> dict[str, Any]:
    """The sampling settings the eval ran with (the task's and the command line's)."""
    config = {
        **log.eval.model_generate_config.model_dump(mode="json", exclude_none=True),
        **log.plan.config.model_dump(mode="json", exclude_none=True),
    }
    return {k: config[k] for k in GENERATE_KEYS if k in config}


def _provenance(log: EvalLog, params: dict[str, Any]) -> dict[str, Any]:
    spec = log.eval
    provenance: dict[str, Any] = {
        "origin": INSPECT_ORIGIN,
        "task": spec.task,
        "task_version": spec.task_version,
        "inspect_version": spec.packages.get("inspect_ai") or str(log.version),
        "run_id": spec.run_id,
        "epochs": spec.config.epochs or 1,
        "log_status": log.status,
        "created": spec.created,
        "dataset": spec.dataset.name,
        "generate_config": params,
    }
    # Logs of Inspect versions before eval ids are found by run name instead.
    if spec.eval_id:
        provenance["origin_id"] = spec.eval_id
    return provenance
