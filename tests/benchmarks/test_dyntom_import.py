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
