"""A generic benchmark's report on every surface: the index, its page, the CSV, XLSX and
JSON downloads, the API, the ``report`` command and background jobs, one named
benchmark (work) at a time and only the workspace's own.

The rows are ``test_generic_report.build_generic_rows``'; the numbers are checked by
hand there, and here every surface must show those same numbers.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from collections import defaultdict

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.urls import reverse
from openpyxl import load_workbook
from rest_framework.test import APIClient

from accounts.services import user_create_with_role
from accounts.workspaces import workspace_create
from common.scoping import scoped_to
from reports import services
from reports.models import ReportJob
from reports.tables import build_report
from tests.generic_items import make_generic_benchmark
from tests.reports.test_generic_report import POOLED, build_generic_rows, s1_label

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_report_cache():
    # Reports are cached by a data fingerprint; rolled-back tests can reuse row ids.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def rows():
    return build_generic_rows()


@pytest.fixture
def client_researcher(client, researcher):
    client.force_login(researcher)
    return client


def _page(work_id: int, **query: str) -> str:
    extra = "".join(f"&{k}={v}" for k, v in query.items())
    return reverse("reports:report", args=["generic"]) + f"?work={work_id}{extra}"


def _csv_records(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))


def _number(text: str) -> float | None:
    return None if text == "" else float(text)


def test_every_surface_shows_the_same_numbers(client_researcher, researcher, rows, tmp_path):
    """Page, table CSV, zip, XLSX, API, the report command and the long-format JSON."""
    work = rows.work.pk
    expected = build_report("generic", work_id=work, seed=0)
    accuracy = {r["System"]: r for r in expected.table("accuracy").records()}
    assert accuracy[POOLED]["Accuracy %"] == 63.89  # counted by hand in test_generic_report
    wrong = [r["Item"] for r in expected.table("gold-disagreement").records()]
    assert wrong == ["mt-08", "mt-04"]

    # The page: its report and the tables it shows.
    page = client_researcher.get(_page(work))
    assert page.status_code == 200
    assert page.context["report"].as_json() == expected.as_json()
    html = page.content.decode()
    assert "Mini ToM v1 report" in html and 'id="table-gold-disagreement"' in html
    assert f'name="work" value="{work}"' in html  # the selection form keeps the work
    assert page.context["downloads"]["xlsx"].endswith(f"?work={work}")

    # One table as CSV, the disagreement list among them.
    table_url = reverse("reports:table-csv", args=["generic", "accuracy"]) + f"?work={work}"
    response = client_researcher.get(table_url)
    assert response.status_code == 200
    assert f"generic-work{work}-report-accuracy.csv" in response["Content-Disposition"]
    shown = {r["System"]: r for r in _csv_records(response.content)}
    assert _number(shown[POOLED]["Accuracy %"]) == 63.89
    assert _number(shown[s1_label(rows)]["CI high %"]) == accuracy[s1_label(rows)]["CI high %"]
    listed = client_researcher.get(
        reverse("reports:table-csv", args=["generic", "gold-disagreement"]) + f"?work={work}"
    )
    assert [r["Item"] for r in _csv_records(listed.content)] == wrong
    assert _csv_records(listed.content)[0]["Majority pick"] == "C"

    # Every table in a zip, and the workbook.
    archive = zipfile.ZipFile(
        io.BytesIO(
            client_researcher.get(
                reverse("reports:export", args=["generic", "csv"]) + f"?work={work}"
            ).content
        )
    )
    assert {f"{t.key}.csv" for t in expected.tables} <= set(archive.namelist())
    assert [r["Item"] for r in _csv_records(archive.read("gold-disagreement.csv"))] == wrong
    workbook = load_workbook(
        io.BytesIO(
            client_researcher.get(
                reverse("reports:export", args=["generic", "xlsx"]) + f"?work={work}"
            ).content
        )
    )
    sheet = workbook["accuracy"]
    header = [c.value for c in sheet[1]]
    by_system = {
        r[0]: dict(zip(header, r, strict=True)) for r in sheet.iter_rows(2, values_only=True)
    }
    assert by_system[POOLED]["Accuracy %"] == 63.89
    assert [r[0] for r in workbook["gold-disagreement"].iter_rows(2, values_only=True)] == wrong

    # The API: the same report, and one table of it.
    api = APIClient()
    api.force_login(researcher)
    answer = api.get(reverse("reports-report", args=["generic"]) + f"?work={work}")
    assert answer.status_code == 200, answer.content
    assert answer.json() == json.loads(json.dumps(expected.as_json()))
    table = api.get(
        reverse("reports-report-table", args=["generic", "gold-disagreement"]) + f"?work={work}"
    )
    assert [r["Item"] for r in table.json()["rows"]] == wrong

    # The report command.
    out = tmp_path / "report.json"
    call_command("report", "generic", "--work", str(work), "--format", "json", "--out", str(out))
    assert json.loads(out.read_text()) == json.loads(json.dumps(expected.as_json()))

    # The long-format JSON: the pooled accuracy counted again from its human rows.
    long = client_researcher.get(
        reverse("reports:export", args=["generic", "json"]) + f"?work={work}"
    )
    records = json.loads(b"".join(long.streaming_content))
    people = [r for r in records if r["source"] == "human"]
    models = [r for r in records if r["source"] == "model"]
    assert len(people) == 24 and len(models) == 16  # R1's 12, R2's 2 x 2
    assert {r["work"] for r in records} == {"mini-tom@1"}
    per_item = defaultdict(list)
    for r in people:
        per_item[r["item"]].append(r["correct"])
    item_means = [sum(v) / len(v) for v in per_item.values()]
    assert round(100 * sum(item_means) / len(item_means), 2) == 63.89
    eighth = next(r for r in people if r["item"] == "mt-08")
    assert (eighth["ability"], eighth["gold"], eighth["answer"], eighth["options"]) == (
        "Discrepant desires",
        "B",
        "C",
        4,
    )
    tidy = client_researcher.get(reverse("reports:tidy-csv", args=["generic"]) + f"?work={work}")
    tidy_rows = _csv_records(b"".join(tidy.streaming_content))
    assert len(tidy_rows) == 40 and "ability" in tidy_rows[0] and "order" in tidy_rows[0]


def test_the_switch_and_the_selection_reach_every_surface(client_researcher, researcher, rows):
    work = rows.work.pk
    query = f"?work={work}&include_excluded=1&runs={rows.r1.pk}"
    expected = build_report("generic", work_id=work, include_excluded=True, run_ids=[rows.r1.pk])
    page = client_researcher.get(reverse("reports:report", args=["generic"]) + query)
    assert page.status_code == 200
    assert page.context["report"].as_json() == expected.as_json()
    pooled = {r["System"]: r for r in expected.table("accuracy").records()}[POOLED]
    assert pooled["Accuracy %"] == 52.96  # with P3, as counted in test_generic_report
    api = APIClient()
    api.force_login(researcher)
    assert api.get(reverse("reports-report", args=["generic"]) + query).json() == json.loads(
        json.dumps(expected.as_json())
    )
    csv_rows = _csv_records(
        client_researcher.get(
            reverse("reports:table-csv", args=["generic", "accuracy"]) + query
        ).content
    )
    assert {r["System"]: _number(r["Accuracy %"]) for r in csv_rows}[POOLED] == 52.96
    # The form posts the work back: ticking boxes keeps the page on the same benchmark.
    picked = client_researcher.get(
        reverse("reports:report", args=["generic"])
        + f"?picked=1&work={work}&runs={rows.r2.pk}&studies={rows.s1.pk}"
    )
    assert picked.status_code == 302
    assert picked["Location"].endswith(f"?work={work}&runs={rows.r2.pk}&studies={rows.s1.pk}")


def test_the_index_lists_each_named_benchmark_with_its_report(client_researcher, rows):
    response = client_researcher.get(reverse("reports:index"))
    assert response.status_code == 200
    listed = {r["label"]: r for r in response.context["generic"]}
    assert set(listed) == {"Mini ToM v1", "Other ToM v1"}
    assert (listed["Mini ToM v1"]["items"], listed["Mini ToM v1"]["runs"]) == (12, 2)
    assert listed["Other ToM v1"]["runs"] == 1
    html = response.content.decode()
    assert f'href="{_page(rows.work.pk)}"' in html and f'href="{_page(rows.other.pk)}"' in html
    # The built-in benchmarks keep one row each.
    assert "generic" not in {r["value"] for r in response.context["benchmarks"]}
    # /reports/generic/ without a work lists them too.
    names = client_researcher.get(reverse("reports:report", args=["generic"]))
    assert names.status_code == 200
    assert [r["label"] for r in names.context["benchmarks"]] == ["Mini ToM v1", "Other ToM v1"]
    assert f'href="{_page(rows.other.pk)}"' in names.content.decode()


@pytest.mark.parametrize("work", ["999999", "abc", "", "²", "-1", "1" + "0" * 30, "a\x00b"])
def test_an_unknown_or_malformed_work_is_4xx_on_every_surface(client_researcher, researcher, work):
    make_generic_benchmark()
    status = 404 if work == "999999" else 400
    urls = [
        reverse("reports:report", args=["generic"]),
        reverse("reports:chart", args=["generic", "accuracy", "svg"]),
        reverse("reports:export", args=["generic", "csv"]),
        reverse("reports:export", args=["generic", "xlsx"]),
        reverse("reports:export", args=["generic", "json"]),
        reverse("reports:table-csv", args=["generic", "accuracy"]),
        reverse("reports:tidy-csv", args=["generic"]),
    ]
    for url in urls:
        assert client_researcher.get(url, {"work": work}).status_code == status, url
    api = APIClient()
    api.force_login(researcher)
    answer = api.get(reverse("reports-report", args=["generic"]), {"work": work})
    assert answer.status_code == status
    if status == 400:
        assert "work" in answer.json()
    job = client_researcher.post(reverse("reports:job-create", args=["generic"]), {"work": work})
    assert job.status_code == (404 if status == 404 else 302)
    assert not ReportJob.objects.exists()


def test_a_generic_download_without_a_work_is_400(client_researcher):
    make_generic_benchmark()
    response = client_researcher.get(reverse("reports:export", args=["generic", "csv"]))
    assert response.status_code == 400
    assert b"work: a generic report covers one named benchmark" in response.content


def test_a_work_id_on_a_built_in_report_is_refused(client_researcher):
    url = reverse("reports:table-csv", args=["dyntom", "accuracy"]) + "?work=1"
    response = client_researcher.get(url)
    assert response.status_code == 400
    assert b"work: a dyntom report covers the whole benchmark" in response.content


def test_another_workspaces_generic_benchmark_is_not_found(client, researcher, rows):
    """A researcher of another lab finds none of work A's report, by any route."""
    lab = workspace_create(name="Other lab")
    outsider = user_create_with_role(
        username="outsider", password="pw-out-123!", role="researcher", workspace=lab
    )
    with scoped_to(lab.pk):
        theirs = make_generic_benchmark(name="Their ToM")
    client.force_login(outsider)
    for url in (
        _page(rows.work.pk),
        reverse("reports:table-csv", args=["generic", "accuracy"]) + f"?work={rows.work.pk}",
        reverse("reports:export", args=["generic", "json"]) + f"?work={rows.work.pk}",
    ):
        assert client.get(url).status_code == 404, url
    api = APIClient()
    api.force_login(outsider)
    theirs_api = api.get(reverse("reports-report", args=["generic"]) + f"?work={rows.work.pk}")
    assert theirs_api.status_code == 404
    # Their own is there, and the index lists only theirs.
    assert client.get(_page(theirs.pk)).status_code == 200
    listed = client.get(reverse("reports:index")).context["generic"]
    assert [r["id"] for r in listed] == [theirs.pk]
    # And ours cannot read theirs either.
    client.force_login(researcher)
    assert client.get(_page(theirs.pk)).status_code == 404


def test_a_background_job_builds_the_works_report(client_researcher, rows):
    response = client_researcher.post(
        reverse("reports:job-create", args=["generic"]),
        {"work": str(rows.work.pk), "include_excluded": "1"},
    )
    assert response.status_code == 302
    job = ReportJob.objects.get()
    assert (job.work_id, job.include_excluded) == (rows.work.pk, True)
    assert services.report_job_execute(job_id=job.pk) == ReportJob.Status.SUCCEEDED
    job.refresh_from_db()
    expected = build_report("generic", work_id=rows.work.pk, include_excluded=True)
    assert job.report().as_json() == json.loads(json.dumps(expected.as_json()))
    page = client_researcher.get(reverse("reports:job", args=[job.pk]))
    html = page.content.decode()
    assert "Mini ToM v1" in html and f'href="{_page(rows.work.pk)}"' in html
    listed = client_researcher.get(
        reverse("reports:job-table-csv", args=[job.pk, "gold-disagreement"])
    )
    assert f"generic-work{rows.work.pk}-report-job{job.pk}" in listed["Content-Disposition"]
    assert [r["Item"] for r in _csv_records(listed.content)] == ["mt-08", "mt-04", "mt-02", "mt-06"]
    # The work's page lists the job; the other work's does not.
    assert job in client_researcher.get(_page(rows.work.pk)).context["jobs"]
    assert job not in client_researcher.get(_page(rows.other.pk)).context["jobs"]
    # A job for runs of another work is refused, as the page refuses them.
    with pytest.raises(ValueError, match="no generic run"):
        services.report_job_create(
            benchmark="generic", work_id=rows.work.pk, run_ids=[rows.other_run.pk]
        )


def test_the_accuracy_by_category_chart_draws(client_researcher, rows):
    url = reverse("reports:chart", args=["generic", "by-ability", "svg"]) + f"?work={rows.work.pk}"
    response = client_researcher.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert b"Accuracy by ability" in response.content
