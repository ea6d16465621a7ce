"""CharToM-QA on the run engine: generative QA with the evaluator's truncation, multiple
choice by context, the LLM judge read in the strict and reference modes, RougeL and
BERTScore, and the reports they feed.

The end-to-end tests run against the loopback OpenAI-compatible server scripted with
the published GPT-4o outputs of the paper's two examples (Tables 18-19).
"""

from __future__ import annotations

import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from benchmarks.models import QAItem
from common.models import QueuedJob
from metrics.text_overlap import rouge_l
from modeling.models import Backend, Prediction, Run
from modeling.pipelines.chartom_qa import (
    REFERENCE,
    STRICT,
    bonus_judgement,
    defects_judgement,
    read_pick,
    response_score,
    truncate_response,
    truncation_limit,
)
from modeling.pipelines.chartom_qa.text_similarity import (
    TEXT_SIMILARITY_TASK_NAME,
    predictions_text_similarity,
)
from modeling.runs.executor import run_execute
from modeling.runs.services import run_create
from reports.run_packs import RUN_PACK_TASK_NAME
from reports.tables import build_report

# The pure reading tests need no database; the rest do.
django_db = pytest.mark.django_db

GORIOT = "Father Goriot by Honoré de Balzac"
MONTE_CRISTO = "The Count of Monte Cristo by Alexandre Dumas"


# --- the judge's replies, table-driven -----------------------------------------------------

NULL = "Null"
# reply, strict (status, covered), reference (stored, covered) — for an item with 2 points.
BONUS_REPLIES = [
    ('[Included Bonus Points]: "1,2"', ("ok", 2), ([1, 2], 2)),
    ('[Included Bonus Points]: "1"', ("ok", 1), ([1], 1)),
    ("[Included Bonus Points]: 2", ("ok", 1), ([2], 1)),
    # Extra spaces: strict ignores them; the published script rejects " 2" as not digits.
    ("[Included Bonus Points]: 1, 2", ("ok", 2), (NULL, 3)),
    ('[Included Bonus Points]:    "1"   ', ("ok", 1), ([1], 1)),
    ("   [Included Bonus Points]: 1   ", ("ok", 1), ([1], 1)),
    # Parentheses and quotes are ignored by both.
    ("[Included Bonus Points]: (1),(2)", ("ok", 2), ([1, 2], 2)),
    ("[Included Bonus Points]: '1','2'", ("ok", 2), ([1, 2], 2)),
    ('[Included Bonus Points]: "(2)"', ("ok", 1), ([2], 1)),
    # Curly quotes: strict drops them too; the script keeps them and fails.
    ("[Included Bonus Points]: \u201c1\u201d", ("ok", 1), (NULL, 3)),
    # A repeated index covers one point.
    ("[Included Bonus Points]: 1,1", ("ok", 1), ([1, 1], 1)),
    # None anywhere after the prefix: no point.
    ("[Included Bonus Points]: None", ("ok", 0), ([], 0)),
    ('[Included Bonus Points]: "None"', ("ok", 0), ([], 0)),
    ("[Included Bonus Points]: None of them", ("ok", 0), ([], 0)),
    ("[Included Bonus Points]: 1, None", ("ok", 0), ([], 0)),
    # Blank lines around one line are dropped by both.
    ("\n[Included Bonus Points]: 1\n\n", ("ok", 1), ([1], 1)),
    # Multi-line replies are invalid in both.
    (
        "[Included Bonus Points]: 1\nThe response covers the first point.",
        ("unparseable", None),
        (NULL, 3),
    ),
    (
        "Reasoning: point 1 is there.\n\n[Included Bonus Points]: 1",
        ("unparseable", None),
        (NULL, 3),
    ),
    (
        "[Included Bonus Points]: 1\n\n\n[Included Bonus Points]: 2",
        ("unparseable", None),
        (NULL, 3),
    ),
    # A non-numeric index, an index the item lacks, an empty index.
    ("[Included Bonus Points]: 1, two", ("unparseable", None), (NULL, 3)),
    ("[Included Bonus Points]: first", ("unparseable", None), (NULL, 3)),
    ("[Included Bonus Points]: none", ("unparseable", None), (NULL, 3)),
    ("[Included Bonus Points]: 3", ("unparseable", None), ([3], 1)),
    ("[Included Bonus Points]: 0", ("unparseable", None), ([0], 1)),
    ("[Included Bonus Points]: 1,2,", ("unparseable", None), (NULL, 3)),
    ("[Included Bonus Points]:", ("unparseable", None), (NULL, 3)),
    # Junk and near misses.
    ("**[Included Bonus Points]:** 1", ("unparseable", None), (NULL, 3)),
    ("Included Bonus Points: 1", ("unparseable", None), (NULL, 3)),
    (
        "I think the response covers point 1. [Included Bonus Points]: 1",
        ("unparseable", None),
        (NULL, 3),
    ),
    ("", ("unparseable", None), (NULL, 3)),
    ("I'm sorry, I can't help with that.", ("unparseable", None), (NULL, 3)),
]


@pytest.mark.parametrize(("reply", "strict", "reference"), BONUS_REPLIES)
def test_bonus_replies_in_both_modes(reply, strict, reference):
    details = bonus_judgement(reply, total=2)

    assert details["judge_bonus"]["status"] == strict[0]
    assert details["judge_bonus"]["reference"] == reference[0]
    score = response_score(details, STRICT)
    # Never silently zero: an unreadable reply has no coverage, and says so.
    assert (score.bonus_status, score.covered, score.total) == (strict[0], strict[1], 2)
    if strict[0] == "unparseable":
        assert "bonus_points_included" not in details
        assert details["judge_bonus"]["reason"]
    assert response_score(details, REFERENCE).covered == reference[1]


# reply, strict (status, penalised), reference (stored, penalised).
DEFECT_REPLIES = [
    ("[Defects]: None", ("ok", False), ("None", False)),
    ('[Defects]: "None"', ("ok", False), ('"None"', False)),
    ("[Defects]: None.", ("ok", False), ("None.", False)),
    ("   [Defects]:    None   ", ("ok", False), ("None", False)),
    ("[Defects]: None. The response is consistent with the plot.", ("ok", False), None),
    ("[Defects]: The response invents a quarrel.", ("ok", True), None),
    # Multi-line defect texts are fine in both.
    ("[Defects]:\n1. It invents a quarrel.\n2. It misnames Goriot.", ("ok", True), None),
    # "None" inside a defect: a defect for strict, no penalty for the script.
    ("[Defects]: None of its claims is supported by the plot.", ("ok", True), None),
    # Unreadable: unparseable for strict, a penalty for the script.
    ("[Defects]:", ("unparseable", None), ("", True)),
    ("[Defect]: None", ("unparseable", None), (NULL, True)),
    ("No defects found.", ("unparseable", None), (NULL, True)),
    ("**[Defects]:** None", ("unparseable", None), (NULL, True)),
    ("", ("unparseable", None), (NULL, True)),
]


@pytest.mark.parametrize(("reply", "strict", "reference"), DEFECT_REPLIES)
def test_defect_replies_in_both_modes(reply, strict, reference):
    details = defects_judgement(reply)

    score = response_score(details, STRICT)
    assert (score.defects_status, score.penalised) == strict
    if strict[0] == "unparseable":
        assert "defects" not in details
    expected_penalty = "None" not in (reference[0] if reference else reply)
    if reference:
        assert details["judge_defects"]["reference"] == reference[0]
        assert reference[1] is expected_penalty
    assert response_score(details, REFERENCE).penalised is expected_penalty


def test_a_response_judged_by_half_or_not_at_all():
    bonus_only = bonus_judgement('[Included Bonus Points]: "1"', total=3)
    assert response_score(bonus_only).defects_status == "unjudged"
    assert response_score(bonus_only).penalised is None
    assert response_score({}).bonus_status == "unjudged"
    assert response_score({}).covered is None
    with pytest.raises(ValueError, match="scoring mode"):
        response_score(bonus_only, "lenient")


def test_imported_verdicts_read_the_same_in_both_modes():
    details = {"bonus_points_total": 3, "bonus_points_included": [0, 0, 2], "defects": []}
    for mode in (STRICT, REFERENCE):
        score = response_score(details, mode)
        assert (score.covered, score.total, score.penalised) == (2, 3, False)
    with_defect = {**details, "defects": ["Overclaims."]}
    assert response_score(with_defect).penalised is True
    # The script's quirk: a defect text containing "None" is no penalty.
    none_inside = {**details, "defects": ["None of it follows."]}
    assert response_score(none_inside, STRICT).penalised is True
    assert response_score(none_inside, REFERENCE).penalised is False


# --- truncation and picks ------------------------------------------------------------------


def test_truncation_is_the_reference_evaluators():
    # n = 16 words: max(16 + 5, int(1.5 * 16)) = 24; n = 4: max(9, 6) = 9.
    sixteen = " ".join(f"w{i}" for i in range(16))
    assert truncation_limit(sixteen) == 24
    assert truncation_limit("a b c d") == 9
    assert truncation_limit("a b c") == 8  # int(4.5) = 4 < 3 + 5
    long = " ".join(f"r{i}" for i in range(40))
    assert truncate_response(long, sixteen).split(" ") == [f"r{i}" for i in range(24)]
    assert truncate_response("short answer", sixteen) == "short answer"
    # Words are split on single spaces, as in evaluate_en.py: "a  b" is three words.
    assert truncate_response("a  b c d e f g h i j", "x y z w") == "a  b c d e f g h"


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("3", "c"),
        ("(3)", "c"),
        ("3.", "c"),
        ("(3).", "c"),
        ("[4]", "d"),
        (" 1 ", "a"),
        ("(2). Vautrin did this to assert his superior status.", "b"),
        ("The answer is (4).", "d"),
        ("c", "c"),
        ("(B)", "b"),
        ("b. Vautrin did this", "b"),
        ("5", "5"),
        ("(1) or (3)", None),
        ("I cannot decide.", None),
        ("", None),
    ],
)
def test_multiple_choice_reply_shapes(reply, letter):
    assert read_pick(reply) == letter


# --- end to end over the paper's examples ----------------------------------------------------


@pytest.fixture
def examples(shared_data: Path) -> Path:
    return shared_data / "chartom-qa" / "paper_examples.jsonl"


@pytest.fixture
def records(examples: Path) -> list[dict]:
    return [json.loads(line) for line in examples.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def chartom_items(examples: Path) -> dict[str, QAItem]:
    call_command(
        "import_benchmark", "chartom-qa", str(examples), "--split", "test", "--no-progress",
        stdout=StringIO(), stderr=StringIO(),
    )  # fmt: skip
    return {item.work.key: item for item in QAItem.objects.select_related("work")}


def published_responder(records: list[dict], *, bonus_junk_for: str = ""):
    """Answers every CharToM-QA prompt as GPT-4o did in the paper (the server thread
    cannot read the test's rows: everything comes from the prompt and the records)."""

    def respond(body: dict) -> str:
        prompt = "\n".join(m["content"] for m in body["messages"])
        record = next(r for r in records if r["question"] in prompt)
        published = record["published_results"]
        if "[Candidate Choices]" in prompt:
            chosen = published["multichoice_choices"][published["gpt-4o_multichoice_pick"] - 1]
            shown = dict((text, i) for i, text in re.findall(r"^\((\d)\)\. (.*)$", prompt, re.M))
            return f"({shown[chosen]})"
        if "[Included Bonus Points]" in prompt:
            if bonus_junk_for and bonus_junk_for in prompt:
                return "The response covers the first point.\n[Included Bonus Points]: 1"
            points = ",".join(str(i) for i in published["gpt-4o_bonus_points_included"])
            return f'[Included Bonus Points]: "{points}"'
        if "[Defects]" in prompt:
            return f"[Defects]: {published['gpt-4o_defects'] or 'None'}"
        return published["gpt-4o_generative_response"]

    return respond


def execute(method: str, backend: Backend, selection: dict) -> Run:
    run = run_create(
        benchmark="chartom-qa",
        method=method,
        backend=backend,
        selection=selection,
        params={"temperature": 0.2},
        enqueue=False,
    )
    status = run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert status == "succeeded", run.error
    return run


def table(report, key: str):
    return next(t for t in report.tables if t.key == key)


def row(found, *first: str) -> dict:
    rows = [r for r in found.rows if tuple(r[: len(first)]) == first]
    assert len(rows) == 1, (first, found.rows)
    return dict(zip(found.columns, rows[0], strict=True))


@django_db
def test_paper_examples_end_to_end_reproduce_the_published_outcome(
    chartom_items, records, openai_backend, llm_server
):
    llm_server.responder = published_responder(records)
    goriot, cristo = chartom_items[GORIOT], chartom_items[MONTE_CRISTO]

    generative = execute("generative", openai_backend, {})
    multichoice = execute("multichoice", openai_backend, {"context": 0})
    judge_bonus = execute("judge-bonus", openai_backend, {"run": generative.pk})
    judge_defects = execute("judge-defects", openai_backend, {"run": generative.pk})

    assert llm_server.request_count == 8  # 2 items x (answer, pick, bonus, defects)
    # The judge writes no predictions of its own: its verdicts go to the responses.
    assert not judge_bonus.predictions.exists() and not judge_defects.predictions.exists()
    answers = {p.qa_item_id: p for p in generative.predictions.all()}
    g, c = answers[goriot.pk], answers[cristo.pk]
    for mode in (STRICT, REFERENCE):
        assert (response_score(g.details, mode).covered, g.details["bonus_points_total"]) == (1, 2)
        assert response_score(g.details, mode).penalised is True
        assert (response_score(c.details, mode).covered, c.details["bonus_points_total"]) == (2, 2)
        assert response_score(c.details, mode).penalised is False
    assert g.details["defects"][0].startswith('The response mentioning "easing')
    assert g.details["judge_bonus"] == {
        "status": "ok", "reference": [1], "run": judge_bonus.pk,
        "call": judge_bonus.calls.get(unit_key=f"chartom-qa:judge-bonus:{g.pk}").pk,
    }  # fmt: skip
    assert g.details["context"] == 0 and g.parse_status == "ok" and g.correct is None

    # The 29-word response was cut to 24 words (answer: 16) before the judge saw it.
    published = records[0]["published_results"]["gpt-4o_generative_response"]
    assert g.details["truncated"] is True and g.parsed_answer == " ".join(published.split()[:24])
    bonus_prompt = next(
        r["messages"][-1]["content"]
        for r in llm_server.requests
        if "[Included Bonus Points]" in r["messages"][-1]["content"] and goriot.question in
        r["messages"][-1]["content"]
    )  # fmt: skip
    assert g.parsed_answer in bonus_prompt and "true intentions" not in bonus_prompt
    assert "(1) Vautrin deliberately tries to please" in bonus_prompt
    generative_prompt = next(
        r["messages"][-1]["content"] for r in llm_server.requests
        if "Your answer:" in r["messages"][-1]["content"] and goriot.question in
        r["messages"][-1]["content"]
    )  # fmt: skip
    assert "about 16 words" in generative_prompt and goriot.context_0 in generative_prompt
    # RougeL of the truncated response, stored when the generative run ended.
    assert g.details["rouge_l"] == pytest.approx(rouge_l(goriot.answer, g.parsed_answer))

    picks = {p.qa_item_id: p for p in multichoice.predictions.all()}
    for item, record in ((goriot, records[0]), (cristo, records[1])):
        pick, results = picks[item.pk], record["published_results"]
        chosen = results["multichoice_choices"][results["gpt-4o_multichoice_pick"] - 1]
        assert pick.details["choices"][ord(pick.parsed_answer) - ord("a")] == chosen
        assert pick.details["context"] == 0
    assert (picks[goriot.pk].correct, picks[cristo.pk].correct) == (False, True)

    report = build_report("chartom-qa", run_ids=[generative.pk, multichoice.pk])
    strict = table(report, "generative")
    assert "scoring: strict" in strict.title
    label = f"#{generative.pk} {generative.name}"
    everything = row(strict, "All")
    assert (everything[f"{label} BPC %"], everything[f"{label} PR %"]) == (75.0, 50.0)
    assert everything[f"{label} judge unparseable"] == 0
    reference = table(report, "generative-reference")
    assert "scoring: reference" in reference.title
    everything = row(reference, "All")
    assert (everything[f"{label} BPC %"], everything[f"{label} PR %"]) == (75.0, 50.0)
    by_context = table(report, "by-context")
    assert "scoring: strict" in by_context.title
    c0 = row(by_context, "0", "All")
    assert c0[f"#{multichoice.pk} {multichoice.name} accuracy %"] == 50.0
    assert c0[f"{label} BPC %"] == 75.0


@django_db
def test_unparseable_judge_replies_are_counted_not_zero(
    chartom_items, records, openai_backend, llm_server
):
    llm_server.responder = published_responder(records)
    generative = execute("generative", openai_backend, {})
    execute("judge-bonus", openai_backend, {"run": generative.pk})
    execute("judge-defects", openai_backend, {"run": generative.pk})
    goriot = generative.predictions.get(qa_item=chartom_items[GORIOT])
    assert goriot.details["bonus_points_included"] == [0]

    # Another judge (another backend: nothing cached) answers Goriot in two lines.
    other = Backend.objects.create(
        name="judge-2", kind="openai", base_url=llm_server.base_url, default_model="judge"
    )
    llm_server.responder = published_responder(records, bonus_junk_for=GORIOT)
    execute("judge-bonus", other, {"run": generative.pk})

    goriot.refresh_from_db()
    assert goriot.details["judge_bonus"]["status"] == "unparseable"
    assert "bonus_points_included" not in goriot.details  # the old verdict is gone
    report = build_report("chartom-qa", run_ids=[generative.pk])
    label = f"#{generative.pk} {generative.name}"
    strict = row(table(report, "generative"), "All")
    # Strict: Goriot's bonus half is left out (Monte Cristo 2/2) and counted.
    assert (strict[f"{label} BPC %"], strict[f"{label} judge unparseable"]) == (100.0, 1)
    assert strict[f"{label} PR %"] == 50.0
    # Reference: "Null" counts 3 of Goriot's 2 points: (3 + 2) / 4.
    reference = row(table(report, "generative-reference"), "All")
    assert reference[f"{label} BPC %"] == 125.0
    assert reference[f"{label} judge unparseable"] == 1


@django_db
def test_judging_again_is_free_and_changes_nothing(
    chartom_items, records, openai_backend, llm_server
):
    llm_server.responder = published_responder(records)
    generative = execute("generative", openai_backend, {})
    execute("judge-bonus", openai_backend, {"run": generative.pk})
    before = {p.pk: p.details for p in generative.predictions.all()}
    requests = llm_server.request_count

    again = execute("judge-bonus", openai_backend, {"run": generative.pk})

    assert llm_server.request_count == requests  # every reply came from the cache
    assert again.calls.filter(from_cache=True).count() == 2
    after = {p.pk: p.details for p in generative.predictions.all()}
    assert {pk: d["bonus_points_included"] for pk, d in after.items()} == {
        pk: d["bonus_points_included"] for pk, d in before.items()
    }
    assert {d["judge_bonus"]["run"] for d in after.values()} == {again.pk}


@django_db
def test_run_pages_show_chartom_runs(chartom_items, records, openai_backend, llm_server, client,
                                     researcher):  # fmt: skip
    llm_server.responder = published_responder(records)
    generative = execute("generative", openai_backend, {})
    judge = execute("judge-defects", openai_backend, {"run": generative.pk})
    client.force_login(researcher)

    page = client.get(f"/runs/{judge.pk}/")
    assert page.status_code == 200
    assert "judge-defects" in page.content.decode()
    page = client.get(f"/runs/{generative.pk}/")
    assert page.status_code == 200 and generative.name in page.content.decode()
    # The new-run form offers the context and the run to judge.
    form = client.get("/runs/new/").content.decode()
    assert 'name="context"' in form and 'name="responses_of"' in form


@django_db
def test_context_is_a_run_option(chartom_items, records, openai_backend, llm_server):
    llm_server.responder = published_responder(records)
    # The paper's examples publish no 1k/2k windows: such a run fails, saying why.
    run = run_create(
        benchmark="chartom-qa",
        method="multichoice",
        backend=openai_backend,
        selection={"context": 1000},
        enqueue=False,
    )
    assert run_execute(run_id=run.pk) == "failed"
    run.refresh_from_db()
    assert "has a 1000-token plot window" in run.error
    assert llm_server.request_count == 0

    # A 2k window given to one item: only that item is asked, with that window.
    QAItem.objects.filter(pk=chartom_items[GORIOT].pk).update(context_2000="LONG PLOT WINDOW")
    out = StringIO()
    call_command(
        "run_model", "--benchmark", "chartom-qa", "--method", "multichoice",
        "--backend", openai_backend.name, "--context", "2k", stdout=out, stderr=StringIO(),
    )  # fmt: skip
    run = Run.objects.latest("pk")
    assert run.selection == {"context": 2000} and run.status == "succeeded"
    assert llm_server.request_count == 1
    assert "LONG PLOT WINDOW" in llm_server.requests[0]["messages"][-1]["content"]
    (pick,) = run.predictions.all()
    assert pick.details["context"] == 2000 and pick.correct is False
    report = build_report("chartom-qa", run_ids=[run.pk])
    assert row(table(report, "by-context"), "2000", "All")[f"#{run.pk} {run.name} n"] == 1


@django_db
def test_judge_run_needs_a_generative_run(openai_backend, llm_server):
    run = run_create(
        benchmark="chartom-qa",
        method="judge-defects",
        backend=openai_backend,
        selection={},
        enqueue=False,
    )
    assert run_execute(run_id=run.pk) == "failed"
    run.refresh_from_db()
    assert "selection['run']" in run.error


@django_db
def test_bertscore_of_the_truncated_response(
    chartom_items, records, openai_backend, llm_server, tiny_bert, settings,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    llm_server.responder = published_responder(records)
    settings.TOMLAB_BERTSCORE_MODEL = str(tiny_bert)
    with django_capture_on_commit_callbacks() as queued:
        generative = execute("generative", openai_backend, {})
    # BERTScore goes to a GPU worker when the run ends, and the report's packing of the
    # run to a worker too, each sent once the end commits; RougeL is there already.
    assert [c.__qualname__ for c in queued].count("task_send_on_commit.<locals>.<lambda>") == 2
    sent = QueuedJob.objects.filter(task__in=[TEXT_SIMILARITY_TASK_NAME, RUN_PACK_TASK_NAME])
    assert sorted(sent.values_list("task", "queue", "args")) == [
        (TEXT_SIMILARITY_TASK_NAME, "gpu", [[generative.pk]]),
        (RUN_PACK_TASK_NAME, "", [generative.pk]),
    ]
    assert all("bertscore_f1" not in p.details for p in generative.predictions.all())

    assert predictions_text_similarity(run_ids=[generative.pk]) == 2
    for p in Prediction.objects.filter(run=generative).select_related("qa_item"):
        assert 0 < p.details["bertscore_f1"] <= 1
        assert p.details["rouge_l"] == pytest.approx(rouge_l(p.qa_item.answer, p.parsed_answer))


@django_db
def test_import_reads_raw_judge_replies_like_the_engine(chartom_items, tmp_path):
    goriot = chartom_items[GORIOT]
    path = tmp_path / "judged.jsonl"
    line = {
        "benchmark": "chartom-qa", "model": "my-llm", "item": goriot.natural_key,
        "task": "generative", "raw_output": "He flatters them to keep his business going.",
        "bonus_reply": "[Included Bonus Points]: 1, 2", "defects_reply": "[Defect]: None",
    }  # fmt: skip
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")

    out = StringIO()
    call_command("import_predictions", str(path), "--name", "raw", stdout=out)

    assert "1 with an unparseable judge reply" in out.getvalue()

    (prediction,) = Run.objects.get(name="raw (generative)").predictions.all()
    strict, reference = (response_score(prediction.details, m) for m in (STRICT, REFERENCE))
    assert (strict.covered, strict.penalised, strict.defects_status) == (2, None, "unparseable")
    assert (reference.covered, reference.penalised) == (3, True)  # "Null" twice
