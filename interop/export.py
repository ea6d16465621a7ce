"""Items as a task an eval harness runs: Inspect (multiple choice or our plain prompt) or
lm-evaluation-harness (multiple choice, scored by log-likelihood).

What is exported:
- a mapped benchmark (one item set), optionally only the items whose categories take
  given values, in one of its languages; the selection is checked by the generic
  pipeline's own :meth:`clean_selection`, so an export and a run name the same items;
- a DynToM subset (stage keys, a split, a limit), one sample per question: the stage's
  characters and story, then the question;
- a study's items (a mapped-benchmark study in its language, or a DynToM study's stages).

Every sample's id is our item key (:mod:`.keys`), so whatever the harness writes comes
back to the same items. The zip holds the dataset as JSON Lines, a small task file and a
README with the commands to run it and to import the result.

- ``inspect``: ``input`` (context and question), ``choices`` (the options, in the
  item's order), ``target`` (the gold letter or letters) and ``metadata`` (our key,
  benchmark, work, item, language, categories); ``task.py`` uses Inspect's
  ``multiple_choice()`` solver and ``choice()`` scorer.
- ``inspect-plain``: the exact prompt our engine sends for the item (the active
  version of the generic template for the language and method) as chat messages, the
  gold letter as target, ``generate()`` and a ``pattern()`` scorer. On import ToMLab
  reads each completion with the engine's own reply parser, as it reads its own runs.
- ``lm-eval``: a task YAML (``output_type: multiple_choice``, lettered options in the
  prompt, the letters as choices) and ``dataset.jsonl`` with our key in ``id``.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from dataclasses import dataclass, field
from typing import Any

from benchmarks.models import Benchmark, DynToMQuestion, MCItem, Work
from modeling.pipelines.dyntom import DynToMPipeline, option_text, render_story
from modeling.pipelines.generic import GenericPipeline
from modeling.pipelines.generic.answers import option_letter

from .keys import ItemKeyError, item_key

INSPECT, INSPECT_PLAIN, LM_EVAL = "inspect", "inspect-plain", "lm-eval"
HARNESSES = (INSPECT, INSPECT_PLAIN, LM_EVAL)
HARNESS_LABELS = {
    INSPECT: "Inspect task (multiple choice)",
    INSPECT_PLAIN: "Inspect task (our prompt, plain generation)",
    LM_EVAL: "lm-evaluation-harness task (multiple choice)",
}
ITEM_SET, DYNTOM, STUDY = "item_set", "dyntom", "study"
SOURCES = (ITEM_SET, DYNTOM, STUDY)
DATASET = "dataset.jsonl"
# Bumped when the exported task's shape changes; written into the task and its README.
EXPORT_VERSION = 1
_SLUG_RE = re.compile(r"[^a-z0-9]+")


class ExportError(ValueError):
    """A selection that exports nothing, or cannot be exported; the message names the
    field at fault (``field``)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class ExportRequest:
    source: str = ITEM_SET
    harness: str = INSPECT
    # ITEM_SET: the item set's key; DYNTOM: stage keys and/or a split.
    work: str = ""
    works: tuple[str, ...] = ()
    split: str = ""
    study_id: int | None = None
    language: str = ""
    categories: dict[str, list[str]] = field(default_factory=dict)
    limit: int | None = None
    # INSPECT_PLAIN: the template method (vanilla or cot).
    method: str = "vanilla"


@dataclass
class HarnessSample:
    id: str
    input: str | list[dict[str, str]]
    choices: list[str] | None
    target: list[str]
    metadata: dict[str, Any]


@dataclass
class ExportBundle:
    name: str  # the task's name, a Python identifier: tomlab_tombench_1_0
    title: str
    harness: str
    samples: list[HarnessSample]
    files: dict[str, str]

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.harness}.zip"

    def zip_bytes(self) -> bytes:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in sorted(self.files):
                # A fixed date: the same items export to the same bytes.
                info = zipfile.ZipInfo(f"{self.name}/{name}", date_time=(2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, self.files[name])
        return buffer.getvalue()


def task_name(label: str) -> str:
    slug = _SLUG_RE.sub("_", label.lower()).strip("_") or "items"
    return f"tomlab_{slug}"[:60].rstrip("_")


# --- samples -------------------------------------------------------------------------


def export_samples(request: ExportRequest) -> tuple[str, list[HarnessSample]]:
    """The label of what was chosen and its samples, in the item bank's order."""
    if request.harness not in HARNESSES:
        raise ExportError("harness", f"expected one of {', '.join(HARNESSES)}")
    if request.source == ITEM_SET:
        return _item_set_samples(request)
    if request.source == DYNTOM:
        return _dyntom_samples(request)
    if request.source == STUDY:
        return _study_samples(request)
    raise ExportError("source", f"expected one of {', '.join(SOURCES)}")


def _item_set_samples(request: ExportRequest) -> tuple[str, list[HarnessSample]]:
    pipeline = GenericPipeline()
    selection: dict[str, Any] = {"works": [request.work] if request.work else []}
    if request.language:
        selection["language"] = request.language
    if request.categories:
        selection["categories"] = request.categories
    if request.limit:
        selection["limit"] = request.limit
    try:
        clean = pipeline.clean_selection(selection=selection)
    except ValueError as exc:
        field_name, _, message = str(exc).partition(": ")
        raise ExportError(field_name if message else "work", message or str(exc)) from None
    work = Work.objects.get(benchmark=Benchmark.GENERIC, key=clean["works"][0])
    items = _generic_items(work, clean)
    samples = _generic_samples(work, items, clean["language"], request)
    label = work.key
    if clean.get("categories"):
        label += " " + " ".join(v for values in clean["categories"].values() for v in values)
    return label, samples


def _generic_items(work: Work, clean: dict[str, Any]) -> list[MCItem]:
    wanted = clean.get("categories") or {}
    language = clean["language"]
    items = [
        item
        for item in MCItem.objects.filter(work=work).order_by("position", "pk")
        if language in item.texts
        and all(str(item.categories.get(f, "")) in values for f, values in wanted.items())
    ]
    if limit := clean.get("limit"):
        items = items[: int(limit)]
    return items


def _generic_samples(
    work: Work, items: list[MCItem], language: str, request: ExportRequest
) -> list[HarnessSample]:
    prompts: dict[int, list[dict[str, str]]] = {}
    template_label = ""
    if request.harness == INSPECT_PLAIN:
        from modeling.runs.prompt_templates import active_template

        pipeline = GenericPipeline()
        if request.method not in pipeline.methods:
            raise ExportError("method", f"expected one of {', '.join(pipeline.methods)}")
        name = pipeline.template_name(method=request.method, selection={"language": language})
        template = active_template(name)
        template_label = f"{template.name} v{template.version}"
        selection = {"works": [work.key], "language": language}
        by_id = {item.pk for item in items}
        for unit in pipeline.build_units(selection=selection, template=template):
            if unit.item_ids[0] in by_id:
                prompts[unit.item_ids[0]] = unit.messages
    samples = []
    for item in items:
        text = item.text(language)
        options = list(text.get("options") or [])
        context, question = text.get("context") or "", text.get("question") or ""
        metadata = {
            "tomlab_key": _key(Benchmark.GENERIC, work.key, item.item_id),
            "benchmark": Benchmark.GENERIC,
            "work": work.key,
            "item": item.item_id,
            "language": language,
            "categories": dict(sorted(item.categories.items())),
        }
        if template_label:
            metadata["template"] = template_label
        samples.append(
            HarnessSample(
                id=metadata["tomlab_key"],
                input=prompts.get(item.pk) or (f"{context}\n\n{question}" if context else question),
                choices=None if request.harness == INSPECT_PLAIN else options,
                target=[option_letter(i) for i in item.answers],
                metadata=metadata,
            )
        )
    return samples


def _dyntom_samples(request: ExportRequest) -> tuple[str, list[HarnessSample]]:
    if request.harness == INSPECT_PLAIN:
        raise ExportError(
            "harness",
            "DynToM's prompt asks a whole stage's questions at once; export it as a "
            "multiple-choice task (one sample per question)",
        )
    selection: dict[str, Any] = {}
    if request.works:
        selection["works"] = list(request.works)
    if request.split:
        selection["split"] = request.split
    if request.limit:
        selection["limit"] = request.limit
    works = list(DynToMPipeline().works(selection))
    if request.works and (missing := sorted(set(request.works) - {w.key for w in works})):
        raise ExportError("works", f"no DynToM stage {', '.join(map(repr, missing))}")
    if not works:
        raise ExportError("works", "no DynToM stage matches this selection")
    label = "dyntom " + (request.split or (works[0].key if len(works) == 1 else "subset"))
    return label, _stage_samples(works, request)


def _stage_samples(works: list[Work], request: ExportRequest) -> list[HarnessSample]:
    samples = []
    for work in works:
        stage = work.stage
        story = render_story(list(stage.scenarios.all()))
        preamble = f"Characters:\n{stage.characters_information}\n\nStory:\n{story}\n\n"
        for question in stage.questions.all():
            samples.append(_dyntom_sample(work, question, preamble))
    if not samples:
        raise ExportError("works", "the chosen DynToM stages have no questions")
    return samples


def _dyntom_sample(work: Work, question: DynToMQuestion, preamble: str) -> HarnessSample:
    key = _key(Benchmark.DYNTOM, work.key, question.key)
    return HarnessSample(
        id=key,
        input=f"{preamble}Question: {question.text}",
        choices=[option_text(o) for o in question.options],
        target=[question.gold_letter.strip().upper()],
        metadata={
            "tomlab_key": key,
            "benchmark": Benchmark.DYNTOM,
            "work": work.key,
            "item": question.key,
            "language": "en",
            "categories": {
                "question_type": question.question_type,
                "mental_state": question.mental_state,
            },
        },
    )


def _study_samples(request: ExportRequest) -> tuple[str, list[HarnessSample]]:
    from studies.models import Study, StudyItem

    study = Study.objects.filter(pk=request.study_id).first()
    if study is None:
        raise ExportError("study", f"no study {request.study_id!r}")
    rows = (
        StudyItem.objects.filter(study=study)
        .exclude(role=StudyItem.Role.PRACTICE)
        .order_by("position", "pk")
    )
    if study.benchmark == Benchmark.GENERIC:
        items = [
            row.mc_item
            for row in rows.select_related("mc_item__work")
            if row.mc_item_id is not None
        ]
        if not items:
            raise ExportError("study", f"{study.name!r} has no items yet")
        work = items[0].work
        language = request.language or (study.sampling or {}).get("language") or ""
        if not language:
            language = next(iter(items[0].texts), "")
        if request.harness == INSPECT_PLAIN and len({i.work_id for i in items}) > 1:
            raise ExportError("study", "a plain-prompt export takes one item set")
        samples: list[HarnessSample] = []
        for item in items:
            if language not in item.texts:
                continue
            samples.extend(_generic_samples(item.work, [item], language, request))
        if not samples:
            raise ExportError("language", f"no item of {study.name!r} has a {language} text")
        return f"study {study.name} {work.key}", samples
    if study.benchmark == Benchmark.DYNTOM:
        if request.harness == INSPECT_PLAIN:
            return _dyntom_samples(request)  # raises the stage-prompt error
        keys = sorted(
            {row.stage.work.key for row in rows.select_related("stage__work") if row.stage_id}
        )
        if not keys:
            raise ExportError("study", f"{study.name!r} has no stages yet")
        works = list(DynToMPipeline().works({"works": keys}))
        return f"study {study.name}", _stage_samples(works, request)
    raise ExportError(
        "study",
        f"{study.name!r} is a {study.benchmark} study; mapped-benchmark and DynToM items "
        "export as harness tasks",
    )


def _key(benchmark: str, work: str, item: str) -> str:
    try:
        return item_key(benchmark, work, item)
    except ItemKeyError as exc:
        raise ExportError("work", str(exc)) from None


# --- files ---------------------------------------------------------------------------


def build_export(request: ExportRequest) -> ExportBundle:
    label, samples = export_samples(request)
    if not samples:
        raise ExportError("works", "nothing to export")
    name = task_name(label)
    if request.harness == LM_EVAL:
        files = _lm_eval_files(name, label, samples)
    else:
        files = _inspect_files(name, label, samples, plain=request.harness == INSPECT_PLAIN)
    return ExportBundle(
        name=name, title=label, harness=request.harness, samples=samples, files=files
    )


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)


def _inspect_files(
    name: str, label: str, samples: list[HarnessSample], *, plain: bool
) -> dict[str, str]:
    rows = []
    for sample in samples:
        row: dict[str, Any] = {
            "id": sample.id,
            "input": sample.input,
            "target": sample.target[0] if len(sample.target) == 1 else sample.target,
            "metadata": sample.metadata,
        }
        if not plain:
            row["choices"] = sample.choices
        rows.append(row)
    task = (_INSPECT_PLAIN_TASK if plain else _INSPECT_TASK).format(
        name=name, label=label, version=EXPORT_VERSION, dataset=DATASET
    )
    readme = _INSPECT_README.format(
        name=name,
        label=label,
        count=len(samples),
        scoring=_PLAIN_SCORING if plain else _CHOICE_SCORING,
    )
    return {DATASET: _jsonl(rows), "task.py": task, "README.md": readme}


def _lm_eval_files(name: str, label: str, samples: list[HarnessSample]) -> dict[str, str]:
    # lm-eval decides from the first doc alone whether golds are lists (a doc is right
    # when its pick is any of them) or one index, and fails on a doc of the other kind
    # (lm_eval/api/task.py, ConfigurableTask: multiple_target): so every gold is a list
    # as soon as one item has several answers.
    several = any(len(sample.target) > 1 for sample in samples)
    rows = []
    for sample in samples:
        choices = sample.choices or []
        letters = [option_letter(i) for i in range(len(choices))]
        options = "\n".join(
            f"{letter}. {text}" for letter, text in zip(letters, choices, strict=True)
        )
        gold = [letters.index(t) for t in sample.target if t in letters]
        rows.append(
            {
                "id": sample.id,
                "query": f"{sample.input}\n\n{options}\nAnswer:",
                "choices": letters,
                "gold": gold if several else gold[0],
                "metadata": sample.metadata,
            }
        )
    yaml = _LM_EVAL_YAML.format(name=name, dataset=DATASET, version=EXPORT_VERSION)
    readme = _LM_EVAL_README.format(name=name, label=label, count=len(samples))
    return {DATASET: _jsonl(rows), f"{name}.yaml": yaml, "README.md": readme}


_INSPECT_TASK = '''"""{label}: exported from ToMLab (export version {version}).

Each sample's id is a ToMLab item key; import the log this task writes into ToMLab
(Data -> Import files -> Inspect log) to see the run beside the human answers.
"""

from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import json_dataset
from inspect_ai.scorer import choice
from inspect_ai.solver import multiple_choice


@task
def {name}() -> Task:
    return Task(
        dataset=json_dataset(str(Path(__file__).parent / "{dataset}")),
        solver=multiple_choice(),
        scorer=choice(),
        version={version},
    )
'''

_INSPECT_PLAIN_TASK = '''"""{label}: ToMLab export (version {version}) with ToMLab's own prompt.

Each sample's input is the prompt ToMLab's engine sends for the item. The pattern
scorer reads a final letter; ToMLab re-reads every completion with its own reply
parser on import, as it reads its own runs.
"""

from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import json_dataset
from inspect_ai.scorer import pattern
from inspect_ai.solver import generate


@task
def {name}() -> Task:
    return Task(
        dataset=json_dataset(str(Path(__file__).parent / "{dataset}")),
        solver=generate(),
        scorer=pattern(r"(?:answer|答案)?\\s*[:\uff1a]?\\s*\\(?([A-Z])\\)?\\s*[.\u3002]?\\s*$"),
        version={version},
    )
'''

_CHOICE_SCORING = (
    "Inspect's `multiple_choice()` solver asks for `ANSWER: X`; its `choice()` scorer "
    "marks a sample right when the chosen letters are the target's. ToMLab scores the "
    "letter Inspect read against the item bank's gold, so its accuracy is the log's."
)
_PLAIN_SCORING = (
    "The input is ToMLab's own prompt (the template named in each sample's metadata). "
    "ToMLab reads every completion with its engine's reply parser on import; Inspect's "
    "own pattern score is kept beside each prediction."
)

_INSPECT_README = """# {label}

{count} samples exported from ToMLab as an Inspect task. Every sample's `id` is a ToMLab
item key, so the log comes back to the same items.

Run it (any Inspect model; `--epochs` repeats each sample):

    pip install inspect_ai
    inspect eval task.py --model openai/gpt-4o-mini --log-dir logs

Then import the log (`logs/*.eval` or a `.json` log) into ToMLab: Data -> Import files ->
Inspect log, or

    python manage.py import_harness_log logs/<file>.eval

Logs must keep their samples (do not pass `--no-log-samples`).

{scoring}
"""

_LM_EVAL_YAML = """# Exported from ToMLab; each doc's id is a ToMLab item key.
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {dataset}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{query}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: gold
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: {version}.0
"""

_LM_EVAL_README = """# {label}

{count} docs exported from ToMLab as an lm-evaluation-harness task. Each doc's `id` is a
ToMLab item key.

Run it from this folder (the dataset path is relative to it), keeping the samples:

    lm_eval --model hf --model_args pretrained=<model> --include_path . \\
        --tasks {name} --log_samples --output_path results

Then import the `results/` folder (or the `samples_{name}_*.jsonl` file with the
`results_*.json` beside it) into ToMLab: Data -> Import files -> lm-eval samples, or

    python manage.py import_harness_log results/ --harness lm-eval

The run's model is the one lm-eval names from `--model_args` (`pretrained=` or
`model=`); pass `--model NAME` to the import to call it something else.
"""
