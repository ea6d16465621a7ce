"""A draft study (no answers, maybe never run) is not listed as a system in reports by
default; asked for by id it still is (issue 16)."""

from __future__ import annotations

import pytest

from reports.selectors import report_studies
from reports.tables import build_report
from studies.services import study_create, study_go_live
from tests.studies.conftest import friends  # noqa: F401

pytestmark = pytest.mark.django_db


def test_a_draft_study_is_not_a_system(friends):  # noqa: F811
    draft = study_create(name="Draft friends", benchmark="tvshowguess", works=[friends])
    live = study_go_live(
        study=study_create(name="Live friends", benchmark="tvshowguess", works=[friends])
    )
    assert [s["id"] for s in report_studies("tvshowguess")] == [live.pk]
    assert [s["id"] for s in report_studies("tvshowguess", study_ids=[draft.pk])] == [draft.pk]
    text = str(build_report("tvshowguess").as_json())
    assert "Humans: Draft friends" not in text and "Humans: Live friends" in text


def test_start_one_only_where_a_pipeline_runs_it(client, researcher):
    from modeling.pipelines import pipeline_benchmarks

    client.force_login(researcher)
    for benchmark in ("dyntom", "tom-in-amc", "tvshowguess", "chartom-qa"):
        page = client.get(f"/reports/{benchmark}/").content.decode()
        offered = f"/runs/new/?benchmark={benchmark}" in page
        assert offered == (benchmark in pipeline_benchmarks()), benchmark


def test_run_form_offers_to_add_a_backend_when_there_is_none(client, researcher):
    client.force_login(researcher)
    page = client.get("/runs/new/").content.decode()
    assert 'data-testid="no-backend"' in page and "/runs/backends/new/?next=/runs/new/" in page
    assert "OPENAI_API_KEY" in page
