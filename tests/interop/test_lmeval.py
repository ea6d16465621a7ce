"""lm-evaluation-harness: ToMLab's export run by lm-eval's own CLI, its output imported.

The module runs lm-eval once (``lmeval_output``): its CLI, in one process, over the
exported Mini ToM items, the same items with one of two answers, a DynToM subset and
two tasks of someone else's (no item ids: a multiple-choice task over the option texts
and a generation task with two filters and two repeats). The model is lm-eval's
``dummy``: random log-likelihoods, seeded by lm-eval, and "lol" for every generation.
Offline: the datasets are local JSON files and the Hugging Face caches are temporary.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from filelock import FileLock

from benchmarks.importers.base import ImportDataError
from benchmarks.models import MCItem
from interop.lmeval_import import lmeval_import
from modeling.models import Prediction, Run
from tests.generic_items import make_generic_benchmark, mini_tom_records

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("dyntom_stages")]

LMEVAL_DYNTOM_WORKS = ("trial50", "trial69")
LMEVAL_MINI, LMEVAL_MULTI = "tomlab_mini_tom_1", "tomlab_mini_tom_2"
LMEVAL_DYNTOM = "tomlab_dyntom_subset"
LMEVAL_FOREIGN_MC, LMEVAL_FOREIGN_GEN = "foreign_mc", "foreign_gen"
# The Mini ToM item given a second answer in "mini-tom@2", and that answer.
LMEVAL_MULTI_ITEM, LMEVAL_MULTI_EXTRA = "mt-02", 0
LMEVAL_FOREIGN_MODEL = "tomlab/dummy"

# What lm-eval's CLI does (lm_eval/_cli/run.py): simple_evaluate, then its tracker writes
# results_<date>.json and samples_<task>_<date>.jsonl under <output>/<model name>/. Not
# the CLI itself: its task manager indexes lm-eval's thousands of built-in tasks first
# (seconds each run), which include_defaults=False skips. One run per task folder: an
# exported task's dataset path is relative to its folder, where its README runs it.
_DRIVER = """
import json, os, sys
from lm_eval import simple_evaluate
from lm_eval.loggers import EvaluationTracker
from lm_eval.tasks import TaskManager

for cwd, tasks, model_args, output in json.loads(sys.argv[1]):
    os.chdir(cwd)
    tracker = EvaluationTracker(output_path=output)
    results = simple_evaluate(
        model="dummy",
        model_args=model_args,
        tasks=tasks,
        log_samples=True,
        evaluation_tracker=tracker,
        task_manager=TaskManager(include_path=".", include_defaults=False),
    )
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
"""

_FOREIGN_MC_YAML = """task: foreign_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: foreign.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{story}}\\n\\n{{question}}\\nAnswer:"
doc_to_choice: "{{choices}}"
doc_to_target: label
metric_list:
  - metric: acc
  - metric: acc_norm
"""

_FOREIGN_GEN_YAML = """task: foreign_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: foreign.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{story}}\\n\\n{{question}}\\nAnswer with a letter:"
doc_to_target: answer
repeats: 2
generation_kwargs:
  until: ["\\n"]
metric_list:
  - metric: exact_match
filter_list:
  - name: strict
    filter:
      - function: regex
        regex_pattern: "\\\\b([A-D])\\\\b"
      - function: take_first
  - name: loose
    filter:
      - function: take_first
"""


@dataclass
class LmEvalOutput:
    """What lm-eval wrote, one ``--output_path`` folder per run of its CLI."""

    folder: Path

    def out(self, task: str) -> Path:
        return self.folder / "out" / task

    def samples_file(self, task: str) -> Path:
        (path,) = self.out(task).glob(f"*/samples_{task}_*.jsonl")
        return path

    def samples(self, task: str) -> list[dict[str, Any]]:
        text = self.samples_file(task).read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines()]

    def results(self, task: str) -> dict[str, Any]:
        (path,) = self.out(task).glob("*/results_*.json")
        return json.loads(path.read_text(encoding="utf-8"))


def _unzip(bundle, folder: Path) -> Path:
    with zipfile.ZipFile(io.BytesIO(bundle.zip_bytes())) as archive:
        archive.extractall(folder)
    return folder / bundle.name


def _export_tasks(folder: Path, shared_data: Path, module_rows) -> dict[str, Path]:
    """The exported tasks' folders, from rows made here and rolled back again (their
    item keys are what each test's own rows will have)."""
    from interop.export import ExportRequest, build_export
    from tests.module_rows import build_dyntom_stages

    with transaction.atomic():
        make_generic_benchmark()
        make_generic_benchmark(version="2")
        item = MCItem.objects.get(work__key="mini-tom@2", item_id=LMEVAL_MULTI_ITEM)
        item.answers = [*item.answers, LMEVAL_MULTI_EXTRA]
        item.save(update_fields=["answers"])
        if not module_rows.shares("dyntom_stages"):
            build_dyntom_stages(shared_data)
        bundles = [
            build_export(ExportRequest(work="mini-tom@1", harness="lm-eval")),
            build_export(ExportRequest(work="mini-tom@2", harness="lm-eval")),
            build_export(
                ExportRequest(source="dyntom", works=LMEVAL_DYNTOM_WORKS, harness="lm-eval")
            ),
        ]
        transaction.set_rollback(True)
    tasks = {}
    for bundle, task in zip(bundles, (LMEVAL_MINI, LMEVAL_MULTI, LMEVAL_DYNTOM), strict=True):
        assert bundle.name == task
        tasks[task] = _unzip(bundle, folder / "tasks")
    return tasks


def _foreign_task(folder: Path) -> Path:
    """Someone else's tasks over the Mini ToM items: no ids, the option texts as choices."""
    folder.mkdir(parents=True)
    rows = [
        {
            "story": record["story"],
            "question": record["question"],
            "choices": record["choices"],
            "label": "ABCD".index(record["answer"]),
            "answer": record["answer"],
        }
        for record in mini_tom_records()
    ]
    (folder / "foreign.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "foreign_mc.yaml").write_text(_FOREIGN_MC_YAML)
    (folder / "foreign_gen.yaml").write_text(_FOREIGN_GEN_YAML)
    return folder


def _run_lm_eval(folder: Path, jobs: list[tuple[Path, list[str], str, Path]]) -> None:
    env = {
        **os.environ,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(folder / "hf"),
        "HF_DATASETS_CACHE": str(folder / "hf" / "datasets"),
    }
    jobs_json = json.dumps([(str(cwd), tasks, args, str(out)) for cwd, tasks, args, out in jobs])
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, jobs_json],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.fixture(scope="module")
def lmeval_output(request, tmp_path_factory, shared_data: Path, worker_id: str) -> LmEvalOutput:
    """lm-eval run once for the session (about 10 s, most of it importing torch and
    transformers); xdist workers share the run (a file lock; the first one writes)."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent  # the session's folder, above each worker's own
    folder = shared / "lmeval"
    with FileLock(str(shared / "lmeval.lock")):
        if (folder / "done").exists():
            return LmEvalOutput(folder)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        request.getfixturevalue("django_db_setup")
        module_rows = request.getfixturevalue("_module_rows")
        with request.getfixturevalue("django_db_blocker").unblock():
            tasks = _export_tasks(folder, shared_data, module_rows)
        foreign = _foreign_task(folder / "tasks" / "foreign")
        out = folder / "out"
        jobs = [(task_dir, [task], "", out / task) for task, task_dir in tasks.items()]
        jobs += [
            (foreign, [task], f"pretrained={LMEVAL_FOREIGN_MODEL}", out / task)
            for task in (LMEVAL_FOREIGN_MC, LMEVAL_FOREIGN_GEN)
        ]
        _run_lm_eval(folder, jobs)
        (folder / "done").touch()
    return LmEvalOutput(folder)


@pytest.fixture
def lmeval_dyntom_stages(db, shared_data: Path, module_rows):
    """The 24 real DynToM stages (the module's shared rows where it shares them)."""
    from benchmarks.models import DynToMStage
    from tests.module_rows import build_dyntom_stages

    if not module_rows.shares("dyntom_stages"):
        build_dyntom_stages(shared_data)
    return DynToMStage.objects.select_related("work").order_by("work__key")


@pytest.fixture
def lmeval_mini(db) -> str:
    make_generic_benchmark()
    return "mini-tom@1"


def _by_doc(run: Run) -> dict[int, Prediction]:
    return {
        p.details["extra"]["doc_id"]: p
        for p in Prediction.objects.filter(run=run, sample_index=0).order_by("pk")
    }


def _assert_acc_is_lm_evals(output: LmEvalOutput, task: str, run: Run) -> None:
    """ToMLab's verdict is lm-eval's acc on every doc, so the accuracies are equal."""
    samples = output.samples(task)
    predictions = _by_doc(run)
    assert sorted(predictions) == sorted(s["doc_id"] for s in samples)
    for sample in samples:
        assert predictions[sample["doc_id"]].correct is bool(sample["acc"]), sample["doc_id"]
    correct = sum(p.correct for p in predictions.values())
    assert correct / len(predictions) == output.results(task)["results"][task]["acc,none"]


# --- the done-when: lm-eval's acc, exactly ---------------------------------------------------


def test_exported_mini_tom_run_by_lm_eval_imports_with_its_accuracy(lmeval_output, lmeval_mini):
    result = lmeval_import(paths=[lmeval_output.out(LMEVAL_MINI)])

    (summary,) = result.runs
    run = summary.run
    assert summary.created and result.unknown == []
    assert (run.name, run.model, run.method, run.benchmark) == (
        f"{LMEVAL_MINI} · dummy",
        "dummy",
        "lm-eval",
        "generic",
    )
    _assert_acc_is_lm_evals(lmeval_output, LMEVAL_MINI, run)
    picks = [p.parsed_answer for p in _by_doc(run).values()]
    # Random log-likelihoods: the test means something only if the picks differ.
    assert len(set(picks)) > 1 and summary.scored == 12
    results = lmeval_output.results(LMEVAL_MINI)
    selection = run.selection
    assert selection["origin"] == "lm-eval" and len(selection["origin_id"]) == 64
    assert selection["task"] == LMEVAL_MINI and selection["task_version"] == 1.0
    assert selection["lm_eval_version"] == results["lm_eval_version"]
    assert selection["num_fewshot"] == 0
    assert selection["lm_eval_results"]["acc,none"] == results["results"][LMEVAL_MINI]["acc,none"]
    # The pick is the highest log-likelihood (kept with lm-eval's own acc for the doc).
    sample = lmeval_output.samples(LMEVAL_MINI)[0]
    lls = [float(ll) for ll, _ in sample["filtered_resps"]]
    first = _by_doc(run)[0]
    assert first.parsed_answer == "ABCD"[lls.index(max(lls))] == first.raw_output
    assert first.details["extra"]["loglikelihoods"] == lls
    assert first.details["extra"]["metrics"] == {"none": {"acc": sample["acc"]}}
    assert result.report.warnings == []


def test_items_with_several_answers_export_as_lists_and_keep_lm_evals_accuracy(lmeval_output):
    work = make_generic_benchmark(version="2")
    item = MCItem.objects.get(work=work, item_id=LMEVAL_MULTI_ITEM)
    item.answers = [*item.answers, LMEVAL_MULTI_EXTRA]
    item.save(update_fields=["answers"])
    # lm-eval takes a doc as right when its pick is any gold of the list; so do we.
    samples = lmeval_output.samples(LMEVAL_MULTI)
    assert {s["target"] for s in samples} >= {"[0]", "[1, 0]"}

    result = lmeval_import(paths=[lmeval_output.out(LMEVAL_MULTI)], name="two answers")

    (summary,) = result.runs
    assert summary.run.name == "two answers"
    _assert_acc_is_lm_evals(lmeval_output, LMEVAL_MULTI, summary.run)


def test_dyntom_subset_run_by_lm_eval_imports_with_its_accuracy(
    lmeval_output, lmeval_dyntom_stages
):
    result = lmeval_import(paths=[lmeval_output.out(LMEVAL_DYNTOM)], model="llama-x")

    (summary,) = result.runs
    run = summary.run
    assert (run.benchmark, run.model, run.name) == (
        "dyntom",
        "llama-x",
        f"{LMEVAL_DYNTOM} · llama-x",
    )
    _assert_acc_is_lm_evals(lmeval_output, LMEVAL_DYNTOM, run)
    questions = {p.dyntom_question.stage.work.key for p in run.predictions.all()}
    assert questions == set(LMEVAL_DYNTOM_WORKS)
    assert len({p.parsed_answer for p in run.predictions.all()}) > 1


# --- tasks ToMLab did not export ----------------------------------------------------------


def _foreign_map() -> dict[str, str]:
    return {str(n): f"generic:mini-tom@1:{r['id']}" for n, r in enumerate(mini_tom_records())}


def test_item_map_brings_a_task_without_ids_to_the_items(lmeval_output, lmeval_mini):
    out = lmeval_output.out(LMEVAL_FOREIGN_MC)
    with pytest.raises(ImportDataError, match=r"no doc has a 'id' field: .*item_map"):
        lmeval_import(paths=[out])

    result = lmeval_import(paths=[out], item_map=json.dumps(_foreign_map()))

    (summary,) = result.runs
    # The model is the one lm-eval names from --model_args, not its random folder name.
    assert summary.run.model == LMEVAL_FOREIGN_MODEL
    assert summary.run.name == f"{LMEVAL_FOREIGN_MC} · {LMEVAL_FOREIGN_MODEL}"
    # The choices are the option texts in the items' order: the same verdict as lm-eval.
    _assert_acc_is_lm_evals(lmeval_output, LMEVAL_FOREIGN_MC, summary.run)
    first = _by_doc(summary.run)[0]
    assert first.raw_output in mini_tom_records()[0]["choices"]
    assert set(first.details["extra"]["metrics"]["none"]) == {"acc", "acc_norm"}


def test_an_item_map_in_another_order_is_warned_about(lmeval_output, lmeval_mini, tmp_path):
    """Choices listed in another order than the item's: ToMLab's verdicts differ."""
    path = lmeval_output.samples_file(LMEVAL_FOREIGN_MC)
    shuffled = Path(shutil.copytree(path.parent, tmp_path / "m"))
    sample_file = shuffled / path.name
    lines = [json.loads(line) for line in sample_file.read_text().splitlines()]
    for line in lines:
        line["filtered_resps"].reverse()
    sample_file.write_text("".join(json.dumps(line) + "\n" for line in lines))

    result = lmeval_import(paths=[shuffled], item_map=_foreign_map())

    (warning,) = result.report.warnings
    assert "lm-eval's acc differs from ToMLab's verdict" in warning


def test_generations_are_read_with_our_parser_one_prediction_per_repeat(
    lmeval_output, lmeval_mini, tmp_path
):
    out = lmeval_output.out(LMEVAL_FOREIGN_GEN)
    result = lmeval_import(paths=[out], item_map=_foreign_map(), name="gen")

    (summary,) = result.runs
    predictions = list(summary.run.predictions.order_by("mc_item__position", "sample_index"))
    # Two repeats of twelve docs, each doc once in the file per filter (strict, loose).
    assert len(predictions) == 24 and {p.sample_index for p in predictions} == {0, 1}
    assert {p.raw_output for p in predictions} == {"lol"}
    assert {p.parse_status for p in predictions} == {"unparseable"}
    extra = predictions[0].details["extra"]
    assert extra["metrics"] == {"strict": {"exact_match": 0.0}, "loose": {"exact_match": 0.0}}
    assert extra["filtered_resps"] == {"strict": ["[invalid]"], "loose": ["lol"]}

    # The same log with the generations a real model writes: read as our runs are read.
    folder = Path(
        shutil.copytree(lmeval_output.samples_file(LMEVAL_FOREIGN_GEN).parent, tmp_path / "m")
    )
    (sample_file,) = folder.glob("samples_*.jsonl")
    lines = [json.loads(line) for line in sample_file.read_text().splitlines()]
    for line in lines:
        line["resps"] = [[f"The answer is {line['target']}.", "I am not sure."]]
    sample_file.write_text("".join(json.dumps(line) + "\n" for line in lines))

    again = lmeval_import(paths=[folder], item_map=_foreign_map(), name="gen 2")

    run = again.runs[0].run
    assert run.pk != summary.run.pk  # another file: another run
    first = run.predictions.filter(sample_index=0)
    assert {(p.parsed_answer, p.correct) for p in first} == {
        (r["answer"], True) for r in mini_tom_records()
    }
    assert set(run.predictions.filter(sample_index=1).values_list("parse_status", flat=True)) == {
        "unparseable"
    }


# --- refusals, re-imports ---------------------------------------------------------------------


def test_unknown_docs_are_refused_or_kept_aside(lmeval_output, lmeval_mini):
    MCItem.objects.filter(work__key=lmeval_mini, item_id__in=["mt-03", "mt-07"]).delete()
    out = lmeval_output.out(LMEVAL_MINI)

    with pytest.raises(ImportDataError) as refused:
        lmeval_import(paths=[out])
    assert "2 doc(s) name no item of this server" in refused.value.message
    assert "'generic:mini-tom@1:mt-03', 'generic:mini-tom@1:mt-07'" in refused.value.message
    assert refused.value.path.endswith(".jsonl") and not Run.objects.exists()

    result = lmeval_import(paths=[out], keep_unknown=True)

    assert result.unknown == ["generic:mini-tom@1:mt-03", "generic:mini-tom@1:mt-07"]
    (summary,) = result.runs
    assert summary.run.selection["unknown_samples"] == result.unknown
    assert summary.run.predictions.count() == 10
    assert "2 sample(s) with ids that are no item here were set aside" in result.notes()[-1]


def test_an_item_map_entry_that_is_no_item_key_is_refused(lmeval_output, lmeval_mini):
    with pytest.raises(ImportDataError) as refused:
        lmeval_import(paths=[lmeval_output.out(LMEVAL_FOREIGN_MC)], item_map={"0": "mt-01"})
    assert refused.value.field == "item_map" and refused.value.record == "0"
    assert "'mt-01' is not an item key" in refused.value.message


def test_output_without_samples_names_the_flag(lmeval_output, tmp_path):
    (results,) = lmeval_output.out(LMEVAL_MINI).glob("*/results_*.json")
    shutil.copy(results, tmp_path / results.name)

    with pytest.raises(
        ImportDataError, match=r"no samples_\*\.jsonl: run lm_eval with --log_samples"
    ):
        lmeval_import(paths=[tmp_path])
    with pytest.raises(ImportDataError, match="no samples") as refused:
        lmeval_import(paths=[tmp_path / results.name])
    assert results.name in refused.value.path


def test_a_samples_file_given_alone_reads_the_results_beside_it(lmeval_output, lmeval_mini):
    (summary,) = lmeval_import(paths=[lmeval_output.samples_file(LMEVAL_MINI)]).runs

    assert summary.run.model == "dummy" and summary.run.selection["task_version"] == 1.0


def test_samples_without_results_need_the_model(lmeval_output, lmeval_mini, tmp_path):
    samples = Path(shutil.copy(lmeval_output.samples_file(LMEVAL_MINI), tmp_path))
    with pytest.raises(ImportDataError, match="no model") as refused:
        lmeval_import(paths=[samples])
    assert refused.value.field == "model"

    (summary,) = lmeval_import(paths=[samples], model="m1", name="bare").runs
    assert (summary.run.name, summary.run.model) == ("bare", "m1")
    assert summary.run.selection["task_version"] is None


def test_a_broken_line_is_located_and_imports_nothing(lmeval_output, lmeval_mini, tmp_path):
    folder = Path(shutil.copytree(lmeval_output.samples_file(LMEVAL_MINI).parent, tmp_path / "m"))
    (sample_file,) = folder.glob("samples_*.jsonl")
    lines = sample_file.read_text().splitlines()
    good = list(lines)
    nested = json.loads(lines[6])
    nested["doc"]["deep"] = json.loads("[" * 70 + "]" * 70)
    lines[6] = json.dumps(nested)
    sample_file.write_text("\n".join(lines) + "\n")

    with pytest.raises(ImportDataError, match="nested deeper than 64") as refused:
        lmeval_import(paths=[folder])
    assert refused.value.record == "line 7"

    lines = list(good)
    line = json.loads(lines[4])
    line["filtered_resps"][1] = ["not a number", "False"]
    lines[4] = json.dumps(line)
    sample_file.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImportDataError) as refused:
        lmeval_import(paths=[folder])
    assert (refused.value.record, refused.value.field) == ("line 5", "filtered_resps")
    assert not Run.objects.exists()


def test_infinite_and_nan_loglikelihoods_pick_as_numpy_does(lmeval_output, lmeval_mini, tmp_path):
    folder = Path(shutil.copytree(lmeval_output.samples_file(LMEVAL_MINI).parent, tmp_path / "m"))
    (sample_file,) = folder.glob("samples_*.jsonl")
    lines = [json.loads(line) for line in sample_file.read_text().splitlines()]
    lines[0]["filtered_resps"] = [["-inf", "False"], ["-0.5", "False"], ["-0.5", "False"]]
    lines[1]["filtered_resps"] = [["-0.1", "False"], ["nan", "False"], ["-inf", "False"]]
    sample_file.write_text("".join(json.dumps(line) + "\n" for line in lines))

    result = lmeval_import(paths=[folder])

    by_doc = _by_doc(result.runs[0].run)
    # np.argmax: the first of equal maxima, and a NaN before any number.
    assert (by_doc[0].parsed_answer, by_doc[1].parsed_answer) == ("B", "B")
    # Stored as strings: PostgreSQL's jsonb holds no infinity or NaN.
    assert by_doc[0].details["extra"]["loglikelihoods"] == ["-inf", -0.5, -0.5]
    assert by_doc[1].details["extra"]["loglikelihoods"] == [-0.1, "nan", "-inf"]


def test_reimporting_the_same_output_creates_nothing(lmeval_output, lmeval_mini, tmp_path):
    out = lmeval_output.out(LMEVAL_MINI)
    first = lmeval_import(paths=[out])
    archive = tmp_path / "out.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in out.rglob("*"):
            zf.write(path, path.relative_to(out.parent).as_posix())

    # Under another name, from a zip of the same folder: the same run, nothing new.
    again = lmeval_import(paths=[archive, out], name="renamed")

    assert again.runs[0].run.pk == first.runs[0].run.pk and not again.runs[0].created
    assert sum(again.report.created.values()) == 0
    assert again.report.unchanged["Prediction"] == 12
    assert Run.objects.count() == 1 and Prediction.objects.count() == 12


def test_several_tasks_and_models_import_as_one_run_each(
    lmeval_output, lmeval_mini, lmeval_dyntom_stages
):
    result = lmeval_import(
        paths=[lmeval_output.out(LMEVAL_MINI), lmeval_output.out(LMEVAL_DYNTOM)], name="both"
    )

    names = sorted(s.run.name for s in result.runs)
    assert names == [f"both · {LMEVAL_DYNTOM} · dummy", f"both · {LMEVAL_MINI} · dummy"]


# --- the upload --------------------------------------------------------------------------------


URL = "/api/imports/"


def _zip_of(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted(folder.rglob("*")):
            zf.write(path, f"results/{path.relative_to(folder).as_posix()}")
        zf.writestr("results/notes.txt", "not lm-eval's")
    return buffer.getvalue()


def test_upload_of_the_output_zip_dry_run_then_confirm(
    client, researcher, lmeval_output, lmeval_mini
):
    client.force_login(researcher)
    data = _zip_of(lmeval_output.out(LMEVAL_MINI))

    def post(url: str):
        files = [SimpleUploadedFile("lm-eval-out.zip", data)]
        return client.post(url, {"format": "lm-eval", "files": files, "name": "uploaded"})

    dry = post(URL)
    assert dry.status_code == 200, dry.content
    body = dry.json()
    assert {r["kind"]: r["created"] for r in body["dry_run"]["counts"]} == {
        "Prediction": 12,
        "Run": 1,
    }
    assert body["preview"][0]["kind"] == "prediction"
    assert body["preview"][0]["item"] == "mini-tom@1 · mt-01"
    assert not Run.objects.exists()

    confirmed = client.post(body["confirm_url"])
    assert confirmed.status_code == 201, confirmed.content
    run = Run.objects.get()
    assert run.name == "uploaded" and run.predictions.count() == 12
    _assert_acc_is_lm_evals(lmeval_output, LMEVAL_MINI, run)


def test_upload_of_loose_files_with_an_item_map(client, researcher, lmeval_output, lmeval_mini):
    client.force_login(researcher)
    folder = lmeval_output.samples_file(LMEVAL_FOREIGN_MC).parent
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(folder.iterdir())]

    bad = client.post(
        f"{URL}?confirm=1", {"format": "lm-eval", "files": files, "item_map": "{nope"}
    )
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "item_map"

    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(folder.iterdir())]
    response = client.post(
        f"{URL}?confirm=1",
        {"format": "lm-eval", "files": files, "item_map": json.dumps(_foreign_map())},
    )

    assert response.status_code == 201, response.content
    assert Run.objects.get().model == LMEVAL_FOREIGN_MODEL


def test_upload_without_ids_is_refused_naming_the_file(client, researcher, lmeval_output):
    client.force_login(researcher)
    path = lmeval_output.samples_file(LMEVAL_FOREIGN_MC)
    response = client.post(
        f"{URL}?confirm=1",
        {
            "format": "lm-eval",
            "model": "m",
            "files": [SimpleUploadedFile(path.name, path.read_bytes())],
        },
    )

    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["file"] == path.name and error["field"] == "id"
    assert not Run.objects.exists()
