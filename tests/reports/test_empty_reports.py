"""Report pages before anything is imported, and before any run: apart from
tests/reports/test_views.py, whose module shares two imported DynToM runs."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.modeling import conftest as run_fixtures

pytestmark = pytest.mark.django_db

# The DynToM fixture lives in tests/modeling/conftest.py, which this folder does not see.
dyntom_stages = run_fixtures.dyntom_stages


@pytest.fixture
def client_researcher(client, researcher):
    client.force_login(researcher)
    return client


@pytest.mark.parametrize("benchmark", ["tom-in-amc", "tvshowguess", "chartom-qa", "dyntom"])
def test_every_benchmark_page_renders_before_anything_is_imported(client_researcher, benchmark):
    response = client_researcher.get(reverse("reports:report", args=[benchmark]))
    assert response.status_code == 200
    report = response.context["report"]
    assert report.benchmark == benchmark
    for chart in report.charts:
        image = client_researcher.get(reverse("reports:chart", args=[benchmark, chart.key, "svg"]))
        assert image.status_code == 200, chart.key
        assert image.content.startswith(b"<?xml")


def test_report_without_runs_still_renders(client_researcher, dyntom_stages):
    response = client_researcher.get(reverse("reports:report", args=["dyntom"]))
    assert response.status_code == 200
    assert "No model runs on DynToM yet" in response.content.decode()
    chart = client_researcher.get(reverse("reports:chart", args=["dyntom", "accuracy", "png"]))
    assert chart.status_code == 200
    assert chart.content.startswith(b"\x89PNG\r\n\x1a\n")
