"""Report tables checked against hand-computed values on small synthetic prediction sets,
and against runs made by our engine on the real DynToM stages.

Every expected number has its arithmetic in a comment next to it.
"""

from __future__ import annotations

import csv
import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchmarks.models import Benchmark, DynToMQuestion, QAItem, SpeakerAnnotation, Work
from modeling.models import Prediction, Run
from modeling.runs.executor import run_execute
from modeling.runs.services import run_create
from reports.charts import MISSING
from reports.exports import table_csv
from reports.models import report_from_json
from reports.selectors import long_format_columns, long_format_rows
from reports.tables import build_report
from reports.views import display_table
from tests.factories import (
    CharacterFactory,
    DynToMQuestionFactory,
    DynToMStageFactory,
    QAItemFactory,
    SceneFactory,
    SpeakerInstanceFactory,
    WorkFactory,
)

# The modeling suite's fixtures: a backend on the loopback OpenAI-compatible server
# and the 24 real DynToM stages (imported here so pytest registers them for this module).
from tests.modeling.conftest import (  # noqa: F401
    dyntom_stages,
    gold_responder,
    openai_backend,
)
from tests.module_rows import build_friends

pytestmark = pytest.mark.django_db

U = DynToMQuestion.QuestionType.UNDERSTANDING
T1 = DynToMQuestion.QuestionType.TRANSFORMATION_1
T2 = DynToMQuestion.QuestionType.TRANSFORMATION_2


def _run(benchmark: str, name: str, method: str = "vanilla") -> Run:
    return Run.objects.create(
        name=name, benchmark=benchmark, method=method, model=f"{name}-model", imported=True
    )


def _predict(run: Run, field: str, item, correct: bool | None, *, sample: int = 0, **kw):
    status = kw.pop("parse_status", "ok")
    return Prediction.objects.create(
        run=run,
        sample_index=sample,
        parse_status=status,
        correct=correct,
        **{field: item},
        **kw,
    )


def _assert_charts_match_tables(report) -> None:
    """Every chart draws columns of a table the report has."""
    columns = {t.key: set(t.columns) for t in report.tables}
    for chart in report.charts:
        drawn = {*chart.series, *chart.error_low, *chart.error_high} | ({chart.x} - {""})
        assert drawn <= columns[chart.table], chart.key


def _row(table, first_cell) -> dict:
    """The row whose first cell is ``first_cell``, as a dict."""
    (record,) = [r for r in table.records() if r[table.columns[0]] == first_cell]
    return record


# -- DynToM ------------------------------------------------------------------------


@pytest.fixture
def dyntom_set():
    """One stage, 8 questions, run A (1 sample) and run B (2 samples).

    q1 U belief s1, q2 U belief s2, q3 U emotion s1, q4 U emotion s2,
    q5 T-1 belief 1-2, q6 T-1 emotion 1-2, q7 T-2 "belief->emotion" in s1 (counts as
    emotion T), q8 U intention s1 (answered by A only, so outside the intersection).
    """
    stage = DynToMStageFactory(scenario_count=2)
    spec = [
        ("q1", U, "belief", 1, 1),
        ("q2", U, "belief", 2, 2),
        ("q3", U, "emotion", 1, 1),
        ("q4", U, "emotion", 2, 2),
        ("q5", T1, "belief", 1, 2),
        ("q6", T1, "emotion", 1, 2),
        ("q7", T2, "belief->emotion", 1, 1),
        ("q8", U, "intention", 1, 1),
    ]
    q = {
        key: DynToMQuestionFactory(
            stage=stage,
            key=key,
            question_type=qt,
            mental_state=state,
            scenario_from=first,
            scenario_to=last,
        )
        for key, qt, state, first, last in spec
    }
    a, b = _run("dyntom", "A"), _run("dyntom", "B")
    for key, ok in zip(["q1", "q2", "q3", "q4", "q5", "q6"], [1, 1, 1, 0, 0, 1], strict=True):
        _predict(a, "dyntom_question", q[key], bool(ok))
    _predict(a, "dyntom_question", q["q7"], False, parse_status="unparseable")
    _predict(a, "dyntom_question", q["q8"], True)
    samples = {0: [1, 0, 1, 1, 1, 0, 1], 1: [1, 1, 0, 1, 1, 1, 0]}
    for sample, outcomes in samples.items():
        for n, ok in enumerate(outcomes, start=1):
            _predict(b, "dyntom_question", q[f"q{n}"], bool(ok), sample=sample)
    return a, b


def test_dyntom_accuracy_by_state_and_type_matches_hand_computation(dyntom_set):
    a, b = dyntom_set
    report = build_report("dyntom")
    # Each run on its own answers: A's q8 ✓ counts there, 5 of 8.
    own_a = _row(report.table("accuracy"), f"#{a.pk} A")
    assert (own_a["Questions"], own_a["Overall %"], own_a["Intention U %"]) == (8, 62.5, 100.0)
    table = report.table("accuracy-common")
    # Intersection: q1..q7 (q8 was answered by A only).
    assert "7 of 8" in table.note
    row_a = _row(table, f"#{a.pk} A")
    assert row_a["Questions"] == 7 and row_a["Samples"] == 1
    assert row_a["Belief U %"] == 100.0  # q1 ✓ q2 ✓
    assert row_a["Belief T %"] == 0.0  # q5 ✗
    assert row_a["Emotion U %"] == 50.0  # q3 ✓ q4 ✗
    assert row_a["Emotion T %"] == 50.0  # q6 ✓, q7 (influence on emotion) unparseable ✗
    assert row_a["Intention U %"] is None  # q8 is outside the intersection
    assert row_a["Overall %"] == 57.14  # 4 / 7
    assert row_a["Unparseable"] == 1 and row_a["Unparseable %"] == 14.29  # 1 / 7
    assert row_a["Overall sd %"] is None
    # One stage, and the bootstrap resamples stages: n = 1, so no interval (issue 49),
    # where there used to be [57.14, 57.14]; the note names the rows.
    assert (row_a["CI low %"], row_a["CI high %"]) == (None, None)
    assert table.note.endswith(f" n = 1, no interval (one stage): #{a.pk} A, #{b.pk} B.")

    row_b = _row(table, f"#{b.pk} B")
    assert row_b["Samples"] == 2
    # Belief U: sample 0 (✓ ✗) 50, sample 1 (✓ ✓) 100 -> mean 75.
    assert row_b["Belief U %"] == 75.0
    assert row_b["Belief T %"] == 100.0  # q5 ✓ in both samples
    assert row_b["Emotion U %"] == 75.0  # (✓ ✓) 100 and (✗ ✓) 50
    assert row_b["Emotion T %"] == 50.0  # (q6 ✗, q7 ✓) and (q6 ✓, q7 ✗)
    assert row_b["Overall %"] == 71.43  # 5/7 in both samples
    assert row_b["Overall sd %"] == 0.0
    # sd of (50, 100) with n - 1: sqrt((25² + 25²) / 1) = 35.355…
    sd = _row(report.table("accuracy-sd"), f"#{b.pk} B")
    assert sd["Belief U %"] == 35.36 and sd["Belief T %"] == 0.0

    types = _row(report.table("by-question-type"), f"#{a.pk} A")
    # Own answers. U: q1..q4, q8 = 4/5; T-1: q5 ✗ q6 ✓ = 1/2; T-2: q7 ✗; T-3: none asked.
    assert types == {
        "System": f"#{a.pk} A",
        "Understanding %": 80.0,
        "Transformation-1 %": 50.0,
        "Transformation-2 %": 0.0,
        "Transformation-3 %": None,
    }


def test_one_stage_gives_a_dash_that_says_why_on_every_surface(dyntom_set):
    # Issue 49: no bootstrap interval over a single unit. The table names the rows; the
    # page's dash says "one stage: no interval", the CSV leaves the cells empty, the API
    # gives null, and a stored job's report keeps the reason.
    a, b = dyntom_set
    report = build_report("dyntom")
    table = report.table("accuracy-common")
    why = "one stage: no interval"
    assert table.no_interval == {f"#{a.pk} A": why, f"#{b.pk} B": why}

    shown = display_table(table)
    interval = [h.text for h in shown.headers].index("CI %")
    assert all((r[interval].text, r[interval].title) == (MISSING, why) for r in shown.rows)

    csv_rows = list(csv.DictReader(io.StringIO(table_csv(table).decode("utf-8-sig"))))
    assert [(r["CI low %"], r["CI high %"]) for r in csv_rows] == [("", "")] * 2

    data = report.as_json()
    (api,) = [t for t in data["tables"] if t["key"] == "accuracy-common"]
    assert api["no_interval"] == table.no_interval
    assert all(r["CI low %"] is None and r["CI high %"] is None for r in api["rows"])
    assert report_from_json(data).table("accuracy-common").no_interval == table.no_interval
    # Only the tables with such rows carry the key: the others keep their JSON shape.
    assert {t["key"] for t in data["tables"] if "no_interval" in t} == {
        "accuracy",
        "accuracy-common",
    }


def test_dyntom_time_span_and_compositional_tables(dyntom_set):
    a, b = dyntom_set
    report = build_report("dyntom", seed=3)
    _assert_charts_match_tables(report)
    spans = report.table("time-span")
    # Only q5 and q6 span two consecutive scenarios (1-2); q7 stays in scenario 1.
    # A: q5 ✗ q6 ✓ = 50; B, samples pooled: (✓ ✗) + (✓ ✓) = 3/4.
    assert spans.records() == [
        {"Span": "1-2", "Span start": 1, "Questions": 2, f"#{a.pk} A %": 50.0, f"#{b.pk} B %": 75.0}
    ]
    by_length = report.table("time-span-by-length")
    assert by_length.rows == [[f"#{a.pk} A", 2, 50.0], [f"#{b.pk} B", 2, 75.0]]

    comp = report.table("compositional")
    # A: q5 ✗ with q1 ✓ q2 ✓ -> local; q6 ✓ with q3 ✓ q4 ✗ -> restoration;
    #    q7 ✗ with belief s1 (q1 ✓) and emotion s1 (q3 ✓) -> local.
    all_a = _row(comp, f"#{a.pk} A · all")
    assert all_a["Questions"] == 3
    assert (all_a["Fully correct %"], all_a["Local error %"]) == (0.0, 66.67)
    assert (all_a["Restoration error %"], all_a["Full error %"]) == (33.33, 0.0)
    assert _row(comp, f"#{a.pk} A · belief")["Local error %"] == 100.0
    # B, per sample: s0 q5 ✓ (q2 ✗) restoration, q6 ✗ (q3 ✓ q4 ✓) local, q7 ✓ (q1 ✓ q3 ✓)
    # fully; s1 q5 ✓ fully, q6 ✓ (q3 ✗) restoration, q7 ✗ (q3 ✗) full -> of 6: 2/1/2/1.
    all_b = _row(comp, f"#{b.pk} B · all")
    assert [all_b[c] for c in comp.columns[3:8]] == [6, 33.33, 16.67, 33.33, 16.67]
    # The charts point at the tables and columns they draw.
    charts = {c.key: c for c in report.charts}
    assert charts["time-span"].kind == "line" and charts["time-span"].x == "Span start"
    assert set(charts["compositional"].series) <= set(comp.columns)


def test_dyntom_runs_compared_on_the_same_questions_from_engine_runs(
    openai_backend,  # noqa: F811
    llm_server,
    dyntom_stages,  # noqa: F811
):
    """Two runs of our engine on the real stages: one over all 24, one over trial149."""
    wrong = {"type_a_what_1"}  # one understanding question per stage, answered "z"
    llm_server.responder = gold_responder(list(dyntom_stages), wrong=wrong)
    full = run_create(
        benchmark="dyntom", method="vanilla", backend=openai_backend, selection={}, enqueue=False
    )
    assert run_execute(run_id=full.pk) == Run.Status.SUCCEEDED
    total = DynToMQuestion.objects.count()
    report = build_report("dyntom")
    row = _row(report.table("accuracy"), f"#{full.pk} {full.name}")
    assert row["Questions"] == total
    assert row["Unparseable"] == 24  # one per stage
    assert row["Overall %"] == round(100 * (total - 24) / total, 2)
    assert report.facts["predictions"] == total

    one = run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=openai_backend,
        selection={"works": ["trial149"]},
        enqueue=False,
        name="one stage",
    )
    assert run_execute(run_id=one.pk) == Run.Status.SUCCEEDED
    stage_questions = DynToMQuestion.objects.filter(stage__work__key="trial149").count()
    report = build_report("dyntom", run_ids=[full.pk, one.pk])
    own = _row(report.table("accuracy"), f"#{full.pk} {full.name}")
    assert own["Questions"] == total  # its own answers, not only the one stage
    table = report.table("accuracy-common")
    assert f"{stage_questions} of {total}" in table.note
    for label in (f"#{full.pk} {full.name}", f"#{one.pk} one stage"):
        row = _row(table, label)
        assert row["Questions"] == stage_questions
        assert row["Overall %"] == round(100 * (stage_questions - 1) / stage_questions, 2)


def test_build_report_refuses_a_run_of_another_benchmark(dyntom_set):
    other = _run("chartom-qa", "elsewhere")
    with pytest.raises(ValueError, match=f"no dyntom run with id {other.pk}"):
        build_report("dyntom", run_ids=[other.pk])
    with pytest.raises(ValueError, match="unknown benchmark"):
        build_report("nope")


# -- ToM-in-AMC ----------------------------------------------------------------------


@pytest.fixture
def amc_set():
    """Two movies, three testing scenes, six masked speakers, two runs.

    W1 (Drama, Comedy): S1 = P0 alice, P1 bob (3 candidates each); S2 = P0 carol
    (candidates alice, carol). W2 (Drama, Thriller): S3 = P0 dan, P1 eve, P2 fay (3).
    Training scenes: W1 alice twice, bob once; W2 eve once.
    """
    w1 = WorkFactory(key="w1", genres=["Drama", "Comedy"])
    w2 = WorkFactory(key="w2", genres=["Drama", "Thriller"])
    chars = {
        name: CharacterFactory(work=work, name=name)
        for work, names in ((w1, ["alice", "bob", "carol"]), (w2, ["dan", "eve", "fay"]))
        for name in names
    }
    for work, char_map in (
        (w1, {"alice": "P0", "bob": "P1"}),
        (w1, {"alice": "P0"}),
        (w2, {"eve": "P0"}),
    ):
        SceneFactory(work=work, part="training", char_map=char_map)
    s1, s2, s3 = (SceneFactory(work=w) for w in (w1, w1, w2))

    def inst(scene, code, gold, candidates):
        return SpeakerInstanceFactory(
            scene=scene, code=code, gold_character=chars[gold], candidates=candidates
        )

    abc = ["alice", "bob", "carol"]
    def_ = ["dan", "eve", "fay"]
    items = [
        inst(s1, "P0", "alice", abc),
        inst(s1, "P1", "bob", abc),
        inst(s2, "P0", "carol", ["alice", "carol"]),
        inst(s3, "P0", "dan", def_),
        inst(s3, "P1", "eve", def_),
        inst(s3, "P2", "fay", def_),
    ]
    r1, r2 = _run("tom-in-amc", "R1"), _run("tom-in-amc", "R2")
    for item, ok in zip(items, [1, 0, 0, 1, 1, 1], strict=True):
        _predict(r1, "speaker_instance", item, bool(ok))
    _predict(r1, "speaker_instance", items[2], True, sample=1)  # later samples are ignored
    _predict(r2, "speaker_instance", items[0], False, parse_status="unparseable")
    for item, ok in zip(items[1:], [1, 1, 1, 1, 1], strict=True):
        _predict(r2, "speaker_instance", item, bool(ok))
    return r1, r2


def test_tom_in_amc_accuracy_baselines_and_breakdowns(amc_set):
    r1, r2 = amc_set
    l1, l2 = f"#{r1.pk} R1", f"#{r2.pk} R2"
    report = build_report("tom-in-amc")
    _assert_charts_match_tables(report)
    assert report.facts == {
        "works": 2,
        "scenes": 3,
        "instances": 6,
        "runs": 2,
        "predictions": 13,
        "unparseable": 1,
        "compared_instances": 6,
    }
    acc = report.table("accuracy")
    random = _row(acc, "Random")
    # mean of 1/k: (5 x 1/3 + 1/2) / 6 = 0.36111; scenes: (1/9 + 1/2 + 1/27) / 3 = 0.21605
    assert (random["Accuracy %"], random["Scene accuracy %"]) == (36.11, 21.6)
    # Majority: W1 guesses alice (2 training scenes): S1 P0 ✓, P1 ✗, S2 ✗;
    # W2 guesses eve: ✗ ✓ ✗ -> 2 / 6.
    assert _row(acc, "Majority")["Accuracy %"] == 33.33
    row1 = _row(acc, l1)
    # R1: ✓ ✗ ✗ ✓ ✓ ✓ = 4/6; scenes S1 ✗, S2 ✗, S3 ✓ = 1/3.
    assert (row1["Instances"], row1["Accuracy %"], row1["Scene accuracy %"]) == (6, 66.67, 33.33)
    assert row1["CI low %"] <= 66.67 <= row1["CI high %"]
    row2 = _row(acc, l2)
    # R2: unparseable ✗, then ✓ x 5 = 5/6; scenes S1 ✗, S2 ✓, S3 ✓ = 2/3.
    assert (row2["Accuracy %"], row2["Scene accuracy %"]) == (83.33, 66.67)
    assert _row(report.table("runs"), r2.pk)["Unparseable"] == 1

    speakers = report.table("by-speakers")
    assert [r[0] for r in speakers.rows] == ["1", "2", "3", "Easy (<3)", "Hard (≥3)"]
    # 1 speaker = S2: chance 1/2, majority ✗, R1 ✗, R2 ✓
    assert _row(speakers, "1") == {
        "Speakers": "1", "Instances": 1, "Random %": 50.0, "Majority %": 0.0,
        f"{l1} %": 0.0, f"{l2} %": 100.0,
    }  # fmt: skip
    # Easy = S1 + S2: chance (1/3 + 1/3 + 1/2) / 3 = 38.89; majority 1/3; R1 1/3; R2 2/3.
    assert _row(speakers, "Easy (<3)") == {
        "Speakers": "Easy (<3)", "Instances": 3, "Random %": 38.89, "Majority %": 33.33,
        f"{l1} %": 33.33, f"{l2} %": 66.67,
    }  # fmt: skip
    assert _row(speakers, "Hard (≥3)")[f"{l1} %"] == 100.0  # S3 ✓ ✓ ✓

    genres = report.table("by-genre")
    # Comedy = W1 (3 speakers): R1 1/3, R2 2/3. Drama = all 6: R1 4/6, R2 5/6.
    # Thriller = W2: R1 3/3, R2 3/3.
    assert _row(genres, "Comedy") == {
        "Genre": "Comedy", "Works": 1, "Instances": 3, "Random %": 38.89,
        "Majority %": 33.33, f"{l1} %": 33.33, f"{l2} %": 66.67,
    }  # fmt: skip
    assert _row(genres, "Drama")["Works"] == 2
    # Both runs rank Comedy < Drama < Thriller: Spearman's rho = 1.
    corr = report.table("genre-correlation")
    assert corr.rows == [[l1, 1.0, 1.0], [l2, 1.0, 1.0]]
    heatmap = next(c for c in report.charts if c.key == "genre-correlation")
    assert heatmap.kind == "heatmap" and heatmap.table == "genre-correlation"


def test_report_queries_do_not_grow_with_runs_or_predictions(amc_set):
    r1, _ = amc_set
    with CaptureQueriesContext(connection) as one:
        build_report("tom-in-amc", run_ids=[r1.pk])
    with CaptureQueriesContext(connection) as both:
        build_report("tom-in-amc")
    assert len(both) == len(one) <= 10


def test_single_run_has_no_correlation_table(amc_set):
    r1, _ = amc_set
    report = build_report("tom-in-amc", run_ids=[r1.pk])
    assert "genre-correlation" not in {t.key for t in report.tables}


# -- CharToM-QA ----------------------------------------------------------------------


def test_chartom_generative_and_multichoice_tables():
    book = WorkFactory(benchmark=Benchmark.CHARTOM_QA, kind=Work.Kind.BOOK, key="book")
    i1 = QAItemFactory(work=book, dimension="belief", directness=QAItem.Directness.DIRECT)
    i2 = QAItemFactory(work=book, dimension="belief", directness=QAItem.Directness.INDIRECT)
    i3 = QAItemFactory(work=book, dimension="emotion", directness=QAItem.Directness.DIRECT)
    gen = _run("chartom-qa", "G", method="generative")
    mc = _run("chartom-qa", "M", method="multichoice")
    for item, included, total, defects in (
        (i1, [0, 1], 2, []),
        (i2, [0], 3, ["misreads the letter"]),
        (i3, [], 1, ["None"]),  # the evaluator's "Penalty: None" is no defect
    ):
        details = {
            "task": "generative",
            "bonus_points_total": total,
            "bonus_points_included": included,
            "defects": defects,
        }
        _predict(gen, "qa_item", item, None, details=details, raw_output="…")
    for item, ok, status in ((i1, True, "ok"), (i2, False, "unparseable"), (i3, True, "ok")):
        _predict(mc, "qa_item", item, ok, parse_status=status, details={"task": "multichoice"})
    report = build_report("chartom-qa")
    _assert_charts_match_tables(report)
    g, m = f"#{gen.pk} G", f"#{mc.pk} M"

    generative = report.table("generative")
    belief = _row(generative, "belief")
    assert belief[f"{g} BPC %"] == 60.0  # (2 + 1) / (2 + 3)
    assert belief[f"{g} PR %"] == 50.0  # 1 of 2 responses has a defect
    everything = _row(generative, "All")
    assert everything[f"{g} BPC %"] == 50.0  # 3 / 6
    assert everything[f"{g} PR %"] == 33.33  # 1 / 3
    assert everything[f"{g} BPC CI low %"] <= 50.0 <= everything[f"{g} BPC CI high %"]
    assert f"{m} BPC %" not in generative.columns

    multichoice = report.table("multichoice")
    assert [r[0] for r in multichoice.rows] == ["belief", "emotion", "All"]
    assert _row(multichoice, "belief")[f"{m} accuracy %"] == 50.0  # ✓, unparseable ✗
    assert _row(multichoice, "All")[f"{m} accuracy %"] == 66.67  # 2 / 3

    directness = report.table("directness")
    # direct = i1 + i3: BPC (2 + 0) / (2 + 1); MC ✓ ✓. indirect = i2: 1/3; MC ✗.
    assert _row(directness, "direct")[f"{g} BPC %"] == 66.67
    assert _row(directness, "direct")[f"{m} accuracy %"] == 100.0
    assert _row(directness, "indirect")[f"{g} BPC %"] == 33.33
    assert _row(directness, "indirect")[f"{m} accuracy %"] == 0.0
    chart = next(c for c in report.charts if c.key == "generative")
    assert chart.error_low == [f"{g} BPC CI low %"] and chart.kind == "bar"


# -- TVShowGuess -----------------------------------------------------------------------


def test_tvshowguess_accuracy_by_dependence_and_long_format(shared_data):
    build_friends(shared_data)
    annotated = SpeakerAnnotation.objects.filter(instance__isnull=False).order_by("row_number")
    direct = [a for a in annotated if a.need_history == "yes"][:2]
    indirect = [a for a in annotated if a.need_history == "no" and a.facts_from_memory == "yes"][:1]
    run = _run("tvshowguess", "T")
    for annotation, ok in zip([*direct, *indirect], [True, False, True], strict=True):
        _predict(run, "speaker_instance", annotation.instance, ok, parsed_answer="x")
    report = build_report("tvshowguess")
    _assert_charts_match_tables(report)
    table = report.table("accuracy-by-dependence")
    label = f"#{run.pk} T %"
    assert _row(table, "direct")[label] == 50.0  # ✓ ✗
    assert _row(table, "indirect")[label] == 100.0  # ✓
    assert _row(table, "none")[label] is None  # no prediction there
    # friends.tsv: 40 rows need history, 2 of them (scene 09x05 2562) not in friends.raw.
    assert _row(table, "direct")["Instances"] == 38

    rows = list(long_format_rows("tvshowguess"))
    assert all(list(r) == long_format_columns("tvshowguess") for r in rows)
    model_rows = [r for r in rows if r["source"] == "model"]
    human_rows = [r for r in rows if r["source"] == "human"]
    assert len(model_rows) == 3 and len(human_rows) == SpeakerAnnotation.objects.count() == 151
    first = model_rows[0]
    assert first["run_id"] == run.pk and first["dependence"] == "direct"
    assert first["scene"] == direct[0].scene_source_id and first["code"] == direct[0].code
    assert first["candidates_count"] == len(direct[0].instance.candidates)
    # Annotators who wrote a name are scored against the gold speaker (case-insensitive).
    named = [r for r in human_rows if r["answer"]]
    assert named and all((r["correct"] is None) == (r["gold"] is None) for r in named)
    scored = [r for r in named if r["gold"]]
    assert all(r["correct"] == (r["answer"].lower() == r["gold"]) for r in scored)
    assert {r["reasoning"] for r in human_rows} >= {"commonsense", "not required"}


def test_long_format_rows_for_dyntom(dyntom_set):
    _, b = dyntom_set
    rows = list(long_format_rows("dyntom", run_ids=[b.pk]))
    assert len(rows) == 14  # 7 questions x 2 samples
    assert {r["run_name"] for r in rows} == {"B"} and {r["sample_index"] for r in rows} == {0, 1}
    q7 = next(r for r in rows if r["question"] == "q7" and r["sample_index"] == 0)
    expected = {
        "source": "model",
        "question_type": "transformation-2",
        "mental_state": "belief->emotion",
        "scenario_from": 1,
        "scenario_to": 1,
        "scenario_count": 2,
        "correct": True,
        "parse_status": "ok",
        "gold": "a",
    }
    assert {k: q7[k] for k in expected} == expected


@pytest.mark.parametrize("benchmark", ["dyntom", "chartom-qa", "tom-in-amc", "tvshowguess"])
def test_empty_benchmark_still_builds(benchmark):
    report = build_report(benchmark)
    assert report.facts["runs"] == report.facts["predictions"] == 0
    assert report.tables[0].key == "runs" and report.tables[0].rows == []
    _assert_charts_match_tables(report)


def test_scene_counts_in_the_speaker_tables_read_as_english():
    """One scene is "1 scene", not "1 scenes" (the walk's screenshot of a common set)."""
    from reports.tables.tom_in_amc import _scenes

    assert [_scenes(n) for n in (0, 1, 2)] == ["0 scenes", "1 scene", "2 scenes"]
