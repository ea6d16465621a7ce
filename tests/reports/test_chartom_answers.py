"""CharToM-QA runs packed for their report (``reports.chartom_answers``) stay current:
verdicts and text scores merged into details after packing reach the report, a
question edited after packing is grouped by its new labels, and a running run is not
packed again after every merge. The tables' numbers themselves are pinned by
``test_chartom_report_golden``."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.models import QAItem
from modeling.models import Prediction, Run
from modeling.pipelines.chartom_qa.predictions import prediction_details_merge
from reports.models import PackedRun
from reports.tables import build_report
from tests.reports.test_chartom_report_golden import _items

pytestmark = pytest.mark.django_db


@pytest.fixture
def run() -> Run:
    items = _items()[:8]
    run = Run.objects.create(
        name="answers", benchmark="chartom-qa", method="generative", model="m",
        status=Run.Status.SUCCEEDED,
    )  # fmt: skip
    Prediction.objects.bulk_create(
        Prediction(
            run=run,
            qa_item=item,
            details={
                "task": "generative",
                "bonus_points_total": 2,
                "bonus_points_included": [],
                "defects": [],
            },
        )
        for item in items
    )
    return run


def _all_row(table_key: str, run: Run) -> dict:
    report = build_report("chartom-qa", run_ids=[run.pk])
    (row,) = [r for r in report.table(table_key).records() if r["Dimension"] == "All"]
    return row


def test_verdicts_merged_after_packing_reach_the_report(run, django_capture_on_commit_callbacks):
    bpc = f"#{run.pk} answers BPC %"
    assert _all_row("generative", run)[bpc] == 0.0
    packed = PackedRun.objects.get(run=run)
    assert packed.predictions == 8

    ids = list(run.predictions.order_by("pk").values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        prediction_details_merge({pk: {"bonus_points_included": [0, 1]} for pk in ids[:2]})
    # Packed again once the merge committed, one generation on.
    repacked = PackedRun.objects.get(run=run)
    assert (repacked.generation, repacked.predictions) == (packed.generation + 1, 8)
    # 2 answers x 2 points of 8 x 2 points.
    assert _all_row("generative", run)[bpc] == 25.0

    with django_capture_on_commit_callbacks(execute=True):
        prediction_details_merge({pk: {"rouge_l": 0.5} for pk in ids})
    (system,) = [
        r
        for r in build_report("chartom-qa", run_ids=[run.pk]).table("table-7").records()
        if r["System"] == f"#{run.pk} answers"
    ]
    assert system["RougeL"] == 0.5


def test_a_question_edited_after_packing_moves_to_its_new_labels(run):
    n = f"#{run.pk} answers n"
    before = {
        r["Dimension"]: r[n]
        for r in build_report("chartom-qa", run_ids=[run.pk]).table("generative").records()
    }
    item = QAItem.objects.get(pk=run.predictions.order_by("pk").first().qa_item_id)
    old = item.dimension
    new = next(d for d in before if d not in (old, "All"))
    QAItem.objects.filter(pk=item.pk).update(dimension=new)

    after = {
        r["Dimension"]: r[n]
        for r in build_report("chartom-qa", run_ids=[run.pk]).table("generative").records()
    }
    assert after[new] == before[new] + 1
    assert after.get(old, 0) == before[old] - 1


def test_a_running_run_is_packed_when_it_finishes_not_after_each_merge(
    run, django_capture_on_commit_callbacks
):
    build_report("chartom-qa", run_ids=[run.pk])
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    pk = run.predictions.order_by("pk").first().pk
    with django_capture_on_commit_callbacks(execute=True):
        prediction_details_merge({pk: {"bonus_points_included": [0]}})
    assert PackedRun.objects.get(run=run).predictions is None  # stale, not packed again
    # The report packs what it finds stale.
    assert _all_row("generative", run)[f"#{run.pk} answers BPC %"] == 6.25
    assert PackedRun.objects.get(run=run).predictions == 8


def test_the_cached_page_is_built_again_after_verdicts_change_in_place(
    run, client, researcher, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    url = reverse("reports:report", args=["chartom-qa"])
    bpc = f"#{run.pk} answers BPC %"

    def shown() -> float:
        table = client.get(url).context["report"].table("generative")
        (row,) = [r for r in table.records() if r["Dimension"] == "All"]
        return row[bpc]

    assert shown() == 0.0
    ids = list(run.predictions.values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        prediction_details_merge({pk: {"bonus_points_included": [1]} for pk in ids})
    # Same count and ids, so only the pack generation tells the cache.
    assert shown() == 50.0
