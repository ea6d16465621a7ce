"""The CharToM-QA report, table for table, against the report saved before its tables
counted answers as arrays (issue 31: the report's first build at 100,000 predictions).

``golden/chartom-qa.json`` holds the whole report JSON (every table, note and chart)
that the row-by-row builders made from the data built here; the array builders must
reproduce it exactly, bootstrap intervals included. The data mixes what the counting
treats specially: judge replies read strict and as the published evaluator reads them
(well-formed, malformed, "None"), imported verdicts (defects as text, list, null or
"None"), unjudged answers, answers without character counts or with an empty reference,
contexts from the answer, from the run or from neither, questions without a directness
label, unparseable and unanswered choices, second samples, a run that answered only
some questions and a run with no answers.

Run ids differ between databases and runs of the suite, so they are replaced by their
order of creation. When a change to a table is intended, rewrite the file with
``TOMLAB_GOLDEN_WRITE=1`` and review the diff.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from benchmarks.models import QAItem, ToMDimension, Work
from modeling.models import Prediction, Run
from modeling.pipelines.chartom_qa.reading import (
    BONUS_PREFIX,
    DEFECTS_PREFIX,
    bonus_judgement,
    defects_judgement,
)
from reports.tables import build_report, report_json
from tests.reports.test_speaker_report_golden import _check, _normalised

pytestmark = pytest.mark.django_db

DIRECTNESS = ["direct", "indirect", None]


def _items() -> list[QAItem]:
    works = [
        Work.objects.create(benchmark="chartom-qa", key=f"golden-{n}", title=f"Novel {n}")
        for n in range(2)
    ]
    dimensions = [d.value for d in ToMDimension]
    return QAItem.objects.bulk_create(
        [
            QAItem(
                work=works[i % 2],
                natural_key=f"golden-{i}",
                position=i,
                dimension=dimensions[i % len(dimensions)],
                question=f"Question {i}?",
                answer=f"Answer {i}.",
                bonus_points=[f"point {k}" for k in range(1 + i % 4)],
                misleading_choices=["b", "c", "d"],
                directness=DIRECTNESS[i % 3],
            )
            for i in range(36)
        ]
    )


def _judged(rng: random.Random, total: int) -> dict[str, Any]:
    """Details of a response judged by the LLM judge: its replies, read both ways."""
    picks = sorted(rng.sample(range(1, total + 1), rng.randint(0, total)))
    bonus = rng.choice(
        [
            f"{BONUS_PREFIX} {', '.join(map(str, picks)) or 'None'}",
            f"{BONUS_PREFIX} {', '.join(map(str, picks)) or 'None'}",
            "I think the answer covers points 1 and 2",  # unparseable both ways
            f"{BONUS_PREFIX} {total + 3}",  # a point that does not exist
        ]
    )
    defects = rng.choice(
        [f"{DEFECTS_PREFIX} None", f"{DEFECTS_PREFIX} misreads the motive", "no defects", ""]
    )
    return bonus_judgement(bonus, total=total) | defects_judgement(defects)


def _imported(rng: random.Random, total: int) -> dict[str, Any]:
    """Details of a response with published (already read) verdicts."""
    return {
        "bonus_points_total": total,
        "bonus_points_included": sorted(rng.sample(range(total), rng.randint(0, total))),
        "defects": rng.choice([None, "None", "vague", ["wrong character"], [], ["None."]]),
    }


def _lengths(rng: random.Random) -> dict[str, Any]:
    return rng.choice(
        [
            {"response_chars": rng.randint(50, 900), "answer_chars": rng.randint(40, 300)},
            {"response_chars": rng.randint(50, 900), "answer_chars": 0},
            {"answer_chars": 120},
            {},
        ]
    )


def _context(rng: random.Random) -> dict[str, Any]:
    contexts = [{}, {"context": 0}, {"context": "1000"}, {"context": 2000}, {"context": None}]
    return rng.choice(contexts)


@pytest.fixture
def runs() -> list[Run]:
    rng = random.Random(31)
    items = _items()

    def run(name: str, method: str, context: Any) -> Run:
        params = {} if context == "absent" else {"context": context}
        return Run.objects.create(
            name=name, benchmark="chartom-qa", method=method, model=name, params=params,
            imported=True, status=Run.Status.SUCCEEDED,
        )  # fmt: skip

    judged = run("judged", "generative", 0)
    imported = run("imported", "generative", 2000)
    choices = run("choices", "multichoice", "absent")
    some = run("some choices", "multichoice", 1000)
    run("nothing yet", "generative", None)
    rows: list[Prediction] = []

    def add(run: Run, item: QAItem, sample: int, details: dict[str, Any], **kw: Any) -> None:
        rows.append(
            Prediction(run=run, qa_item=item, sample_index=sample, details=details,
                       model=run.model, **kw)
        )  # fmt: skip

    for item in items:
        total = len(item.bonus_points)
        for sample in (0, 1):
            verdict = _judged(rng, total) if rng.random() < 0.85 else {"bonus_points_total": total}
            scores = {"rouge_l": round(rng.random(), 3)} if rng.random() < 0.5 else {}
            add(judged, item, sample, {"task": "generative", **verdict, **_lengths(rng), **scores})
        add(imported, item, 0, {"task": "generative", **_imported(rng, total), **_lengths(rng),
                                **_context(rng)})  # fmt: skip
        status = rng.choice(["ok", "ok", "ok", "unparseable"])
        correct = None if status != "ok" else rng.choice([True, False, None])
        add(choices, item, 0, {"task": "multichoice", **_context(rng)},
            parse_status=status, correct=correct)  # fmt: skip
        if item.position % 3 == 0:
            add(some, item, 0, {"task": "multichoice"}, correct=rng.random() < 0.6)
    Prediction.objects.bulk_create(rows)
    return list(Run.objects.filter(benchmark="chartom-qa").order_by("pk"))


def test_chartom_report_matches_the_row_builders(runs):
    data = report_json(build_report("chartom-qa", seed=3))
    keys = [table["key"] for table in data["tables"]]
    assert {"generative", "generative-reference", "multichoice", "directness", "by-context"} <= {
        *keys
    }
    _check("chartom-qa", _normalised(data, [r.pk for r in runs], []))
