"""CharToM-QA by context length: predictions imported with ``context`` (0, 1000, 2000
tokens of plot window) land in one run per task and context, and the ``by-context``
table splits BPC / PR and accuracy by dimension and context length (paper, Table 1).

The two real items of ``paper_examples.jsonl``: Father Goriot (intention) and Monte
Cristo (belief), two bonus points each. Every expected number has its arithmetic.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmarks.models import QAItem
from modeling.models import Prediction, Run
from reports.tables import build_report

pytestmark = pytest.mark.django_db

GORIOT = "Father Goriot by Honoré de Balzac"
MONTE_CRISTO = "The Count of Monte Cristo by Alexandre Dumas"


@pytest.fixture
def examples(shared_data: Path) -> Path:
    return shared_data / "chartom-qa" / "paper_examples.jsonl"


@pytest.fixture
def items(examples: Path) -> dict[str, QAItem]:
    call_command(
        "import_benchmark", "chartom-qa", str(examples), "--split", "test", "--no-progress",
        stdout=StringIO(), stderr=StringIO(),
    )  # fmt: skip
    return {item.work.key: item for item in QAItem.objects.select_related("work")}


def _lines(items: dict[str, QAItem]) -> list[dict]:
    goriot, cristo = items[GORIOT], items[MONTE_CRISTO]
    base = {"benchmark": "chartom-qa", "model": "my-llm"}

    def gen(item, context, included, defects):
        return {**base, "item": item.natural_key, "task": "generative", "context": context,
                "raw_output": "…", "bonus_points_included": included,
                "defects": defects}  # fmt: skip

    def mc(item, context, answer):
        # The answer shown first: "a" is right.
        return {**base, "item": item.natural_key, "task": "multichoice", "context": context,
                "choices": [item.answer, *item.misleading_choices], "answer": answer}  # fmt: skip

    return [
        gen(goriot, 0, [0], "vague"),
        gen(cristo, "0", [0, 1], None),
        gen(goriot, "2k", [0, 1], None),
        gen(cristo, 2000, [], ["wrong character"]),
        mc(goriot, 0, "a"),
        mc(cristo, 0, "b"),
        mc(goriot, "2k", "a"),
        mc(cristo, 2000, "a"),
    ]


def _import(path: Path, name: str) -> str:
    out = StringIO()
    call_command("import_predictions", str(path), "--name", name, stdout=out, stderr=StringIO())
    return out.getvalue()


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    return path


def _cell(table, context: str, dimension: str) -> dict:
    (record,) = [
        r for r in table.records() if (r["Context"], r["Dimension"]) == (context, dimension)
    ]
    return record


def test_one_run_per_task_and_context(items, tmp_path):
    out = _import(_write(tmp_path / "ctx.jsonl", _lines(items)), "ctx")

    runs = {r.name: r for r in Run.objects.all()}
    assert sorted(runs) == [
        "ctx (generative, c=0)",
        "ctx (generative, c=2k)",
        "ctx (multichoice, c=0)",
        "ctx (multichoice, c=2k)",
    ]
    assert runs["ctx (generative, c=2k)"].params == {"context": 2000}
    assert runs["ctx (multichoice, c=0)"].params == {"context": 0}
    assert "Prediction: 8 created" in out
    # Each prediction carries its context; the same item twice, once per run.
    contexts = {(p.run.name, p.qa_item.work.key): p.details["context"]
                for p in Prediction.objects.select_related("run", "qa_item__work")}  # fmt: skip
    assert contexts[("ctx (generative, c=0)", GORIOT)] == 0
    assert contexts[("ctx (generative, c=2k)", GORIOT)] == 2000
    assert contexts[("ctx (multichoice, c=2k)", MONTE_CRISTO)] == 2000
    # Again: nothing new.
    assert "Prediction: 0 created, 8 unchanged" in _import(tmp_path / "ctx.jsonl", "ctx")


@pytest.mark.parametrize("bad", ["500", "1K", 1, True, 1000.0, "2000", ["0"]])
def test_bad_context_imports_nothing(items, tmp_path, bad):
    lines = _lines(items)
    lines[5]["context"] = bad
    path = _write(tmp_path / "bad.jsonl", lines)

    with pytest.raises(CommandError) as exc:
        _import(path, "bad")

    assert f"{path}: record line 6: field 'context'" in str(exc.value)
    assert "is not one of 0, 1000, 2000" in str(exc.value)
    assert Run.objects.count() == Prediction.objects.count() == 0


def test_by_context_table(items, examples, tmp_path):
    _import(_write(tmp_path / "ctx.jsonl", _lines(items)), "ctx")
    _import(examples, "published")  # no context: shown under "(unknown)"
    runs = {r.name: f"#{r.pk} {r.name}" for r in Run.objects.all()}
    g0, g2 = runs["ctx (generative, c=0)"], runs["ctx (generative, c=2k)"]
    m0, m2 = runs["ctx (multichoice, c=0)"], runs["ctx (multichoice, c=2k)"]
    gp, mp = runs["published (generative)"], runs["published (multichoice)"]

    table = build_report("chartom-qa").table("by-context")

    assert [tuple(r[:2]) for r in table.rows] == [
        (context, dimension)
        for context in ("0", "2000", "(unknown)")
        for dimension in ("belief", "intention", "All")
    ]
    # c=0: Goriot (intention) 1 of 2 points with a defect; Cristo (belief) 2 of 2, none.
    assert _cell(table, "0", "intention")[f"{g0} BPC %"] == 50.0  # 1 / 2
    assert _cell(table, "0", "intention")[f"{g0} PR %"] == 100.0  # 1 / 1
    assert _cell(table, "0", "belief")[f"{g0} BPC %"] == 100.0  # 2 / 2
    everything = _cell(table, "0", "All")
    assert everything[f"{g0} n"] == 2
    assert everything[f"{g0} BPC %"] == 75.0  # (1 + 2) / (2 + 2)
    assert everything[f"{g0} PR %"] == 50.0  # 1 of 2 responses
    assert everything[f"{m0} accuracy %"] == 50.0  # Goriot a ✓, Cristo b ✗
    assert _cell(table, "0", "belief")[f"{m0} accuracy %"] == 0.0
    # The 2k runs have nothing at c=0.
    assert (everything[f"{g2} n"], everything[f"{g2} BPC %"]) == (0, None)
    assert everything[f"{m2} n"] == 0
    # c=2000: Goriot 2 of 2, no defect; Cristo 0 of 2 with a defect.
    everything = _cell(table, "2000", "All")
    assert everything[f"{g2} BPC %"] == 50.0  # (2 + 0) / (2 + 2)
    assert everything[f"{g2} PR %"] == 50.0  # 1 of 2
    assert _cell(table, "2000", "belief")[f"{g2} PR %"] == 100.0
    assert everything[f"{m2} accuracy %"] == 100.0  # a ✓, a ✓
    # The published GPT-4o outputs: BPC 3/4, PR 1/2, accuracy 1/2.
    unknown = _cell(table, "(unknown)", "All")
    assert (unknown[f"{gp} BPC %"], unknown[f"{gp} PR %"]) == (75.0, 50.0)
    assert unknown[f"{mp} accuracy %"] == 50.0
    assert unknown[f"{g0} n"] == 0
