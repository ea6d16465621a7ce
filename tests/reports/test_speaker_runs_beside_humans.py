"""A speaker-guessing run made by the engine sits beside a human study in the report."""

from __future__ import annotations

import pytest

from modeling.models import Run
from modeling.runs.executor import run_execute
from modeling.runs.services import run_create
from reports.tables import build_report
from tests.modeling import conftest as run_fixtures
from tests.modeling.test_speaker_guess_pipeline import gold_answers, responder_for
from tests.reports.test_human_tables import HUMANS, _row, study  # noqa: F401
from tests.studies.conftest import friends  # noqa: F401

pytestmark = pytest.mark.django_db

openai_backend = run_fixtures.openai_backend


def test_tompro_and_icl_runs_beside_the_human_study(study, openai_backend, llm_server):  # noqa: F811
    labels = []
    for method, options in (
        ("icl", {"shots": 10, "perturb_names": True}),
        ("tompro", {"dimensions": ["personality"]}),
    ):
        llm_server.responder = responder_for(gold_answers("tvshowguess", method, options, {}))
        run = run_create(
            benchmark="tvshowguess",
            method=method,
            backend=openai_backend,
            selection={},
            params={"options": options},
            enqueue=False,
        )
        assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
        labels.append(f"#{run.pk} {run.name}")
    report = build_report("tvshowguess")
    acc = report.table("accuracy-common")
    # The runs answered every speaker, so the common set is the study's speakers.
    assert report.facts["compared_instances"] == 7
    humans = _row(acc, HUMANS)
    assert humans["Instances"] == 7 and humans["CI low %"] is not None
    for label in labels:
        machine = _row(acc, label)
        assert (machine["Instances"], machine["Accuracy %"]) == (7, 100.0)
        assert (machine["CI low %"], machine["CI high %"]) == (100.0, 100.0)
        assert machine["Method"] in ("icl", "tompro")
