"""import_predictions: predictions made elsewhere, scored against the item bank.

Real data throughout: the 24 DynToM stages, TVShowGuess friends.raw and the CharToM-QA
paper examples (whose published GPT-4o outputs are the acceptance check: BPC 3/4,
PR 1/2, multiple-choice accuracy 1/2). Error paths use broken copies in tmp_path.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from benchmarks.models import DynToMQuestion, QAItem, SpeakerInstance
from modeling.models import Prediction, Run
from modeling.runs.executor import run_execute
from modeling.runs.services import run_create

from .conftest import gold_responder

pytestmark = pytest.mark.django_db

GORIOT = "Father Goriot by Honoré de Balzac"
MONTE_CRISTO = "The Count of Monte Cristo by Alexandre Dumas"
OUTCOME = ("parsed_answer", "parse_status", "correct", "details")


def run_import(path: Path, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("import_predictions", str(path), *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def write_jsonl(path: Path, records: list[dict[str, Any] | str]) -> Path:
    """Records as JSONL; a str is written as the raw line (to break it)."""
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stored() -> list[tuple]:
    """Every run and prediction row as stored, so any write shows."""
    return [
        *Run.objects.order_by("pk").values_list(),
        *Prediction.objects.order_by("pk").values_list(),
    ]


def outcomes(run: Run, item_field: str) -> dict[int, tuple]:
    return {
        row[0]: row[1:]
        for row in Prediction.objects.filter(run=run).values_list(item_field, *OUTCOME)
    }


# --- CharToM-QA ------------------------------------------------------------------------


@pytest.fixture
def examples(shared_data: Path) -> Path:
    return shared_data / "chartom-qa" / "paper_examples.jsonl"


@pytest.fixture
def chartom_items(examples: Path):
    call_command(
        "import_benchmark", "chartom-qa", str(examples), "--split", "test", "--no-progress",
        stdout=StringIO(), stderr=StringIO(),
    )  # fmt: skip
    return {item.work.key: item for item in QAItem.objects.select_related("work")}


def test_paper_examples_give_the_published_scores(chartom_items, examples):
    out, _ = run_import(examples, "--name", "gpt-4o-published")

    runs = {r.method: r for r in Run.objects.all()}
    assert sorted(runs) == ["generative", "multichoice"]
    for method, run in runs.items():
        assert run.name == f"gpt-4o-published ({method})"
        assert (run.benchmark, run.model, run.imported, run.status) == (
            "chartom-qa", "gpt-4o", True, "succeeded",
        )  # fmt: skip
        assert run.backend is None and run.template is None
    assert "Run: 2 created, 0 unchanged" in out
    assert "Prediction: 4 created, 0 unchanged, 0 updated" in out
    assert "correct 1/2" in out
    assert "bonus points 3/4 covered, 1/2 responses with defects" in out

    generative = list(Prediction.objects.filter(run=runs["generative"]))
    assert len(generative) == 2
    assert {(p.parse_status, p.correct, p.parsed_answer) for p in generative} == {("ok", None, "")}
    # The report metrics, computed from the stored details as the reports will.
    judged = [(len(p.details["bonus_points_included"]), p.details["bonus_points_total"])
              for p in generative]  # fmt: skip
    assert sum(i for i, _ in judged) / sum(t for _, t in judged) == 3 / 4  # BPC
    assert sum(bool(p.details["defects"]) for p in generative) / len(generative) == 1 / 2  # PR

    goriot = next(p for p in generative if p.qa_item_id == chartom_items[GORIOT].pk)
    assert goriot.raw_output.startswith("Vautrin might use this gesture")
    assert goriot.details["task"] == "generative"
    assert goriot.details["bonus_points_total"] == 2
    assert goriot.details["bonus_points_included"] == [0]  # the paper's "1", 0-based
    assert len(goriot.details["defects"]) == 1
    assert goriot.details["defects"][0].startswith('The response mentioning "easing')
    cristo = next(p for p in generative if p.qa_item_id == chartom_items[MONTE_CRISTO].pk)
    assert cristo.details["bonus_points_included"] == [0, 1]
    assert cristo.details["defects"] == []

    picks = {p.qa_item_id: p for p in Prediction.objects.filter(run=runs["multichoice"])}
    assert sum(p.correct for p in picks.values()) / len(picks) == 1 / 2  # accuracy
    goriot_pick = picks[chartom_items[GORIOT].pk]
    assert (goriot_pick.parsed_answer, goriot_pick.parse_status, goriot_pick.correct) == (
        "d", "ok", False,
    )  # fmt: skip
    assert goriot_pick.details["task"] == "multichoice"
    assert goriot_pick.details["gold_letter"] == "c"
    assert goriot_pick.details["choices"][2] == chartom_items[GORIOT].answer
    assert set(goriot_pick.details["choices"]) == {
        chartom_items[GORIOT].answer, *chartom_items[GORIOT].misleading_choices,
    }  # fmt: skip
    cristo_pick = picks[chartom_items[MONTE_CRISTO].pk]
    assert (cristo_pick.parsed_answer, cristo_pick.correct) == ("c", True)


def test_importing_again_under_the_same_name_adds_nothing(chartom_items, examples):
    run_import(examples, "--name", "gpt-4o-published")
    before = stored()

    out, _ = run_import(examples, "--name", "gpt-4o-published")

    assert stored() == before
    assert "Run: 0 created, 2 unchanged" in out
    assert "Prediction: 0 created, 4 unchanged, 0 updated" in out
    # Another name is another import: two more runs.
    run_import(examples, "--name", "again")
    assert Run.objects.count() == 4 and Prediction.objects.count() == 8


def test_published_results_as_python_literal_strings(chartom_items, examples, tmp_path):
    """Copies of the examples may carry published_results (and the choices) as a
    Python-literal string, as pandas-written dumps do; they must read the same."""
    records = [json.loads(line) for line in examples.read_text(encoding="utf-8").splitlines()]
    for record in records:
        results = record["published_results"]
        results["multichoice_choices"] = repr(results["multichoice_choices"])
        record["published_results"] = repr(results)
        record["misleading_choices"] = repr(record["misleading_choices"])
    literal = write_jsonl(tmp_path / "literal.jsonl", records)

    run_import(examples, "--name", "as-json")
    run_import(literal, "--name", "as-literal")

    for method in ("generative", "multichoice"):
        as_json = Run.objects.get(name=f"as-json ({method})")
        as_literal = Run.objects.get(name=f"as-literal ({method})")
        assert outcomes(as_literal, "qa_item") == outcomes(as_json, "qa_item")
        assert len(outcomes(as_json, "qa_item")) == 2


def test_chartom_lines_by_key_or_by_book_and_question(chartom_items, tmp_path):
    goriot, cristo = chartom_items[GORIOT], chartom_items[MONTE_CRISTO]
    # The choices in another order than the paper showed: the gold letter follows them.
    shown = [goriot.misleading_choices[0], goriot.answer, *goriot.misleading_choices[1:]]
    base = {"benchmark": "chartom-qa", "model": "my-llm"}
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {**base, "item": goriot.natural_key, "task": "multichoice", "choices": shown,
             "answer": "(B)", "correct": False},
            {**base, "book": MONTE_CRISTO, "question": cristo.question, "task": "multichoice",
             "choices": [cristo.answer, *cristo.misleading_choices], "answer": "e"},
            {**base, "item": goriot.natural_key, "task": "multichoice", "choices": shown,
             "answer": None, "sample_index": 1},
            {**base, "book": GORIOT, "character": "Vautrin", "question": goriot.question,
             "task": "generative", "raw_output": "He wants to please them.",
             "bonus_points_included": [1], "defects": "None", "judge": "gpt-4o"},
        ],
    )  # fmt: skip

    out, err = run_import(path, "--name", "mine")

    picks = Run.objects.get(name="mine (multichoice)")
    rows = {
        (p.qa_item_id, p.sample_index): (p.parsed_answer, p.parse_status, p.correct,
                                         p.details["gold_letter"])
        for p in picks.predictions.all()
    }  # fmt: skip
    assert rows == {
        (goriot.pk, 0): ("b", "ok", True, "b"),
        (cristo.pk, 0): ("e", "unparseable", False, "a"),
        (goriot.pk, 1): ("", "missing", False, "b"),
    }
    generative = Run.objects.get(name="mine (generative)").predictions.get()
    assert generative.details == {
        "task": "generative",
        "bonus_points_total": 2,
        "bonus_points_included": [1],
        "defects": [],
        "extra": {"judge": "gpt-4o"},
        # What the reports' length ratios need (the reference answer has 16 words).
        "response_chars": 24,
        "answer_chars": len(goriot.answer),
        "response_words": 5,
        "answer_words": 16,
        "truncated": False,
    }
    assert "correct 1/3 (1 missing, 1 unparseable)" in out
    # The file said line 1 was wrong; the item bank says right, and wins.
    assert "1 prediction(s) claim a correctness that differs" in err
    assert "'judge' (first on line 4)" in err


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda r: r.update(choices=[*r["choices"][:3], "Something else."]), "choices",
         "not the item's answer and its three misleading choices"),
        (lambda r: r.update(task="essay"), "task", "'essay' is not one of"),
        (lambda r: r.update(item="0" * 40), "item", "no CharToM-QA item"),
        (lambda r: r.pop("choices"), "choices", "missing"),
        (lambda r: r.update(task="generative", raw_output="x", bonus_points_included=[2],
                            defects=[]), "bonus_points_included", "indices run from 0 to 1"),
        (lambda r: r.update(task="generative", raw_output="x", defects=[]),
         "bonus_points_included", "missing"),
    ],
)  # fmt: skip
def test_bad_chartom_line_imports_nothing(chartom_items, tmp_path, change, field, message):
    goriot = chartom_items[GORIOT]
    good = {"benchmark": "chartom-qa", "model": "m", "item": goriot.natural_key,
            "task": "multichoice", "choices": [goriot.answer, *goriot.misleading_choices],
            "answer": "a"}  # fmt: skip
    bad = json.loads(json.dumps(good))
    change(bad)
    path = write_jsonl(tmp_path / "bad.jsonl", [good, bad])

    with pytest.raises(CommandError) as exc:
        run_import(path, "--name", "bad")

    assert f"{path}: record line 2: field '{field}'" in str(exc.value)
    assert message in str(exc.value)
    assert stored() == []


def test_bad_published_results_name_the_nested_field(chartom_items, examples, tmp_path):
    records = [json.loads(line) for line in examples.read_text(encoding="utf-8").splitlines()]
    records[1]["published_results"]["gpt-4o_bonus_points_included"] = [0, 1]  # 1-based there
    path = write_jsonl(tmp_path / "examples.jsonl", records)

    with pytest.raises(CommandError) as exc:
        run_import(path, "--name", "bad")

    assert "record line 2: field 'published_results.gpt-4o_bonus_points_included'" in str(exc.value)
    assert stored() == []


# --- DynToM ----------------------------------------------------------------------------


@pytest.fixture
def trial149(dyntom_stages) -> list[DynToMQuestion]:
    return list(DynToMQuestion.objects.filter(stage__work__key="trial149").order_by("position"))


def dyntom_line(question: DynToMQuestion, **fields: Any) -> dict[str, Any]:
    return {"benchmark": "dyntom", "work": "trial149", "question": question.key,
            "model": "vllm-llama", **fields}  # fmt: skip


def other_letter(letter: str) -> str:
    return "a" if letter != "a" else "b"


def test_dyntom_answers_read_like_our_pipeline(trial149, tmp_path):
    q = trial149
    reply = json.dumps({q[5].key: q[5].gold_letter.upper(), q[6].key: "maybe"})
    path = write_jsonl(
        tmp_path / "dyntom.jsonl",
        [
            dyntom_line(q[0], answer=q[0].gold_letter.upper()),
            dyntom_line(q[1], parsed_answer=f"({q[1].gold_letter})"),
            dyntom_line(q[2], answer=f"{other_letter(q[2].gold_letter)}. some option text"),
            dyntom_line(q[3], answer="z"),
            dyntom_line(q[4], answer=None, raw_output="I lost track."),
            # No parsed answer: the stage's reply is read as our pipeline reads it.
            dyntom_line(q[5], raw_output=reply),
            dyntom_line(q[6], raw_output=reply),
            dyntom_line(q[7], raw_output=reply),
        ],
    )

    out, _ = run_import(path, "--name", "llama-vllm", "--benchmark", "dyntom")

    run = Run.objects.get()
    assert (run.name, run.benchmark, run.method, run.model, run.imported) == (
        "llama-vllm", "dyntom", "imported", "vllm-llama", True,
    )  # fmt: skip
    got = outcomes(run, "dyntom_question")

    def not_a_letter(question: DynToMQuestion) -> dict[str, str]:
        last = chr(ord("a") + len(question.options) - 1)
        return {"reason": f"not one of the option letters a-{last}"}

    assert got == {
        q[0].pk: (q[0].gold_letter, "ok", True, {}),
        q[1].pk: (q[1].gold_letter, "ok", True, {}),
        q[2].pk: (other_letter(q[2].gold_letter), "ok", False, {}),
        q[3].pk: ("z", "unparseable", False, not_a_letter(q[3])),
        q[4].pk: ("", "missing", False, {}),
        q[5].pk: (q[5].gold_letter, "ok", True, {}),
        q[6].pk: ("", "unparseable", False, not_a_letter(q[6])),
        q[7].pk: ("", "missing", False, {}),
    }
    assert Prediction.objects.get(run=run, dyntom_question=q[4]).raw_output == "I lost track."
    assert "correct 3/8 (2 missing, 2 unparseable)" in out


def test_dyntom_round_trip_keeps_correctness(openai_backend, llm_server, dyntom_stages, tmp_path):
    stages = [s for s in dyntom_stages if s.work.key in ("trial149", "trial50")]
    gold = gold_responder(stages, wrong={"type_d_how_1"})

    def responder(request_json: dict) -> str:
        answers = json.loads(gold(request_json))
        answers.pop("type_a_what_2", None)  # left out: "missing"
        return json.dumps(answers)

    llm_server.responder = responder
    ours = run_create(
        benchmark="dyntom", method="vanilla", backend=openai_backend,
        selection={"works": ["trial149", "trial50"]}, enqueue=False,
    )  # fmt: skip
    assert run_execute(run_id=ours.pk) == Run.Status.SUCCEEDED
    predictions = Prediction.objects.filter(run=ours).select_related("dyntom_question__stage__work")
    assert {p.parse_status for p in predictions} == {"ok", "unparseable", "missing"}

    # Our run written in the JSONL shape: parsed answers (null where the reply gave
    # none) with the raw replies, and a second file with the raw replies alone.
    def line(p: Prediction, with_answer: bool) -> dict[str, Any]:
        record = {
            "benchmark": "dyntom",
            "work": p.dyntom_question.stage.work.key,
            "question": p.dyntom_question.key,
            "model": p.model,
            "method": ours.method,
            "sample_index": p.sample_index,
            "raw_output": p.reply,
            "template_version": p.template_version,
            "params": p.params,
        }
        if with_answer:
            record["parsed_answer"] = p.parsed_answer if p.parse_status != "missing" else None
        return record

    both = write_jsonl(tmp_path / "both.jsonl", [line(p, True) for p in predictions])
    raw = write_jsonl(tmp_path / "raw.jsonl", [line(p, False) for p in predictions])
    run_import(both, "--name", "round trip")
    run_import(raw, "--name", "raw only")

    expected = outcomes(ours, "dyntom_question")
    assert len(expected) == predictions.count() > 100
    for name in ("round trip", "raw only"):
        back = Run.objects.get(name=name)
        assert (back.imported, back.method, back.model) == (True, "vanilla", ours.model)
        assert outcomes(back, "dyntom_question") == expected
        copy = Prediction.objects.filter(run=back).first()
        assert copy.template_version == "dyntom-vanilla v1" and copy.params["top_p"] == 0.9


def test_changed_answers_update_in_place(trial149, tmp_path):
    q = trial149
    lines = [dyntom_line(q[0], answer=q[0].gold_letter), dyntom_line(q[1], answer="z")]
    path = write_jsonl(tmp_path / "v1.jsonl", lines)
    run_import(path, "--name", "n")
    first = Prediction.objects.get(dyntom_question=q[1])

    lines[1]["answer"] = q[1].gold_letter
    out, _ = run_import(write_jsonl(tmp_path / "v2.jsonl", lines), "--name", "n")

    assert "Prediction: 0 created, 1 unchanged, 1 updated" in out
    again = Prediction.objects.get(dyntom_question=q[1])
    assert again.pk == first.pk
    assert (again.parsed_answer, again.parse_status, again.correct) == (
        q[1].gold_letter, "ok", True,
    )  # fmt: skip


def _break(lines: list, index: int, change) -> list:
    broken = [json.loads(json.dumps(line)) for line in lines]
    if callable(change):
        change(broken[index])
    else:
        broken[index] = change
    return broken


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ('{"benchmark": "dyntom", "work": ', None, "malformed JSON"),
        ("[1, 2]", None, "expected a JSON object"),
        (lambda r: r.pop("model"), "model", "missing (or pass --model)"),
        (lambda r: r.update(work="trial0"), "work", "no DynToM stage 'trial0'"),
        (lambda r: r.update(question="type_z_who_9"), "question", "has no question"),
        (lambda r: r.pop("answer"), "answer", "missing"),
        (lambda r: r.update(answer=2), "answer", "expected a string or null"),
        (lambda r: r.update(sample_index=-1), "sample_index", "expected an integer"),
        (lambda r: r.update(benchmark="bigtom"), "benchmark", "'bigtom' is not one of"),
        (lambda r: r.update(question=None), "question", "expected a non-empty string"),
        (lambda r: r.update(parsed_answer="q"), "parsed_answer", "differs from 'answer'"),
        (lambda r: r.update(model="other"), "model", "pass --model"),
        (lambda r: r.update(method="cot"), "method", "differs from 'imported'"),
        (lambda r: r.update(question="type_d_how_1"), "sample_index",
         "same item and sample_index as line 1"),
    ],
)  # fmt: skip
def test_bad_dyntom_line_imports_nothing(trial149, tmp_path, change, field, message):
    lines = [dyntom_line(q, answer="a") for q in trial149[:4]]
    assert lines[0]["question"] == "type_d_how_1"
    # A run already there must not change either.
    run_import(write_jsonl(tmp_path / "good.jsonl", lines), "--name", "n")
    before = stored()
    broken = _break(lines, 2, change)
    broken[0]["answer"] = "b"  # would update line 1's prediction if anything were written
    path = write_jsonl(tmp_path / "broken.jsonl", broken)

    with pytest.raises(CommandError) as exc:
        run_import(path, "--name", "n")

    text = str(exc.value)
    assert text.startswith(f"import failed, nothing was written: {path}: record line 3")
    if field:
        assert f"record line 3: field '{field}'" in text
    assert message in text
    assert stored() == before


def test_missing_file_and_empty_file(db, tmp_path):
    with pytest.raises(CommandError, match="file not found"):
        run_import(tmp_path / "nope.jsonl", "--name", "n")
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(CommandError, match="no predictions to import"):
        run_import(tmp_path / "empty.jsonl", "--name", "n")
    with pytest.raises(CommandError, match="a run name is required"):
        run_import(tmp_path / "empty.jsonl", "--name", " ")


def test_benchmark_and_model_options_fill_and_filter(trial149, tmp_path):
    q = trial149
    lines = [
        {"work": "trial149", "question": q[0].key, "answer": q[0].gold_letter},  # both filled
        dyntom_line(q[1], model="other", answer="a"),  # another model: skipped
        {"benchmark": "tvshowguess", "work": "friends", "scene": "x", "code": "P0",
         "model": "m", "answer": "ross"},  # another benchmark: skipped, never looked up
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "mixed.jsonl", lines)

    out, _ = run_import(path, "--name", "n", "--benchmark", "dyntom", "--model", "m")

    run = Run.objects.get()
    assert (run.benchmark, run.model) == ("dyntom", "m")
    assert outcomes(run, "dyntom_question") == {q[0].pk: (q[0].gold_letter, "ok", True, {})}
    assert "skipped 2 prediction(s)" in out


# --- TVShowGuess -----------------------------------------------------------------------


@pytest.fixture
def friends(shared_data: Path) -> list[SpeakerInstance]:
    call_command(
        "import_benchmark", "tvshowguess", str(shared_data / "tvshowguess" / "friends.raw"),
        "--split", "test", "--no-progress", stdout=StringIO(), stderr=StringIO(),
    )  # fmt: skip
    return list(
        SpeakerInstance.objects.select_related("scene__work", "gold_character").order_by("pk")
    )


def speaker_line(instance: SpeakerInstance, answer: Any) -> dict[str, Any]:
    return {"benchmark": "tvshowguess", "work": instance.scene.work.key,
            "scene": instance.scene.source_id, "code": instance.code,
            "model": "gpt-4o", "answer": answer}  # fmt: skip


def test_tvshowguess_names_are_scored_against_the_candidates(friends, tmp_path):
    first, second, third, fourth = friends[:4]
    assert first.scene.source_id == "09x01 2500"
    wrong = next(c for c in second.candidates if c != second.gold_character.name)
    path = write_jsonl(
        tmp_path / "friends.jsonl",
        [
            speaker_line(first, first.gold_character.name),
            speaker_line(second, wrong),
            speaker_line(third, f"  {third.gold_character.name.upper()} "),
            speaker_line(fourth, "gunther"),
            {**speaker_line(first, None), "sample_index": 1},
        ],
    )

    out, _ = run_import(path, "--name", "gpt-4o friends")

    run = Run.objects.get()
    assert (run.benchmark, run.method, run.imported) == ("tvshowguess", "imported", True)
    got = outcomes(run, "speaker_instance")
    assert got[second.pk] == (wrong, "ok", False, {})
    assert got[third.pk] == (third.gold_character.name, "ok", True, {})
    assert got[fourth.pk] == (
        "gunther", "unparseable", False,
        {"reason": "not one of the candidates: " + ", ".join(fourth.candidates)},
    )  # fmt: skip
    samples = {
        p.sample_index: (p.parsed_answer, p.parse_status, p.correct)
        for p in Prediction.objects.filter(run=run, speaker_instance=first)
    }
    assert samples == {0: (first.gold_character.name, "ok", True), 1: ("", "missing", False)}
    assert "correct 2/5" in out


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r.update(work="seinfeld"), "work"),
        (lambda r: r.update(scene="99x99 1"), "scene"),
        (lambda r: r.update(code="P9"), "code"),
        (lambda r: r.pop("answer"), "answer"),
    ],
)
def test_unknown_speaker_imports_nothing(friends, tmp_path, change, field):
    lines = [speaker_line(i, "ross") for i in friends[:3]]
    path = write_jsonl(tmp_path / "bad.jsonl", _break(lines, 1, change))

    with pytest.raises(CommandError) as exc:
        run_import(path, "--name", "n")

    assert f"{path}: record line 2: field '{field}'" in str(exc.value)
    assert stored() == []


# --- ToM-in-AMC ------------------------------------------------------------------------


def test_tom_in_amc_instances_by_movie_scene_and_code(db, tmp_path):
    # The release is not at hand; the importer tests' invented file in its layout.
    from tests.benchmarks.test_tom_in_amc_import import amc_release

    release = tmp_path / "amc.json"
    release.write_text(json.dumps(amc_release()), encoding="utf-8")
    call_command("import_benchmark", "tom-in-amc", str(release), "--no-progress",
                 stdout=StringIO(), stderr=StringIO())  # fmt: skip
    instance = SpeakerInstance.objects.select_related("scene__work", "gold_character").first()
    line = {**speaker_line(instance, instance.gold_character.name), "benchmark": "tom-in-amc",
            "method": "tompro"}  # fmt: skip
    path = write_jsonl(tmp_path / "amc.jsonl", [line, {**line, "code": "P7"}])

    with pytest.raises(CommandError, match="record line 2: field 'code'"):
        run_import(path, "--name", "ToMPro")
    run_import(write_jsonl(path, [line]), "--name", "ToMPro")

    run = Run.objects.get()
    assert (run.benchmark, run.method, run.name) == ("tom-in-amc", "tompro", "ToMPro")
    assert outcomes(run, "speaker_instance") == {
        instance.pk: (instance.gold_character.name, "ok", True, {})
    }
