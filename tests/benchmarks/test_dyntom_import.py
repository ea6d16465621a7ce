"""DynToM import/export through the management commands, on the 24 real stages.

Error paths run on broken copies made in ``tmp_path``; each asserts the message
locates the problem and that the database is exactly as before.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchmarks.importers import dyntom as dyntom_importer
from benchmarks.importers.dyntom import parse_profiles
from benchmarks.models import Character, DynToMQuestion, DynToMScenario, DynToMStage, Work
from benchmarks.services import benchmark_import
from tests.factories import DynToMScenarioFactory
from tests.migration_steps import migration_editor

pytestmark = pytest.mark.django_db

MODELS = (Work, Character, DynToMStage, DynToMScenario, DynToMQuestion)


@pytest.fixture
def dyntom_dir(shared_data: Path) -> Path:
    return shared_data / "dyntom"


def _import(path: Path) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("import_benchmark", "dyntom", str(path), "--no-progress", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _summary(stdout: str) -> dict[str, tuple[int, int, int]]:
    """Model label -> (created, unchanged, updated) from the command's summary lines."""
    return {
        m[1]: (int(m[2]), int(m[3]), int(m[4]))
        for m in re.finditer(r"(\w+): (\d+) created, (\d+) unchanged, (\d+) updated", stdout)
    }


def _snapshot() -> dict[str, list[tuple]]:
    """Every row's key fields and updated_at: equal snapshots mean nothing was written."""
    return {
        model.__name__: sorted(model.objects.values_list("pk", "updated_at")) for model in MODELS
    }


def _copy_trial(source: Path, target: Path) -> Path:
    # The shared files are read-only; copy contents only so the copies can be broken.
    target.mkdir(parents=True)
    for name in ("story.json", "question_new.json"):
        shutil.copyfile(source / name, target / name)
    return target


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _dump(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")


def _real_files(dyntom_dir: Path) -> dict[str, tuple[dict, dict]]:
    return {
        d.name: (_load(d / "story.json"), _load(d / "question_new.json"))
        for d in sorted(dyntom_dir.iterdir())
    }


def test_import_counts_match_the_files(dyntom_dir: Path) -> None:
    stdout, stderr = _import(dyntom_dir)
    files = _real_files(dyntom_dir)

    assert Work.objects.filter(benchmark="dyntom", kind="social_stage").count() == 24
    assert DynToMStage.objects.count() == 24
    assert DynToMQuestion.objects.count() == 1719
    assert sum(len(o) for o in DynToMQuestion.objects.values_list("options", flat=True)) == 15176
    assert DynToMScenario.objects.count() == sum(s["scenario numbers"] for s, _ in files.values())
    gold = {
        (key, q_key): q["true answer"] for key, (_, qs) in files.items() for q_key, q in qs.items()
    }
    assert (
        dict(
            ((k, q), g)
            for k, q, g in DynToMQuestion.objects.values_list(
                "stage__work__key", "key", "gold_letter"
            )
        )
        == gold
    )
    assert Character.objects.count() == 48
    assert Character.objects.filter(is_main=True).count() == 24
    assert _summary(stdout)["Work"] == (24, 0, 0)
    assert "warning" not in stderr


def test_stage_fields_and_characters(dyntom_dir: Path) -> None:
    _import(dyntom_dir)

    stage = DynToMStage.objects.select_related("work").get(work__key="trial50")
    assert stage.work.title == "trial50: Angela Hwang"
    assert stage.work.source == str(dyntom_dir / "trial50")
    assert stage.scenario_count == 5
    assert [p["name"] for p in stage.profiles] == ["Angela Hwang", "Kevin Flores"]
    assert [p["role"] for p in stage.profiles] == ["main", "supporting"]
    assert (
        stage.trajectory["scenario 3"]["emotion"]
        == "Angela feels frustrated and worried for Kevin."
    )
    assert stage.change_analysis["Belief"]["Changed"] == "True"
    # trial50 has no social setting at all; trial1191 has one.
    assert (stage.location, stage.extra["absent"]) == (
        "",
        ["social setting", "social setting type"],
    )
    other = DynToMStage.objects.get(work__key="trial1191")
    assert (other.location, other.location_category) == ("waiting room", "Miscellaneous")
    assert other.scenarios.count() == 6 and other.questions.count() == 86

    people = list(
        Character.objects.filter(work__key="trial50").values_list("name", "is_main", "gender")
    )
    assert people == [("Angela Hwang", True, "female"), ("Kevin Flores", False, "male")]


def test_split_and_progress_per_stage(dyntom_dir: Path) -> None:
    ticks: list[int] = []

    benchmark_import(format_name="dyntom", path=dyntom_dir, split="test", progress=ticks.append)

    assert ticks == [1] * 24
    assert set(Work.objects.values_list("split", flat=True)) == {"test"}


def test_profiles_parse_several_supporting_characters() -> None:
    info = (
        "**Main Character**: Ann Lee, woman, is a Nurse..**Supporting Characters**:\n"
        "- **1**: Bob Ray, man, is a Cook. Bob is half-Irish.\n- **2**: Cy Dee, man, is a Pilot."
    )
    assert parse_profiles(info) == [
        {
            "role": "main",
            "index": 0,
            "name": "Ann Lee",
            "description": "Ann Lee, woman, is a Nurse.",
        },
        {
            "role": "supporting",
            "index": 1,
            "name": "Bob Ray",
            "description": "Bob Ray, man, is a Cook. Bob is half-Irish.",
        },
        {
            "role": "supporting",
            "index": 2,
            "name": "Cy Dee",
            "description": "Cy Dee, man, is a Pilot.",
        },
    ]


def test_second_import_changes_nothing(dyntom_dir: Path) -> None:
    _import(dyntom_dir)
    before = _snapshot()

    stdout, _ = _import(dyntom_dir)

    summary = _summary(stdout)
    assert summary == {
        "Character": (0, 48, 0),
        "DynToMQuestion": (0, 1719, 0),
        "DynToMScenario": (0, 121, 0),
        "DynToMStage": (0, 24, 0),
        "Work": (0, 24, 0),
    }
    assert _snapshot() == before


def test_question_type_shares_per_stage(dyntom_dir: Path) -> None:
    _import(dyntom_dir)

    per_stage: dict[str, Counter] = {}
    for key, qtype in DynToMQuestion.objects.values_list("stage__work__key", "question_type"):
        per_stage.setdefault(key, Counter())[qtype] += 1
    counts = dict(DynToMStage.objects.values_list("work__key", "scenario_count"))
    five = [key for key, n in counts.items() if n == 5]
    assert len(five) == 23
    for key in five:
        assert per_stage[key] == {
            "understanding": 20,
            "transformation-1": 16,
            "transformation-2": 31,
            "transformation-3": 4,
        }, key
    # Six scenarios: 4 states x 6 + 4 x 5 transitions (x2 kinds) + 3 x 6 influences + 4.
    assert per_stage["trial1191"] == {
        "understanding": 24,
        "transformation-1": 20,
        "transformation-2": 38,
        "transformation-3": 4,
    }


@pytest.mark.parametrize(
    ("trial", "key", "mental_state", "span"),
    [
        ("trial50", "type_a_what_5", "belief", (5, 5)),
        ("trial50", "type_a_what_20", "action", (5, 5)),
        ("trial50", "type_c_how_1", "belief->emotion", (1, 1)),
        ("trial50", "type_c_how_6", "belief&emotion->intention", (1, 1)),
        ("trial50", "type_c_how_15", "intention->action", (5, 5)),
        ("trial50", "type_d_why_2", "belief", (2, 3)),
        ("trial50", "type_d_whether_6", "emotion", (2, 3)),
        ("trial50", "type_d_how_4", "action", (1, 5)),
        ("trial1191", "type_d_how_1", "belief", (1, 6)),
    ],
)
def test_mental_state_and_scenario_span(
    dyntom_dir: Path, trial: str, key: str, mental_state: str, span: tuple[int, int]
) -> None:
    _import(dyntom_dir / trial)

    question = DynToMQuestion.objects.get(stage__work__key=trial, key=key)
    assert question.mental_state == mental_state
    assert (question.scenario_from, question.scenario_to) == span


def test_every_question_gets_a_state_a_span_and_its_file_position(dyntom_dir: Path) -> None:
    _import(dyntom_dir)

    assert not DynToMQuestion.objects.filter(mental_state="").exists()
    assert not DynToMQuestion.objects.filter(scenario_from=None).exists()
    keys = list(
        DynToMQuestion.objects.filter(stage__work__key="trial50")
        .order_by("position")
        .values_list("key", flat=True)
    )
    assert keys == list(_load(dyntom_dir / "trial50" / "question_new.json"))


def test_export_round_trip_is_exact(dyntom_dir: Path, tmp_path: Path) -> None:
    _import(dyntom_dir)
    out = tmp_path / "export"

    stdout = StringIO()
    call_command("export_benchmark", "dyntom", str(out), stdout=stdout)

    assert "exported 24 record(s)" in stdout.getvalue()
    for key, (story, questions) in _real_files(dyntom_dir).items():
        assert _load(out / key / "story.json") == story, key
        exported = _load(out / key / "question_new.json")
        assert exported == questions, key
        assert list(exported) == list(questions), key
    before = _snapshot()
    summary = _summary(_import(out)[0])
    assert all(created == updated == 0 for created, _, updated in summary.values()), summary
    assert _snapshot() == before


def test_unknown_fields_are_kept_reported_and_exported(dyntom_dir: Path, tmp_path: Path) -> None:
    trial = _copy_trial(dyntom_dir / "trial50", tmp_path / "trial50")
    story = _load(trial / "story.json")
    story["rating"] = 4.5
    story["sketch"]["notes"] = ["n1"]
    story["story"]["scenario 2"]["time"] = "evening"
    _dump(trial / "story.json", story)
    questions = _load(trial / "question_new.json")
    questions["type_a_what_1"]["difficulty"] = "easy"
    del questions["type_a_what_2"]["option reasons"]
    _dump(trial / "question_new.json", questions)

    _, stderr = _import(trial)
    out = tmp_path / "export"
    call_command("export_benchmark", "dyntom", str(out), stdout=StringIO())

    for field, record in [
        ("rating", "story"),
        ("notes", "sketch"),
        ("time", "scenario 2"),
        ("difficulty", "type_a_what_1"),
    ]:
        assert re.search(rf"record {record}: kept unknown field\(s\) \['{field}'\]", stderr), field
    assert _load(out / "trial50" / "story.json") == story
    assert _load(out / "trial50" / "question_new.json") == questions


def _assert_import_fails(path: Path, *fragments: str) -> str:
    before = _snapshot()
    with pytest.raises(CommandError) as excinfo:
        _import(path)
    message = str(excinfo.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert _snapshot() == before
    return message


def test_malformed_json_names_file_and_line(dyntom_dir: Path, tmp_path: Path) -> None:
    _import(dyntom_dir / "trial69")
    trial = _copy_trial(dyntom_dir / "trial50", tmp_path / "trial50")
    path = trial / "question_new.json"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[9] = lines[9].rstrip(",")  # a missing comma: the parser fails on line 11
    path.write_text("\n".join(lines), encoding="utf-8")

    _assert_import_fails(trial, str(path), "malformed JSON", "line 11")
    assert not Work.objects.filter(key="trial50").exists()


def test_missing_story_names_the_trial_directory(dyntom_dir: Path, tmp_path: Path) -> None:
    _import(dyntom_dir / "trial69")
    trials = tmp_path / "trials"
    _copy_trial(dyntom_dir / "trial50", trials / "trial50")
    broken = _copy_trial(dyntom_dir / "trial149", trials / "trial149")
    (broken / "story.json").unlink()

    message = _assert_import_fails(trials, f"trial directory {broken} has no story.json")
    assert str(broken / "story.json") in message
    assert set(Work.objects.values_list("key", flat=True)) == {"trial69"}


def test_gold_letter_not_among_options(dyntom_dir: Path, tmp_path: Path) -> None:
    _import(dyntom_dir / "trial69")
    trial = _copy_trial(dyntom_dir / "trial50", tmp_path / "trial50")
    questions = _load(trial / "question_new.json")
    assert len(questions["type_d_whether_6"]["options"]) == 5
    questions["type_d_whether_6"]["true answer"] = "f"
    _dump(trial / "question_new.json", questions)

    _assert_import_fails(
        trial,
        str(trial / "question_new.json"),
        "record type_d_whether_6",
        "field 'true answer'",
        "'f' is not one of the option letters a-e",
    )


def test_scenario_count_mismatch(dyntom_dir: Path, tmp_path: Path) -> None:
    trial = _copy_trial(dyntom_dir / "trial50", tmp_path / "trial50")
    story = _load(trial / "story.json")
    story["scenario numbers"] = 6
    _dump(trial / "story.json", story)

    _assert_import_fails(
        trial, str(trial / "story.json"), "field 'scenario numbers'", "[1, 2, 3, 4, 5]"
    )


def test_question_without_options(dyntom_dir: Path, tmp_path: Path) -> None:
    trial = _copy_trial(dyntom_dir / "trial50", tmp_path / "trial50")
    questions = _load(trial / "question_new.json")
    questions["type_c_how_3"]["options"] = []
    _dump(trial / "question_new.json", questions)

    _assert_import_fails(trial, "record type_c_how_3", "field 'options'")


def test_failure_in_last_trial_rolls_back_the_whole_batch(
    dyntom_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _import(dyntom_dir)
    before = _snapshot()
    original_background = DynToMScenario.objects.get(
        stage__work__key="trial50", number=1
    ).background
    # Small batches, so earlier stages are written before the bad one is read.
    monkeypatch.setattr(dyntom_importer, "STAGES_PER_BATCH", 2)
    trials = tmp_path / "trials"
    changed = _copy_trial(dyntom_dir / "trial50", trials / "trial50")
    story = _load(changed / "story.json")
    story["story"]["scenario 1"]["background"] = "rewritten"
    _dump(changed / "story.json", story)
    for n in range(1, 5):
        _copy_trial(dyntom_dir / "trial69", trials / f"trial9000{n}")
    last = _copy_trial(dyntom_dir / "trial149", trials / "trial90009")
    questions = _load(last / "question_new.json")
    questions["type_a_what_1"]["true answer"] = "z"
    _dump(last / "question_new.json", questions)

    _assert_import_fails(trials, "trial90009", "type_a_what_1", "'true answer'")

    assert _snapshot() == before
    assert not Work.objects.filter(key__startswith="trial9000").exists()
    assert (
        DynToMScenario.objects.get(stage__work__key="trial50", number=1).background
        == original_background
    )


# Every story shape of the full release -------------------------------------------------
# ../shared/data/dyntom-variants holds one real stage per shape (PROVENANCE.md): scenario
# keys "1", "scenario_1", "scenario1", "Scenario 1"; a dialogue as one object or one
# "Name: 'line'" string; rounds of three speakers; no social setting.


@pytest.fixture
def variants_dir(shared_data: Path) -> Path:
    return shared_data / "dyntom-variants"


def _source_turns(dialogue: Any) -> list[tuple[str, str]]:
    """(speaker, text) pairs read straight from a source dialogue, for comparison."""
    if isinstance(dialogue, list):
        return [pair for round_ in dialogue for pair in round_.items()]
    if isinstance(dialogue, dict):
        return list(dialogue.items())
    pairs = []
    for line in dialogue.split("\n"):
        speaker, _, text = line.partition(": ")
        assert text[0] == text[-1] == "'", line
        pairs.append((speaker, text[1:-1]))
    return pairs


def test_variant_stages_import_with_exact_counts(variants_dir: Path) -> None:
    stdout, stderr = _import(variants_dir)

    assert _summary(stdout) == {
        "Character": (20, 0, 0),
        "DynToMQuestion": (725, 0, 0),
        "DynToMScenario": (51, 0, 0),
        "DynToMStage": (10, 0, 0),
        "Work": (10, 0, 0),
    }
    assert sum(len(o) for o in DynToMQuestion.objects.values_list("options", flat=True)) == 6586
    assert dict(DynToMStage.objects.values_list("work__key", "scenario_count")) == {
        "trial100": 5,
        "trial1000": 5,
        "trial1008": 5,
        "trial1011": 5,
        "trial1059": 5,
        "trial1062": 5,
        "trial1081": 5,
        "trial1150": 7,
        "trial1165": 4,
        "trial64": 5,
    }
    shapes = Counter(DynToMScenario.objects.values_list("dialogue_shape", flat=True))
    assert shapes == {"rounds": 36, "object": 10, "text": 5}
    assert Character.objects.filter(is_main=True).count() == 10
    assert "warning" not in stderr
    # Every turn, in order, equals what the source file says, whatever its shape.
    for key, (story, _) in _real_files(variants_dir).items():
        stored = {
            s.key: s for s in DynToMScenario.objects.filter(stage__work__key=key).order_by("number")
        }
        assert list(stored) == sorted(story["story"], key=lambda k: int(re.sub(r"\D", "", k)))
        for scenario_key, scenario in story["story"].items():
            turns = stored[scenario_key].dialogue
            assert all(set(turn) == {"speaker", "text"} for turn in turns), key
            assert [(t["speaker"], t["text"]) for t in turns] == _source_turns(
                scenario["dialogue"]
            ), (key, scenario_key)


def test_each_variant_shape_is_read_into_turns(variants_dir: Path) -> None:
    _import(variants_dir)

    def scenario(trial: str, number: int) -> DynToMScenario:
        return DynToMScenario.objects.get(stage__work__key=trial, number=number)

    # Scenario keys are kept as written; the number is read from them.
    keys = {
        trial: scenario(trial, 1).key
        for trial in ("trial1008", "trial1081", "trial1062", "trial1059", "trial1000")
    }
    assert keys == {
        "trial1008": "1",
        "trial1081": "scenario_1",
        "trial1062": "scenario1",
        "trial1059": "Scenario 1",
        "trial1000": "scenario 1",
    }
    # One string of "Name: 'line'" lines: the quotes go, an apostrophe inside stays.
    text = scenario("trial1011", 1)
    assert text.dialogue_shape == "text"
    assert text.dialogue[0] == {
        "speaker": "Gerald",
        "text": "Natalie, I've noticed during our last few meetings that my suggestions "
        "aren\u2019t being discussed much. I feel like they could really benefit our "
        "project\u2019s progress.",
    }
    assert [t["speaker"] for t in text.dialogue] == ["Gerald", "Natalie"]
    assert "dialogue_text" not in text.extra  # it re-renders exactly: no copy kept
    # One object speaker -> line.
    obj = scenario("trial1000", 1)
    assert obj.dialogue_shape == "object"
    assert [t["speaker"] for t in obj.dialogue] == ["Sean", "Richard"]
    # Rounds of one, two and three speakers keep their sizes for the export.
    three = scenario("trial64", 2)
    assert three.dialogue_shape == "rounds"
    assert [t["speaker"] for t in three.dialogue] == ["Maria", "Team Leader", "Cheryl"]
    assert three.extra["round_sizes"] == [3]
    ones = scenario("trial1062", 1)
    assert ones.extra["round_sizes"] == [1] * 6
    # No social setting.
    stage = DynToMStage.objects.get(work__key="trial100")
    assert stage.extra["absent"] == ["social setting", "social setting type"]


def test_all_real_stages_import_twice_and_round_trip(
    dyntom_dir: Path, variants_dir: Path, tmp_path: Path
) -> None:
    for directory in (dyntom_dir, variants_dir):
        _import(directory)
    assert DynToMStage.objects.count() == 34
    assert DynToMScenario.objects.count() == 172
    assert DynToMQuestion.objects.count() == 2444
    before = _snapshot()

    for directory, stages, scenarios, questions in (
        (dyntom_dir, 24, 121, 1719),
        (variants_dir, 10, 51, 725),
    ):
        summary = _summary(_import(directory)[0])
        assert summary["Work"] == (0, stages, 0)
        assert summary["DynToMScenario"] == (0, scenarios, 0)
        assert summary["DynToMQuestion"] == (0, questions, 0)
        assert all(created == updated == 0 for created, _, updated in summary.values())
    assert _snapshot() == before

    out = tmp_path / "export"
    stdout = StringIO()
    call_command("export_benchmark", "dyntom", str(out), stdout=stdout)
    assert "exported 34 record(s)" in stdout.getvalue()
    for directory in (dyntom_dir, variants_dir):
        for key, (story, questions) in _real_files(directory).items():
            exported_story = _load(out / key / "story.json")
            assert exported_story == story, key
            assert list(exported_story["story"]) == list(story["story"]), key
            assert _load(out / key / "question_new.json") == questions, key
    summary = _summary(_import(out)[0])
    assert all(created == updated == 0 for created, _, updated in summary.values()), summary
    assert _snapshot() == before


def test_prompt_shows_turns_of_every_shape(variants_dir: Path) -> None:
    from modeling.pipelines.dyntom import render_story

    _import(variants_dir)

    for trial, line in [
        ("trial1011", "Natalie: Oh, I didn\u2019t realize you felt that way, Gerald."),
        ("trial1000", "Richard: I didn't realize that's how it came across."),
        ("trial64", "Team Leader: That\u2019s a good suggestion, Maria."),
    ]:
        scenarios = list(DynToMScenario.objects.filter(stage__work__key=trial).order_by("number"))
        assert f"\n{line}" in render_story(scenarios), trial


def test_api_serves_turns_and_shape(variants_dir: Path, client: Any, researcher: Any) -> None:
    from django.urls import reverse

    _import(variants_dir / "trial1011")
    stage = DynToMStage.objects.get(work__key="trial1011")
    client.force_login(researcher)

    body = client.get(reverse("dyntom-stage-detail", args=[stage.pk])).json()

    first = body["scenarios"][0]
    assert (first["key"], first["dialogue_shape"]) == ("1", "text")
    assert [turn["speaker"] for turn in first["dialogue"]] == ["Gerald", "Natalie"]


@pytest.mark.parametrize(
    ("key", "number"),
    [
        ("scenario 3", 3),
        ("Scenario 3", 3),
        ("SCENARIO-3", 3),
        ("scenario_3", 3),
        ("scenario3", 3),
        ("scenario 03", 3),
        ("3", 3),
        (" 3 ", 3),
        ("scene 3", None),
        ("scenario", None),
        ("scenario 3b", None),
    ],
)
def test_scenario_keys_in_any_case_or_separator(key: str, number: int | None) -> None:
    assert dyntom_importer.scenario_number(key) == number


def test_dialogue_string_in_another_layout_is_kept_verbatim(
    dyntom_dir: Path, tmp_path: Path
) -> None:
    # Double quotes, CRLF, a blank line and a line continuing the turn before it: read
    # into turns, and written back exactly as it was.
    trial = _copy_trial(dyntom_dir / "trial50", tmp_path / "trial50")
    story = _load(trial / "story.json")
    odd = 'Angela: "Kevin, are you ok?"\r\n\r\nKevin: I am fine.\r\nReally, I am.'
    story["story"]["scenario 2"]["dialogue"] = odd
    story["story"]["scenario 3"]["dialogue"] = {}
    _dump(trial / "story.json", story)

    _import(trial)
    out = tmp_path / "export"
    call_command("export_benchmark", "dyntom", str(out), stdout=StringIO())

    scenario = DynToMScenario.objects.get(stage__work__key="trial50", number=2)
    assert scenario.dialogue == [
        {"speaker": "Angela", "text": "Kevin, are you ok?"},
        {"speaker": "Kevin", "text": "I am fine.\nReally, I am."},
    ]
    assert scenario.extra["dialogue_text"] == odd
    assert DynToMScenario.objects.get(stage__work__key="trial50", number=3).dialogue == []
    assert _load(out / "trial50" / "story.json") == story


def test_question_file_wrapped_in_questions_round_trips(dyntom_dir: Path, tmp_path: Path) -> None:
    trial = _copy_trial(dyntom_dir / "trial50", tmp_path / "trial50")
    wrapped = {"questions": _load(trial / "question_new.json")}
    _dump(trial / "question_new.json", wrapped)

    _import(trial)
    out = tmp_path / "export"
    call_command("export_benchmark", "dyntom", str(out), stdout=StringIO())

    assert DynToMQuestion.objects.filter(stage__work__key="trial50").count() == 71
    assert _load(out / "trial50" / "question_new.json") == wrapped


@pytest.mark.parametrize(
    ("scenario_key", "dialogue", "fragments"),
    [
        ("scenario 2", 42, ["field 'dialogue'", "got int"]),
        ("scenario 2", [{"Angela": "Hi"}, "Kevin: hi"], ["round 2", "got str"]),
        ("scenario 4", [{"Angela": "Hi", "Kevin": ["hi"]}], ["round 1", "speaker 'Kevin'"]),
        ("scenario 1", {"Angela": None}, ["speaker 'Angela'", "got NoneType"]),
        ("scenario 5", "\nhello there\nKevin: 'hi'", ["line 2", "expected \"Name: 'line'\""]),
    ],
)
def test_unreadable_dialogue_is_located(
    dyntom_dir: Path, tmp_path: Path, scenario_key: str, dialogue: Any, fragments: list[str]
) -> None:
    _import(dyntom_dir / "trial69")
    trial = _copy_trial(dyntom_dir / "trial50", tmp_path / "trial50")
    story = _load(trial / "story.json")
    story["story"][scenario_key]["dialogue"] = dialogue
    _dump(trial / "story.json", story)

    _assert_import_fails(
        trial, str(trial / "story.json"), f"record {scenario_key}", "field 'dialogue'", *fragments
    )
    assert not Work.objects.filter(key="trial50").exists()


def test_missing_dialogue_and_bad_scenario_keys_are_located(
    dyntom_dir: Path, tmp_path: Path
) -> None:
    trial = _copy_trial(dyntom_dir / "trial50", tmp_path / "trial50")
    story = _load(trial / "story.json")
    path = str(trial / "story.json")

    broken = json.loads(json.dumps(story))
    del broken["story"]["scenario 4"]["dialogue"]
    _dump(trial / "story.json", broken)
    _assert_import_fails(trial, path, "record scenario 4", "field 'dialogue'", "missing")

    broken = json.loads(json.dumps(story))
    broken["story"]["prologue"] = broken["story"].pop("scenario 5")
    _dump(trial / "story.json", broken)
    _assert_import_fails(trial, path, "record prologue", 'must read "scenario N"')

    # The same scenario under two spellings cannot both be scenario 5.
    broken = json.loads(json.dumps(story))
    broken["story"]["5"] = broken["story"]["scenario 5"]
    _dump(trial / "story.json", broken)
    _assert_import_fails(trial, path, "field 'story'", "scenario(s) [5] given under two keys")


def test_question_files_of_variant_stages_are_still_validated(
    variants_dir: Path, tmp_path: Path
) -> None:
    trial = _copy_trial(variants_dir / "trial1011", tmp_path / "trial1011")
    questions = _load(trial / "question_new.json")
    questions["type_d_why_2"]["true answer"] = ["b"]
    _dump(trial / "question_new.json", questions)
    _assert_import_fails(trial, "record type_d_why_2", "field 'true answer'", "['b']")

    questions["type_d_why_2"]["true answer"] = "b"
    questions["type_d_why_2"]["options"] = "a. yes"
    _dump(trial / "question_new.json", questions)
    _assert_import_fails(trial, "record type_d_why_2", "field 'options'")


@pytest.mark.parametrize(
    ("name", "limit"), [("story.json", "dyntom-story"), ("question_new.json", "dyntom-questions")]
)
def test_stage_files_over_the_size_limit_are_refused_before_parsing(
    dyntom_dir: Path, tmp_path: Path, settings: Any, name: str, limit: str
) -> None:
    _import(dyntom_dir / "trial69")
    trials = tmp_path / "trials"
    _copy_trial(dyntom_dir / "trial50", trials / "trial50")
    big = _copy_trial(dyntom_dir / "trial149", trials / "trial149")
    allowed = (trials / "trial50" / name).stat().st_size
    size = allowed + 1
    # Not JSON at all: a size check that ran after parsing would report that instead.
    (big / name).write_text("x" * size, encoding="utf-8")
    settings.TOMLAB_IMPORT_MAX_BYTES = {**settings.TOMLAB_IMPORT_MAX_BYTES, limit: allowed}

    _assert_import_fails(
        trials, str(big / name), f"file is {size:,} bytes", f"TOMLAB_IMPORT_MAX_BYTES['{limit}']"
    )
    assert set(Work.objects.values_list("key", flat=True)) == {"trial69"}


@pytest.mark.parametrize("target", ["question", "dialogue"])
def test_a_value_over_the_field_size_limit_is_refused_with_its_place(
    dyntom_dir: Path, tmp_path: Path, settings: Any, target: str
) -> None:
    _import(dyntom_dir / "trial69")
    trial = _copy_trial(dyntom_dir / "trial50", tmp_path / "trial50")
    settings.TOMLAB_IMPORT_MAX_FIELD_BYTES = 30_000
    long_text = "word " * 7_000  # 35,000 bytes
    if target == "question":
        questions = _load(trial / "question_new.json")
        questions["type_d_why_4"]["options"][2] = long_text
        _dump(trial / "question_new.json", questions)
        where = [str(trial / "question_new.json"), "record type_d_why_4", "field 'options'"]
    else:
        story = _load(trial / "story.json")
        story["story"]["scenario 3"]["dialogue"] = [{"Angela": long_text}]
        _dump(trial / "story.json", story)
        where = [str(trial / "story.json"), "record scenario 3", "field 'dialogue'"]

    _assert_import_fails(trial, *where, "TOMLAB_IMPORT_MAX_FIELD_BYTES")
    assert set(Work.objects.values_list("key", flat=True)) == {"trial69"}


def test_turns_bigger_than_their_source_are_measured(
    dyntom_dir: Path, tmp_path: Path, settings: Any
) -> None:
    # 132 kB of "A:" lines (as JSON) become ~1 MB of turns: over the limit, though the story file
    # is under a sixth of it (the bound that spares measuring verbatim values).
    trial = _copy_trial(dyntom_dir / "trial50", tmp_path / "trial50")
    story = _load(trial / "story.json")
    story["story"]["scenario 2"]["dialogue"] = "A:\n" * 33_000
    _dump(trial / "story.json", story)
    settings.TOMLAB_IMPORT_MAX_FIELD_BYTES = 900_000
    assert (trial / "story.json").stat().st_size * 6 <= 900_000

    _assert_import_fails(
        trial, "record scenario 2", "field 'dialogue'", "TOMLAB_IMPORT_MAX_FIELD_BYTES"
    )


def test_migration_turns_old_rounds_into_turns_and_back() -> None:
    from importlib import import_module

    from django.apps import apps

    migration = import_module("benchmarks.migrations.0002_dyntom_turns")
    # PostgreSQL's jsonb orders an object's keys (shorter first), so a round's speakers
    # come back in that order there; these two are in it already.
    old = DynToMScenarioFactory(
        dialogue=[{"Al": "Hi!", "Beth": "Hello."}, {"Al": "Tea?"}], extra={"unknown": {"t": 1}}
    )

    migration._rounds_to_turns(apps, migration_editor())
    old.refresh_from_db()
    assert old.dialogue == [
        {"speaker": "Al", "text": "Hi!"},
        {"speaker": "Beth", "text": "Hello."},
        {"speaker": "Al", "text": "Tea?"},
    ]
    assert old.extra == {"unknown": {"t": 1}, "round_sizes": [2, 1]}
    assert old.dialogue_shape == "rounds"
    # Applied twice (a re-run), rows already in turns are left alone.
    migration._rounds_to_turns(apps, migration_editor())
    old.refresh_from_db()
    assert old.extra["round_sizes"] == [2, 1]

    migration._turns_to_rounds(apps, migration_editor())
    old.refresh_from_db()
    assert old.dialogue == [{"Al": "Hi!", "Beth": "Hello."}, {"Al": "Tea?"}]
    assert old.extra == {"unknown": {"t": 1}}


def test_several_paths_import_all_or_nothing(shared_data, tmp_path):
    good = tmp_path / "good" / "trial50"
    broken = tmp_path / "broken" / "trial149"
    shutil.copytree(shared_data / "dyntom" / "trial50", good)
    shutil.copytree(shared_data / "dyntom" / "trial149", broken)
    (broken / "story.json").write_text("{not json", encoding="utf-8")
    out = StringIO()

    with pytest.raises(CommandError, match=r"nothing was written.*trial149"):
        call_command("import_benchmark", "dyntom", str(good), str(broken), stdout=out)

    assert Work.objects.count() == 0  # the first, valid path was rolled back too
    assert "imported" not in out.getvalue()
