"""A speaker-guessing run made by the engine sits beside a human study in the report."""

from __future__ import annotations

import pytest

from modeling.models import Run
from modeling.runs.executor import run_execute
from modeling.runs.recording import NO_CACHE
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


def test_a_run_with_no_parseable_answer_stays_in_the_common_set_and_says_so(
    study,  # noqa: F811
    openai_backend,
    llm_server,
    client,
    researcher,
):
    # Issue 49: a run whose every reply is unparseable must not pass for one that erred.
    llm_server.responder = responder_for(gold_answers("tvshowguess", "zero-shot", {}, {}))
    good = run_create(
        benchmark="tvshowguess", method="zero-shot", backend=openai_backend, selection={},
        params={}, enqueue=False,
    )  # fmt: skip
    run_execute(run_id=good.pk)
    llm_server.responder = lambda body: "Sorry, I would rather not guess."
    garbage = run_create(
        benchmark="tvshowguess", method="zero-shot", backend=openai_backend, selection={},
        params={NO_CACHE: True}, enqueue=False,
    )  # fmt: skip
    run_execute(run_id=garbage.pk)
    assert not garbage.predictions.filter(parse_status="ok").exists()

    report = build_report("tvshowguess")
    runs = report.table("runs")
    assert _row(runs, garbage.pk)["Unparseable %"] == 100.0
    common = report.table("accuracy-common")
    label = f"#{garbage.pk} {garbage.name}"
    assert _row(common, label)["Accuracy %"] == 0.0
    assert _row(common, f"#{good.pk} {good.name}")["Accuracy %"] == 100.0
    replies = garbage.predictions.count()
    assert replies > 1
    assert (
        f" No parseable answer, in it at 0% (every answer counted wrong): {label} "
        f"(all {replies} replies unparseable)."
    ) in common.note
    # The own-answers table has no such note: the common set's is where 0% misleads.
    assert "No parseable answer" not in report.table("accuracy").note
    # The page shows it above the common set's table, not folded in its method note.
    assert common.alert == (
        f"No parseable answer, in it at 0% (every answer counted wrong): {label} "
        f"(all {replies} replies unparseable)."
    )
    assert not report.table("accuracy").alert
    client.force_login(researcher)
    page = client.get("/reports/tvshowguess/").content.decode()
    section = page[page.index('id="table-accuracy-common"') :]
    alert = section[section.index('data-testid="table-alert">') :].split("</p>")[0]
    assert f"{label} (all {replies} replies unparseable)" in alert
    assert section.index('data-testid="table-alert"') < section.index("<table")
