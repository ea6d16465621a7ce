"""The eval-harness loop in the browser (issue 48, "Done when"): a researcher exports an
item set as an Inspect task from its report, Inspect runs the downloaded task (offline,
its mockllm model scripted here), the researcher uploads the log through Data -> Import
files, reads the dry run and confirms, finds the run marked as Inspect's with its
provenance, and finds it in the item set's report beside the people who answered the
same items, at exactly the accuracy Inspect's log reports.
"""

from __future__ import annotations

import json
import re
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from modeling.models import Run
from tests.browser.axe import axe_violations, describe
from tests.browser.conftest import SCREENSHOTS
from tests.generic_items import make_generic_benchmark
from tests.interop.conftest import MOCK_MODEL, inspect_run
from tests.reports.test_generic_report import answer, make_study

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # Inspect's retry setup calls tenacity with a parameter tenacity has deprecated.
    pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning"),
]

WORK_KEY = "mini-tom@1"
LABEL = "Mini ToM v1"  # how pages name the mapped benchmark
STUDY = "Mini ToM humans"
RUN = "Mini ToM via Inspect"
ITEMS = [f"mt-{i:02d}" for i in range(1, 13)]
GOLD = {item: "A" if item in ("mt-01", "mt-12") else "B" for item in ITEMS}
# Three participants on every item: the gold, except these picks.
HUMAN_WRONG = [{}, {"mt-02": "C", "mt-05": "A"}, {"mt-03": "D", "mt-10": "A", "mt-11": "C"}]
# The model: "ANSWER: <gold>", except a wrong letter on these and no letter on one.
MODEL_WRONG = {"mt-03": "C", "mt-08": "D", "mt-11": "A"}
MODEL_UNREADABLE = "mt-06"


def shown(share: float) -> str:
    """A share as the report's % columns show it: stored rounded to 2 decimals, shown
    with 1 (reports/views.py format_cell)."""
    return f"{round(100 * share, 2):.1f}"


def shot(page: Page, name: str) -> None:
    """A full-page PNG under var/screenshots, to be looked at (PNG, not the fixture's
    JPEG: the image viewer reviewers use reads PNG only)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"harness-loop-{name}.png"), full_page=True)


def scripted_model(rows: list[dict[str, Any]]):
    """A mockllm model answering each exported sample as MODEL_WRONG / MODEL_UNREADABLE
    say. The sample is the one whose input the prompt holds (the longest, should one
    input hold another). Usage is set on every reply: without it mockllm counts tokens
    with tiktoken, which downloads its encoding."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    def reply(messages, tools, tool_choice, config) -> ModelOutput:
        prompt = messages[-1].text
        row = max((r for r in rows if r["input"] in prompt), key=lambda r: len(r["input"]))
        item = row["metadata"]["item"]
        if item == MODEL_UNREADABLE:
            content = "I cannot tell from such a short story."
        else:
            content = f"ANSWER: {MODEL_WRONG.get(item, row['target'])}"
        output = ModelOutput.from_content(model=MOCK_MODEL, content=content)
        output.usage = ModelUsage(input_tokens=len(prompt), output_tokens=3, total_tokens=0)
        return output

    return get_model(MOCK_MODEL, custom_outputs=reply)


def run_inspect(zip_path: Path, folder: Path):
    """Unpack the downloaded task and run Inspect on it; the log Inspect wrote.

    In a thread of its own: Playwright's sync API leaves its asyncio loop marked running
    in the test's thread, and Inspect would re-enter that loop through nest_asyncio,
    patching asyncio for the whole process."""
    from inspect_ai.log import read_eval_log

    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(folder)
        (dataset,) = [n for n in archive.namelist() if n.endswith("/dataset.jsonl")]
    task_dir = folder / Path(dataset).parent
    rows = [json.loads(line) for line in (task_dir / "dataset.jsonl").read_text().splitlines()]
    with ThreadPoolExecutor(max_workers=1) as pool:
        log_path = pool.submit(
            lambda: inspect_run(task_dir / "task.py", scripted_model(rows), folder / "logs")
        ).result()
    return read_eval_log(str(log_path))


def export_task(page: Page, tmp_path: Path) -> Path:
    """Step 1: from the item set's report, the export page; preview, then the zip."""
    page.get_by_test_id("harness-export").click()
    page.wait_for_url(re.compile(r"/harness/export/\?source=item_set&work="))
    expect(page.get_by_label("An item set (a mapped benchmark)")).to_be_checked()
    expect(page.get_by_label("Item set", exact=True)).to_have_value(WORK_KEY)
    page.get_by_label("Inspect task (multiple choice)").check()
    page.get_by_role("button", name="Preview", exact=True).click()
    preview = page.get_by_test_id("export-preview")
    expect(preview.get_by_test_id("sample-count")).to_have_text("12")
    samples = preview.get_by_test_id("preview-sample")
    expect(samples.first.locator("td.id")).to_have_text(f"generic:{WORK_KEY}:mt-01")
    expect(samples.first.locator("td.target")).to_have_text("A")
    assert not (found := axe_violations(page)), describe(found)
    shot(page, "1-export-preview")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download zip", exact=True).click()
    download = info.value
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    return path


def import_log(page: Page, nav, log) -> None:
    """Step 3: Data -> Import files, "Inspect log", a run name; the dry run; Confirm."""
    nav(page, "Data", "Import files")
    page.get_by_label("Format").select_option("inspect")
    files = page.get_by_label(re.compile(r"^Files"))
    expect(files).to_be_visible()  # the format's fields, swapped in by htmx
    files.set_input_files(log.location)
    page.get_by_label("Run name").fill(RUN)
    page.get_by_role("button", name="Upload and dry run").click()
    page.wait_for_url(re.compile(r"/data/imports/\d+/$"))

    expect(page.get_by_test_id("dry-run-note")).to_contain_text("nothing has been written yet")
    report = page.get_by_test_id("import-report")
    expect(report.get_by_test_id("count-Run").locator("td").nth(1)).to_have_text("1")
    expect(report.get_by_test_id("count-Prediction").locator("td").nth(1)).to_have_text("12")
    right = len(ITEMS) - len(MODEL_WRONG) - 1
    expect(page.get_by_test_id("import-notes")).to_have_text(
        f"run {RUN!r} (generic, {MOCK_MODEL}): new; correct {right}/12, 1 unparseable"
    )
    first = page.get_by_test_id("preview-prediction").first
    expect(first).to_contain_text(f"{WORK_KEY} · mt-01")
    expect(first).to_contain_text("ANSWER: A")
    assert not Run.objects.exists()
    shot(page, "2-import-dry-run")

    page.get_by_role("button", name="Confirm import").click()
    # A small upload is imported within the request (Inspect reads the log again), which
    # can take longer than expect's 5 s on a loaded machine.
    expect(page.get_by_test_id("job-status")).to_have_text("succeeded", timeout=30_000)
    expect(page.get_by_test_id("imported-note")).to_be_visible()


def test_export_run_in_inspect_import_and_find_it_beside_the_humans(
    live_server, page, nav, log_in_as, researcher, tmp_path
):
    """One test, as the loop is one: each step reads what the one before wrote (the zip,
    Inspect's log, the imported run). About 12 s, Inspect's import and eval included."""
    work = make_generic_benchmark()
    study = make_study(work, STUDY, ITEMS)
    for n, wrong in enumerate(HUMAN_WRONG, start=1):
        answer(study, f"P{n}", {item: wrong.get(item, GOLD[item]) for item in ITEMS})
    log_in_as(page)

    # 1. The export, from the item set's report.
    nav(page, "Reports", "Reports")
    page.get_by_test_id("generic-benchmark").get_by_role("link", name=LABEL).click()
    page.wait_for_url(re.compile(rf"/reports/generic/\?work={work.pk}$"))
    zip_path = export_task(page, tmp_path)

    # 2. Inspect on the downloaded task.
    log = run_inspect(zip_path, tmp_path / "inspect")
    assert log.status == "success" and len(log.samples) == 12
    accuracy = log.results.scores[0].metrics["accuracy"].value
    assert accuracy == pytest.approx(8 / 12)  # the script's 8 right: the log is what we wrote

    # 3. The log, uploaded.
    import_log(page, nav, log)
    run = Run.objects.get(name=RUN)

    # 4. The runs list and the run's page say where it came from.
    nav(page, "Models", "Model runs")
    row = page.get_by_role("row").filter(has_text=RUN)
    expect(row.get_by_test_id("run-origin")).to_have_text("Inspect")
    row.get_by_role("link", name=RUN).click()
    page.wait_for_url(re.compile(rf"/runs/{run.pk}/$"))
    expect(page.get_by_test_id("run-origin")).to_have_text("Inspect")
    provenance = page.get_by_test_id("run-provenance")
    for label, value in (
        ("Task", log.eval.task),
        ("Inspect version", log.eval.packages["inspect_ai"]),
        ("Eval id", log.eval.eval_id),
        ("File", Path(log.location).name),
    ):
        header = page.get_by_role("rowheader", name=label, exact=True)
        expect(provenance.get_by_role("row").filter(has=header).locator("td")).to_have_text(value)
    expect(page.get_by_test_id("accuracy-line")).to_contain_text("8 of 12 correct")
    expect(page.locator("#run-calls")).to_contain_text("predictions were imported (Inspect)")
    shot(page, "3-run")

    # 5. The report: the run beside the humans, at the log's accuracy.
    nav(page, "Reports", "Reports")
    page.get_by_test_id("generic-benchmark").get_by_role("link", name=LABEL).click()
    page.wait_for_url(re.compile(rf"/reports/generic/\?work={work.pk}$"))
    table = page.locator("#table-accuracy")
    # System, Kind, Participants, Items, Answers, Accuracy %, CI, Chance %
    humans = table.get_by_role("row").filter(has_text=f"Humans: {STUDY} (#{study.pk})")
    expect(humans.locator("td").nth(2)).to_have_text("3")
    expect(humans.locator("td").nth(3)).to_have_text("12")
    human_right = 3 * len(ITEMS) - sum(map(len, HUMAN_WRONG))
    expect(humans.locator("td").nth(5)).to_have_text(shown(human_right / 36))
    model = table.get_by_role("row").filter(has_text=f"#{run.pk} {RUN}")
    expect(model.locator("td").nth(1)).to_have_text("model")
    expect(model.locator("td").nth(3)).to_have_text("12")
    expect(model.locator("td").nth(5)).to_have_text(shown(accuracy))
    shot(page, "4-report")
