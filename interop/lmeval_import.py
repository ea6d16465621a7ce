"""lm-evaluation-harness output (``--log_samples``) imported as runs.

``lm_eval ... --log_samples --output_path OUT`` writes, per model, a folder
``OUT/<model_name_sanitized>/`` holding ``results_<date>.json`` (the aggregate scores,
the model and its arguments, each task's config, version and n-shot, lm-eval's version)
and one ``samples_<task>_<date>.jsonl`` per task: one line per doc and filter with
``doc_id``, ``doc`` (the dataset row), ``target``, ``arguments``, ``resps``,
``filtered_resps``, ``filter``, ``metrics`` (the metric names) and each metric's value
for this doc (``"acc": 1.0``). The tracker writes every response as a string: a
log-likelihood is ``["-0.26", "False"]``.

Each doc comes back to an item by our item key in ``doc[id_field]`` (a task ToMLab
exported, :mod:`.export`), or by ``item_map`` (``{"<doc_id>": "<item key>"}``, for a
task ToMLab did not export). The answer:

- ``multiple_choice``: the choice with the highest log-likelihood, the first on ties
  (lm-eval's ``np.argmax``), as the option letter of that position. ToMLab scores the
  letter against the item bank's gold, so its accuracy is lm-eval's ``acc`` when the
  task lists the item's options in the item's order (an exported task does); a doc
  where the two disagree is counted in a warning.
- ``generate_until``: each generation (one per ``repeats``, as ``sample_index``) read
  with our engine's reply parser, as ToMLab reads its own runs.

lm-eval's own per-doc metrics stay with each prediction (``details["extra"]``). One run
per task and model, found again by the samples file's hash: importing the same output
twice creates nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from django.conf import settings
from django.db import transaction

from benchmarks.importers.base import (
    MAX_JSON_DEPTH,
    ImportDataError,
    ImportReport,
    input_size_check,
    json_value_check,
    read_json,
)
from benchmarks.models import Benchmark, DynToMQuestion, MCItem
from benchmarks.uploads import UploadRefused, zip_extract
from modeling.models import Prediction, Run
from modeling.pipelines.generic.answers import option_letter
from modeling.runs.prediction_import import (
    NAME_MAX,
    READ_REPLY,
    SAMPLE_MAX,
    PredictionLine,
    RunSummary,
    import_lines,
    prediction_values,
)

from .importing import (
    LM_EVAL_ORIGIN,
    UNKNOWN_KEPT,
    HarnessImportResult,
    unknown_refusal,
)
from .keys import parse_item_key

METHOD = "lm-eval"
SIZE_LIMIT = "lm-eval"
MULTIPLE_CHOICE, GENERATE_UNTIL = "multiple_choice", "generate_until"
OUTPUT_TYPES = (MULTIPLE_CHOICE, GENERATE_UNTIL)
# The tracker's date id: datetime.now().isoformat() with ":" replaced by "-".
_DATE = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
SAMPLES_RE = re.compile(rf"^samples_(?P<task>.+)_(?P<date>{_DATE})\.jsonl$")
RESULTS_RE = re.compile(rf"^results_(?P<date>{_DATE})\.json$")
# Where lm-eval's tracker finds the model's name in its arguments, in its order
# (lm_eval.loggers.evaluation_tracker.GeneralConfigTracker._get_model_name); without
# one it names the folder with a random id, so we fall back to the model type.
MODEL_ARG_KEYS = ("peft", "delta", "pretrained", "model", "path", "engine")
NO_SAMPLES = "no samples_*.jsonl: run lm_eval with --log_samples"
# The per-doc keys that are neither a metric nor worth keeping (the dataset row and
# the prompts are the item's; lm-eval's hashes identify the doc for lm-eval only).
_DOC_KEYS = {
    "doc_id",
    "doc",
    "target",
    "arguments",
    "resps",
    "filtered_resps",
    "filter",
    "metrics",
    "doc_hash",
    "prompt_hash",
    "target_hash",
}


def lm_eval_file(name: str) -> bool:
    """Whether ``name`` is a file lm-eval's tracker writes (what a zip is unpacked for)."""
    return bool(SAMPLES_RE.match(name) or RESULTS_RE.match(name))


@dataclass
class _SamplesFile:
    path: Path  # on disk
    shown: str  # as errors name it: a zip's member is "out.zip/<member>"
    task: str
    results: dict[str, Any] | None  # the results_<date>.json beside it
    results_shown: str = ""


@dataclass
class _Doc:
    """One doc of a samples file, its lines (one per filter) merged."""

    number: int  # the line of its first filter, named in errors
    doc_id: int
    doc: dict[str, Any]
    target: Any
    resps: list[Any]
    filtered_resps: list[Any]  # the first filter's
    # A multiple_choice request's continuation per choice (" A"), in order.
    continuations: list[str] = field(default_factory=list)
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # per filter
    filtered: dict[str, Any] = field(default_factory=dict)  # generations: per filter


@dataclass
class _Task:
    """One samples file, read: its run's model, lines and provenance."""

    file: _SamplesFile
    model: str
    lines: list[PredictionLine]
    unknown: list[str]  # the docs that name no item here, as shown
    provenance: dict[str, Any]


@transaction.atomic
def lmeval_import(
    *,
    paths: list[Path],
    name: str = "",
    model: str = "",
    id_field: str = "id",
    item_map: dict[str, str] | Path | str | None = None,
    keep_unknown: bool = False,
) -> HarnessImportResult:
    """Import lm-eval's ``--log_samples`` output as imported runs (method "lm-eval").

    ``paths``: output folders (searched below for ``samples_*.jsonl``), the files
    themselves, or zips of them. ``model`` names the model (default: the results file's
    ``pretrained=``/``model=`` argument, else the model type). ``item_map``: a dict, a
    JSON file or JSON text. A task's run is called ``name``; without one
    ``"<task> · <model>"``, and with several tasks ``"<name> · <task> · <model>"``.
    Docs whose id names no item here are refused, or with ``keep_unknown`` set aside
    and listed (:attr:`HarnessImportResult.unknown`, the run's
    ``selection["unknown_samples"]``). Raises :class:`ImportDataError` naming the
    file, line and field of the first problem; nothing is written then.
    """
    report = ImportReport()
    mapping = _item_map(item_map)
    id_field = id_field.strip() or "id"
    with ExitStack() as stack:
        # Everything is read and matched to items before anything is written.
        tasks: list[_Task] = []
        seen: set[str] = set()
        for file in _samples_files([Path(p) for p in paths], stack):
            origin_id, docs = _read(file)
            if origin_id in seen:
                continue  # the same file given twice (a folder and its zip)
            seen.add(origin_id)
            run_model = _model(file, model)
            lines, unknown = _lines(
                file, docs, run_model, _output_type(file, docs), id_field, mapping
            )
            tasks.append(_Task(file, run_model, lines, unknown, _provenance(file, origin_id)))
        unknown = [doc for task in tasks for doc in task.unknown]
        if unknown and not keep_unknown:
            first = next(task for task in tasks if task.unknown)
            raise unknown_refusal(Path(first.file.shown), unknown, what="doc")
        several = len({task.file.task for task in tasks}) > 1
        summaries: list[RunSummary] = []
        for task in tasks:
            if not task.lines:
                raise ImportDataError(
                    f"none of its {len(task.unknown)} doc(s) names an item of this server",
                    path=task.file.shown,
                    field=id_field,
                )
            if task.unknown:
                task.provenance["unknown_samples"] = task.unknown[:UNKNOWN_KEPT]
            runs = import_lines(
                path=Path(task.file.shown),
                name=_run_name(name.strip(), task.file.task, task.model, several=several),
                lines=task.lines,
                report=report,
                provenance=task.provenance,
            )
            _check_agreement(task.file, runs, report)
            summaries.extend(runs)
    return HarnessImportResult(runs=summaries, report=report, unknown=unknown)


def _run_name(name: str, task: str, model: str, *, several: bool) -> str:
    if name and not several:
        run_name = name
    elif name:
        # Several tasks under one name: each run still says which task it holds.
        run_name = f"{name} · {task} · {model}"
    else:
        run_name = f"{task} · {model}"
    return run_name[:NAME_MAX]


# --- finding the files ---------------------------------------------------------------


def _samples_files(paths: list[Path], stack: ExitStack) -> list[_SamplesFile]:
    """Every samples file under ``paths``, with the results file of its run."""
    found: list[tuple[Path, str]] = []
    for path in paths:
        if not path.exists():
            raise ImportDataError("file not found", path=path)
        if path.is_dir():
            found.extend(_walk(path, str(path)))
        elif path.suffix.lower() == ".zip":
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            _unzip(path, folder)
            found.extend(_walk(folder, str(path)))
        elif lm_eval_file(path.name):
            found.append((path, str(path)))
            # A samples file given alone still has its run's results file beside it.
            if match := SAMPLES_RE.match(path.name):
                beside = path.with_name(f"results_{match['date']}.json")
                if beside.is_file():
                    found.append((beside, str(beside)))
        else:
            raise ImportDataError(
                "not lm-eval output: expected samples_<task>_<date>.jsonl, "
                "results_<date>.json, their folder or a .zip of it",
                path=path,
            )
    samples = [(p, shown) for p, shown in found if SAMPLES_RE.match(p.name)]
    if not samples:
        where = ", ".join(str(p) for p in paths) or "nothing given"
        raise ImportDataError(NO_SAMPLES, path=where)
    results = {
        (p.parent, RESULTS_RE.match(p.name)["date"]): (p, shown)
        for p, shown in found
        if RESULTS_RE.match(p.name)
    }
    files = []
    for path, shown in sorted(samples, key=lambda pair: pair[1]):
        match = SAMPLES_RE.match(path.name)
        beside = results.get((path.parent, match["date"]))
        file = _SamplesFile(path=path, shown=shown, task=match["task"], results=None)
        if beside is not None:
            file.results = _results(*beside)
            file.results_shown = beside[1]
        files.append(file)
    return files


def _walk(folder: Path, shown: str) -> Iterator[tuple[Path, str]]:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and lm_eval_file(path.name):
            yield path, f"{shown}/{path.relative_to(folder).as_posix()}"


def _unzip(archive: Path, folder: Path) -> None:
    limit = settings.TOMLAB_IMPORT_MAX_BYTES[SIZE_LIMIT]
    try:
        zip_extract(
            archive,
            folder,
            member_limit=lambda name: limit if lm_eval_file(name) else None,
            budget=settings.TOMLAB_UPLOAD_MAX_BYTES,
        )
    except UploadRefused as exc:
        raise ImportDataError(exc.message, path=exc.file or archive) from None


def _results(path: Path, shown: str) -> dict[str, Any]:
    try:
        data = read_json(path, limit=SIZE_LIMIT)
    except ImportDataError as exc:
        raise ImportDataError(exc.message, path=shown, record=exc.record) from None
    if not isinstance(data, dict):
        raise ImportDataError("expected a JSON object (lm-eval's results)", path=shown)
    for key in ("config", "configs", "versions", "n-shot", "results"):
        if key in data and not isinstance(data[key], dict):
            raise ImportDataError("expected an object", path=shown, field=key)
    return data


# --- reading a samples file ----------------------------------------------------------


def _read(file: _SamplesFile) -> tuple[str, list[_Doc]]:
    """The file's origin id (its bytes and task, hashed) and its docs, in file order."""
    input_size_check(file.path, limit=SIZE_LIMIT)
    digest = hashlib.sha256()
    docs: dict[int, _Doc] = {}
    filters: set[tuple[int, str]] = set()
    with file.path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            digest.update(raw)
            if raw.strip():
                _merge(file, number, raw, docs, filters)
    if not docs:
        raise ImportDataError("holds no doc", path=file.shown)
    digest.update(file.task.encode("utf-8"))
    return digest.hexdigest(), list(docs.values())


def _fail(file: _SamplesFile, number: int, message: str, name: str | None = None) -> NoReturn:
    raise ImportDataError(message, path=file.shown, record=f"line {number}", field=name)


def _merge(
    file: _SamplesFile,
    number: int,
    raw: bytes,
    docs: dict[int, _Doc],
    filters: set[tuple[int, str]],
) -> None:
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        _fail(file, number, "not UTF-8 text")
    except json.JSONDecodeError as exc:
        _fail(file, number, f"malformed JSON: {exc.msg} (column {exc.colno})")
    except RecursionError:
        _fail(file, number, f"nested deeper than {MAX_JSON_DEPTH} levels")
    json_value_check(data, path=file.shown, record=f"line {number}")
    if not isinstance(data, dict):
        _fail(file, number, f"expected a JSON object, got {type(data).__name__}")
    doc_id = data.get("doc_id")
    if isinstance(doc_id, bool) or not isinstance(doc_id, int) or doc_id < 0:
        _fail(file, number, "expected a non-negative integer", "doc_id")
    if not isinstance(data.get("doc"), dict):
        _fail(file, number, "expected the dataset row as an object", "doc")
    for name in ("resps", "filtered_resps"):
        if not isinstance(data.get(name), list):
            _fail(file, number, "expected a list (lm-eval's responses)", name)
    filter_name = data.get("filter", "none")
    if not isinstance(filter_name, str):
        _fail(file, number, "expected a string", "filter")
    if (doc_id, filter_name) in filters:
        _fail(file, number, f"doc {doc_id} appears twice for filter {filter_name!r}", "doc_id")
    filters.add((doc_id, filter_name))
    names = data.get("metrics")
    if names is None:
        names = [k for k in data if k not in _DOC_KEYS]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        _fail(file, number, "expected a list of metric names", "metrics")
    doc = docs.get(doc_id)
    if doc is None:
        doc = docs[doc_id] = _Doc(
            number=number,
            doc_id=doc_id,
            doc=data["doc"],
            target=data.get("target"),
            resps=data["resps"],
            filtered_resps=data["filtered_resps"],
            continuations=_continuations(data.get("arguments")),
        )
    doc.metrics[filter_name] = {n: data[n] for n in names if n in data}
    doc.filtered[filter_name] = data["filtered_resps"]


def _continuations(arguments: Any) -> list[str]:
    """``arguments`` is ``{"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...}``
    for a multiple_choice doc; a generation's ``arg_1`` is its settings, not a string."""
    if not isinstance(arguments, dict):
        return []
    out = [a.get("arg_1") if isinstance(a, dict) else None for a in arguments.values()]
    return out if all(isinstance(c, str) for c in out) else []


def _output_type(file: _SamplesFile, docs: list[_Doc]) -> str:
    """The task's output type, from its config; else from the responses' shape."""
    config = ((file.results or {}).get("configs") or {}).get(file.task)
    output_type = config.get("output_type") if isinstance(config, dict) else None
    if output_type is None:
        first = docs[0].filtered_resps
        pairs = all(isinstance(r, list) and len(r) == 2 for r in first)
        output_type = MULTIPLE_CHOICE if first and pairs else GENERATE_UNTIL
    if output_type not in OUTPUT_TYPES:
        raise ImportDataError(
            f"{output_type!r} tasks have no answer to score; multiple_choice and "
            "generate_until tasks import",
            path=file.results_shown or file.shown,
            field="output_type",
        )
    return output_type


def _model(file: _SamplesFile, given: str) -> str:
    name = given.strip()
    if not name and file.results is not None:
        config = file.results.get("config") or {}
        name = _model_arg(config.get("model_args")) or str(config.get("model") or "")
    if not name:
        raise ImportDataError(
            "no model: no results_<date>.json beside it names one; give the model",
            path=file.shown,
            field="model",
        )
    return name.strip()[: Run._meta.get_field("model").max_length]


def _model_arg(args: Any) -> str:
    if isinstance(args, str):
        pairs = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
        args = {k.strip(): v.strip() for k, v in pairs.items()}
    if isinstance(args, dict):
        for key in MODEL_ARG_KEYS:
            if args.get(key):
                return str(args[key])
    return ""


def _provenance(file: _SamplesFile, origin_id: str) -> dict[str, Any]:
    results = file.results or {}
    config = (results.get("configs") or {}).get(file.task) or {}
    metadata = config.get("metadata") if isinstance(config, dict) else None
    version = (metadata or {}).get("version") if isinstance(metadata, dict) else None
    if version is None:
        version = (results.get("versions") or {}).get(file.task)
    fewshot = (results.get("n-shot") or {}).get(file.task)
    if fewshot is None and isinstance(config, dict):
        fewshot = config.get("num_fewshot")
    provenance: dict[str, Any] = {
        "origin": LM_EVAL_ORIGIN,
        "origin_id": origin_id,
        "task": file.task,
        "task_version": version,
        "lm_eval_version": results.get("lm_eval_version"),
        "num_fewshot": fewshot,
    }
    if model_type := (results.get("config") or {}).get("model"):
        provenance["model_type"] = model_type
    # lm-eval's own aggregate scores ("acc,none": 0.25), to compare with ours.
    if isinstance(scores := (results.get("results") or {}).get(file.task), dict):
        provenance["lm_eval_results"] = {
            k: v for k, v in scores.items() if k not in ("name", "alias", "sample_len")
        }
    return _json_safe(provenance)


# --- docs to prediction lines ----------------------------------------------------------


def _item_map(value: dict[str, str] | Path | str | None) -> dict[str, tuple[str, str, str]] | None:
    """``{"<doc_id>": (benchmark, work, item)}`` from a dict, a JSON file or JSON text
    (an upload's option); every value must be an item key."""
    if value is None:
        return None
    where: Path | str = "item_map"
    if isinstance(value, Path):
        where = value
        value = read_json(value, limit=SIZE_LIMIT)
    elif isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ImportDataError(
                f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                path=where,
                field="item_map",
            ) from None
        except RecursionError:
            raise ImportDataError(
                f"nested deeper than {MAX_JSON_DEPTH} levels", path=where, field="item_map"
            ) from None
    if not isinstance(value, dict):
        raise ImportDataError('expected {"<doc_id>": "<item key>", ...}', path=where)
    mapping = {}
    for doc_id, key in value.items():
        parsed = parse_item_key(key)
        if parsed is None:
            raise ImportDataError(
                f"{key!r} is not an item key (generic:<item set>:<item> or "
                "dyntom:<stage>:<question>)",
                path=where,
                record=str(doc_id),
                field="item_map",
            )
        mapping[str(doc_id).strip()] = parsed
    return mapping


def _lines(
    file: _SamplesFile,
    docs: list[_Doc],
    model: str,
    output_type: str,
    id_field: str,
    mapping: dict[str, tuple[str, str, str]] | None,
) -> tuple[list[PredictionLine], list[str]]:
    """The prediction lines of the docs that name an item here, and the ids of the rest."""
    refs: dict[int, tuple[str, str, str] | None] = {}
    shown: dict[int, str] = {}
    for doc in docs:
        if mapping is not None:
            refs[doc.doc_id] = mapping.get(str(doc.doc_id))
            shown[doc.doc_id] = f"doc_id {doc.doc_id}"
        else:
            value = doc.doc.get(id_field)
            refs[doc.doc_id] = parse_item_key(value)
            shown[doc.doc_id] = str(value)
    if mapping is None and all(id_field not in doc.doc for doc in docs):
        raise ImportDataError(
            f"no doc has a {id_field!r} field: for a task ToMLab did not export, give "
            'item_map {"<doc_id>": "<item key>"}',
            path=file.shown,
            field=id_field,
        )
    known = _known_items({ref for ref in refs.values() if ref is not None})
    lines: list[PredictionLine] = []
    unknown: list[str] = []
    for doc in docs:
        ref = refs[doc.doc_id]
        if ref is None or ref not in known:
            unknown.append(shown[doc.doc_id])
            continue
        lines.extend(_doc_lines(file, doc, ref, model, output_type))
    return lines, unknown


def _known_items(refs: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """Which of the (benchmark, work, item) keys name an item in the item bank."""
    known: set[tuple[str, str, str]] = set()
    generic = {work for benchmark, work, _ in refs if benchmark == Benchmark.GENERIC}
    if generic:
        rows = MCItem.objects.filter(
            work__benchmark=Benchmark.GENERIC, work__key__in=generic
        ).values_list("work__key", "item_id")
        known |= {(Benchmark.GENERIC, work, item) for work, item in rows}
    stages = {work for benchmark, work, _ in refs if benchmark == Benchmark.DYNTOM}
    if stages:
        rows = DynToMQuestion.objects.filter(
            stage__work__benchmark=Benchmark.DYNTOM, stage__work__key__in=stages
        ).values_list("stage__work__key", "key")
        known |= {(Benchmark.DYNTOM, work, key) for work, key in rows}
    return known & refs


def _doc_lines(
    file: _SamplesFile, doc: _Doc, ref: tuple[str, str, str], model: str, output_type: str
) -> Iterator[PredictionLine]:
    benchmark, work, item = ref
    extra: dict[str, Any] = {"doc_id": doc.doc_id, "target": doc.target, "metrics": doc.metrics}
    metadata = doc.doc.get("metadata")
    language = metadata.get("language") if isinstance(metadata, dict) else None
    if benchmark != Benchmark.GENERIC or not isinstance(language, str):
        language = None

    def line(sample_index: int, values: dict[str, Any]) -> PredictionLine:
        return PredictionLine(
            number=doc.number,
            benchmark=benchmark,
            model=model,
            method=METHOD,
            sample_index=sample_index,
            ref=(work, item),
            values=values,
        )

    if output_type == MULTIPLE_CHOICE:
        lls = _loglikelihoods(file, doc)
        pick = _argmax(lls)
        extra["loglikelihoods"] = lls
        yield line(
            0,
            prediction_values(
                answer=option_letter(pick),
                raw_output=_continuation(doc, pick),
                extra=_json_safe(extra),
                language=language,
            ),
        )
        return
    generations = doc.resps[0] if doc.resps and isinstance(doc.resps[0], list) else doc.resps
    if not generations or not all(isinstance(g, str) for g in generations):
        _fail(file, doc.number, "expected the generations as strings", "resps")
    if len(generations) > SAMPLE_MAX + 1:
        _fail(file, doc.number, f"more than {SAMPLE_MAX + 1} generations", "resps")
    extra["filtered_resps"] = doc.filtered
    extra = _json_safe(extra)
    for index, text in enumerate(generations):
        yield line(
            index,
            prediction_values(answer=READ_REPLY, raw_output=text, extra=extra, language=language),
        )


def _loglikelihoods(file: _SamplesFile, doc: _Doc) -> list[float]:
    """Each choice's log-likelihood: ``filtered_resps`` holds ``[ll, is_greedy]`` per
    choice, numbers or (as the tracker writes them) their strings."""
    lls = []
    for response in doc.filtered_resps:
        value = response[0] if isinstance(response, list) and response else None
        try:
            lls.append(float(value))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            _fail(
                file,
                doc.number,
                "expected [log-likelihood, is_greedy] per choice (a multiple_choice task)",
                "filtered_resps",
            )
    if not lls:
        _fail(file, doc.number, "no choice", "filtered_resps")
    if len(lls) > 26:
        _fail(file, doc.number, f"{len(lls)} choices; options are lettered A-Z", "filtered_resps")
    return lls


def _json_safe(value: Any) -> Any:
    """``value`` with every infinite or NaN number as its string ("-inf"): PostgreSQL's
    jsonb has no such numbers, and a log-likelihood of -inf is one a model can give."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _argmax(values: list[float]) -> int:
    """numpy's argmax: the first maximum, and the first NaN if there is one."""
    for index, value in enumerate(values):
        if math.isnan(value):
            return index
    return max(range(len(values)), key=values.__getitem__)


def _continuation(doc: _Doc, pick: int) -> str:
    """The text of the choice picked ("A" in an exported task), from its request."""
    if len(doc.continuations) > pick:
        return doc.continuations[pick].strip() or option_letter(pick)
    return option_letter(pick)


# --- after writing ---------------------------------------------------------------------


def _check_agreement(file: _SamplesFile, runs: list[RunSummary], report: ImportReport) -> None:
    """Warn when ToMLab's verdict on a doc differs from lm-eval's ``acc``: the task's
    choices are then not in the item's order (or its gold is not the item bank's)."""
    differ = 0
    for summary in runs:
        for correct, details in Prediction.objects.filter(run=summary.run).values_list(
            "correct", "details"
        ):
            metrics = ((details or {}).get("extra") or {}).get("metrics") or {}
            acc = (metrics.get("none") or next(iter(metrics.values()), {})).get("acc")
            if isinstance(acc, (int, float)) and correct is not None and bool(acc) != correct:
                differ += 1
    if differ:
        report.warn(
            f"{file.shown}: on {differ} doc(s) lm-eval's acc differs from ToMLab's "
            "verdict: the task's choices may not be in the items' order, or its gold "
            "not the item bank's"
        )
