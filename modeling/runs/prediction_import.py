"""Predictions made elsewhere (published outputs, a lab's own vLLM runs), imported as runs.

The file is JSON Lines, one prediction per line, each naming its item by the item
bank's natural key (``docs/predictions-jsonl.md`` has the shape and examples). The
CharToM-QA paper's published examples (``paper_examples.jsonl``, the dataset's layout
plus ``published_results``) are read as they are.

What we never take from the file: correctness and parse status. They are computed
here against the gold in the item bank, with the same letter reading as our own
DynToM pipeline, so an imported run and one of ours are scored alike. Imported
predictions land in the same store as ours: one :class:`Run` (``imported=True``;
succeeded, or failed when not one answer could be read) per benchmark, method and
model, named by the caller, CharToM-QA split by task as the reports expect
(``"<name> (generative)"``, ``"<name> (multichoice)"``), and by context length where
lines give one (``"<name> (generative, c=1k)"``).

The whole file is read and checked before anything is written, inside one
transaction: a bad line imports nothing and the error names the file, the line and
the field. Runs and predictions are upserted by their natural keys, so importing a
file again under the same name adds nothing.
"""

from __future__ import annotations

import ast
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from benchmarks.importers.base import (
    MAX_JSON_DEPTH,
    ImportDataError,
    ImportReport,
    json_value_check,
)
from benchmarks.models import Benchmark, DynToMQuestion, MCItem

from ..models import Prediction, Run
from ..pipelines import chartom_qa
from ..pipelines.base import CallUnit, ParsedItem
from ..pipelines.dyntom import DynToMPipeline, option_letter
from ..pipelines.generic import score_reply as score_mc_reply
from ..pipelines.speaker_guess import instances_by_key
from ..pipelines.speaker_guess import score_answer as score_speaker_answer
from .outcome import run_outcome
from .signals import predictions_changed

__all__ = [
    "READ_REPLY",
    "ImportDataError",
    "PredictionImportResult",
    "PredictionLine",
    "RunSummary",
    "import_lines",
    "prediction_values",
    "predictions_import",
]

DEFAULT_METHOD = "imported"
GENERATIVE, MULTICHOICE = chartom_qa.GENERATIVE, chartom_qa.MULTICHOICE
CHARTOM_TASKS = (GENERATIVE, MULTICHOICE)
MULTICHOICE_OPTIONS = chartom_qa.MULTICHOICE_OPTIONS

NAME_MAX = Run._meta.get_field("name").max_length
MODEL_MAX = Run._meta.get_field("model").max_length
METHOD_MAX = Run._meta.get_field("method").max_length
ANSWER_MAX = Prediction._meta.get_field("parsed_answer").max_length
TEMPLATE_MAX = Prediction._meta.get_field("template_version").max_length
SAMPLE_MAX = 32767  # PositiveSmallIntegerField

COMMON_FIELDS = {
    "benchmark",
    "model",
    "method",
    "sample_index",
    "raw_output",
    "answer",
    "parsed_answer",
    "params",
    "template_version",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    # Claims we recompute; accepted so that files written by other tools load, and
    # compared with our verdict only to warn.
    "correct",
    "parse_status",
}
REF_FIELDS = {
    Benchmark.DYNTOM: ("work", "question"),
    Benchmark.TOM_IN_AMC: ("work", "scene", "code"),
    Benchmark.TVSHOWGUESS: ("work", "scene", "code"),
    Benchmark.CHARTOM_QA: ("item", "book", "character", "question"),
    # A mapped benchmark's item set (its key, e.g. "tombench@1.0") and the item's id.
    Benchmark.GENERIC: ("work", "item"),
}
# A mapped item's language, for reading an answer given as the option's text (default:
# the item's first language).
GENERIC_FIELDS = {"language"}
CHARTOM_FIELDS = {
    "task",
    "choices",
    "bonus_points_included",
    "defects",
    "bonus_reply",
    "defects_reply",
    "context",
}
# CharToM-QA's plot windows (tokens shown to the model) as run names spell them.
CONTEXT_LABELS = chartom_qa.CONTEXT_LABELS
# Keys of a paper example's published_results, after the "<model>_" prefix.
PUBLISHED_SUFFIXES = (
    "multichoice_pick",
    "generative_response",
    "bonus_points_included",
    "defects",
)

_ABSENT = object()
# prediction_values(answer=READ_REPLY): read the answer from raw_output, as our engine would.
READ_REPLY = object()


@dataclass
class _Line:
    """One prediction as read from the file, before its item is looked up."""

    number: int
    benchmark: str
    model: str
    method: str
    sample_index: int
    # The item's natural key within the benchmark; its shape depends on the benchmark.
    ref: tuple
    # Benchmark-specific values (answer, choices, judgement…) and the common optional
    # ones (raw_output, params, tokens…).
    values: dict[str, Any]
    # Field names in error messages: a paper example's values sit in published_results.
    fields: dict[str, str] = field(default_factory=dict)
    # CharToM-QA's context length in tokens (0, 1000, 2000); None when not given.
    context: int | None = None

    def field_name(self, name: str) -> str:
        return self.fields.get(name, name)


# Built by the harness readers (modeling.harness) as the JSONL reader builds its lines:
# ``number`` is then the sample's position in the log, named in errors as "line".
PredictionLine = _Line


@dataclass
class _Scored:
    line: _Line
    item_id: int
    parsed_answer: str
    parse_status: str
    correct: bool | None
    details: dict[str, Any]


@dataclass
class RunSummary:
    """What an import did to one run."""

    run: Run
    created: bool
    predictions: Counter = field(default_factory=Counter)  # created/unchanged/updated
    by_status: Counter = field(default_factory=Counter)
    correct: int = 0
    scored: int = 0  # predictions with a correctness (not generative CharToM-QA ones)
    # Generative CharToM-QA: the judge's verdicts, summed (BPC and PR at a glance).
    judged: int = 0
    bonus_included: int = 0
    bonus_total: int = 0
    with_defects: int = 0
    judge_unparseable: int = 0  # responses with an unparseable judge reply (strict)


@dataclass
class PredictionImportResult:
    runs: list[RunSummary]
    report: ImportReport
    skipped: int = 0  # predictions of other benchmarks or models (--benchmark/--model)


def imported_run_name(name: str, benchmark: str, method: str, context: int | None = None) -> str:
    """The name of the run holding one benchmark/method(/context)'s predictions of an import."""
    if benchmark == Benchmark.CHARTOM_QA:
        if context is not None:
            return f"{name} ({method}, c={CONTEXT_LABELS[context]})"
        return f"{name} ({method})"
    return name


@transaction.atomic
def predictions_import(
    *,
    path: Path | str,
    name: str,
    benchmark: str | None = None,
    model: str | None = None,
) -> PredictionImportResult:
    """Import a predictions JSONL file as imported, succeeded runs named ``name``.

    ``benchmark`` and ``model`` fill lines that leave those fields out and restrict
    the import to the lines that match (others are skipped and counted). Without
    ``model`` a file must hold one model's predictions. Raises
    :class:`~benchmarks.importers.ImportDataError` naming the file, line and field of
    the first problem; nothing is written then.
    """
    path = Path(path)
    name = name.strip()
    if not name:
        raise ValueError("a run name is required")
    if len(imported_run_name(name, Benchmark.CHARTOM_QA, MULTICHOICE)) > NAME_MAX:
        limit = NAME_MAX - len(imported_run_name("", Benchmark.CHARTOM_QA, MULTICHOICE))
        raise ValueError(f"the run name is too long (at most {limit} characters)")
    report = ImportReport()
    reader = _Reader(path, report, benchmark=benchmark, model=model)
    lines = reader.read()
    if not lines:
        raise ImportDataError(
            "no predictions to import" + (f" ({reader.skipped} skipped)" if reader.skipped else ""),
            path=path,
        )
    if any(line.context is not None for line in lines):
        longest = imported_run_name(name, Benchmark.CHARTOM_QA, MULTICHOICE, 2000)
        if len(longest) > NAME_MAX:
            limit = NAME_MAX - (len(longest) - len(name))
            raise ValueError(
                f"the run name is too long for a file with context lengths (at most {limit} "
                "characters)"
            )
    _check_one_model_and_method(path, lines)
    summaries = import_lines(path=path, name=name, lines=lines, report=report)
    return PredictionImportResult(runs=summaries, report=report, skipped=reader.skipped)


def import_lines(
    *,
    path: Path,
    name: str,
    lines: list[PredictionLine],
    report: ImportReport,
    provenance: dict[str, Any] | None = None,
) -> list[RunSummary]:
    """Score ``lines`` against the item bank and upsert them as imported runs.

    The one write path of every import of predictions made elsewhere: a predictions
    file, an Inspect log, lm-eval samples (``modeling.harness``). ``provenance`` goes
    into the run's ``selection`` (where it came from: ``origin``, the harness's ids and
    versions); with an ``origin_id`` (an Inspect eval id) the run is found by it, so the
    same log imported twice, under any name, adds nothing. The caller holds the
    transaction.
    """
    scored = _score(path, lines, report)
    _check_duplicates(path, scored)
    summaries = _write(path, name, scored, report, provenance or {})
    predictions_changed.send(sender=Prediction, run_ids=[s.run.pk for s in summaries])
    return summaries


def prediction_values(
    *,
    answer: Any = None,
    raw_output: str | None = None,
    params: dict[str, Any] | None = None,
    template_version: str = "",
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    latency_ms: int = 0,
    extra: dict[str, Any] | None = None,
    language: str | None = None,
    claimed_correct: bool | None = None,
) -> dict[str, Any]:
    """A :class:`PredictionLine`'s values as a harness reader gives them. ``answer``:
    the answer the harness read (a letter), None for none given (missing), or
    :data:`READ_REPLY` to read ``raw_output`` with our own reply parser."""
    return {
        "raw_output": raw_output,
        "answer": _ABSENT if answer is READ_REPLY else answer,
        "params": params or {},
        "template_version": template_version[:TEMPLATE_MAX],
        "prompt_tokens": max(0, int(prompt_tokens or 0)),
        "completion_tokens": max(0, int(completion_tokens or 0)),
        "latency_ms": max(0, int(latency_ms or 0)),
        # The harness's own verdict: compared with ours only to warn.
        "claimed_correct": claimed_correct,
        "extra": extra or {},
        "language": language,
    }


# --- reading -----------------------------------------------------------------------


class _Reader:
    """Reads and checks every line's fields; items are looked up afterwards, in bulk."""

    def __init__(
        self, path: Path, report: ImportReport, *, benchmark: str | None, model: str | None
    ) -> None:
        self.path = path
        self.report = report
        self.benchmark = benchmark
        self.model = model
        self.skipped = 0
        self.unknown: dict[str, int] = {}

    def read(self) -> list[_Line]:
        if self.path.is_dir():
            raise ImportDataError("is a directory, not a JSONL file", path=self.path)
        try:
            text = self.path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise ImportDataError("file not found", path=self.path) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ImportDataError(f"cannot read file: {exc}", path=self.path) from None
        lines: list[_Line] = []
        for number, raw in enumerate(text.splitlines(), start=1):
            if raw.strip():
                lines.extend(self._line(number, raw))
        if self.unknown:
            fields = ", ".join(f"{name!r} (first on line {n})" for name, n in self.unknown.items())
            self.report.warn(f"{self.path}: kept unknown field(s) in details['extra']: {fields}")
        return lines

    def fail(self, number: int, message: str, field: str | None = None) -> NoReturn:
        raise ImportDataError(message, path=self.path, record=f"line {number}", field=field)

    def _line(self, number: int, raw: str) -> Iterator[_Line]:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            self.fail(number, f"malformed JSON: {exc.msg} (column {exc.colno})")
        except RecursionError:
            self.fail(number, f"nested deeper than {MAX_JSON_DEPTH} levels")
        json_value_check(data, path=self.path, record=f"line {number}")
        if not isinstance(data, dict):
            self.fail(number, f"expected a JSON object, got {type(data).__name__}")
        if "published_results" in data and "book_name" in data:
            yield from self._paper_example(number, data)
            return
        benchmark = data.get("benchmark", self.benchmark)
        if benchmark is None:
            self.fail(number, "missing (or pass --benchmark)", "benchmark")
        if benchmark not in Benchmark.values:
            self.fail(
                number, f"{benchmark!r} is not one of {', '.join(Benchmark.values)}", "benchmark"
            )
        if self.benchmark and benchmark != self.benchmark:
            self.skipped += 1
            return
        model = self._model(number, data.get("model", self.model), "model")
        if self.model and model != self.model:
            self.skipped += 1
            return
        values = self._common(number, data)
        known = COMMON_FIELDS | set(REF_FIELDS[benchmark])
        context = None
        if benchmark == Benchmark.CHARTOM_QA:
            known |= CHARTOM_FIELDS
            method, ref = self._chartom(number, data, values)
            context = self._context(number, data)
        else:
            method = self._string(number, data, "method", DEFAULT_METHOD, max_length=METHOD_MAX)
            ref = tuple(self._string(number, data, f) for f in REF_FIELDS[benchmark])
        if benchmark == Benchmark.GENERIC:
            known |= GENERIC_FIELDS
            values["language"] = self._string(number, data, "language", None)
        extra = {k: v for k, v in data.items() if k not in known}
        for key in extra:
            self.unknown.setdefault(key, number)
        values["extra"] = extra
        yield _Line(
            number=number,
            benchmark=benchmark,
            model=model,
            method=method,
            sample_index=self._sample_index(number, data),
            ref=ref,
            values=values,
            context=context,
        )

    # Field readers: each checks one field's type and fails with its name.

    def _string(
        self,
        number: int,
        data: dict[str, Any],
        name: str,
        default: Any = _ABSENT,
        *,
        max_length: int | None = None,
    ) -> Any:
        value = data.get(name)
        if value is None or value == "":
            # An optional field may be left out, null or empty; a required one may not.
            if default is not _ABSENT:
                return default
            self.fail(
                number, "missing" if name not in data else "expected a non-empty string", name
            )
        if not isinstance(value, str) or not value.strip():
            self.fail(number, "expected a non-empty string", name)
        if max_length and len(value) > max_length:
            self.fail(number, f"longer than {max_length} characters", name)
        return value.strip()

    def _model(self, number: int, value: Any, name: str) -> str:
        if value is None:
            self.fail(number, "missing (or pass --model)", name)
        if not isinstance(value, str) or not value.strip():
            self.fail(number, "expected a non-empty string", name)
        if len(value.strip()) > MODEL_MAX:
            self.fail(number, f"longer than {MODEL_MAX} characters", name)
        return value.strip()

    def _sample_index(self, number: int, data: dict[str, Any]) -> int:
        value = data.get("sample_index", 0)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= SAMPLE_MAX:
            self.fail(number, f"expected an integer from 0 to {SAMPLE_MAX}", "sample_index")
        return value

    def _context(self, number: int, data: dict[str, Any]) -> int | None:
        """CharToM-QA's plot window: 0, 1000 or 2000 tokens ("0", "1k", "2k"), or None."""
        value = data.get("context")
        if value is None:
            return None
        try:
            return chartom_qa.read_context(value)
        except ValueError as exc:
            self.fail(number, str(exc), "context")

    def _common(self, number: int, data: dict[str, Any]) -> dict[str, Any]:
        """The optional fields every benchmark shares, checked and defaulted."""
        values: dict[str, Any] = {}
        raw = data.get("raw_output")
        if raw is not None and not isinstance(raw, str):
            self.fail(number, "expected a string or null", "raw_output")
        values["raw_output"] = raw
        answer = data.get("answer", _ABSENT)
        parsed = data.get("parsed_answer", _ABSENT)
        if answer is not _ABSENT and parsed is not _ABSENT and answer != parsed:
            self.fail(number, "differs from 'answer'; give one of the two", "parsed_answer")
        answer = parsed if answer is _ABSENT else answer
        name = "parsed_answer" if "answer" not in data else "answer"
        if answer is not _ABSENT and answer is not None and not isinstance(answer, str):
            self.fail(number, "expected a string or null", name)
        values["answer"] = answer
        params = data.get("params", {})
        if not isinstance(params, dict):
            self.fail(number, "expected an object", "params")
        values["params"] = params
        values["template_version"] = self._string(
            number, data, "template_version", "", max_length=TEMPLATE_MAX
        )
        for name in ("prompt_tokens", "completion_tokens", "latency_ms"):
            value = data.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                self.fail(number, "expected a non-negative integer", name)
            values[name] = value
        claimed = data.get("correct")
        if claimed is not None and not isinstance(claimed, bool):
            self.fail(number, "expected true, false or null", "correct")
        values["claimed_correct"] = claimed
        return values

    def _chartom(
        self, number: int, data: dict[str, Any], values: dict[str, Any]
    ) -> tuple[str, tuple]:
        task = data.get("task")
        if task not in CHARTOM_TASKS:
            self.fail(
                number,
                "missing" if task is None else f"{task!r} is not one of {', '.join(CHARTOM_TASKS)}",
                "task",
            )
        if "item" in data:
            ref: tuple = ("key", self._string(number, data, "item"))
        elif "book" in data or "question" in data:
            ref = (
                "text",
                self._string(number, data, "book"),
                self._string(number, data, "character", None),
                self._string(number, data, "question"),
            )
        else:
            self.fail(number, "missing (or give book and question)", "item")
        if task == GENERATIVE:
            if not isinstance(values["raw_output"], str) or not values["raw_output"].strip():
                self.fail(number, "the generative response is required", "raw_output")
            # The judge's verdict: read already (indices, defects) or its raw replies,
            # which the pipeline reads as it reads its own judge's.
            values["bonus_reply"] = self._reply(number, data, "bonus_reply")
            values["defects_reply"] = self._reply(number, data, "defects_reply")
            if values["bonus_reply"] is None:
                included = data.get("bonus_points_included", _ABSENT)
                if included is _ABSENT:
                    self.fail(
                        number,
                        "missing (the judge's verdict, or its reply in bonus_reply)",
                        "bonus_points_included",
                    )
                values["bonus_points_included"] = self._indices(
                    number, included, "bonus_points_included", base=0
                )
            if values["defects_reply"] is None:
                values["defects"] = self._defects(number, data.get("defects", _ABSENT), "defects")
        else:
            values["choices"] = self._choices(number, data.get("choices", _ABSENT), "choices")
            if values["answer"] is _ABSENT:
                self.fail(number, "missing (the chosen letter, or null)", "answer")
        return task, ref

    def _reply(self, number: int, data: dict[str, Any], name: str) -> str | None:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            self.fail(number, "expected the judge's reply as a string", name)
        return value

    def _indices(self, number: int, value: Any, name: str, *, base: int) -> list[int]:
        if not isinstance(value, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= base for i in value
        ):
            self.fail(number, f"expected a list of integers from {base}", name)
        if len(set(value)) != len(value):
            self.fail(number, "repeats an index", name)
        return sorted(i - base for i in value)

    def _defects(self, number: int, value: Any, name: str) -> list[str]:
        """The judge's criticisms: a list of strings, one string, or null for none."""
        if value is _ABSENT:
            self.fail(number, "missing (null or [] when the judge found none)", name)
        if value is None:
            return []
        if not isinstance(value, (str, list)) or (
            isinstance(value, list) and not all(isinstance(d, str) for d in value)
        ):
            self.fail(number, "expected a list of strings, a string or null", name)
        # A judge writing "None" (the paper's "Penalty: None") found no defect.
        return chartom_qa.published_defects(value)

    def _choices(self, number: int, value: Any, name: str) -> list[str]:
        if value is _ABSENT:
            self.fail(number, "missing (the four choices in the order shown)", name)
        if isinstance(value, str):
            value = self._literal(number, value, name)
        if (
            not isinstance(value, list)
            or len(value) != MULTICHOICE_OPTIONS
            or not all(isinstance(c, str) and c.strip() for c in value)
        ):
            self.fail(number, f"expected a list of {MULTICHOICE_OPTIONS} non-empty strings", name)
        return value

    def _literal(self, number: int, value: str, name: str) -> Any:
        """A Python literal written as a string (the paper examples' habit), or JSON."""
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            try:
                return json.loads(value)
            except (ValueError, RecursionError):
                self.fail(number, "a string that is neither a Python literal nor JSON", name)

    def _paper_example(self, number: int, data: dict[str, Any]) -> Iterator[_Line]:
        """A CharToM-QA paper example: the item plus ``published_results`` for some models.

        ``published_results`` holds, per model prefix (``gpt-4o_``), the multiple-choice
        pick (1-based into ``multichoice_choices``), the generative response and the
        judge's verdict (1-based bonus point indices and a defects string or null). It
        may be an object or a Python-literal string.
        """
        benchmark = data.get("benchmark", Benchmark.CHARTOM_QA)
        if benchmark != Benchmark.CHARTOM_QA:
            self.fail(number, "a paper example is a chartom-qa item", "benchmark")
        results = data["published_results"]
        if isinstance(results, str):
            results = self._literal(number, results, "published_results")
        if not isinstance(results, dict):
            self.fail(number, "expected an object", "published_results")
        ref = (
            "text",
            self._string(number, data, "book_name"),
            self._string(number, data, "target_character", None),
            self._string(number, data, "question"),
        )
        models = list(
            dict.fromkeys(
                key[: -len(suffix) - 1]
                for key in results
                for suffix in PUBLISHED_SUFFIXES
                if key.endswith(f"_{suffix}")
            )
        )
        if not models:
            self.fail(number, "holds no model's results", "published_results")
        if self.benchmark and self.benchmark != Benchmark.CHARTOM_QA:
            self.skipped += len(models)
            return
        for model in models:
            if self.model and model != self.model:
                self.skipped += 1
                continue

            def key(suffix: str, model: str = model) -> str:
                return f"{model}_{suffix}"

            def where(name: str) -> str:
                return f"published_results.{name}"

            fields = {
                "book": "book_name",
                "character": "target_character",
                "raw_output": where(key("generative_response")),
                "bonus_points_included": where(key("bonus_points_included")),
                "answer": where(key("multichoice_pick")),
                "choices": where("multichoice_choices"),
            }
            if key("generative_response") in results:
                yield _Line(
                    number=number,
                    benchmark=Benchmark.CHARTOM_QA,
                    model=model,
                    method=GENERATIVE,
                    sample_index=0,
                    ref=ref,
                    values=self._published_generative(number, results, key, where),
                    fields=fields,
                )
            if key("multichoice_pick") in results:
                yield _Line(
                    number=number,
                    benchmark=Benchmark.CHARTOM_QA,
                    model=model,
                    method=MULTICHOICE,
                    sample_index=0,
                    ref=ref,
                    values=self._published_multichoice(number, results, key, where),
                    fields=fields,
                )

    def _published_generative(self, number, results, key, where) -> dict[str, Any]:
        response = results[key("generative_response")]
        if not isinstance(response, str) or not response.strip():
            self.fail(number, "expected a non-empty string", where(key("generative_response")))
        if key("bonus_points_included") not in results:
            self.fail(number, "missing", where(key("bonus_points_included")))
        return {
            **_published_defaults(),
            "raw_output": response,
            # The paper counts bonus points from 1; details hold 0-based indices.
            "bonus_points_included": self._indices(
                number,
                results[key("bonus_points_included")],
                where(key("bonus_points_included")),
                base=1,
            ),
            "defects": self._defects(number, results.get(key("defects")), where(key("defects"))),
            "bonus_reply": None,
            "defects_reply": None,
        }

    def _published_multichoice(self, number, results, key, where) -> dict[str, Any]:
        choices = self._choices(
            number, results.get("multichoice_choices", _ABSENT), where("multichoice_choices")
        )
        pick = results[key("multichoice_pick")]
        if isinstance(pick, bool) or not isinstance(pick, int):
            self.fail(number, "expected a 1-based choice number", where(key("multichoice_pick")))
        # An out-of-range pick stays visible as given, and is scored unparseable.
        letter = option_letter(pick - 1) if 1 <= pick <= len(choices) else str(pick)
        claimed = results.get("multichoice_correct")
        return {
            **_published_defaults(),
            "answer": letter,
            "choices": choices,
            "claimed_correct": pick == claimed if isinstance(claimed, int) else None,
        }


def _published_defaults() -> dict[str, Any]:
    """The optional values a paper example has no field for."""
    return {
        "raw_output": None,
        "answer": _ABSENT,
        "params": {},
        "template_version": "",
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "latency_ms": 0,
        "claimed_correct": None,
        "extra": {},
    }


def _check_one_model_and_method(path: Path, lines: list[_Line]) -> None:
    """One import is one model, and one method per benchmark (CharToM-QA: its two tasks)."""
    first = lines[0]
    for line in lines:
        if line.model != first.model:
            raise ImportDataError(
                f"{line.model!r} differs from {first.model!r} on line {first.number}; the file "
                "holds several models' predictions: pass --model to import one at a time",
                path=path,
                record=f"line {line.number}",
                field="model",
            )
    methods: dict[str, _Line] = {}
    for line in lines:
        if line.benchmark == Benchmark.CHARTOM_QA:
            continue
        seen = methods.setdefault(line.benchmark, line)
        if line.method != seen.method:
            raise ImportDataError(
                f"{line.method!r} differs from {seen.method!r} on line {seen.number}; import "
                "each method's predictions under its own --name",
                path=path,
                record=f"line {line.number}",
                field="method",
            )


# --- scoring -------------------------------------------------------------------------


def _score(path: Path, lines: list[_Line], report: ImportReport) -> list[_Scored]:
    """Look every item up (a query or two per benchmark) and score each prediction."""
    by_benchmark: dict[str, list[_Line]] = defaultdict(list)
    for line in lines:
        by_benchmark[line.benchmark].append(line)
    scored: list[_Scored] = []
    for benchmark, group in by_benchmark.items():
        scorer = _SCORERS[benchmark](path)
        scored.extend(scorer.score_all(benchmark, group))
    disagreements = [
        s.line.number
        for s in scored
        if s.line.values["claimed_correct"] is not None
        and s.correct is not None
        and s.line.values["claimed_correct"] != s.correct
    ]
    if disagreements:
        report.warn(
            f"{path}: {len(disagreements)} prediction(s) claim a correctness that differs from "
            f"the item bank's gold (first on line {disagreements[0]}); the item bank's was kept"
        )
    return sorted(scored, key=lambda s: s.line.number)


class _Scorer:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, line: _Line, message: str, field: str) -> NoReturn:
        raise ImportDataError(
            message, path=self.path, record=f"line {line.number}", field=line.field_name(field)
        )

    def score_all(self, benchmark: str, lines: list[_Line]) -> list[_Scored]:
        raise NotImplementedError  # pragma: no cover - interface

    def missing(self, line: _Line, item_id: int, details: dict[str, Any]) -> _Scored:
        """An explicit null answer: the model's output gave none for this item."""
        return _Scored(line, item_id, "", Prediction.ParseStatus.MISSING, False, details)


class _DynToMScorer(_Scorer):
    """Question keys within a stage; letters read exactly as our pipeline reads them."""

    def score_all(self, benchmark: str, lines: list[_Line]) -> list[_Scored]:
        rows = DynToMQuestion.objects.filter(
            stage__work__benchmark=Benchmark.DYNTOM,
            stage__work__key__in={line.ref[0] for line in lines},
        ).values("id", "stage_id", "stage__work__key", "key", "position", "options", "gold_letter")
        questions: dict[tuple[str, str], dict[str, Any]] = {}
        stage_items: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for row in sorted(rows, key=lambda r: (r["stage_id"], r["position"])):
            item = {
                "id": row["id"],
                "key": row["key"],
                "options": len(row["options"]),
                "gold": row["gold_letter"],
                "stage_id": row["stage_id"],
            }
            questions[(row["stage__work__key"], row["key"])] = item
            stage_items[row["stage_id"]].append(item)
        works = {work for work, _ in questions}
        pipeline = DynToMPipeline()
        # A stage's whole reply is often repeated on each of its questions' lines.
        parsed_replies: dict[tuple[int, str], dict[int, ParsedItem]] = {}
        scored = []
        for line in lines:
            work, key = line.ref
            if work not in works:
                self.fail(line, f"no DynToM stage {work!r} in the item bank", "work")
            item = questions.get((work, key))
            if item is None:
                self.fail(line, f"stage {work!r} has no question {key!r}", "question")
            answer = line.values["answer"]
            if answer is None:
                scored.append(self.missing(line, item["id"], {}))
                continue
            if answer is _ABSENT:
                raw = line.values["raw_output"]
                if not raw:
                    self.fail(line, "missing (or give the reply in raw_output)", "answer")
                # No parsed answer: read the reply as our pipeline reads a stage's reply,
                # so "missing" (other questions answered) and "unparseable" agree with ours.
                cache_key = (item["stage_id"], raw)
                if cache_key not in parsed_replies:
                    unit = CallUnit(
                        key=f"dyntom:{work}",
                        messages=[],
                        item_ids=[i["id"] for i in stage_items[item["stage_id"]]],
                        items=stage_items[item["stage_id"]],
                    )
                    parsed_replies[cache_key] = {
                        p.item_id: p for p in pipeline.parse(unit=unit, text=raw)
                    }
                parsed = parsed_replies[cache_key][item["id"]]
            else:
                unit = CallUnit(
                    key=f"dyntom:{work}", messages=[], item_ids=[item["id"]], items=[item]
                )
                (parsed,) = pipeline.parse(unit=unit, text=json.dumps({key: answer}))
            scored.append(
                _Scored(
                    line,
                    item["id"],
                    parsed.parsed_answer,
                    parsed.parse_status,
                    parsed.correct,
                    parsed.details or {},
                )
            )
        return scored


class _SpeakerScorer(_Scorer):
    """Masked speakers (ToM-in-AMC, TVShowGuess): a name among the instance's candidates."""

    def score_all(self, benchmark: str, lines: list[_Line]) -> list[_Scored]:
        instances, aliases = instances_by_key(
            benchmark=benchmark, work_keys={line.ref[0] for line in lines}
        )
        works = {key[0] for key in instances}
        scenes = {key[:2] for key in instances}
        scored = []
        for line in lines:
            work, scene, code = line.ref
            if work not in works:
                self.fail(line, f"no {benchmark} work {work!r} in the item bank", "work")
            if (work, scene) not in scenes:
                self.fail(line, f"{work!r} has no scene {scene!r}", "scene")
            instance = instances.get(line.ref)
            if instance is None:
                self.fail(line, f"scene {scene!r} has no masked speaker {code!r}", "code")
            answer = line.values["answer"]
            if answer is _ABSENT:
                self.fail(line, "missing (the character's name, or null)", "answer")
            if answer is None:
                scored.append(self.missing(line, instance["id"], {}))
                continue
            # Read as our pipeline reads a reply line: case, spacing, aliases and extra
            # words are tolerated; a name that is no candidate is unparseable.
            result = score_speaker_answer(
                answer=answer,
                candidates=list(instance["candidates"]),
                gold=instance["gold_character__name"],
                aliases=aliases.get(work, {}),
            )
            scored.append(
                _Scored(
                    line,
                    instance["id"],
                    result.parsed_answer[:ANSWER_MAX],
                    result.parse_status,
                    result.correct,
                    result.details,
                )
            )
        return scored


class _CharToMScorer(_Scorer):
    """CharToM-QA: items found and answers scored by the pipeline's own functions."""

    def score_all(self, benchmark: str, lines: list[_Line]) -> list[_Scored]:
        index = chartom_qa.ItemIndex.load(
            keys={line.ref[1] for line in lines if line.ref[0] == "key"},
            books={line.ref[1] for line in lines if line.ref[0] == "text"},
        )
        scored = []
        for line in lines:
            try:
                scored.append(self._score(line, index.find(line.ref)))
            except chartom_qa.AnswerError as exc:
                self.fail(line, str(exc), exc.field)
        return scored

    def _score(self, line: _Line, item: dict[str, Any]) -> _Scored:
        values = line.values
        if line.method == GENERATIVE:
            details = chartom_qa.generative_details(
                item,
                response=values["raw_output"],
                included=values.get("bonus_points_included"),
                defects=values.get("defects"),
                bonus_reply=values["bonus_reply"],
                defects_reply=values["defects_reply"],
                context=line.context,
            )
            return _Scored(line, item["id"], "", Prediction.ParseStatus.OK, None, details)
        pick = chartom_qa.multichoice_score(
            item, choices=values["choices"], answer=values["answer"], context=line.context
        )
        return _Scored(
            line, item["id"], pick.parsed_answer, pick.status, pick.correct, pick.details
        )


class _GenericScorer(_Scorer):
    """Mapped items by item set and item id; answers read as our generic pipeline reads
    a reply (a letter of the item's own order, or an option's text)."""

    def score_all(self, benchmark: str, lines: list[_Line]) -> list[_Scored]:
        rows = MCItem.objects.filter(
            work__benchmark=Benchmark.GENERIC,
            work__key__in={line.ref[0] for line in lines},
        ).values("id", "work__key", "item_id", "texts", "answers")
        items = {(row["work__key"], row["item_id"]): row for row in rows}
        works = {work for work, _ in items}
        scored = []
        for line in lines:
            work, item_id = line.ref
            if work not in works:
                self.fail(line, f"no {Benchmark.GENERIC.label} item set {work!r}", "work")
            row = items.get(line.ref)
            if row is None:
                self.fail(line, f"item set {work!r} has no item {item_id!r}", "item")
            language = line.values["language"] or next(iter(row["texts"]), "")
            if language not in row["texts"]:
                self.fail(
                    line,
                    f"item {item_id!r} has no {language!r} text (it has {', '.join(row['texts'])})",
                    "language",
                )
            answer = line.values["answer"]
            if answer is None:
                scored.append(self.missing(line, row["id"], {}))
                continue
            if answer is _ABSENT:
                answer = line.values["raw_output"]
                if not answer:
                    self.fail(line, "missing (or give the reply in raw_output)", "answer")
            item = {
                "id": row["id"],
                "options": row["texts"][language].get("options") or [],
                "order": None,
                "answers": row["answers"],
            }
            parsed = score_mc_reply(item, answer)
            scored.append(
                _Scored(
                    line,
                    row["id"],
                    parsed.parsed_answer,
                    parsed.parse_status,
                    parsed.correct,
                    parsed.details or {},
                )
            )
        return scored


_SCORERS: dict[str, Callable[[Path], _Scorer]] = {
    Benchmark.DYNTOM: _DynToMScorer,
    Benchmark.TOM_IN_AMC: _SpeakerScorer,
    Benchmark.TVSHOWGUESS: _SpeakerScorer,
    Benchmark.CHARTOM_QA: _CharToMScorer,
    Benchmark.GENERIC: _GenericScorer,
}


def _check_duplicates(path: Path, scored: list[_Scored]) -> None:
    seen: dict[tuple, int] = {}
    for s in scored:
        key = (
            s.line.benchmark,
            s.line.method,
            s.line.model,
            s.line.context,
            s.item_id,
            s.line.sample_index,
        )
        if key in seen:
            raise ImportDataError(
                f"same item and sample_index as line {seen[key]}",
                path=path,
                record=f"line {s.line.number}",
                field="sample_index",
            )
        seen[key] = s.line.number


# --- writing -------------------------------------------------------------------------

_ITEM_FIELD = {
    Benchmark.DYNTOM: "dyntom_question_id",
    Benchmark.TOM_IN_AMC: "speaker_instance_id",
    Benchmark.TVSHOWGUESS: "speaker_instance_id",
    Benchmark.CHARTOM_QA: "qa_item_id",
    Benchmark.GENERIC: "mc_item_id",
}
_VALUE_FIELDS = (
    "raw_output",
    "parsed_answer",
    "parse_status",
    "correct",
    "details",
    "template_version",
    "model",
    "params",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
)


def _comparable(value: Any) -> Any:
    # jsonb hands dicts back with its own key order; compare canonical dumps.
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


def _write(
    path: Path,
    name: str,
    scored: list[_Scored],
    report: ImportReport,
    provenance: dict[str, Any],
) -> list[RunSummary]:
    """Upsert the runs by (name, benchmark, method, model), then their predictions.

    CharToM-QA lines with a context length go to one run per task and context: the
    same item under two plot windows is two predictions, and predictions are unique
    per run, item and sample.
    """
    now = timezone.now()
    groups: dict[tuple[str, str, str, int | None], list[_Scored]] = defaultdict(list)
    for s in scored:
        groups[(s.line.benchmark, s.line.method, s.line.model, s.line.context)].append(s)
    summaries = []
    for (benchmark, method, model, context), group in groups.items():
        run_name = imported_run_name(name, benchmark, method, context)
        if origin_id := provenance.get("origin_id"):
            same = Run.objects.filter(selection__origin_id=origin_id)
        else:
            same = Run.objects.filter(name=run_name)
        run = (
            same.filter(imported=True, benchmark=benchmark, method=method, model=model)
            .order_by("pk")
            .first()
        )
        created = run is None
        if created:
            run = Run.objects.create(
                name=run_name,
                benchmark=benchmark,
                method=method,
                model=model,
                imported=True,
                status=Run.Status.SUCCEEDED,
                selection={"source": path.name, **provenance},
                params={} if context is None else {"context": context},
                started_at=now,
                finished_at=now,
            )
            report.created["Run"] += 1
        else:
            report.unchanged["Run"] += 1
        summary = RunSummary(run=run, created=created)
        _upsert_predictions(run, benchmark, group, summary)
        # Judged like a run of ours: a file of answers none of which could be read
        # imports as a failed run, not a successful one. Its token totals are its
        # predictions' (a harness log gives each sample's usage), as our runs' are their
        # calls'.
        status, error = run_outcome(run_id=run.pk)
        tokens = Prediction.objects.filter(run=run).aggregate(
            prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens")
        )
        now_values = (status, error, tokens["prompt"] or 0, tokens["completion"] or 0)
        if (run.status, run.error, run.prompt_tokens, run.completion_tokens) != now_values:
            run.status, run.error, run.prompt_tokens, run.completion_tokens = now_values
            run.save(update_fields=["status", "error", "prompt_tokens", "completion_tokens"])
        for label in ("created", "unchanged", "updated"):
            getattr(report, label)["Prediction"] += summary.predictions[label]
        summaries.append(summary)
    return summaries


def _upsert_predictions(
    run: Run, benchmark: str, group: list[_Scored], summary: RunSummary
) -> None:
    item_field = _ITEM_FIELD[benchmark]
    existing = {
        (row[item_field], row["sample_index"]): row
        for row in Prediction.objects.filter(run=run).values(
            "pk", item_field, "sample_index", *_VALUE_FIELDS
        )
    }
    to_create, to_update = [], []
    for s in group:
        values = s.line.values
        row = {
            "raw_output": values["raw_output"] or "",
            "parsed_answer": s.parsed_answer,
            "parse_status": s.parse_status,
            "correct": s.correct,
            "details": s.details,
            "template_version": values["template_version"],
            "model": s.line.model,
            "params": values["params"],
            "prompt_tokens": values["prompt_tokens"],
            "completion_tokens": values["completion_tokens"],
            "latency_ms": values["latency_ms"],
        }
        if values["extra"]:
            # Fields we have no column for stay with the prediction, as the item bank
            # keeps unknown source fields in ``extra``.
            row["details"] = {**s.details, "extra": values["extra"]}
        summary.by_status[s.parse_status] += 1
        if s.correct is not None:
            summary.scored += 1
            summary.correct += s.correct
        if s.details.get("task") == GENERATIVE:
            score = chartom_qa.response_score(s.details)
            summary.judged += 1
            summary.bonus_included += score.covered or 0
            summary.bonus_total += score.total if score.covered is not None else 0
            summary.with_defects += bool(score.penalised)
            summary.judge_unparseable += chartom_qa.UNPARSEABLE in (
                score.bonus_status,
                score.defects_status,
            )
        current = existing.get((s.item_id, s.line.sample_index))
        keys = {item_field: s.item_id, "sample_index": s.line.sample_index}
        if current is None:
            to_create.append(Prediction(run=run, **keys, **row))
        elif any(_comparable(current[f]) != _comparable(row[f]) for f in _VALUE_FIELDS):
            to_update.append(Prediction(pk=current["pk"], run=run, **keys, **row))
        else:
            summary.predictions["unchanged"] += 1
    Prediction.objects.bulk_create(to_create, batch_size=1000)
    if to_update:
        Prediction.objects.bulk_update(to_update, list(_VALUE_FIELDS), batch_size=1000)
    summary.predictions["created"] += len(to_create)
    summary.predictions["updated"] += len(to_update)
