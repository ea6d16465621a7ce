"""The prediction table's indexes after migration 0009, on whichever database runs."""

from __future__ import annotations

import pytest
from django.db import connection

from modeling.models import Prediction

pytestmark = pytest.mark.django_db


def _indexes() -> dict[str, list[str]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Prediction._meta.db_table)
    return {
        name: info["columns"]
        for name, info in constraints.items()
        if info["index"] and not info["primary_key"]
    }


def test_item_references_are_indexed_only_where_set_and_run_once():
    indexes = _indexes()
    # One index leads with the run (besides the per-item unique ones): the migration
    # dropped (run) and (run, parse_status) for it.
    assert indexes["prediction_run_status"] == ["run_id", "parse_status", "id"]
    single = sorted(columns[0] for columns in indexes.values() if len(columns) == 1)
    assert single == [
        "call_id",
        "dyntom_question_id",
        "mc_item_id",
        "qa_item_id",
        "speaker_instance_id",
    ]
    assert [c for c in indexes.values() if c[:1] == ["run_id"] and len(c) < 3] == []
    # The single-column item indexes are the partial ones the migration made.
    for name in (
        "prediction_dyntom_set",
        "prediction_qa_item_set",
        "prediction_instance_set",
        "prediction_mc_item_set",
    ):
        assert name in indexes
    assert len(indexes) == 10
