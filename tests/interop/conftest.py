"""Fixtures for harness interop: items to export, and Inspect run on the exports offline.

Inspect runs the exported task itself (``task.py`` from the zip ToMLab builds) against
its ``mockllm`` provider, whose replies are scripted here per sample: right letters,
wrong ones, a reply without a letter and an empty one. No network: every scripted
reply carries its token usage, else mockllm counts the prompt's tokens with tiktoken,
which downloads its encoding.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import transaction

from tests.module_rows import build_dyntom_stages

# A few ToMBench task files (20 items each), imported as the item set "tombench@1".
INSPECT_TOMBENCH_FILES = ("Completion of Failed Actions.jsonl", "Discrepant Desires.jsonl")
INSPECT_TOMBENCH_WORK = "tombench@1"
# Two DynToM stages of the test split, exported as a subset.
INSPECT_DYNTOM_WORKS = ("trial50", "trial69")
MOCK_MODEL = "mockllm/model"
# What the scripted model does, in turn over samples and epochs.
INSPECT_BEHAVIOURS = ("right", "wrong", "right", "no letter", "empty")


def inspect_tombench_import(folder: Path) -> None:
    call_command(
        "import_benchmark",
        "--format",
        "generic",
        "--mapping",
        "ToMBench",
        "--name",
        "ToMBench",
        "--version",
        "1",
        str(folder),
        "--no-progress",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )


@pytest.fixture(scope="session")
def inspect_tombench_folder(shared_data: Path, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tombench")
    for name in INSPECT_TOMBENCH_FILES:
        shutil.copy(shared_data / "tombench" / name, folder / name)
    return folder


@pytest.fixture
def inspect_tombench(db, inspect_tombench_folder: Path) -> str:
    """The ToMBench item set the logs were made from, imported; its key."""
    inspect_tombench_import(inspect_tombench_folder)
    return INSPECT_TOMBENCH_WORK


@pytest.fixture
def inspect_dyntom_stages(db, shared_data: Path, module_rows):
    """The 24 real DynToM stages (the module's shared rows where it shares them)."""
    from benchmarks.models import DynToMStage

    if not module_rows.shares("dyntom_stages"):
        build_dyntom_stages(shared_data)
    return DynToMStage.objects.select_related("work").order_by("work__key")


# --- running Inspect --------------------------------------------------------------------


def inspect_unzip(bundle, folder: Path) -> Path:
    """The export's zip unpacked under ``folder``; the task's folder."""
    with zipfile.ZipFile(io.BytesIO(bundle.zip_bytes())) as archive:
        archive.extractall(folder)
    return folder / bundle.name


def inspect_scripted_model(dataset: list[dict[str, Any]], model: str = MOCK_MODEL):
    """A mockllm model that answers each sample of ``dataset`` (the exported rows) by
    ``INSPECT_BEHAVIOURS``, a different behaviour in each epoch.

    The sample is found by its input inside the prompt, so the script holds however
    Inspect orders or interleaves the samples.
    """
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    calls: Counter = Counter()
    position = {row["id"]: i for i, row in enumerate(dataset)}

    def reply(messages, tools, tool_choice, config) -> ModelOutput:
        prompt = messages[-1].text
        candidates = [row for row in dataset if _input_text(row) in prompt]
        # The longest input that fits is the sample; of equal ones, the least asked.
        row = max(candidates, key=lambda r: (len(_input_text(r)), -calls[r["id"]]))
        epoch = calls[row["id"]]
        calls[row["id"]] += 1
        behaviour = INSPECT_BEHAVIOURS[(position[row["id"]] + epoch) % len(INSPECT_BEHAVIOURS)]
        output = ModelOutput.from_content(model=model, content=_content(row, behaviour))
        output.usage = ModelUsage(input_tokens=len(prompt), output_tokens=7, total_tokens=0)
        return output

    return get_model(model, custom_outputs=reply)


def _input_text(row: dict[str, Any]) -> str:
    value = row["input"]
    return value if isinstance(value, str) else value[-1]["content"]


def _content(row: dict[str, Any], behaviour: str) -> str:
    targets = row["target"] if isinstance(row["target"], list) else [row["target"]]
    letters = "ABCDEFGHIJ"[: len(row.get("choices") or "ABCD")]
    if behaviour == "right":
        return f"ANSWER: {', '.join(targets)}"
    if behaviour == "wrong":
        return f"ANSWER: {next(x for x in letters if x not in targets)}"
    if behaviour == "no letter":
        return "I cannot tell from the story."
    return ""


def inspect_run(
    task: Any, model: Any, log_dir: Path, *, status: str = "success", **options: Any
) -> Path:
    """Run ``task`` (an exported task file, or a Task) offline; the log's path."""
    from inspect_ai import eval as inspect_eval

    if isinstance(task, Path):
        # "file@task": Inspect reads a bare task path as a glob under the working
        # directory, which an absolute path cannot be.
        task = f"{task}@{task.parent.name}"
    (log,) = inspect_eval(
        task,
        model=model,
        log_dir=str(log_dir),
        display="none",
        # No live sample buffer for a viewer: half the time of a small eval.
        log_realtime=False,
        **options,
    )
    assert log.status == status, log.error
    return Path(log.location)


@dataclass
class InspectLogs:
    """Logs Inspect wrote for a module: real exports, and the bad ones."""

    folder: Path
    tombench: Path  # the ToMBench export, two epochs, .eval
    tombench_other_model: Path  # the same task, another model, one epoch
    dyntom: Path  # a DynToM subset, .json
    plain: Path  # ToMBench as our plain prompt (generate + pattern), no choice scorer
    other_task: Path  # a task of someone else's: integer ids
    nope: Path  # ToMBench with one sample id that names no item here
    no_samples: Path  # written with log_samples=False
    errored: Path  # an eval that stopped on a model error (status "error")

    def copy(self, name: str, folder: Path) -> Path:
        """A copy of a log under ``folder`` (a test may cut or rename it)."""
        path = getattr(self, name)
        return Path(shutil.copy(path, folder / path.name))


def _tombench_exports(folder: Path, harness: str) -> tuple[Path, list[dict[str, Any]]]:
    from interop.export import ExportRequest, build_export

    bundle = build_export(
        ExportRequest(source="item_set", work=INSPECT_TOMBENCH_WORK, language="en", harness=harness)
    )
    task_dir = inspect_unzip(bundle, folder / harness)
    return task_dir, _rows(task_dir)


def _rows(task_dir: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in (task_dir / "dataset.jsonl").read_text().splitlines()]


def _write_rows(task_dir: Path, rows: list[dict[str, Any]]) -> None:
    import json

    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    (task_dir / "dataset.jsonl").write_text(text)


def _exports(folder: Path, shared_data: Path, tombench_folder: Path, module_rows) -> dict:
    """The tasks, exported from rows made for the purpose and rolled back again."""
    from interop.export import ExportRequest, build_export

    with transaction.atomic():
        inspect_tombench_import(tombench_folder)
        if not module_rows.shares("dyntom_stages"):
            build_dyntom_stages(shared_data)
        exports = {
            harness: _tombench_exports(folder, harness) for harness in ("inspect", "inspect-plain")
        }
        bundle = build_export(ExportRequest(source="dyntom", works=INSPECT_DYNTOM_WORKS))
        dyntom_dir = inspect_unzip(bundle, folder / "dyntom")
        exports["dyntom"] = (dyntom_dir, _rows(dyntom_dir))
        transaction.set_rollback(True)
    return exports


@pytest.fixture(scope="module")
def inspect_logs(
    request, tmp_path_factory, shared_data: Path, inspect_tombench_folder: Path
) -> InspectLogs:
    """Inspect run once per module over ToMLab's exports (about 5 s: seven small evals)."""
    from inspect_ai import Task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    folder = tmp_path_factory.mktemp("inspect")
    logs = folder / "logs"
    request.getfixturevalue("django_db_setup")
    module_rows = request.getfixturevalue("_module_rows")
    with request.getfixturevalue("django_db_blocker").unblock():
        exports = _exports(folder, shared_data, inspect_tombench_folder, module_rows)

    tombench_dir, tombench_rows = exports["inspect"]
    plain_dir, plain_rows = exports["inspect-plain"]
    dyntom_dir, dyntom_rows = exports["dyntom"]
    tombench = inspect_run(
        tombench_dir / "task.py", inspect_scripted_model(tombench_rows), logs / "a", epochs=2
    )
    other_model = inspect_run(
        tombench_dir / "task.py",
        inspect_scripted_model(tombench_rows, "mockllm/other"),
        logs / "b",
        limit=6,
    )
    dyntom = inspect_run(
        dyntom_dir / "task.py", inspect_scripted_model(dyntom_rows), logs / "c", log_format="json"
    )
    plain = inspect_run(plain_dir / "task.py", _plain_model(plain_rows), logs / "d", limit=5)
    other_task = Task(
        dataset=MemoryDataset(
            [
                Sample(id=n, input=f"Question {n}?", choices=["yes", "no"], target="A")
                for n in (1, 2, 3)
            ]
        ),
        solver=multiple_choice(),
        scorer=choice(),
    )
    other = inspect_run(
        other_task, inspect_scripted_model([_row(s) for s in other_task.dataset]), logs / "e"
    )
    # The model fails on the third sample: Inspect stops the eval and logs what it has.
    errored = inspect_run(
        tombench_dir / "task.py",
        _failing_model(tombench_rows[2]),
        logs / "h",
        status="error",
        max_samples=1,
        limit=4,
    )
    # One sample id edited to name an item this server does not have.
    nope_rows = [dict(row) for row in tombench_rows[:3]]
    nope_rows[1]["id"] = f"generic:{INSPECT_TOMBENCH_WORK}:nope"
    _write_rows(tombench_dir, nope_rows)
    nope = inspect_run(tombench_dir / "task.py", inspect_scripted_model(nope_rows), logs / "f")
    no_samples = inspect_run(
        tombench_dir / "task.py",
        inspect_scripted_model(nope_rows),
        logs / "g",
        log_samples=False,
    )
    return InspectLogs(
        folder=folder,
        tombench=tombench,
        tombench_other_model=other_model,
        dyntom=dyntom,
        plain=plain,
        other_task=other,
        nope=nope,
        no_samples=no_samples,
        errored=errored,
    )


def _failing_model(failing: dict[str, Any]):
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    def reply(messages, tools, tool_choice, config) -> ModelOutput:
        if _input_text(failing) in messages[-1].text:
            raise RuntimeError("the model's server went away")
        output = ModelOutput.from_content(model=MOCK_MODEL, content="ANSWER: A")
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    return get_model(MOCK_MODEL, custom_outputs=reply)


def _row(sample) -> dict[str, Any]:
    return {
        "id": sample.id,
        "input": sample.input,
        "choices": sample.choices,
        "target": sample.target,
    }


def _plain_model(dataset: list[dict[str, Any]]):
    """Replies to our plain prompt as models write them: a final "Answer: X" line."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    position = {row["id"]: i for i, row in enumerate(dataset)}

    def reply(messages, tools, tool_choice, config) -> ModelOutput:
        prompt = "\n".join(m.text for m in messages)
        row = max(
            (r for r in dataset if _input_text(r) in prompt), key=lambda r: len(_input_text(r))
        )
        target = row["target"] if isinstance(row["target"], str) else row["target"][0]
        wrong = "A" if target != "A" else "B"
        text = f"Let me think.\nAnswer: {wrong if position[row['id']] % 2 else target}"
        output = ModelOutput.from_content(model=MOCK_MODEL, content=text)
        output.usage = ModelUsage(input_tokens=len(prompt), output_tokens=5, total_tokens=0)
        return output

    return get_model(MOCK_MODEL, custom_outputs=reply)
