"""A generic benchmark's report, checked against accuracy counted by hand.

The rows are written straight through the ORM (``make_generic_benchmark`` for the
items; studies, participants and picks as the choice studies store them), so these
tests do not depend on the study screens. The numbers in the comments are counted from
the picks below; the other surfaces (page, CSV, JSON, API, jobs) are held to the same
report in ``test_generic_surfaces.py``.

Work A ("Mini ToM"): 12 items, gold A for mt-01 and mt-12, B for the others; mt-12 is
cut to two options (chance 1/2), every other item has four (chance 1/4).

Study S1 on mt-01..mt-06 (gold A B B B B B):
    P1  A B B B B B   6/6
    P2  A C B A B D   3/6
    P3  B C C A B D   1/6   excluded by the researcher
    P4  withdrawn (never counted), plus an attention check and an unsubmitted item
Study S2 on mt-04..mt-09 (gold B B B B B B):
    Q1  A B D B C B
    Q2  A B B B C A
Run R1 on all 12: right on mt-01..05, 07, 08, 11, 12; wrong on 06 and 09; 10 unparseable.
Run R2 on mt-01, mt-02 with two samples: 01 right then wrong, 02 right twice.
Work B ("Other ToM"): its own run and study, which work A's report never reads.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from django.utils import timezone

from benchmarks.models import MCItem, Work
from metrics import accuracy_ci, mean_ci
from modeling.models import Prediction, Run
from reports.report_types import Report
from reports.tables import build_report
from studies.models import (
    Assignment,
    ChoiceAnswer,
    Participant,
    Study,
    StudyItem,
    StudyWork,
    WorkSession,
)
from tests.generic_items import make_generic_benchmark

pytestmark = pytest.mark.django_db

LETTER = {letter: i for i, letter in enumerate("ABCD")}
_tokens = itertools.count(1)


@dataclass
class GenericRows:
    work: Work
    other: Work
    s1: Study
    s2: Study
    r1: Run
    r2: Run
    other_run: Run
    other_study: Study
    excluded: Participant


def make_study(work: Work, name: str, item_ids: list[str], **fields) -> Study:
    study = Study.objects.create(
        name=name, benchmark="generic", status=Study.Status.LIVE, seed=1, **fields
    )
    study_work = StudyWork.objects.create(study=study, work=work)
    for position, item in enumerate(MCItem.objects.filter(work=work, item_id__in=item_ids)):
        StudyItem.objects.create(
            study=study, study_work=study_work, mc_item=item, position=position
        )
    return study


def answer(
    study: Study,
    label: str,
    picks: dict[str, str],
    *,
    submitted: bool = True,
    role: str = StudyItem.Role.TEST,
    participant: Participant | None = None,
) -> Participant:
    """``label`` picks ``picks`` (item id -> letter), one assignment per item, as the
    choice studies store them: option in the item's own order, correct once final."""
    now = timezone.now()
    if participant is None:
        participant = Participant.objects.create(
            study=study, token=f"generic-{next(_tokens)}", label=label, consented_at=now
        )
    study_work = study.study_works.get()
    session, _ = WorkSession.objects.get_or_create(
        participant=participant, study_work=study_work, defaults={"seen": False, "seed": 7}
    )
    for position, (item_id, letter) in enumerate(picks.items()):
        item = MCItem.objects.get(work=study_work.work, item_id=item_id)
        study_item, _ = StudyItem.objects.get_or_create(
            study=study, mc_item=item, defaults={"study_work": study_work, "role": role}
        )
        assignment = Assignment.objects.create(
            participant=participant,
            session=session,
            study_item=study_item,
            position=position,
            seen=False,
            option_seed=3,
            status=Assignment.Status.SUBMITTED if submitted else Assignment.Status.ASSIGNED,
            submitted_at=now if submitted else None,
        )
        option = LETTER[letter]
        ChoiceAnswer.objects.create(
            assignment=assignment,
            mc_item=item,
            round=ChoiceAnswer.Round.FIRST,
            option=option,
            shown=option,
            shown_at=now,
            answered_at=now,
            ms=1500,
            correct=(option in item.answers) if submitted else None,
        )
    return participant


def predict(run: Run, work: Work, outcomes: dict[str, list[bool | None]]) -> None:
    """``outcomes``: item id -> correct per sample (None: unparseable)."""
    for item_id, samples in outcomes.items():
        item = MCItem.objects.get(work=work, item_id=item_id)
        for sample, correct in enumerate(samples):
            Prediction.objects.create(
                run=run,
                mc_item=item,
                sample_index=sample,
                parsed_answer="" if correct is None else ("B" if correct else "D"),
                parse_status="unparseable" if correct is None else "ok",
                correct=correct,
                model=run.model,
            )


def make_run(name: str, model: str = "m") -> Run:
    return Run.objects.create(
        name=name,
        benchmark="generic",
        method="vanilla",
        model=model,
        imported=True,
        status=Run.Status.SUCCEEDED,
    )


def build_generic_rows() -> GenericRows:
    work = make_generic_benchmark()
    # Two options on the last item: chance is the mean of 1/n over items, not 1/4.
    last = MCItem.objects.get(work=work, item_id="mt-12")
    last.texts["en"]["options"] = last.texts["en"]["options"][:2]
    last.save()
    other = make_generic_benchmark(name="Other ToM")

    s1 = make_study(work, "First", [f"mt-0{i}" for i in range(1, 7)])
    answer(s1, "P1", dict(zip([f"mt-0{i}" for i in range(1, 7)], "ABBBBB", strict=True)))
    answer(s1, "P2", dict(zip([f"mt-0{i}" for i in range(1, 7)], "ACBABD", strict=True)))
    excluded = answer(s1, "P3", dict(zip([f"mt-0{i}" for i in range(1, 7)], "BCCABD", strict=True)))
    Participant.objects.filter(pk=excluded.pk).update(
        excluded_at=timezone.now(), exclusion_source="researcher"
    )
    withdrawn = answer(s1, "P4", {"mt-01": "B", "mt-02": "A"})
    Participant.objects.filter(pk=withdrawn.pk).update(withdrawn_at=timezone.now())
    p1 = Participant.objects.get(study=s1, label="P1")
    # P1's attention check (wrong) and an item not yet submitted: neither counts.
    answer(s1, "P1", {"mt-10": "A"}, role=StudyItem.Role.ATTENTION, participant=p1)
    answer(s1, "P1", {"mt-11": "A"}, submitted=False, participant=p1)

    s2 = make_study(work, "Second", [f"mt-0{i}" for i in range(4, 10)])
    answer(s2, "Q1", dict(zip([f"mt-0{i}" for i in range(4, 10)], "ABDBCB", strict=True)))
    answer(s2, "Q2", dict(zip([f"mt-0{i}" for i in range(4, 10)], "ABBBCA", strict=True)))

    r1 = make_run("llm")
    right = {f"mt-{i:02d}" for i in (1, 2, 3, 4, 5, 7, 8, 11, 12)}
    predict(
        r1,
        work,
        {f"mt-{i:02d}": [None if i == 10 else f"mt-{i:02d}" in right] for i in range(1, 13)},
    )
    r2 = make_run("sampled", model="m2")
    predict(r2, work, {"mt-01": [True, False], "mt-02": [True, True]})

    other_run = make_run("other run")
    predict(other_run, other, {"mt-01": [False], "mt-02": [False]})
    other_study = make_study(other, "Other study", ["mt-01", "mt-02"])
    answer(other_study, "O1", {"mt-01": "D", "mt-02": "D"})
    return GenericRows(work, other, s1, s2, r1, r2, other_run, other_study, excluded)


@pytest.fixture
def rows() -> GenericRows:
    return build_generic_rows()


def record(report: Report, key: str, first: str) -> dict:
    (found,) = [r for r in report.table(key).records() if r[report.table(key).columns[0]] == first]
    return found


def s1_label(rows: GenericRows) -> str:
    return f"Humans: First (#{rows.s1.pk})"


def s2_label(rows: GenericRows) -> str:
    return f"Humans: Second (#{rows.s2.pk})"


POOLED = "Humans: all studies pooled"


# --- the numbers ----------------------------------------------------------------------


def test_overall_accuracy_people_and_runs_item_level(rows):
    report = build_report("generic", work_id=rows.work.pk, seed=0)
    assert report.title == "Mini ToM v1 report"
    # S1 without P3, per item: 1, .5, 1, .5, 1, .5 -> 4.5 / 6.
    s1 = record(report, "accuracy", s1_label(rows))
    assert (s1["Participants"], s1["Items"], s1["Answers"], s1["Accuracy %"]) == (2, 6, 12, 75.0)
    assert s1["Chance %"] == 25.0
    # S2 per item (mt-04..09): 0, 1, .5, 1, 0, .5 -> 3 / 6.
    s2 = record(report, "accuracy", s2_label(rows))
    assert (s2["Participants"], s2["Items"], s2["Accuracy %"]) == (2, 6, 50.0)
    # Pooled per item mt-01..09: 1, .5, 1, .25, 1, .5, 1, 0, .5 -> 5.75 / 9.
    pooled = record(report, "accuracy", POOLED)
    assert (pooled["Participants"], pooled["Items"], pooled["Answers"]) == (4, 9, 24)
    assert pooled["Accuracy %"] == 63.89
    # R1: 9 of 12 right (the unparseable one is wrong); chance (11/4 + 1/2) / 12.
    r1 = record(report, "accuracy", f"#{rows.r1.pk} llm")
    assert (r1["Items"], r1["Answers"], r1["Accuracy %"], r1["Chance %"]) == (12, 12, 75.0, 27.08)
    assert r1["Participants"] is None and r1["Kind"] == "model"
    # R2: mt-01 right in one sample of two (.5), mt-02 in both (1) -> .75.
    r2 = record(report, "accuracy", f"#{rows.r2.pk} sampled")
    assert (r2["Items"], r2["Answers"], r2["Accuracy %"]) == (2, 4, 75.0)
    for row in report.table("accuracy").records():
        assert row["CI low %"] <= row["Accuracy %"] <= row["CI high %"]
    runs = {r["Run"]: r for r in report.table("runs").records()}
    assert set(runs) == {rows.r1.pk, rows.r2.pk}
    assert (runs[rows.r1.pk]["Predictions"], runs[rows.r1.pk]["Unparseable"]) == (12, 1)
    assert runs[rows.r2.pk]["Samples"] == 2
    facts = report.facts
    assert (facts["name"], facts["work_id"], facts["items"]) == ("Mini ToM", rows.work.pk, 12)
    assert (facts["human_answers"], facts["participants"]) == (24, 4)
    assert facts["excluded_participants_left_out"] == 1
    assert facts["category_fields"] == "ability, order"
    # S2 answered mt-04..09, R2 only mt-01 and 02: no item is answered by every system.
    assert facts["items_every_system_answered"] == 0


def test_runs_beside_people_on_the_items_both_answered(rows):
    report = build_report("generic", work_id=rows.work.pk, seed=0)
    versus = record(report, "humans-vs-runs", f"#{rows.r1.pk} llm")
    # mt-01..09: R1 right on 7 (not 06, 09); people 5.75 / 9.
    assert versus["Shared items"] == 9
    assert (versus["Humans %"], versus["Run %"]) == (63.89, 77.78)
    # Per item run - people: 0 .5 0 .75 0 -.5 0 1 -.5 -> 1.25 / 9.
    assert versus["Difference %"] == 13.89
    assert versus["Difference CI low %"] <= 13.89 <= versus["Difference CI high %"]
    assert versus["Chance %"] == 25.0
    sampled = record(report, "humans-vs-runs", f"#{rows.r2.pk} sampled")
    # mt-01, mt-02: people 1 and .5; R2 .5 and 1.
    assert (sampled["Shared items"], sampled["Humans %"], sampled["Run %"]) == (2, 75.0, 75.0)
    assert "answered 9 of the 12 items" in report.table("humans-vs-runs").note


def test_accuracy_by_each_category_field_with_chance(rows):
    report = build_report("generic", work_id=rows.work.pk, seed=0)
    ability = report.table("by-ability")
    assert ability.columns[:3] == ["ability", "Items", "Chance %"]
    rows_by = {r["ability"]: r for r in ability.records()}
    assert list(rows_by) == [
        "Discrepant desires",
        "False belief",
        "Hidden emotions",
        "Knowledge and perception",
    ]
    # Pooled people: false belief 1, .5, 1; hidden emotions .25, 1, .5; desires 1, 0, .5.
    assert rows_by["False belief"][f"{POOLED} %"] == 83.33
    assert rows_by["Hidden emotions"][f"{POOLED} %"] == 58.33
    assert rows_by["Discrepant desires"][f"{POOLED} %"] == 50.0
    knowledge = rows_by["Knowledge and perception"]
    assert (knowledge[f"{POOLED} n"], knowledge[f"{POOLED} %"]) == (0, None)
    # Knowledge and perception holds mt-12 (two options): (1/4 + 1/4 + 1/2) / 3.
    assert (knowledge["Items"], knowledge["Chance %"]) == (3, 33.33)
    # R1 on mt-10, 11, 12: unparseable, right, right.
    assert knowledge[f"#{rows.r1.pk} llm %"] == 66.67
    order = {r["order"]: r for r in report.table("by-order").records()}
    # first: mt-01 1, 02 .5, 04 .25, 05 1, 07 1, 08 0 -> 3.75 / 6; second: 1, .5, .5.
    assert order["first"][f"{POOLED} %"] == 62.5
    assert order["second"][f"{POOLED} %"] == 66.67
    assert order["second"]["Chance %"] == 31.25  # mt-03, 06, 09, 12
    assert order["first"][f"{s1_label(rows)} n"] == 4
    chart = next(c for c in report.charts if c.key == "by-ability")
    assert chart.kind == "bar" and chart.x == "ability"
    assert chart.series[0] == f"{s1_label(rows)} %"
    assert chart.error_low[-1] == f"#{rows.r2.pk} sampled CI low %"


def test_agreement_and_the_items_people_get_wrong(rows):
    report = build_report("generic", work_id=rows.work.pk, seed=0)
    pooled = record(report, "human-agreement", POOLED)
    assert (pooled["Items with 2+ answers"], pooled["Answers per item"]) == (9, 2.667)
    # Majority shares 1 .5 1 .75 1 .5 1 1 .5 -> 7.25 / 9.
    assert pooled["Majority share %"] == 80.56
    # Agreeing pairs per item 1 0 1 .5 1 1/3 1 1 0 -> 5.8333 / 9.
    assert pooled["Pairwise agreement %"] == 64.81
    assert pooled["Fleiss' kappa"] is None  # 2 and 4 answers per item
    # S1 alone: two answers on every item. P-bar .5, p_e 60/144 -> (.5 - 5/12) / (7/12).
    assert record(report, "human-agreement", s1_label(rows))["Fleiss' kappa"] == 0.1429
    assert pooled["Krippendorff's alpha"] is not None

    items = {r["Item"]: r for r in report.table("item-agreement").records()}
    assert list(items) == [f"mt-0{i}" for i in range(1, 10)]
    assert items["mt-06"]["Majority pick"] == "B/D"  # B twice, D twice
    assert (items["mt-04"]["Answers"], items["mt-04"]["Correct %"]) == (4, 25.0)

    wrong = report.table("gold-disagreement")
    assert wrong.columns == [
        "Item",
        "ability",
        "order",
        "Question",
        "Gold",
        "Majority pick",
        "Majority share %",
        "Correct %",
        "Answers",
    ]
    # mt-08: nobody right (C, C); mt-04: one of four (B, A, A, A). Fewest right first.
    assert [r["Item"] for r in wrong.records()] == ["mt-08", "mt-04"]
    first = wrong.records()[0]
    assert (first["ability"], first["order"], first["Gold"]) == ("Discrepant desires", "first", "B")
    assert (first["Majority pick"], first["Majority share %"], first["Correct %"]) == (
        "C",
        100.0,
        0.0,
    )
    assert first["Question"].startswith("What does Grandma think Felix wants")
    second = wrong.records()[1]
    assert (second["Majority pick"], second["Majority share %"], second["Answers"]) == (
        "A",
        75.0,
        4,
    )


def test_excluded_participants_count_only_with_the_switch(rows):
    report = build_report("generic", work_id=rows.work.pk, seed=0, include_excluded=True)
    assert report.facts["excluded_participants_included"] == 1
    # S1 with P3, per item: 2/3 1/3 2/3 1/3 1 1/3 -> 10/3 / 6.
    s1 = record(report, "accuracy", s1_label(rows))
    assert (s1["Participants"], s1["Answers"], s1["Accuracy %"]) == (3, 18, 55.56)
    # Pooled: 2/3 1/3 2/3 1/5 1 2/5 1 0 1/2 -> 4.7667 / 9.
    assert record(report, "accuracy", POOLED)["Accuracy %"] == 52.96
    wrong = report.table("gold-disagreement").records()
    assert [r["Item"] for r in wrong] == ["mt-08", "mt-04", "mt-02", "mt-06"]
    assert (wrong[2]["Majority pick"], wrong[2]["Majority share %"]) == ("C", 66.67)
    assert "are included (1)" in report.table("accuracy").note


def test_intervals_are_seeded_and_reproducible(rows):
    first = build_report("generic", work_id=rows.work.pk, seed=3).as_json()
    again = build_report("generic", work_id=rows.work.pk, seed=3).as_json()
    assert first == again
    other = build_report("generic", work_id=rows.work.pk, seed=4).as_json()
    low = {t["key"]: t["rows"] for t in first["tables"]}
    moved = {t["key"]: t["rows"] for t in other["tables"]}
    assert low["accuracy"] != moved["accuracy"]  # the intervals follow the seed
    # ... and only they: the point estimates stay.
    assert [r["Accuracy %"] for r in low["accuracy"]] == [
        r["Accuracy %"] for r in moved["accuracy"]
    ]


def test_one_work_never_reads_another_works_runs_or_answers(rows):
    report = build_report("generic", work_id=rows.work.pk, seed=0)
    text = repr(report.as_json())
    assert "other run" not in text and "Other study" not in text
    assert {r["Run"] for r in report.table("runs").records()} == {rows.r1.pk, rows.r2.pk}
    other = build_report("generic", work_id=rows.other.pk, seed=0)
    assert {r["Run"] for r in other.table("runs").records()} == {rows.other_run.pk}
    (people,) = [r for r in other.table("accuracy").records() if r["Kind"] == "humans"]
    assert (people["System"], people["Items"], people["Accuracy %"]) == (
        f"Humans: Other study (#{rows.other_study.pk})",
        2,
        0.0,
    )
    # A run or study of the other work is refused by id, as a run of another benchmark is.
    with pytest.raises(ValueError, match=f"no generic run with id {rows.other_run.pk}"):
        build_report("generic", work_id=rows.work.pk, run_ids=[rows.other_run.pk])
    with pytest.raises(ValueError, match=f"no generic study with id {rows.other_study.pk}"):
        build_report("generic", work_id=rows.work.pk, study_ids=[rows.other_study.pk])


def test_a_generic_report_needs_a_known_work_and_others_take_none(rows):
    with pytest.raises(ValueError, match="give its work id"):
        build_report("generic")
    with pytest.raises(ValueError, match="no generic benchmark with work id 999999"):
        build_report("generic", work_id=999999)
    with pytest.raises(ValueError, match="no work id"):
        build_report("dyntom", work_id=rows.work.pk)


def test_a_work_without_runs_or_studies_has_empty_tables():
    work = make_generic_benchmark(name="Empty ToM")
    report = build_report("generic", work_id=work.pk, seed=0)
    assert report.table("runs").rows == [] and report.table("accuracy").rows == []
    assert [r["Items"] for r in report.table("by-ability").records()] == [3, 3, 3, 3]
    keys = [t.key for t in report.tables]
    assert "gold-disagreement" not in keys and "humans-vs-runs" not in keys


@pytest.mark.parametrize("k", [12, 1500])  # the multiplicity product, and chunked draws
def test_mean_ci_of_outcomes_is_accuracy_ci_resampling_items(k):
    outcomes = [i % 3 != 0 for i in range(k)]
    mean, low, high = mean_ci([float(o) for o in outcomes], n_resamples=1000, seed=5)
    expected = accuracy_ci(outcomes, clusters=list(range(k)), n_resamples=1000, seed=5)
    assert (mean, low, high) == (expected.accuracy, expected.ci_low, expected.ci_high)
    assert mean_ci([], seed=5) == (None, None, None)


def test_the_items_people_get_wrong_are_quoted_in_the_language_they_answered_in():
    """A bilingual benchmark (English first) studied in Chinese: the list people read
    again quotes the question as the participants saw it."""
    work = make_generic_benchmark(name="Bilingual", bilingual=True)
    study = make_study(work, "In Chinese", ["mt-08"], sampling={"language": "zh"})
    answer(study, "P1", {"mt-08": "C"})
    answer(study, "P2", {"mt-08": "C"})
    wrong = build_report("generic", work_id=work.pk, seed=0).table("gold-disagreement")
    (row,) = wrong.records()
    assert row["Question"].startswith("（中文）What does Grandma think")  # noqa: RUF001
