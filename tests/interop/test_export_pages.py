"""Exports for eval harnesses through the interfaces people use (issue 48, items 1 and 4):
``manage.py export_harness_task``, the export page (form, preview, download), the API,
who may use them, and where a run came from on the run pages and the runs API.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.services import user_create_with_role
from accounts.workspaces import workspace_create
from benchmarks.models import DynToMStage, MCItem
from modeling.models import Run
from studies.choice import services as cs
from studies.choice.generic import GenericSpec
from studies.models import Study, StudyItem
from tests.generic_items import make_generic_benchmark

pytestmark = pytest.mark.django_db

MINI = "mini-tom@1"
PAGE = "/harness/export/"
API = "/api/harness/export/"
HTMX = {"HTTP_HX_REQUEST": "true"}
ABILITIES = ("False belief", "Hidden emotions", "Discrepant desires")
DYNTOM_KEYS = ("trial149", "trial210")


@pytest.fixture
def dyntom_stages(shared_data: Path, tmp_path: Path) -> list[DynToMStage]:
    """Two real DynToM stages of ../shared/data/dyntom, imported as the whole folder is
    (tests/module_rows.py) but alone: the 24 take half a minute, two take one second."""
    folder = tmp_path / "dyntom"
    for key in DYNTOM_KEYS:
        shutil.copytree(shared_data / "dyntom" / key, folder / key)
    call_command(
        "import_benchmark", "dyntom", str(folder), "--split", "test",
        verbosity=0, stdout=io.StringIO(), stderr=io.StringIO(),
    )  # fmt: skip
    return list(DynToMStage.objects.select_related("work").order_by("work__key"))


@pytest.fixture
def mini():
    return make_generic_benchmark()


@pytest.fixture
def generic_study(mini) -> Study:
    """One item per ability, a practice item (left out of the export) and an attention
    check (kept: participants answered it)."""
    return cs.choice_study_create(
        name="Mini ToM humans",
        benchmark=cs.GENERIC,
        works=[mini],
        generic=GenericSpec(
            language="en",
            category_field="ability",
            category_values=ABILITIES,
            per_category=1,
            practice=1,
            attention=1,
        ),
        seed=4,
    ).study


@pytest.fixture
def chartom_study(db) -> Study:
    return Study.objects.create(name="Read the book", benchmark="chartom-qa")


@pytest.fixture
def researcher_client(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def mini_keys(**categories: str) -> list[str]:
    items = MCItem.objects.filter(work__key=MINI).order_by("position", "pk")
    return [
        f"generic:{MINI}:{item.item_id}"
        for item in items
        if all(item.categories.get(k) == v for k, v in categories.items())
    ]


def dataset_ids(data: bytes) -> tuple[list[str], list[str]]:
    """The ids of the zip's dataset rows, and the zip's file names."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        (dataset,) = [n for n in names if n.endswith("/dataset.jsonl")]
        rows = [json.loads(line) for line in archive.read(dataset).decode().splitlines()]
    return [row["id"] for row in rows], names


# --- the command ---------------------------------------------------------------------


def test_the_command_writes_an_inspect_zip_whose_samples_are_our_item_keys(mini, tmp_path):
    out = tmp_path / "task.zip"
    stdout = io.StringIO()
    call_command("export_harness_task", "--item-set", MINI, "--out", str(out), stdout=stdout)
    ids, names = dataset_ids(out.read_bytes())
    assert ids == mini_keys() and len(ids) == 12
    assert sorted(names) == [
        "tomlab_mini_tom_1/README.md",
        "tomlab_mini_tom_1/dataset.jsonl",
        "tomlab_mini_tom_1/task.py",
    ]
    assert "12 samples" in stdout.getvalue()


def test_the_command_unpacks_an_lm_eval_task_of_one_category_into_a_folder(mini, tmp_path):
    call_command(
        "export_harness_task",
        "--item-set",
        MINI,
        "--category",
        "ability=False belief",
        "--harness",
        "lm-eval",
        "--limit",
        "2",
        "--out",
        str(tmp_path / "tasks"),
        stdout=io.StringIO(),
    )
    task = tmp_path / "tasks" / "tomlab_mini_tom_1_false_belief"
    rows = [json.loads(line) for line in (task / "dataset.jsonl").read_text().splitlines()]
    assert [row["id"] for row in rows] == mini_keys(ability="False belief")[:2]
    assert (task / f"{task.name}.yaml").read_text().startswith("# Exported from ToMLab")


def test_the_command_exports_dyntom_stages_one_sample_per_question(dyntom_stages, tmp_path):
    first, second = dyntom_stages[0], dyntom_stages[1]
    out = tmp_path / "dyntom.zip"
    call_command(
        "export_harness_task",
        "--dyntom",
        first.work.key,
        second.work.key,
        "--out",
        str(out),
        stdout=io.StringIO(),
    )
    ids, _ = dataset_ids(out.read_bytes())
    assert ids == [
        f"dyntom:{stage.work.key}:{q.key}"
        for stage in (first, second)
        for q in stage.questions.order_by("position")
    ]


def test_the_command_exports_a_study_s_items_without_its_practice_items(generic_study, tmp_path):
    out = tmp_path / "study.zip"
    call_command(
        "export_harness_task", "--study", str(generic_study.pk), "--out", str(out),
        stdout=io.StringIO(),
    )  # fmt: skip
    ids, _ = dataset_ids(out.read_bytes())
    rows = StudyItem.objects.filter(study=generic_study).order_by("position", "pk")
    assert ids == [
        f"generic:{MINI}:{row.mc_item.item_id}"
        for row in rows
        if row.role != StudyItem.Role.PRACTICE
    ]
    assert len(ids) == 4  # three abilities and the attention check


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--item-set", "nope@1"], "--item-set: no "),
        (["--item-set", MINI, "--language", "fr"], "--language: 'fr': Mini ToM"),
        (["--item-set", MINI, "--category", "ability=Telepathy"], "--category: ability: "),
        (["--dyntom", "--harness", "inspect-plain"], "--harness: DynToM's prompt"),
        (["--dyntom", "--category", "ability=x"], "--category: applies to an item set only"),
    ],
)
def test_the_command_names_the_option_at_fault(mini, tmp_path, args, named):
    out = tmp_path / "task.zip"
    with pytest.raises(CommandError, match=re.escape(named)):
        call_command("export_harness_task", *args, "--out", str(out))
    assert not out.exists()


def test_the_command_refuses_a_chartom_study(chartom_study, tmp_path):
    with pytest.raises(CommandError, match=r"--study: 'Read the book' is a chartom-qa study"):
        call_command(
            "export_harness_task", "--study", str(chartom_study.pk), "--out",
            str(tmp_path / "x.zip"),
        )  # fmt: skip


# --- the page ------------------------------------------------------------------------


def test_the_page_is_prefilled_from_the_links_that_reach_it(
    researcher_client, generic_study, dyntom_stages
):
    html = researcher_client.get(PAGE, {"source": "item_set", "work": MINI}).content.decode()
    assert f'<option value="{MINI}" selected>Mini ToM ({MINI})</option>' in html
    assert re.search(r'<input type="radio" name="source" value="item_set"[^>]*checked', html)
    # The item set's languages and category values, for the categories field.
    assert "Knowledge and perception" in html and "<dt>Languages</dt><dd>en</dd>" in html

    html = researcher_client.get(
        PAGE, {"source": "study", "study": generic_study.pk}
    ).content.decode()
    assert re.search(r'<input type="radio" name="source" value="study"[^>]*checked', html)
    assert f'<option value="{generic_study.pk}" selected>Mini ToM humans' in html

    key = dyntom_stages[0].work.key
    html = researcher_client.get(PAGE, {"source": "dyntom", "works": key}).content.decode()
    assert re.search(rf"<textarea name=\"works\"[^>]*>\s*{key}</textarea>", html)


def test_the_study_page_and_the_item_set_report_link_to_the_page(
    researcher_client, generic_study, mini
):
    study_page = researcher_client.get(reverse("studies:detail", args=[generic_study.pk]))
    assert f'href="{PAGE}?source=study&amp;study={generic_study.pk}"' in study_page.content.decode()
    report = researcher_client.get(reverse("reports:report", args=["generic"]), {"work": mini.pk})
    assert f'href="{PAGE}?source=item_set&amp;work=mini-tom%401"' in report.content.decode()
    runs = researcher_client.get(reverse("modeling:run-list")).content.decode()
    assert f'href="{PAGE}"' in runs  # the page's button and the Models menu


def test_a_preview_shows_the_sample_count_and_the_first_three_samples(researcher_client, mini):
    data = {"source": "item_set", "work": MINI, "harness": "inspect", "action": "preview"}
    response = researcher_client.post(PAGE, data, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html  # the form's region only, swapped in by htmx
    assert re.search(r'data-testid="sample-count">12<', html)
    ids = re.findall(r'data-testid="preview-sample">\s*<td class="id"><code>([^<]+)</code>', html)
    assert ids == mini_keys()[:3]
    first = MCItem.objects.get(work__key=MINI, item_id=ids[0].rsplit(":", 1)[1])
    assert first.texts["en"]["options"][0] in html
    assert "tomlab_mini_tom_1-inspect.zip" in html

    # Without JavaScript the same button posts the form: the whole page, with the preview.
    page = researcher_client.post(PAGE, data).content.decode()
    assert "<html" in page and 'data-testid="sample-count">12<' in page


def test_a_plain_prompt_preview_shows_our_prompt_and_no_choices(researcher_client, mini):
    data = {"source": "item_set", "work": MINI, "harness": "inspect-plain", "method": "cot"}
    html = researcher_client.post(PAGE, data, **HTMX).content.decode()
    assert "none (plain generation)" in html
    assert "generic-cot-en v1" in html
    assert "Read the story and answer the question about it" in html


def test_the_download_is_the_zip_of_what_the_form_chose(researcher_client, mini):
    data = {
        "source": "item_set",
        "work": MINI,
        "harness": "lm-eval",
        "categories": "ability=Hidden emotions\n",
        "action": "download",
    }
    response = researcher_client.post(PAGE, data)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert (
        response["Content-Disposition"]
        == 'attachment; filename="tomlab_mini_tom_1_hidden_emotions-lm-eval.zip"'
    )
    ids, names = dataset_ids(response.content)
    assert ids == mini_keys(ability="Hidden emotions")
    assert "tomlab_mini_tom_1_hidden_emotions/tomlab_mini_tom_1_hidden_emotions.yaml" in names


def test_dyntom_stages_preview_and_download_from_the_page(
    researcher_client, dyntom_stages, django_assert_num_queries
):
    stage = dyntom_stages[0]
    data = {"source": "dyntom", "works": stage.work.key, "harness": "inspect"}
    response = researcher_client.post(PAGE, {**data, "action": "download"})
    questions = list(stage.questions.order_by("position"))
    ids, _ = dataset_ids(response.content)
    assert ids == [f"dyntom:{stage.work.key}:{q.key}" for q in questions]
    # The preview shows the end of a long input too: the question after the story.
    html = researcher_client.post(PAGE, data, **HTMX).content.decode()
    assert f"Question: {questions[0].text}" in html.replace("&#x27;", "'").replace("&quot;", '"')

    # The same queries for two stages as for one: no query per question or stage.
    with CaptureQueriesContext(connection) as one:
        researcher_client.post(PAGE, {**data, "action": "download"})
    both = {**data, "works": " ".join(s.work.key for s in dyntom_stages)}
    with django_assert_num_queries(len(one.captured_queries)):
        response = researcher_client.post(PAGE, {**both, "action": "download"})
    assert len(dataset_ids(response.content)[0]) > len(questions)


# Bad input: (form data, the field the page names, the API parameter, words of the error).
BAD = [
    ({"source": "item_set", "work": "nope@1"}, "work", "work", "item set 'nope@1'"),
    (
        {"source": "item_set", "work": MINI, "categories": "ability=Telepathy"},
        "categories",
        "category",
        "'Telepathy' not among",
    ),
    ({"source": "item_set", "work": MINI, "language": "fr"}, "language", "language", "has en"),
    (
        {"source": "dyntom", "harness": "inspect-plain"},
        "harness",
        "harness",
        "whole stage's questions",
    ),
]


@pytest.mark.parametrize(("data", "field", "param", "words"), BAD)
def test_bad_input_is_a_400_with_the_error_at_its_field(
    researcher_client, mini, dyntom_stages, data, field, param, words
):
    response = researcher_client.post(PAGE, {"harness": "inspect", **data, "action": "download"})
    assert response.status_code == 400
    html = response.content.decode()
    error = re.search(rf'<div class="error" id="id_{field}_error">([^<]*)</div>', html)
    assert error and words in error.group(1).replace("&#x27;", "'")
    # htmx gets the form's region with the same error (the page's script swaps a 400 in).
    partial = researcher_client.post(PAGE, {"harness": "inspect", **data}, **HTMX)
    assert partial.status_code == 400 and f'id="id_{field}_error"' in partial.content.decode()


def test_a_chartom_study_is_refused_at_the_study_field(researcher_client, chartom_study):
    data = {"source": "study", "study": chartom_study.pk, "harness": "inspect"}
    response = researcher_client.post(PAGE, data)
    assert response.status_code == 400
    error = re.search(r'id="id_study_error">([^<]*)<', response.content.decode())
    assert error and "is a chartom-qa study" in error.group(1)


def test_a_form_error_is_a_400_too(researcher_client, mini):
    response = researcher_client.post(PAGE, {"source": "item_set", "harness": "inspect"})
    assert response.status_code == 400
    assert "choose the item set to export" in response.content.decode()


# --- the API -------------------------------------------------------------------------


def test_the_api_returns_the_zip(researcher_client, mini):
    query = {"source": "item_set", "work": MINI, "category": ["ability=False belief"]}
    response = researcher_client.get(API, query)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert "attachment" in response["Content-Disposition"]
    ids, _ = dataset_ids(response.content)
    assert ids == mini_keys(ability="False belief")


@pytest.mark.parametrize(("data", "field", "param", "words"), BAD)
def test_the_api_names_the_parameter_at_fault(
    researcher_client, mini, dyntom_stages, data, field, param, words
):
    query = dict(data)
    if "categories" in query:
        query["category"] = query.pop("categories")
    response = researcher_client.get(API, query)
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == param and words in body["detail"]


def test_the_api_answers_404_for_a_study_it_does_not_hold_and_400_for_a_chartom_one(
    researcher_client, chartom_study
):
    assert researcher_client.get(API, {"source": "study", "study": 999999}).status_code == 404
    response = researcher_client.get(API, {"source": "study", "study": chartom_study.pk})
    assert response.status_code == 400 and response.json()["field"] == "study"


# --- who may export ------------------------------------------------------------------


def test_raters_are_refused_and_visitors_sent_to_log_in(rater, mini):
    client = Client()
    assert client.get(PAGE)["Location"].startswith(reverse("login"))
    client.force_login(rater)
    assert client.get(PAGE).status_code == 403
    assert client.post(PAGE, {"source": "item_set", "work": MINI}).status_code == 403
    assert client.get(API, {"work": MINI}).status_code == 403


def test_another_workspace_does_not_find_the_study(generic_study):
    other = workspace_create(name="Other lab")
    outsider = user_create_with_role(
        username="outsider", password="pw-out-123!", role="researcher", workspace=other
    )
    client = Client()
    client.force_login(outsider)
    page = client.get(PAGE, {"source": "study", "study": generic_study.pk}).content.decode()
    assert "Mini ToM humans" not in page
    data = {"source": "study", "study": generic_study.pk, "harness": "inspect"}
    response = client.post(PAGE, {**data, "action": "download"})
    assert response.status_code == 400
    assert f"no study {generic_study.pk}" in response.content.decode()
    assert client.get(API, data).status_code == 404


# --- where a run came from -----------------------------------------------------------


@pytest.fixture
def runs_of_each_origin(db) -> dict[str, Run]:
    common = {"benchmark": "generic", "method": "vanilla", "status": Run.Status.SUCCEEDED}
    return {
        "engine": Run.objects.create(name="ours", model="gpt-test", **common),
        "predictions file": Run.objects.create(
            name="from a file",
            model="file-model",
            imported=True,
            selection={"source": "predictions.jsonl"},
            **common,
        ),
        "Inspect": Run.objects.create(
            name="from inspect",
            model="openai/gpt-4o-mini",
            imported=True,
            selection={
                "source": "2025-01-01_task.eval",
                "origin": "inspect",
                "origin_id": "eval-abc123",
                "task": "tomlab_mini_tom_1",
                "task_version": 1,
                "inspect_version": "0.3.285",
                "epochs": 3,
                "generate_config": {"temperature": 0.0},
                "unknown_samples": [f"x{n}" for n in range(25)],
            },
            **common,
        ),
    }


def test_the_runs_page_and_api_say_where_each_run_came_from(researcher_client, runs_of_each_origin):
    html = researcher_client.get(reverse("modeling:run-list")).content.decode()
    shown = dict(
        re.findall(
            r'<a href="/runs/\d+/">([^<]+)</a>.*?data-testid="run-origin">([^<]+)<', html, re.S
        )
    )
    assert shown == {
        "ours": "engine",
        "from a file": "predictions file",
        "from inspect": "Inspect",
    }
    api = researcher_client.get(reverse("modeling-run-list")).json()["results"]
    assert {run["name"]: run["origin"] for run in api} == shown


def test_a_harness_run_s_page_shows_its_provenance(researcher_client, runs_of_each_origin):
    run = runs_of_each_origin["Inspect"]
    html = researcher_client.get(reverse("modeling:run-detail", args=[run.pk])).content.decode()
    assert re.search(r'data-testid="run-origin">Inspect<', html)
    rows = dict(re.findall(r'<th scope="row" title="[^"]+">(.*?)</th><td>([^<]*)</td>', html))
    assert rows["Task"] == "tomlab_mini_tom_1"
    assert rows["Task version"] == "1"
    assert rows["Inspect version"] == "0.3.285"
    assert rows["Eval id"] == "eval-abc123"
    assert rows["Epochs"] == "3"
    assert rows["File"] == "2025-01-01_task.eval"
    assert rows["<code>generate_config.temperature</code>"] == "0.0"
    assert rows["<code>unknown_samples</code>"].endswith("x9 … (25 in all)")
    assert list(rows)[:4] == ["File", "Task", "Task version", "Inspect version"]
    # No "0 / 0 calls done" and empty progress bar: nothing was called here.
    assert 'data-testid="run-imported">imported: no calls made here<' in html
    assert 'role="progressbar"' not in html
    engine = runs_of_each_origin["engine"]
    html = researcher_client.get(reverse("modeling:run-detail", args=[engine.pk])).content.decode()
    assert 'role="progressbar"' in html and "run-imported" not in html
