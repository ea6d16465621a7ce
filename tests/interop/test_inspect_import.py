"""Inspect logs imported as runs: Inspect itself runs ToMLab's exported tasks offline
(mockllm), and ToMLab's accuracy of the imported run must be the log's own, overall
and per sample; bad logs are refused by name and write nothing."""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmarks.importers.base import ImportDataError
from benchmarks.models import MCItem
from interop.inspect_import import inspect_logs_import
from modeling.models import Prediction, Run
from modeling.runs.selectors import run_prediction_summary

from .conftest import INSPECT_TOMBENCH_WORK, MOCK_MODEL, InspectLogs

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.module_rows("dyntom_stages"),
    # Inspect's retry setup calls tenacity with a parameter tenacity has deprecated.
    pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning"),
]

API_URL = "/api/imports/"


def read_log(path: Path):
    from inspect_ai.log import read_eval_log

    return read_eval_log(str(path))


def log_accuracy(log) -> float:
    return log.results.scores[0].metrics["accuracy"].value


def predictions_by_sample(run: Run) -> dict[tuple[str, int], Prediction]:
    """The run's predictions by (item key, sample index)."""
    rows = Prediction.objects.filter(run=run).select_related(
        "mc_item__work", "dyntom_question__stage__work"
    )
    out = {}
    for p in rows:
        if p.mc_item_id:
            key = f"generic:{p.mc_item.work.key}:{p.mc_item.item_id}"
        else:
            key = f"dyntom:{p.dyntom_question.stage.work.key}:{p.dyntom_question.key}"
        out[(key, p.sample_index)] = p
    return out


def assert_same_as_log(run: Run, log) -> None:
    """ToMLab's verdict on every sample is Inspect's, and so is the accuracy."""
    predictions = predictions_by_sample(run)
    assert len(predictions) == len(log.samples)
    for sample in log.samples:
        prediction = predictions[(sample.id, sample.epoch - 1)]
        score = sample.scores["choice"]
        assert prediction.correct is (score.value == "C"), (sample.id, score)
        assert prediction.raw_output == sample.output.completion
        assert prediction.details["extra"] == {
            "epoch": sample.epoch,
            "inspect_score": score.value,
            "inspect_answer": score.answer,
        }
        if score.answer:
            assert prediction.parsed_answer.upper() == score.answer
        else:
            assert prediction.parse_status == Prediction.ParseStatus.UNPARSEABLE
    summary = run_prediction_summary(run=run)
    assert summary.correct == sum(s.scores["choice"].value == "C" for s in log.samples)
    assert summary.accuracy == pytest.approx(log_accuracy(log), rel=1e-12)


# --- the round trip: export, Inspect, import --------------------------------------------


def test_tombench_log_gives_the_logs_accuracy_per_sample_and_epoch(
    inspect_logs: InspectLogs, inspect_tombench
):
    log = read_log(inspect_logs.tombench)
    # The script gave right and wrong letters, a reply without one and an empty reply.
    verdicts = Counter(
        (s.scores["choice"].value, bool(s.scores["choice"].answer)) for s in log.samples
    )
    assert verdicts.keys() == {("C", True), ("I", True), ("I", False), ("N", False)}

    result = inspect_logs_import(paths=[inspect_logs.tombench])

    (summary,) = result.runs
    run = summary.run
    assert summary.created and run.imported and run.status == Run.Status.SUCCEEDED
    assert (run.benchmark, run.method, run.model) == ("generic", "inspect", MOCK_MODEL)
    assert run.name == f"{log.eval.task} · {MOCK_MODEL}"
    assert_same_as_log(run, log)
    assert 0 < summary.correct < summary.scored == 80  # 40 items, two epochs

    # The two epochs are two samples of each item, kept apart.
    predictions = predictions_by_sample(run)
    assert {index for _, index in predictions} == {0, 1}
    item = f"generic:{INSPECT_TOMBENCH_WORK}:{MCItem.objects.order_by('position').first().item_id}"
    first, second = predictions[(item, 0)], predictions[(item, 1)]
    assert first.raw_output != second.raw_output

    sample = next(s for s in log.samples if s.id == item and s.epoch == 1)
    assert first.prompt_tokens == sample.model_usage[MOCK_MODEL].input_tokens > 0
    assert first.completion_tokens == 7
    assert first.latency_ms == round(sample.working_time * 1000)
    # The run's totals are its samples' usage, as the log's own totals are.
    run.refresh_from_db()
    usage = [s.model_usage[MOCK_MODEL] for s in log.samples]
    assert run.prompt_tokens == sum(u.input_tokens for u in usage) > 0
    assert run.completion_tokens == sum(u.output_tokens for u in usage) > 0
    assert run.selection == {
        "source": inspect_logs.tombench.name,
        "origin": "inspect",
        "origin_id": log.eval.eval_id,
        "task": log.eval.task,
        "task_version": 1,
        "inspect_version": log.eval.packages["inspect_ai"],
        "run_id": log.eval.run_id,
        "epochs": 2,
        "log_status": "success",
        "created": log.eval.created,
        "dataset": "dataset",
        "generate_config": {},
    }
    assert not result.report.warnings and not result.unknown


def test_dyntom_subset_json_log_gives_the_logs_accuracy(
    inspect_logs: InspectLogs, inspect_dyntom_stages
):
    assert inspect_logs.dyntom.suffix == ".json"
    log = read_log(inspect_logs.dyntom)

    result = inspect_logs_import(paths=[inspect_logs.dyntom], name="dyntom mock")

    (summary,) = result.runs
    assert summary.run.name == "dyntom mock" and summary.run.benchmark == "dyntom"
    assert_same_as_log(summary.run, log)
    assert 0 < summary.correct < summary.scored == len(log.samples)
    assert {s.epoch for s in log.samples} == {1}


def test_plain_prompt_log_is_read_by_our_reply_parser(inspect_logs: InspectLogs, inspect_tombench):
    log = read_log(inspect_logs.plain)
    assert all("choice" not in s.scores for s in log.samples)

    (summary,) = inspect_logs_import(paths=[inspect_logs.plain]).runs

    predictions = predictions_by_sample(summary.run)
    for sample in log.samples:
        prediction = predictions[(sample.id, 0)]
        (score,) = sample.scores.values()
        # Our parser read the final "Answer: X" line as Inspect's pattern did.
        assert prediction.parsed_answer == sample.output.completion[-1] == score.answer
        assert prediction.correct is (score.value == "C")
        assert prediction.details["extra"]["inspect_score"] == score.value
    assert {p.correct for p in predictions.values()} == {True, False}


# --- idempotence, several logs, status --------------------------------------------------


def test_the_same_log_again_under_another_name_creates_nothing(
    inspect_logs: InspectLogs, inspect_tombench
):
    inspect_logs_import(paths=[inspect_logs.tombench], name="first")

    again = inspect_logs_import(paths=[inspect_logs.tombench], name="second")

    (summary,) = again.runs
    assert not summary.created and summary.run.name == "first"
    assert again.report.created["Run"] == 0 and again.report.created["Prediction"] == 0
    assert again.report.unchanged["Prediction"] == 80
    assert Run.objects.count() == 1


def test_several_logs_in_one_call_are_one_run_each(
    inspect_logs: InspectLogs, inspect_tombench, inspect_dyntom_stages
):
    paths = [inspect_logs.tombench, inspect_logs.tombench_other_model, inspect_logs.dyntom]

    result = inspect_logs_import(paths=paths, name="batch")

    runs = [s.run for s in result.runs]
    assert [(r.benchmark, r.model) for r in runs] == [
        ("generic", MOCK_MODEL),
        ("generic", "mockllm/other"),
        ("dyntom", MOCK_MODEL),
    ]
    assert runs[1].name == "batch · mockllm/other"
    # Two logs of one model under one name: told apart by their eval ids.
    assert len({r.name for r in runs}) == 3
    assert all(r.name.startswith(f"batch · {MOCK_MODEL} · ") for r in (runs[0], runs[2]))
    assert len({r.selection["origin_id"] for r in runs}) == 3
    assert Prediction.objects.filter(run=runs[1]).count() == 6


def test_an_eval_that_stopped_on_an_error_imports_its_finished_samples_with_a_warning(
    inspect_logs: InspectLogs, inspect_tombench
):
    log = read_log(inspect_logs.errored)
    finished = [s for s in log.samples if s.error is None]
    assert log.status == "error" and 0 < len(finished) < len(log.samples)

    result = inspect_logs_import(paths=[inspect_logs.errored])

    (summary,) = result.runs
    assert summary.scored == len(finished)
    assert summary.run.selection["log_status"] == "error"
    warnings = " ".join(result.report.warnings)
    assert "did not finish (status error: RuntimeError" in warnings
    assert f"{len(log.samples) - len(finished)} sample(s) ended in an error" in warnings


# --- bad logs: refused by name, nothing written -----------------------------------------


def refused(paths: list[Path], **options) -> ImportDataError:
    with pytest.raises(ImportDataError) as caught:
        inspect_logs_import(paths=paths, **options)
    assert not Run.objects.exists() and not Prediction.objects.exists()
    return caught.value


def test_a_log_of_another_task_is_refused(inspect_logs: InspectLogs, inspect_tombench):
    error = refused([inspect_logs.other_task])

    assert error.path == str(inspect_logs.other_task) and error.field == "id"
    assert "3 sample(s) name no item of this server: 1, 2, 3" in error.message
    assert "keep_unknown" in error.message

    error = refused([inspect_logs.other_task], keep_unknown=True)
    assert "no sample of this log is an item here" in error.message


def test_a_bad_log_after_a_good_one_writes_neither(inspect_logs: InspectLogs, inspect_tombench):
    error = refused([inspect_logs.tombench, inspect_logs.other_task])

    assert error.path == str(inspect_logs.other_task)


def test_a_truncated_eval_file_is_refused(inspect_logs: InspectLogs, inspect_tombench, tmp_path):
    path = inspect_logs.copy("tombench", tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])

    error = refused([path])

    assert error.path == str(path) and error.message.startswith("not an Inspect log: ")


def test_an_eval_file_that_unpacks_past_the_limit_is_refused_unread(
    inspect_tombench, tmp_path, settings
):
    settings.TOMLAB_IMPORT_MAX_BYTES = {**settings.TOMLAB_IMPORT_MAX_BYTES, "inspect-log": 10_000}
    path = tmp_path / "bomb.eval"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("_journal/start.json", b" " * 50_000)  # packs to ~100 bytes

    error = refused([path])

    assert error.path == str(path)
    assert "unpacks to 50,000 bytes" in error.message and "40,000-byte limit" in error.message


def test_a_json_log_nested_past_the_parsers_depth_is_refused(inspect_tombench, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"eval": ' + "[" * 100_000 + "]" * 100_000 + "}")

    error = refused([path])

    assert error.path == str(path) and error.message.startswith("not an Inspect log: ")


@pytest.mark.parametrize("text", ['{"results": {}}', '{"eval": ', "[1, 2]"])
def test_a_json_file_that_is_no_log_is_refused(text, inspect_tombench, tmp_path):
    path = tmp_path / "results.json"
    path.write_text(text)

    error = refused([path])

    assert error.path == str(path) and error.message.startswith("not an Inspect log: ")


def test_a_log_without_samples_is_refused_with_the_fix(inspect_logs: InspectLogs, inspect_tombench):
    error = refused([inspect_logs.no_samples])

    assert error.field == "samples"
    assert "--no-log-samples" in error.message and "Run the eval again" in error.message


def test_an_unknown_sample_id_is_refused_or_set_aside(inspect_logs: InspectLogs, inspect_tombench):
    nope = f"generic:{INSPECT_TOMBENCH_WORK}:nope"
    error = refused([inspect_logs.nope])
    assert f"1 sample(s) name no item of this server: {nope!r}" in error.message

    result = inspect_logs_import(paths=[inspect_logs.nope], keep_unknown=True)

    (summary,) = result.runs
    assert result.unknown == [nope]
    assert summary.run.selection["unknown_samples"] == [nope]
    assert Prediction.objects.filter(run=summary.run).count() == 2
    assert any("set aside: " + nope in note for note in result.notes())


# --- the upload (POST /api/imports/) and the command ------------------------------------


@pytest.fixture
def api(client, researcher):
    client.force_login(researcher)
    return client


def upload(path: Path) -> SimpleUploadedFile:
    return SimpleUploadedFile(path.name, path.read_bytes())


def test_upload_of_several_logs_dry_runs_then_imports(
    api, inspect_logs: InspectLogs, inspect_tombench, settings
):
    settings.TOMLAB_IMPORT_BACKGROUND_BYTES = 100_000_000  # Confirm imports in the request
    logs = (inspect_logs.tombench_other_model, inspect_logs.plain)

    dry = api.post(
        API_URL, {"format": "inspect", "files": [upload(p) for p in logs], "name": "uploaded"}
    )

    assert dry.status_code == 200, dry.content
    body = dry.json()
    counts = {row["kind"]: row["created"] for row in body["dry_run"]["counts"]}
    assert counts == {"Run": 2, "Prediction": 6 + 5}
    preview = body["preview"][0]
    assert preview["kind"] == "prediction"
    assert preview["item"].startswith(f"{INSPECT_TOMBENCH_WORK} · ")
    assert not Run.objects.exists()

    confirmed = api.post(body["confirm_url"])

    assert confirmed.status_code == 201, confirmed.content
    # Every log its own run, read in name order.
    runs = Run.objects.order_by("pk")
    assert [r.selection["source"] for r in runs] == sorted(p.name for p in logs)
    assert {r.name for r in runs} == {"uploaded · mockllm/other", f"uploaded · {MOCK_MODEL}"}


def test_the_import_page_offers_inspect_logs_with_their_options(api):
    response = api.get(reverse("benchmarks:import"), {"format": "inspect"})

    assert response.status_code == 200
    page = response.content.decode()
    assert 'accept=".eval,.json"' in page and "multiple" in page
    assert 'name="name"' in page and 'name="keep_unknown"' in page


def test_upload_of_a_log_of_another_task_is_a_located_400(
    api, inspect_logs: InspectLogs, inspect_tombench
):
    response = api.post(
        f"{API_URL}?confirm=1",
        {"format": "inspect", "files": [upload(inspect_logs.other_task)]},
    )

    assert response.status_code == 400, response.content
    (error,) = response.json()["errors"]
    assert error["file"] == inspect_logs.other_task.name and error["field"] == "id"
    assert not Run.objects.exists()


def test_command_imports_a_log_and_prints_the_run(inspect_logs: InspectLogs, inspect_tombench):
    out = io.StringIO()

    call_command("import_harness_log", str(inspect_logs.tombench), "--name", "cmd", stdout=out)

    run = Run.objects.get()
    assert run.name == "cmd"
    text = out.getvalue()
    assert "run 'cmd' (generic, mockllm/model): new; correct " in text
    assert "Prediction: 80 created, 0 unchanged, 0 updated" in text


def test_command_takes_a_json_log_as_inspect_and_refuses_bad_input(
    inspect_logs: InspectLogs, inspect_tombench, inspect_dyntom_stages, tmp_path
):
    call_command("import_harness_log", str(inspect_logs.dyntom), stdout=io.StringIO())
    assert Run.objects.get().benchmark == "dyntom"

    with pytest.raises(CommandError, match=r"nothing was written: .*name no item"):
        call_command("import_harness_log", str(inspect_logs.other_task), stdout=io.StringIO())
    samples = tmp_path / "samples_task.jsonl"
    samples.write_text(json.dumps({"doc_id": 0}) + "\n")
    with pytest.raises(CommandError, match="pass --harness"):
        call_command("import_harness_log", str(samples), stdout=io.StringIO())
    results = tmp_path / "results_2024.json"
    results.write_text(json.dumps({"results": {}}))
    with pytest.raises(CommandError, match=r"is not an Inspect log .*pass --harness lm-eval"):
        call_command("import_harness_log", str(results), stdout=io.StringIO())
    with pytest.raises(CommandError, match="--model: only for --harness lm-eval"):
        call_command(
            "import_harness_log", str(inspect_logs.tombench), "--model", "m", stdout=io.StringIO()
        )
    assert Run.objects.count() == 1
