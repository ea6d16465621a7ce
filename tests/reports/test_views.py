"""The report pages, chart images and downloads through the Django test client, on the
24 real DynToM stages with two imported runs' predictions."""

from __future__ import annotations

import io
import json
import zipfile

import pandas as pd
import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from benchmarks.models import DynToMQuestion
from modeling.models import Prediction, Run
from reports import selectors, services
from reports.models import ReportJob
from tests.modeling import conftest as run_fixtures
from tests.module_rows import build_dyntom_runs

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("dyntom_stages", "dyntom_runs")]

HX = {"HX-Request": "true"}

# The DynToM fixture lives in tests/modeling/conftest.py, which this folder does not see.
dyntom_stages = run_fixtures.dyntom_stages


# --- fixtures and helpers (test_report_jobs.py and the browser test import these) ----------


def make_dyntom_run(name: str, *, wrong_every: int, model: str = "test-model") -> Run:
    """An imported run answering every DynToM question: gold except every n-th question."""
    run = Run.objects.create(
        name=name,
        benchmark="dyntom",
        method="vanilla",
        model=model,
        imported=True,
        status=Run.Status.SUCCEEDED,
    )
    questions = DynToMQuestion.objects.order_by("pk").only("pk", "gold_letter")
    Prediction.objects.bulk_create(
        Prediction(
            run=run,
            dyntom_question=q,
            parsed_answer="z" if i % wrong_every == 0 else q.gold_letter,
            parse_status=Prediction.ParseStatus.OK,
            correct=i % wrong_every != 0,
            model=model,
        )
        for i, q in enumerate(questions)
    )
    return run


@pytest.fixture(autouse=True)
def _fresh_report_cache():
    # Reports are cached by a data fingerprint; rolled-back tests can reuse row ids.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def dyntom_runs(dyntom_stages, module_rows) -> list[Run]:
    """Two imported runs (tests/module_rows.py builds them once where the module shares them)."""
    if module_rows.shares("dyntom_runs"):
        pks = module_rows.get("dyntom_runs")
    else:
        pks = build_dyntom_runs(None)
    return [Run.objects.get(pk=pk) for pk in pks]


@pytest.fixture
def client_researcher(client, researcher):
    client.force_login(researcher)
    return client


def read_stream(response) -> bytes:
    assert response.streaming
    return b"".join(response.streaming_content)


# --- index -------------------------------------------------------------------------------


def test_index_lists_benchmarks_with_counts_and_links(
    client_researcher, dyntom_runs, django_assert_max_num_queries
):
    # Session, user, roles, five item-bank counts, runs per benchmark, recent jobs.
    with django_assert_max_num_queries(10):
        response = client_researcher.get(reverse("reports:index"))
    assert response.status_code == 200
    rows = {row["value"]: row for row in response.context["benchmarks"]}
    assert set(rows) == {"tom-in-amc", "tvshowguess", "chartom-qa", "dyntom"}
    assert rows["dyntom"]["items"] == DynToMQuestion.objects.count() == 1719
    assert (rows["dyntom"]["works"], rows["dyntom"]["runs"]) == (24, 2)
    assert rows["chartom-qa"]["runs"] == 0
    content = response.content.decode()
    assert f'href="{reverse("reports:report", args=["dyntom"])}"' in content
    assert "css/reports.css" in content


# --- permissions -------------------------------------------------------------------------


def _protected_urls() -> list[str]:
    return [
        reverse("reports:index"),
        reverse("reports:report", args=["dyntom"]),
        reverse("reports:chart", args=["dyntom", "accuracy", "svg"]),
        reverse("reports:export", args=["dyntom", "csv"]),
        reverse("reports:export", args=["dyntom", "json"]),
        reverse("reports:table-csv", args=["dyntom", "accuracy"]),
        reverse("reports:tidy-csv", args=["dyntom"]),
    ]


def test_anonymous_visitors_are_sent_to_login(client):
    for url in _protected_urls():
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.url.startswith(reverse("login")), url
    response = client.post(reverse("reports:job-create", args=["dyntom"]))
    assert response.status_code == 302
    assert ReportJob.objects.count() == 0


@pytest.mark.parametrize("role", ["rater", "annotator"])
def test_raters_and_annotators_get_403(client, request, role):
    client.force_login(request.getfixturevalue(role))
    for url in _protected_urls():
        assert client.get(url).status_code == 403, url
    assert client.post(reverse("reports:job-create", args=["dyntom"])).status_code == 403
    assert ReportJob.objects.count() == 0


# --- the report page ---------------------------------------------------------------------


def test_report_page_shows_facts_runs_tables_charts_and_downloads(client_researcher, dyntom_runs):
    response = client_researcher.get(reverse("reports:report", args=["dyntom"]))
    assert response.status_code == 200
    content = response.content.decode()
    report = response.context["report"]
    assert report.facts["predictions"] == 2 * 1719

    # Run selector: both runs, both ticked (no selection = every run).
    for run in dyntom_runs:
        assert f'name="runs" value="{run.pk}" checked' in content
    assert content.count("1,719 predictions") == 2

    # Every table and every chart, charts as <img> with SVG/PNG links.
    for table in report.tables:
        assert f'id="table-{table.key}"' in content
        assert reverse("reports:table-csv", args=["dyntom", table.key]) in content
    assert report.charts
    for chart in report.charts:
        svg = reverse("reports:chart", args=["dyntom", chart.key, "svg"])
        png = reverse("reports:chart", args=["dyntom", chart.key, "png"])
        assert f'<a class="chart-frame" href="{svg}">' in content and f'<img src="{svg}"' in content
        # Phones get the narrow layout of the same chart (horizontal bars, legend below).
        assert f'<source media="(max-width: 40rem)" srcset="{svg}?layout=narrow"' in content
        assert f'href="{png}" download' in content
    narrow = client_researcher.get(
        reverse("reports:chart", args=["dyntom", report.charts[0].key, "svg"]) + "?layout=narrow"
    )
    assert narrow["Content-Type"] == "image/svg+xml"
    assert b'width="288pt"' in narrow.content  # 4 inches: a phone's width
    for url in (
        reverse("reports:export", args=["dyntom", "csv"]),
        reverse("reports:export", args=["dyntom", "xlsx"]),
        reverse("reports:export", args=["dyntom", "json"]),
        reverse("reports:tidy-csv", args=["dyntom"]),
    ):
        assert f'href="{url}" download' in content
    assert "Build in background" in content


def test_report_tables_format_percent_and_confidence_intervals(client_researcher, dyntom_runs):
    response = client_researcher.get(reverse("reports:report", args=["dyntom"]))
    report = response.context["report"]
    accuracy = report.table("accuracy")
    shown = next(t for t in response.context["tables"] if t.table.key == "accuracy")
    headers = [h.text for h in shown.headers]
    # The CI's two columns become one "[low, high]" column.
    assert "CI %" in headers
    assert "CI low %" not in headers and "CI high %" not in headers
    assert len(headers) == len(accuracy.columns) - 1
    record = accuracy.records()[0]
    row = dict(zip(headers, [c.text for c in shown.rows[0]], strict=True))
    assert row["Overall %"] == f"{record['Overall %']:.1f}"
    assert row["CI %"] == f"[{record['CI low %']:.1f}, {record['CI high %']:.1f}]"
    assert record["CI low %"] < record["Overall %"] < record["CI high %"]
    content = response.content.decode()
    assert f'<td class="num">{row["CI %"]}</td>' in content


def test_selecting_runs_limits_the_report(client_researcher, dyntom_runs):
    first, second = dyntom_runs
    url = reverse("reports:report", args=["dyntom"])
    response = client_researcher.get(url, {"runs": str(first.pk)})
    assert response.status_code == 200
    report = response.context["report"]
    assert [row[0] for row in report.table("runs").rows] == [first.pk]
    content = response.content.decode()
    assert f'name="runs" value="{first.pk}" checked' in content
    assert f'name="runs" value="{second.pk}">' in content  # not ticked
    # Chart and download links carry the selection.
    assert f"/charts/accuracy.svg?runs={first.pk}" in content
    assert f"tidy.csv?runs={first.pk}" in content

    # The checkboxes submit runs=1&runs=2; the comma form means the same.
    both = client_researcher.get(url, {"runs": [str(first.pk), str(second.pk)]})
    comma = client_researcher.get(url, {"runs": f"{second.pk},{first.pk}"})
    assert both.context["selection"].run_ids == comma.context["selection"].run_ids
    assert comma.context["selection"].run_ids == [first.pk, second.pk]


def test_bad_run_selection_is_a_400_with_a_message(client_researcher, dyntom_runs):
    url = reverse("reports:report", args=["dyntom"])
    response = client_researcher.get(url, {"runs": "999999"})
    assert response.status_code == 400
    assert "no dyntom run with id 999999" in response.content.decode()
    assert client_researcher.get(url, {"runs": "abc"}).status_code == 400
    chart = reverse("reports:chart", args=["dyntom", "accuracy", "svg"])
    assert client_researcher.get(chart, {"runs": "999999"}).status_code == 400
    tidy = reverse("reports:tidy-csv", args=["dyntom"])
    assert client_researcher.get(tidy, {"runs": "999999"}).status_code == 400


def test_unknown_benchmark_chart_or_table_is_404(client_researcher, dyntom_runs):
    assert client_researcher.get("/reports/nosuch/").status_code == 404
    chart = reverse("reports:chart", args=["dyntom", "nosuch", "svg"])
    assert client_researcher.get(chart).status_code == 404
    table = reverse("reports:table-csv", args=["dyntom", "nosuch"])
    assert client_researcher.get(table).status_code == 404


def test_report_page_query_count_does_not_grow_with_runs(client_researcher, dyntom_runs):
    url = reverse("reports:report", args=["dyntom"])

    def queries() -> int:
        cache.clear()
        with CaptureQueriesContext(connection) as captured:
            assert client_researcher.get(url).status_code == 200
        return len(captured)

    # The first build packs each DynToM run's outcomes (a read and a write per run,
    # once); counted here is a page over packed runs.
    queries()
    with_two = queries()
    make_dyntom_run("third", wrong_every=4)
    queries()
    assert queries() == with_two
    assert with_two <= 25

    # Built once, the report is reused: the page then reads runs, jobs, the studies
    # to pick from, the fingerprint and which DynToM runs are packed only.
    with CaptureQueriesContext(connection) as cached:
        client_researcher.get(url)
    assert len(cached) <= 10


def test_report_is_rebuilt_when_predictions_change(client_researcher, dyntom_runs):
    url = reverse("reports:report", args=["dyntom"])
    before = client_researcher.get(url).context["report"].facts["predictions"]
    make_dyntom_run("later", wrong_every=5)
    after = client_researcher.get(url).context["report"].facts["predictions"]
    assert (before, after) == (2 * 1719, 3 * 1719)


def test_big_report_offers_a_background_build(client_researcher, dyntom_runs, settings):
    settings.REPORTS_INLINE_MAX_PREDICTIONS = 1000
    response = client_researcher.get(reverse("reports:report", args=["dyntom"]))
    assert response.status_code == 200
    content = response.content.decode()
    assert "Too big to build on this page" in content
    assert "report" not in response.context or response.context.get("report") is None
    assert 'action="/reports/dyntom/jobs/"' in content
    chart = reverse("reports:chart", args=["dyntom", "accuracy", "svg"])
    assert client_researcher.get(chart).status_code == 404
    # The long-format exports stream and stay available.
    tidy = client_researcher.get(reverse("reports:tidy-csv", args=["dyntom"]))
    assert tidy.status_code == 200


# --- charts ------------------------------------------------------------------------------


def test_a_chart_is_drawn_once_for_its_numbers_and_again_when_they_change(
    client_researcher, dyntom_runs
):
    """The drawing is cached by what it is drawn from: a second request is served the
    stored bytes, and a new run changes the numbers, the key and the picture."""
    from reports import charts

    url = reverse("reports:chart", args=["dyntom", "accuracy", "svg"])
    first = client_researcher.get(url)
    assert first.status_code == 200
    report = services.report_build_cached(benchmark="dyntom")
    chart = charts.chart_by_key(report, "accuracy")
    key = services.chart_cache_key(chart, report.table(chart.table), "svg")
    assert cache.get(key) == first.content == charts.render_chart(report, "accuracy", "svg")
    # The narrow layout and PNG are other drawings, under other keys.
    assert services.chart_cache_key(chart, report.table(chart.table), "svg", layout="narrow") != key
    assert services.chart_cache_key(chart, report.table(chart.table), "png") != key
    assert client_researcher.get(url).content == first.content

    make_dyntom_run("a third run", wrong_every=2)
    changed = client_researcher.get(url)
    assert changed.status_code == 200
    assert changed.content != first.content
    assert b"a third run" in changed.content
    again = services.report_build_cached(benchmark="dyntom")
    assert cache.get(key) == first.content  # the old drawing is not served for new numbers
    assert changed.content == charts.render_chart(again, "accuracy", "svg")


def test_chart_images(client_researcher, dyntom_runs):
    response = client_researcher.get(reverse("reports:report", args=["dyntom"]))
    for chart in response.context["report"].charts:
        svg = client_researcher.get(reverse("reports:chart", args=["dyntom", chart.key, "svg"]))
        assert svg.status_code == 200
        assert svg["Content-Type"] == "image/svg+xml"
        assert svg.content.startswith(b"<?xml")
        assert chart.title.encode() in svg.content
        assert "default-src 'none'" in svg["Content-Security-Policy"]
        png = client_researcher.get(reverse("reports:chart", args=["dyntom", chart.key, "png"]))
        assert png["Content-Type"] == "image/png"
        assert png.content.startswith(b"\x89PNG\r\n\x1a\n")
        assert f"dyntom-report-{chart.key}.png" in png["Content-Disposition"]


# --- exports -----------------------------------------------------------------------------


def test_csv_export_is_a_zip_of_every_table(client_researcher, dyntom_runs):
    response = client_researcher.get(reverse("reports:export", args=["dyntom", "csv"]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert 'filename="dyntom-report-tables.zip"' in response["Content-Disposition"]
    report = client_researcher.get(reverse("reports:report", args=["dyntom"])).context["report"]
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert set(archive.namelist()) == {"README.txt"} | {f"{t.key}.csv" for t in report.tables}
        for table in report.tables:
            frame = pd.read_csv(archive.open(f"{table.key}.csv"))
            assert list(frame.columns) == table.columns
            assert len(frame) == len(table.rows)
    accuracy = pd.read_csv(io.BytesIO(_table_bytes(response.content, "accuracy")))
    assert accuracy["Overall %"].dtype == float
    assert accuracy["Overall %"].tolist() == [
        r["Overall %"] for r in report.table("accuracy").records()
    ]


def _table_bytes(zipped: bytes, key: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(zipped)) as archive:
        return archive.read(f"{key}.csv")


def test_table_csv_and_xlsx_exports(client_researcher, dyntom_runs):
    second = dyntom_runs[1]
    query = {"runs": str(second.pk)}
    table = client_researcher.get(reverse("reports:table-csv", args=["dyntom", "runs"]), query)
    assert table["Content-Type"] == "text/csv; charset=utf-8"
    assert f"dyntom-report-runs-{second.pk}-runs.csv" in table["Content-Disposition"]
    frame = pd.read_csv(io.BytesIO(table.content))
    assert frame["Run"].tolist() == [second.pk]
    assert frame["Predictions"].tolist() == [1719]

    xlsx = client_researcher.get(reverse("reports:export", args=["dyntom", "xlsx"]))
    assert xlsx.status_code == 200
    assert xlsx["Content-Type"].startswith("application/vnd.openxmlformats")
    sheets = pd.read_excel(io.BytesIO(xlsx.content), sheet_name=None, engine="openpyxl")
    report = client_researcher.get(reverse("reports:report", args=["dyntom"])).context["report"]
    assert list(sheets) == ["About", *(t.key[:31] for t in report.tables)]
    runs = sheets["runs"]
    assert runs["Name"].tolist() == ["vanilla gpt", "cot llama"]
    accuracy = sheets["accuracy"]
    assert accuracy["Overall %"].round(2).tolist() == [
        r["Overall %"] for r in report.table("accuracy").records()
    ]


def test_json_export_streams_the_long_format_rows(client_researcher, dyntom_runs):
    first, _ = dyntom_runs
    response = client_researcher.get(
        reverse("reports:export", args=["dyntom", "json"]), {"runs": str(first.pk)}
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = read_stream(response)
    rows = json.loads(body)
    assert len(rows) == 1719
    assert rows == list(selectors.long_format_rows("dyntom", run_ids=[first.pk]))
    frame = pd.read_json(io.BytesIO(body))
    assert list(frame.columns) == selectors.long_format_columns("dyntom")
    assert frame["correct"].dtype == bool
    assert frame["correct"].sum() == sum(r["correct"] for r in rows)


def test_tidy_csv_reads_with_pandas_and_proper_dtypes(client_researcher, dyntom_runs):
    response = client_researcher.get(reverse("reports:tidy-csv", args=["dyntom"]))
    assert response.status_code == 200
    assert 'filename="dyntom-report-tidy.csv"' in response["Content-Disposition"]
    frame = pd.read_csv(io.BytesIO(read_stream(response)))
    assert list(frame.columns) == selectors.long_format_columns("dyntom")
    assert len(frame) == 2 * 1719
    assert frame["correct"].dtype == bool
    assert frame["sample_index"].dtype == "int64"
    assert frame["run_id"].dtype == "int64"
    assert frame["scenario_count"].dtype == "int64"
    by_run = frame.groupby("run_name")["correct"].mean()
    expected = {
        run.name: Prediction.objects.filter(run=run, correct=True).count() / 1719
        for run in dyntom_runs
    }
    assert by_run.to_dict() == pytest.approx(expected)


def test_tvshowguess_human_annotations_export_and_render(client_researcher, shared_data):
    """Real friends.raw + friends.tsv: the human rows stream out and the page renders."""
    from django.core.management import call_command

    path = shared_data / "tvshowguess" / "friends.raw"
    call_command("import_benchmark", "tvshowguess", str(path), "--split", "test", "--no-progress")
    page = client_researcher.get(reverse("reports:report", args=["tvshowguess"]))
    assert page.status_code == 200
    for chart in page.context["report"].charts:
        url = reverse("reports:chart", args=["tvshowguess", chart.key, "png"])
        assert client_researcher.get(url).content.startswith(b"\x89PNG"), chart.key

    response = client_researcher.get(reverse("reports:tidy-csv", args=["tvshowguess"]))
    frame = pd.read_csv(io.BytesIO(read_stream(response)))
    assert list(frame.columns) == selectors.long_format_columns("tvshowguess")
    assert len(frame) == 151  # one row per imported annotation
    assert set(frame["source"]) == {"human"}
    # Scored where the annotator wrote a name: true/false (NaN where not scored).
    scored = frame["correct"].dropna()
    assert len(scored) > 50 and set(scored.astype(str)) <= {"True", "False"}
    rows = json.loads(read_stream(client_researcher.get(
        reverse("reports:export", args=["tvshowguess", "json"])
    )))  # fmt: skip
    assert len(rows) == 151
    assert [r["correct"] for r in rows] == [
        None if pd.isna(v) else bool(v) for v in frame["correct"]
    ]
