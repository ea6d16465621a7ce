"""The report API: researchers only, and the numbers of build_report."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from modeling.models import Prediction, Run
from reports.tables import build_report, report_json
from tests.factories import DynToMQuestionFactory, DynToMStageFactory
from tests.module_rows import build_friends

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture
def runs():
    """Two DynToM runs over the same two questions of one stage."""
    stage = DynToMStageFactory()
    q1 = DynToMQuestionFactory(stage=stage, mental_state="belief")
    q2 = DynToMQuestionFactory(stage=stage, mental_state="emotion")
    made = []
    for name, outcomes in (("first", (True, False)), ("second", (True, True))):
        run = Run.objects.create(name=name, benchmark="dyntom", method="vanilla", model="m")
        for question, ok in zip((q1, q2), outcomes, strict=True):
            Prediction.objects.create(
                run=run, dyntom_question=question, parse_status="ok", correct=ok
            )
        made.append(run)
    return made


def _url(benchmark: str, key: str | None = None, **query: str) -> str:
    if key is None:
        url = reverse("reports-report", kwargs={"benchmark": benchmark})
    else:
        url = reverse("reports-report-table", kwargs={"benchmark": benchmark, "key": key})
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def test_report_equals_build_report(researcher, runs):
    first, second = runs
    response = _client(researcher).get(_url("dyntom", runs=f"{first.pk},{second.pk}", seed="4"))
    assert response.status_code == 200, response.content
    expected = json.loads(json.dumps(build_report("dyntom", seed=4).as_json()))
    assert response.json() == expected
    accuracy = next(t for t in response.json()["tables"] if t["key"] == "accuracy")
    # first: q1 ✓ q2 ✗ = 50%; second: ✓ ✓ = 100%.
    assert [r["Overall %"] for r in accuracy["rows"]] == [50.0, 100.0]


def test_run_selection_and_one_table(researcher, runs):
    first, _ = runs
    response = _client(researcher).get(_url("dyntom", "accuracy", runs=str(first.pk)))
    assert response.status_code == 200, response.content
    table = build_report("dyntom", run_ids=[first.pk]).table("accuracy")
    data = response.json()
    assert data["columns"] == table.columns and data["rows"] == table.records()
    assert [r["System"] for r in data["rows"]] == [f"#{first.pk} first"]


def test_tvshowguess_report_has_the_share_keys(researcher, shared_data):

    build_friends(shared_data)
    data = _client(researcher).get(_url("tvshowguess")).json()
    assert data["dependence"]["direct"] == 26.49
    assert data == json.loads(json.dumps(report_json(build_report("tvshowguess"))))


def test_bad_requests(researcher, runs):
    client = _client(researcher)
    assert client.get(_url("nope")).status_code == 404
    assert client.get(_url("dyntom", "no-such-table")).status_code == 404
    response = client.get(_url("dyntom", runs="1,x"))
    assert response.status_code == 400 and "runs" in response.json()
    response = client.get(_url("dyntom", runs="999"))
    assert response.status_code == 400
    assert "no dyntom run with id 999" in response.json()["runs"][0]


@pytest.mark.parametrize("role", ["rater", "annotator"])
def test_only_researchers(request, role, runs):
    user = request.getfixturevalue(role)
    client = _client(user)
    assert client.get(_url("dyntom")).status_code == 403
    assert client.get(_url("dyntom", "accuracy")).status_code == 403
    assert APIClient().get(_url("dyntom")).status_code in (401, 403)
