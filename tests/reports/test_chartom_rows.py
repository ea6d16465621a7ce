"""A CharToM-QA run's pack reads what the tables need of each prediction
(``selectors.chartom_pack_rows``), with ``details`` as text decoded a chunk of rows
per ``json.loads`` (``selectors._json_decoded``). Every row must hold what the export's
read (``chartom_prediction_rows``, the JSONField's own decoding) gives, in its order."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from benchmarks.models import QAItem
from modeling.models import Prediction, Run
from reports import selectors

pytestmark = pytest.mark.django_db

DETAILS = [
    {},
    {"task": "generative", "context": 1000, "bonus_points_included": [0, 2], "defects": []},
    {"task": "multichoice", "context": "2k", "gold_letter": "a"},
    {"nested": {"a": [1, 2.5, None, True, False]}, "text": 'quote " and \\ and \n and é 🙂'},
    {"big": 2**70, "negative": -3.25e-7, "empty": "", "null": None},
]


@pytest.fixture
def run_ids(shared_data: Path) -> list[int]:
    call_command(
        "import_benchmark", "chartom-qa", str(shared_data / "chartom-qa" / "paper_examples.jsonl"),
        "--split", "test", "--no-progress", stdout=StringIO(), stderr=StringIO(),
    )  # fmt: skip
    items = list(QAItem.objects.order_by("pk"))
    ids = []
    for n in range(2):
        run = Run.objects.create(name=f"rows {n}", benchmark="chartom-qa", method="generative")
        Prediction.objects.bulk_create(
            Prediction(
                run=run,
                qa_item=items[i % len(items)],
                sample_index=i // len(items),
                parse_status=Prediction.ParseStatus.OK,
                details=details,
            )
            for i, details in enumerate(DETAILS)
        )
        ids.append(run.pk)
    return ids


def test_the_pack_read_is_the_export_read_with_fewer_columns(run_ids):
    report = [row for run_id in run_ids for row in selectors.chartom_pack_rows(run_id)]
    export = list(selectors.chartom_prediction_rows(run_ids))

    assert len(report) == len(export) == 2 * len(DETAILS)
    keys = ["id", "sample_index", "parse_status", "correct", "details"]
    assert all(sorted(row) == sorted([*keys, "qa_item_id"]) for row in report)
    assert [{key: row[key] for key in keys} for row in report] == [
        {key: row[key] for key in keys} for row in export
    ]
    assert [row["qa_item_id"] for row in report] == [row["item_id"] for row in export]
    assert [row["details"] for row in report] == DETAILS * 2


def test_chunks_and_text_that_is_not_json():
    rows = [{"n": i, "text": text} for i, text in enumerate(['{"a": 1}', None, "[1", "2]", "3"])]

    # Joined, "[1", "2]" and "3" would read as two values, not three: each is then
    # read on its own, and text that is not JSON stays text, as JSONField leaves it.
    out = list(selectors._json_decoded(iter(rows), "text", "value", chunk_size=2))

    assert [row["value"] for row in out] == [{"a": 1}, None, "[1", "2]", 3]
    assert [row["n"] for row in out] == [0, 1, 2, 3, 4]
    assert all("text" not in row for row in out)
