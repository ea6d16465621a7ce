"""Predictions made elsewhere on a mapped benchmark's items, imported by item set and item
id and scored as the generic pipeline scores its own replies."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError

from modeling.models import Prediction, Run
from tests.generic_items import make_generic_benchmark

from .test_import_predictions import run_import, stored, write_jsonl

pytestmark = pytest.mark.django_db


def line(item: str, **fields) -> dict:
    return {
        "benchmark": "generic",
        "model": "lab-llm",
        "work": "mini-tom@1",
        "item": item,
        **fields,
    }


def test_answers_by_letter_text_or_reply_are_scored_against_the_gold(tmp_path):
    make_generic_benchmark()
    path = write_jsonl(
        tmp_path / "preds.jsonl",
        [
            line("mt-01", answer="A"),  # gold A
            line("mt-02", answer="Crayons"),  # the gold option's text
            line("mt-03", raw_output="Piet saw it move.\nAnswer: A"),  # gold B
            line("mt-04", answer=None),
            line("mt-05", answer="Z"),
            line("mt-06", answer="B", sample_index=1, correct=False),
        ],
    )
    run_import(path, "--name", "lab")
    run = Run.objects.get()
    assert (run.benchmark, run.model, run.imported, run.status) == (
        "generic",
        "lab-llm",
        True,
        Run.Status.SUCCEEDED,
    )
    got = {
        (p.mc_item.item_id, p.sample_index): (p.parsed_answer, p.parse_status, p.correct)
        for p in Prediction.objects.filter(run=run).select_related("mc_item")
    }
    assert got == {
        ("mt-01", 0): ("A", "ok", True),
        ("mt-02", 0): ("B", "ok", True),
        ("mt-03", 0): ("A", "ok", False),
        ("mt-04", 0): ("", "missing", False),
        ("mt-05", 0): ("", "unparseable", False),
        # The file's own claim is not what counts: B is mt-06's gold.
        ("mt-06", 1): ("B", "ok", True),
    }


def test_a_language_picks_the_option_texts(tmp_path):
    make_generic_benchmark(bilingual=True)
    path = write_jsonl(
        tmp_path / "zh.jsonl",
        [line("mt-02", answer="（中文）Crayons", language="zh")],  # noqa: RUF001
    )
    run_import(path, "--name", "zh")
    prediction = Prediction.objects.get()
    assert (prediction.parsed_answer, prediction.correct) == ("B", True)


@pytest.mark.parametrize(
    ("record", "where"),
    [
        (
            line("mt-99", answer="A"),
            "record line 2: field 'item': item set 'mini-tom@1' has no item",
        ),
        (
            {**line("mt-01", answer="A"), "work": "other@1"},
            "record line 2: field 'work': no Other (mapped) item set 'other@1'",
        ),
        (line("mt-01", answer="A", language="fr"), "record line 2: field 'language'"),
        (line("mt-01"), "record line 2: field 'answer': missing"),
    ],
)
def test_a_bad_line_names_itself_and_writes_nothing(tmp_path, record, where):
    make_generic_benchmark()
    before = stored()
    path = write_jsonl(tmp_path / "bad.jsonl", [line("mt-02", answer="B"), record])
    with pytest.raises(CommandError) as exc:
        run_import(path, "--name", "bad")
    assert where in str(exc.value)
    assert stored() == before
