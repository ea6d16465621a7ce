"""Human studies beside model runs in the ToM-in-AMC / TVShowGuess reports.

The responses are made through ``studies.services`` over the real Friends scenes, and
every number is checked against a value computed by hand (arithmetic in comments).

Scenes (gold in brackets, candidates in order):
  A = 09x01 2504: P0 [joey], P1 [rachel]; candidates joey, rachel
  B = 09x01 2505: P0 [phoebe], P1 [ross]; candidates phoebe, ross
  C = 09x01 2503: P0 [ross], P1 [joey], P2 [chandler]; candidates chandler, joey, ross
Raters of "Friends guessing" (overlap 4, so everyone gets A, B and C); answers, then the
"needed earlier scenes" flag:
  r1 seen:   A joey ✓ rachel ✓, no  | B phoebe ✓ ross ✓, no    | C ross ✓ joey ✓ chandler ✓, yes
  r2 unseen: A rachel ✗ joey ✗, yes | B phoebe ✓ phoebe ✗, yes | C ross ✓ chandler ✗ joey ✗, yes
  r3 unseen: A joey ✓ rachel ✓, no  | B ross ✗ phoebe ✗, yes   | C answered, not submitted
  r4 seen, withdrawn after submitting A (rachel ✗ joey ✗, tag gender): left out everywhere.
Counted: 8 scene answers, 18 answers, 11 correct (r1 7/7, r2 2/7, r3 2/4).
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks.models import Scene, SpeakerInstance, Work
from modeling.models import Prediction, Run
from reports.charts import render_chart
from reports.selectors import human_response_size, long_format_columns, long_format_rows
from reports.tables import build_report
from studies.models import Assignment, Study
from studies.participation.services import (
    participant_consent,
    participant_withdraw,
    participants_invite,
)
from studies.scene.services import (
    familiarity_declare,
    flag_record,
    guess_record,
    history_confirm,
    scene_submit,
)
from studies.services import study_create, study_go_live
from tests.studies.conftest import friends, live_study  # noqa: F401

pytestmark = pytest.mark.django_db

SCENES = {"A": "09x01 2504", "B": "09x01 2505", "C": "09x01 2503", "D": "09x01 2506"}
HUMANS = "Humans: Friends guessing"


def _scene(key: str) -> Scene:
    return Scene.objects.get(source_id=SCENES[key])


def _instances(key: str) -> list[SpeakerInstance]:
    return list(SpeakerInstance.objects.filter(scene=_scene(key)).order_by("code"))


def _answer(participant, study_work, plan, *, seen: bool) -> dict[str, Assignment]:
    """Declare familiarity, read the history, then answer each scene of ``plan``.

    ``plan[scene] = (names per masked speaker, tags per speaker, history flag, submit)``;
    answers are chosen by index into the candidates, as the rater page sends them.
    """
    participant_consent(participant=participant)
    session = familiarity_declare(participant=participant, study_work=study_work, seen=seen)
    history_confirm(participant=participant, session=session)
    assignments = {
        a.study_item.scene.source_id: a
        for a in Assignment.objects.filter(participant=participant).select_related(
            "study_item__scene"
        )
    }
    done = {}
    for key, (names, tags, flag, submit) in plan.items():
        assignment = assignments[SCENES[key]]
        for instance, name, tag_list in zip(_instances(key), names, tags, strict=True):
            guess_record(
                participant=participant,
                assignment_id=assignment.pk,
                instance_id=instance.pk,
                choice=instance.candidates.index(name),
                tags=tag_list,
            )
        flag_record(participant=participant, assignment_id=assignment.pk, history_needed=flag)
        if submit:
            scene_submit(participant=participant, assignment_id=assignment.pk)
        done[key] = assignment
    return done


def _times(assignment: Assignment, total_s: int, active_s: int) -> None:
    # The server clocks real time; pin it so medians and means can be checked by hand.
    Assignment.objects.filter(pk=assignment.pk).update(
        total_ms=total_s * 1000, active_ms=active_s * 1000
    )


@pytest.fixture
def study(friends, researcher):  # noqa: F811
    Work.objects.filter(pk=friends.pk).update(genres=["Comedy"])
    study = study_create(
        name="Friends guessing",
        benchmark="tvshowguess",
        works=[friends],
        scenes=[_scene(k) for k in "ABC"],
        overlap=4,
        created_by=researcher,
    )
    study = study_go_live(study=study)
    study_work = study.study_works.get()
    r1, r2, r3, r4 = participants_invite(study=study, labels=["r1", "r2", "r3", "r4"])
    none: list[str] = []
    a1 = _answer(
        r1,
        study_work,
        {
            "A": (["joey", "rachel"], [["intention", "personality"], ["personality"]], False, 1),
            "B": (["phoebe", "ross"], [none, none], False, 1),
            "C": (["ross", "joey", "chandler"], [["stereotype/trope", "intention"], none, none],
                  True, 1),
        },
        seen=True,
    )  # fmt: skip
    a2 = _answer(
        r2,
        study_work,
        {
            "A": (["rachel", "joey"], [none, ["emotion"]], True, 1),
            "B": (["phoebe", "phoebe"], [["intention"], none], True, 1),
            "C": (["ross", "chandler", "joey"], [none, none, none], True, 1),
        },
        seen=False,
    )
    a3 = _answer(
        r3,
        study_work,
        {
            "A": (["joey", "rachel"], [none, none], False, 1),
            "B": (["ross", "phoebe"], [none, none], True, 1),
            "C": (["ross", "joey", "chandler"], [none, none, none], True, 0),  # not submitted
        },
        seen=False,
    )
    a4 = _answer(
        r4, study_work, {"A": (["rachel", "joey"], [["gender"], none], True, 1)}, seen=True
    )
    participant_withdraw(participant=r4)
    for assignment, total, active in (
        (a1["A"], 30, 20),
        (a1["B"], 60, 40),
        (a1["C"], 90, 45),
        (a2["A"], 20, 10),
        (a2["B"], 40, 30),
        (a2["C"], 50, 50),
        (a3["A"], 10, 5),
        (a3["B"], 100, 60),
        (a4["A"], 9999, 9999),  # withdrawn: must not move the medians
    ):
        _times(assignment, total, active)
    study.raters = {"r1": r1, "r2": r2, "r3": r3, "r4": r4}
    return study


@pytest.fixture
def run(study):
    """A model run on A, B and D (D is outside the study, so outside the comparison)."""
    run = Run.objects.create(
        name="T", benchmark="tvshowguess", method="vanilla", model="t-model", imported=True
    )
    answers = {"A": [True, False], "B": [True, True], "D": [True, True]}
    for key, outcomes in answers.items():
        for instance, ok in zip(_instances(key), outcomes, strict=True):
            Prediction.objects.create(
                run=run, speaker_instance=instance, correct=ok, parse_status="ok"
            )
    return run


@pytest.fixture
def imported(friends, study):  # noqa: F811
    """An annotation study with no scoring (``imported``): two annotators on scene A.

    a1 (seen): P0 joey [belief], P1 rachel [belief, desire], flag yes;
    a2 (unseen): P0 joey, P1 joey, flag yes. Nothing is submitted, so correct stays None.
    """
    imported = study_go_live(
        study=study_create(
            name="Published notes",
            benchmark="tvshowguess",
            works=[friends],
            scenes=[_scene("A")],
            overlap=2,
            imported=True,
        )
    )
    study_work = imported.study_works.get()
    a1, a2 = participants_invite(study=imported, labels=["a1", "a2"])
    tags = [["belief"], ["belief", "desire"]]
    _answer(a1, study_work, {"A": (["joey", "rachel"], tags, True, 0)}, seen=True)
    _answer(a2, study_work, {"A": (["joey", "joey"], [[], []], True, 0)}, seen=False)
    return imported


def _row(table, first_cell, column: str | None = None) -> dict:
    """The row whose first cell (or ``column``) is ``first_cell``, as a dict."""
    column = column or table.columns[0]
    (record,) = [r for r in table.records() if r[column] == first_cell]
    return record


def _assert_charts_match_tables(report) -> None:
    columns = {t.key: set(t.columns) for t in report.tables}
    for chart in report.charts:
        drawn = {*chart.series, *chart.error_low, *chart.error_high} | ({chart.x} - {""})
        assert drawn <= columns[chart.table], chart.key


def test_humans_beside_the_run_on_the_same_items(study, run):
    report = build_report("tvshowguess")
    _assert_charts_match_tables(report)
    # Compared: the speakers both answered = A and B (4 speakers, 2 scenes); C is the
    # humans' only, D the run's only.
    assert report.facts["compared_instances"] == 4
    assert report.facts["studies"] == 1
    assert report.facts["human_participants"] == 3  # r4 withdrawn
    assert report.facts["human_answers"] == 18  # 7 + 7 + 4
    # Each system's own accuracy: the humans' 11 of 18 answers on A, B and C; the run's
    # A ✓ ✗, B ✓ ✓, D ✓ ✓ = 5 of 6.
    own = report.table("accuracy")
    assert (_row(own, HUMANS)["Instances"], _row(own, HUMANS)["Accuracy %"]) == (7, 61.11)
    assert (_row(own, f"#{run.pk} T")["Instances"], _row(own, f"#{run.pk} T")["Accuracy %"]) == (
        6,
        83.33,
    )
    assert _row(own, "Random")["Instances"] == 9  # A, B, C and D: what any system answered
    acc = report.table("accuracy-common")
    assert "same 4 of 149 masked speakers (2 scenes)" in acc.note
    humans = _row(acc, HUMANS)
    # A: r1 ✓✓ r2 ✗✗ r3 ✓✓ (4/6); B: r1 ✓✓ r2 ✓✗ r3 ✗✗ (3/6) -> 7/12.
    assert (humans["Instances"], humans["Answers"], humans["Accuracy %"]) == (4, 12, 58.33)
    # Scene bootstrap over {A, B}: AA 8/12, AB 7/12, BB 6/12; each tail holds 25% of the
    # draws, so the 2.5% and 97.5% percentiles are BB and AA.
    assert (humans["CI low %"], humans["CI high %"]) == (50.0, 66.67)
    # Scene answers: A r1 ✓ r2 ✗ r3 ✓, B r1 ✓ r2 ✗ r3 ✗ -> 3/6; AA 4/6, BB 2/6.
    assert (humans["Scenes"], humans["Scene answers"], humans["Scene accuracy %"]) == (2, 6, 50.0)
    assert (humans["Scene CI low %"], humans["Scene CI high %"]) == (33.33, 66.67)
    assert (humans["Model"], humans["Method"]) == ("humans", "study")
    machine = _row(acc, f"#{run.pk} T")
    # A ✓ ✗, B ✓ ✓ = 3/4 (D's two right answers are outside the comparison); scenes 1/2.
    assert (machine["Instances"], machine["Accuracy %"], machine["Scene accuracy %"]) == (
        4,
        75.0,
        50.0,
    )
    assert (machine["CI low %"], machine["CI high %"]) == (50.0, 100.0)  # AA 2/4, BB 4/4
    random = _row(acc, "Random")
    # Four speakers with 2 candidates: 1/2; scenes: (1/2 · 1/2 + 1/2 · 1/2) / 2 = 1/4.
    assert (random["Instances"], random["Accuracy %"], random["Scene accuracy %"]) == (
        4,
        50.0,
        25.0,
    )

    # The breakdowns take each system's own answers: A, B, D have 2 speakers, C 3.
    speakers = report.table("by-speakers")
    assert [r[0] for r in speakers.rows] == ["2", "3", "Easy (<3)", "Hard (≥3)"]
    assert _row(speakers, "2")[f"{HUMANS} %"] == 58.33  # A and B: 7 / 12
    assert _row(speakers, "2")[f"#{run.pk} T %"] == 83.33  # A, B and D: 5 / 6
    assert _row(speakers, "3")[f"#{run.pk} T %"] is None
    genre = _row(report.table("by-genre"), "Comedy")
    assert (genre["Works"], genre["Instances"], genre[f"{HUMANS} %"]) == (1, 9, 61.11)

    # friends.tsv: A P0, A P1, B P0 need no history (none); B P1 needs it (direct).
    dependence = report.table("accuracy-by-dependence")
    # C (gold ross, joey, chandler): P0, P1 none, P2 direct; D: P0 direct, P1 none.
    # none: A P0 ✓✗✓, A P1 ✓✗✓, B P0 ✓✓✗, C P0 ✓✓, C P1 ✓✗ = 9/13;
    # direct: B P1 ✓✗✗, C P2 ✓✗ = 2/5.
    assert _row(dependence, "none")[f"{HUMANS} %"] == 69.23
    assert _row(dependence, "direct")[f"{HUMANS} %"] == 40.0
    assert _row(dependence, "none")[f"#{run.pk} T %"] == 75.0  # A P0 ✓, A P1 ✗, B P0 ✓, D P1 ✓
    assert _row(dependence, "indirect")[f"{HUMANS} %"] is None


def test_human_breakdowns_follow_hand_computation(study):
    report = build_report("tvshowguess")
    _assert_charts_match_tables(report)
    studies = _row(report.table("human-studies"), HUMANS)
    assert studies == {
        "Study": HUMANS, "ID": study.pk, "Status": "live", "Imported": False,
        "Participants": 3, "Withdrawn": 1, "Excluded": 0, "Raters": 3,
        "Scene answers": 8,  # r1 3 + r2 3 + r3 2 (C not submitted)
        "Answers": 18, "Scenes": 3, "Instances": 7,
        "Instructions versions": "1", "Names": "original",
    }  # fmt: skip
    # Without a run the humans are the only system: scored on all 7 speakers they answered.
    acc = _row(report.table("accuracy"), HUMANS)
    assert (acc["Instances"], acc["Answers"], acc["Accuracy %"]) == (7, 18, 61.11)  # 11 / 18
    # Scene answers: r1 ✓✓✓, r2 ✗✗✗, r3 ✓✗ -> 4 / 8.
    assert (acc["Scene answers"], acc["Scene accuracy %"]) == (8, 50.0)

    familiarity = _row(report.table("human-familiarity"), HUMANS)
    # Seen: r1 only (r4 withdrawn) 7/7, every scene right, so the interval is a point.
    assert (familiarity["Seen raters"], familiarity["Seen answers"]) == (1, 7)
    assert familiarity["Seen %"] == familiarity["Seen CI low %"] == 100.0
    assert familiarity["Seen scene %"] == 100.0
    # Unseen: r2 2/7 + r3 2/4 = 4/11; scenes r2 ✗✗✗, r3 ✓✗ = 1/5.
    assert (familiarity["Unseen raters"], familiarity["Unseen answers"]) == (2, 11)
    assert (familiarity["Unseen %"], familiarity["Unseen scene %"]) == (36.36, 20.0)
    assert familiarity["Unseen CI low %"] <= 36.36 <= familiarity["Unseen CI high %"]

    history = _row(report.table("human-history"), HUMANS)
    # Flags: r1 no no yes, r2 yes yes yes, r3 no yes -> 5 of 8 needed.
    assert (history["Scene answers"], history["Flagged"], history["History needed"]) == (8, 8, 5)
    assert history["History needed share %"] == 62.5
    # Needed: r1 C ✓✓✓, r2 A ✗✗, B ✓✗, C ✓✗✗, r3 B ✗✗ = 5/12; not needed: r1 A, B, r3 A = 6/6.
    assert (history["Needed answers"], history["Needed %"]) == (12, 41.67)
    assert (history["Not needed answers"], history["Not needed %"]) == (6, 100.0)
    assert history["Not needed CI low %"] == history["Not needed CI high %"] == 100.0

    tags = report.table("human-tags")
    # In the study's tag order; 5 tagged answers of 18 (r4's "gender" is withdrawn).
    assert [r[0] for r in tags.rows] == [*study.tags, "(no tag)"]
    count, share = f"{HUMANS} answers", f"{HUMANS} share %"
    expected = {
        "stereotype/trope": (1, 5.56),  # 1 / 18
        "intention": (3, 16.67),  # r1 A P0, r1 C P0, r2 B P0
        "personality": (2, 11.11),  # r1 A P0, r1 A P1
        "emotion": (1, 5.56),
        "gender": (0, 0.0),
        "(no tag)": (13, 72.22),  # 18 - 5
    }
    for tag, values in expected.items():
        assert (_row(tags, tag)[count], _row(tags, tag)[share]) == values, tag

    agreement = report.table("human-agreement")
    speaker = _row(agreement, "speaker", "Rating")
    # Units: A P0 [joey rachel joey], A P1 [rachel joey rachel], B P0 [phoebe phoebe ross],
    # B P1 [ross phoebe phoebe], C P0 [ross ross], C P1 [joey chandler], C P2 [chandler joey].
    assert (speaker["Units"], speaker["Raters per unit"]) == (7, "2-3")
    # Agreeing pairs: 2/6 in each 3-rater unit, then 1, 0, 0 -> (4/3 + 1) / 7 = 1/3.
    assert speaker["Agreement %"] == 33.33
    # Fleiss on the four 3-rater units: P̄ = 1/3; marginals joey 3, rachel 3, phoebe 4,
    # ross 2 of 12 -> Pe = 38/144; kappa = (48 - 38) / (144 - 38) = 10/106.
    assert (speaker["Fleiss units"], speaker["Fleiss raters"]) == (4, 3)
    assert speaker["Fleiss' kappa"] == 0.094
    # Krippendorff: 18 pairable values; coincidences off the diagonal 12 -> Do = 12/18;
    # n_c = joey 5, rachel 3, phoebe 4, ross 4, chandler 2 -> De = (324 - 70) / 306;
    # alpha = 1 - (2/3) / (254/306) = 150/762.
    assert speaker["Krippendorff's alpha"] == 0.197
    assert speaker["Alpha CI low"] <= 0.197 <= speaker["Alpha CI high"]
    assert speaker["Kappa CI low"] <= 0.094 <= speaker["Kappa CI high"]
    flag = _row(agreement, "history needed", "Rating")
    # Scenes: A [no yes no], B [no yes yes], C [yes yes] (r3's C unsubmitted).
    assert (flag["Units"], flag["Raters per unit"]) == (3, "2-3")
    assert flag["Agreement %"] == 55.56  # (1/3 + 1/3 + 1) / 3
    # Fleiss on A and B: P̄ = 1/3, Pe = (3/6)² + (3/6)² = 1/2 -> (1/3 - 1/2) / (1/2).
    assert (flag["Fleiss units"], flag["Fleiss' kappa"]) == (2, -0.333)
    # Krippendorff: n_no 3, n_yes 5, Do = 4/8, De = (64 - 9 - 25) / 56 -> 1 - 56/60.
    assert flag["Krippendorff's alpha"] == 0.067
    assert "same number of raters" in agreement.note

    time = _row(report.table("human-time"), HUMANS)
    # Total s: 10 20 30 40 50 60 90 100 -> median 45, mean 400/8; active s:
    # 5 10 20 30 40 45 50 60 -> median 35, mean 260/8. r4's 9999 s is withdrawn.
    assert time == {
        "Study": HUMANS, "Timed scenes": 8, "Median total s": 45.0, "Mean total s": 50.0,
        "Median active s": 35.0, "Mean active s": 32.5,
    }  # fmt: skip
    # The same seed gives the same report; the intervals come from the seeded bootstrap.
    assert build_report("tvshowguess").as_json() == report.as_json()
    for chart in report.charts:
        if chart.key.startswith("human-"):
            assert render_chart(report, chart.key, "svg").startswith(b"<?xml")


def test_imported_annotations_count_for_flags_tags_and_agreement_only(study, imported):
    report = build_report("tvshowguess")
    _assert_charts_match_tables(report)
    label = "Humans: Published notes"
    assert label not in {r[0] for r in report.table("accuracy").rows}
    assert "not scored" in report.table("accuracy").note
    assert report.facts["compared_instances"] == 7  # the imported study is no system
    row = _row(report.table("human-studies"), label)
    assert (row["Imported"], row["Raters"], row["Scene answers"], row["Answers"]) == (
        True,
        2,
        2,
        4,
    )
    history = _row(report.table("human-history"), label)
    assert (history["History needed"], history["History needed share %"]) == (2, 100.0)
    assert history["Needed answers"] == 4 and history["Needed %"] is None
    familiarity = _row(report.table("human-familiarity"), label)
    assert (familiarity["Seen answers"], familiarity["Seen %"]) == (2, None)
    tags = report.table("human-tags")
    # 4 answers: belief on a1's two, desire on a1's P1, nothing on a2's two.
    assert _row(tags, "belief")[f"{label} answers"] == 2
    assert _row(tags, "belief")[f"{label} share %"] == 50.0
    assert _row(tags, "desire")[f"{label} share %"] == 25.0
    assert _row(tags, "(no tag)")[f"{label} share %"] == 50.0
    assert _row(tags, "intention")[f"{HUMANS} answers"] == 3  # the other study unchanged
    agreement = [r for r in report.table("human-agreement").records() if r["Study"] == label]
    speaker, flag = agreement
    # A P0 [joey joey], A P1 [rachel joey]: agreement (1 + 0) / 2; Fleiss P̄ 1/2,
    # Pe (3/4)² + (1/4)² = 10/16 -> -1/3; alpha: Do 2/4, De (16 - 9 - 1)/12 -> 0.
    assert (speaker["Agreement %"], speaker["Fleiss' kappa"]) == (50.0, -0.333)
    assert speaker["Krippendorff's alpha"] == 0.0
    # One scene, both "needed": full agreement, but kappa and alpha are 0/0.
    assert (flag["Units"], flag["Agreement %"], flag["Fleiss' kappa"]) == (1, 100.0, None)
    assert flag["Krippendorff's alpha"] is None

    rows = [r for r in long_format_rows("tvshowguess") if r["study_id"] == imported.pk]
    assert len(rows) == 4
    assert {r["method"] for r in rows} == {"imported study"}
    assert {r["correct"] for r in rows} == {None}

    with CaptureQueriesContext(connection) as one:
        only = build_report("tvshowguess", study_ids=[study.pk])
    with CaptureQueriesContext(connection) as both:
        build_report("tvshowguess")
    assert len(one) == len(both) <= 12  # no query per study, rater or answer
    assert label not in {r[0] for r in only.table("human-studies").rows}
    assert "human-studies" not in {t.key for t in build_report("tvshowguess", study_ids=[]).tables}


def test_long_format_has_one_row_per_counted_human_answer(study, run):
    rows = list(long_format_rows("tvshowguess"))
    assert all(list(r) == long_format_columns("tvshowguess") for r in rows)
    humans = [r for r in rows if r["source"] == "human" and r["study_id"] == study.pk]
    assert len(humans) == 18  # r4 withdrawn, r3's unsubmitted C left out
    raters = study.raters
    assert {r["participant"] for r in humans} == {raters[k].pk for k in ("r1", "r2", "r3")}
    tokens = {p.token for p in raters.values()}
    assert not any(str(v) in tokens for r in rows for v in r.values())
    (first,) = [r for r in humans if r["participant"] == raters["r1"].pk and r["code"] == "P0"
                and r["scene"] == SCENES["A"]]  # fmt: skip
    expected = {
        "source": "human", "method": "study", "study": "Friends guessing", "work": "friends",
        "seen": True, "history_needed": False, "tags": ["intention", "personality"],
        "answer": "joey", "gold": "joey", "correct": True, "speakers_in_scene": 2,
        "candidates_count": 2, "total_s": 30.0, "active_s": 20.0, "instructions_version": 1,
        "dependence": "none", "run_id": None, "sample_index": None,
    }  # fmt: skip
    assert {k: first[k] for k in expected} == expected
    assert first["version"]["names"] == "original"
    assert first["version"]["item_set_hash"] == Study.objects.get(pk=study.pk).item_set_hash
    assert sum(r["correct"] for r in humans) == 11
    # Model rows first, then the study's answers, then the imported friends.tsv rows.
    sources = [r["source"] for r in rows]
    assert sources[:6] == ["model"] * 6 and sources[6:] == ["human"] * (len(rows) - 6)
    assert len([r for r in rows if r["study_id"] is None and r["source"] == "human"]) == 151


def test_study_selection_through_build_report_api_and_command(study, researcher, tmp_path):
    with pytest.raises(ValueError, match="no tvshowguess study with id 999"):
        build_report("tvshowguess", study_ids=[999])
    with pytest.raises(ValueError, match="no dyntom study"):
        build_report("dyntom", study_ids=[study.pk])
    with pytest.raises(ValueError, match="no tom-in-amc study"):
        list(long_format_rows("tom-in-amc", study_ids=[study.pk]))

    # What a cached report's fingerprint reads: r4's withdrawal shows there too.
    size = human_response_size("tvshowguess")
    assert (size["studies"], size["human_answers"], size["withdrawn"]) == (1, 18, 1)
    assert size["last_human_answer"] is not None
    assert human_response_size("tvshowguess", study_ids=[])["human_answers"] == 0

    client = APIClient()
    client.force_login(researcher)
    url = reverse("reports-report-table", kwargs={"benchmark": "tvshowguess", "key": "human-tags"})
    whole = reverse("reports-report", kwargs={"benchmark": "tvshowguess"})
    response = client.get(url, {"studies": str(study.pk)})
    assert response.status_code == 200
    assert response.json()["rows"][-1] == {
        "Tag": "(no tag)",
        f"{HUMANS} answers": 13,
        f"{HUMANS} share %": 72.22,
    }
    assert client.get(url, {"studies": "none"}).status_code == 404  # no human tables
    bad = client.get(whole, {"studies": "x"})
    assert bad.status_code == 400 and "studies" in bad.json()
    assert client.get(whole, {"studies": "999"}).status_code == 400

    out = tmp_path / "report.json"
    args = ["report", "tvshowguess", "--format", "json", "--out", str(out)]
    call_command(*args, "--study", str(study.pk), stdout=io.StringIO())
    data = json.loads(out.read_text())
    assert data["facts"]["human_answers"] == 18
    call_command(*args, "--study", stdout=io.StringIO())
    assert "studies" not in json.loads(out.read_text())["facts"]
