"""``manage.py dyntom_questions`` on the 34 real DynToM stages (4, 5, 6 and 7 scenarios).

No test here is marked ``django_db``: pytest-django refuses any database access in
them, which is how we check that the command needs none. Broken stories are copies
of a real one, broken inside ``tmp_path``.
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

from annotation.dyntom.questions import generate_questions, stage_rng

DATA_DIRS = ("dyntom", "dyntom-variants")
QUESTION_FIELDS = ["question", "true answer", "options", "question type", "option reasons"]
PAPER_TYPES = {
    "type_a_what": "Understanding",
    "type_d_whether": "Transformation-1",
    "type_d_why": "Transformation-2",
    "type_c_how": "Transformation-2",
    "type_d_how": "Transformation-3",
}
PREFIX_RE = re.compile(r"^[a-z]\. ")


def _run(stages_dir: Path, out_dir: Path, *extra: str) -> str:
    out = StringIO()
    call_command("dyntom_questions", str(stages_dir), str(out_dir), *extra, stdout=out)
    return out.getvalue()


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _gold(question: dict[str, Any]) -> str:
    option = question["options"][ord(question["true answer"]) - ord("a")]
    return PREFIX_RE.sub("", option, count=1)


def _kind(key: str) -> str:
    return key.rsplit("_", 1)[0]


@pytest.fixture(scope="module")
def generated(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the command once over both real data folders (seed 0)."""
    out_root = tmp_path_factory.mktemp("dyntom-questions")
    outputs, stages = {}, []
    for name in DATA_DIRS:
        outputs[name] = _run(shared_data / name, out_root / name)
        for story in sorted((shared_data / name).glob("trial*/story.json")):
            stages.append((story.parent, out_root / name / story.parent.name))
    return {"outputs": outputs, "stages": stages}


def test_reproduces_the_real_questions_per_scenario_count(generated, capsys) -> None:
    # Our own count, from the written files, so the test does not trust the
    # command's comparison: key, question text and gold option text.
    original, reproduced = Counter(), Counter()
    for release_dir, out_dir in generated["stages"]:
        ours = _load(out_dir / "question_new.json")
        theirs = _load(release_dir / "question_new.json")
        count = _load(release_dir / "story.json")["scenario numbers"]
        for key, question in theirs.items():
            original[count] += 1
            mine = ours.get(key)
            if mine and mine["question"] == question["question"] and _gold(mine) == _gold(question):
                reproduced[count] += 1
    shares = {n: reproduced[n] / original[n] for n in sorted(original)}
    overall = sum(reproduced.values()) / sum(original.values())
    with capsys.disabled():
        print(
            "\ndyntom_questions reproduces "
            + ", ".join(f"{n} scenarios {s:.2%} of {original[n]}" for n, s in shares.items())
            + f"; overall {overall:.2%} of {sum(original.values())} questions"
        )
    assert sorted(shares) == [4, 5, 6, 7]
    assert all(share >= 0.98 for share in shares.values()), shares
    # The command prints the same shares it measured itself.
    printed = "\n".join(generated["outputs"].values())
    for n, share in shares.items():
        assert f"{n} scenarios: " in printed
        assert f"({share:.2%})" in printed
    assert "overall: 24 stage(s), 1719/1719 questions reproduced" in printed


def test_distractors_differ_from_the_release_only_where_it_drew_random_numbers(generated) -> None:
    deterministic = compared_t3 = 0
    for release_dir, out_dir in generated["stages"]:
        ours = _load(out_dir / "question_new.json")
        theirs = _load(release_dir / "question_new.json")
        assert list(ours) == list(theirs), release_dir
        for key, question in theirs.items():
            mine = ours[key]
            assert list(mine) == QUESTION_FIELDS
            assert mine["question type"] == question["question type"]
            assert len(mine["options"]) == len(question["options"]), (release_dir, key)
            if _kind(key) == "type_d_how":
                # Random texts, but the same kinds of distractor in the same order,
                # with the same record layout.
                assert [(list(r), r["short"], r["explain"]) for r in mine["option reasons"]] == [
                    (list(r), r["short"], r["explain"]) for r in question["option reasons"]
                ]
                compared_t3 += 1
                continue
            assert mine["option reasons"] == question["option reasons"], (release_dir, key)
            strip = [PREFIX_RE.sub("", o, count=1) for o in mine["options"]]
            assert sorted(strip) == sorted(
                PREFIX_RE.sub("", o, count=1) for o in question["options"]
            )
            deterministic += 1
    assert deterministic == 2444 - compared_t3 and compared_t3 == 4 * 34


def test_five_scenario_stage_has_71_questions_in_the_papers_shares(generated) -> None:
    out_dir = next(out for release, out in generated["stages"] if release.name == "trial50")
    questions = _load(out_dir / "question_new.json")
    assert len(questions) == 71
    by_type = Counter(PAPER_TYPES[_kind(key)] for key in questions)
    assert by_type == {
        "Understanding": 20,
        "Transformation-1": 16,
        "Transformation-2": 31,
        "Transformation-3": 4,
    }
    assert Counter(_kind(key) for key in questions)["type_c_how"] == 15
    for key, question in questions.items():
        letters = [option[0] for option in question["options"]]
        assert letters == [chr(ord("a") + i) for i in range(len(letters))], key
        gold = question["option reasons"][0]
        assert gold["short"] == "true_answer" and gold["option"] == _gold(question), key


def test_t3_random_distractors_are_what_their_reasons_say(shared_data: Path) -> None:
    story = _load(shared_data / "dyntom-variants" / "trial1150" / "story.json")
    analysis = story["sketch"]["analysis of mental states across scenarios"]
    texts = {
        kind.lower(): [analysis[kind][str(n)] for n in range(1, 8)]
        for kind in ("Belief", "Emotion", "Intention", "Action")
    }
    for seed in range(5):
        questions = generate_questions(story, rng=stage_rng(seed, "trial1150"))
        for number, kind in enumerate(texts, start=1):
            question = questions[f"type_d_how_{number}"]
            gold = texts[kind]
            by_explain = {
                r["explain"]: r["option"].split(" -> ") for r in question["option reasons"]
            }
            shuffled = by_explain["shuffle the order of belief in scenarios"]
            assert sorted(shuffled) == sorted(gold) and shuffled != gold
            swapped = by_explain["change the order of belief in scenarios"]
            assert sum(a != b for a, b in zip(swapped, gold, strict=True)) == 2
            assert by_explain["reverse the order of belief in scenarios"] == swapped[::-1]
            assert len(by_explain["remove one belief in one time stage"]) == 6
            for other in texts:
                if other != kind:
                    replaced = by_explain[f"{other} change reason"]
                    changed = [
                        i for i, (a, b) in enumerate(zip(replaced, swapped, strict=True)) if a != b
                    ]
                    assert len(changed) <= 1
                    assert all(replaced[i] in texts[other] for i in changed)


def test_seed_fixes_every_random_choice(shared_data: Path, tmp_path: Path) -> None:
    stages = shared_data / "dyntom-variants"
    _run(stages, tmp_path / "a", "--seed", "7")
    _run(stages, tmp_path / "b", "--seed", "7")
    _run(stages, tmp_path / "c", "--seed", "8")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.json"))
    assert len(files) == 10
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # Another seed moves options and T-3 distractors, never a key, text or gold option.
    differs = 0
    for name in files:
        seven, eight = _load(tmp_path / "a" / name), _load(tmp_path / "c" / name)
        assert list(seven) == list(eight)
        for key in seven:
            assert seven[key]["question"] == eight[key]["question"]
            assert _gold(seven[key]) == _gold(eight[key])
            differs += seven[key]["options"] != eight[key]["options"]
    assert differs > 0.9 * sum(len(_load(tmp_path / "a" / n)) for n in files)
    # A stage draws the same whether generated alone or with the others.
    _run(stages / "trial1150", tmp_path / "alone", "--seed", "7")
    alone = tmp_path / "alone" / "trial1150" / "question_new.json"
    assert alone.read_bytes() == (tmp_path / "a" / "trial1150" / "question_new.json").read_bytes()


def _broken_copy(shared_data: Path, tmp_path: Path, change) -> Path:
    stages = tmp_path / "stages"
    for name in ("trial50", "trial69"):
        shutil.copytree(shared_data / "dyntom" / name, stages / name)
    story_path = stages / "trial69" / "story.json"
    text = story_path.read_text(encoding="utf-8")
    story_path.write_text(change(text), encoding="utf-8")
    return stages


def _drop_reason(text: str) -> str:
    story = json.loads(text)
    emotion = story["sketch"]["analysis of mental states across scenarios"]["Emotion"]
    emotion["Reasons"] = ";".join(emotion["Reasons"].split(";")[:2])
    return json.dumps(story)


def _drop_influence_scenario(text: str) -> str:
    story = json.loads(text)
    del story["sketch"]["mental states analysis in every scenario"]["scenario 4"]
    return json.dumps(story)


def _number_as_text(text: str) -> str:
    story = json.loads(text)
    story["scenario numbers"] = "five"
    return json.dumps(story)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda t: t[:500], r"trial69/story\.json: record line \d+: malformed JSON"),
        (
            _drop_reason,
            r"trial69/story\.json: record analysis of mental states across scenarios / Emotion: "
            r"field 'Reasons': has 2 transition\(s\) separated by ';', needs 4",
        ),
        (
            _drop_influence_scenario,
            r"trial69/story\.json: record mental states analysis in every scenario: "
            r"field 'scenario 4': scenario 4 missing",
        ),
        (
            _number_as_text,
            r"trial69/story\.json: field 'scenario numbers': expected an integer, got 'five'",
        ),
    ],
    ids=["malformed-json", "missing-transition", "missing-influences", "count-not-a-number"],
)
def test_broken_story_is_named_and_nothing_is_written(
    shared_data: Path, tmp_path: Path, change, expected: str
) -> None:
    stages = _broken_copy(shared_data, tmp_path, change)
    out_dir = tmp_path / "out"
    with pytest.raises(CommandError, match=expected):
        _run(stages, out_dir)
    # trial50 is fine, but every story is read before anything is written.
    assert not out_dir.exists()


def test_refuses_to_write_over_the_stages(shared_data: Path, tmp_path: Path) -> None:
    stages = tmp_path / "stages"
    shutil.copytree(shared_data / "dyntom" / "trial50", stages / "trial50")
    before = (stages / "trial50" / "question_new.json").read_bytes()
    with pytest.raises(CommandError, match="OUT_DIR must differ from STAGES_DIR"):
        _run(stages, stages)
    assert (stages / "trial50" / "question_new.json").read_bytes() == before


def test_stage_without_release_questions_is_generated_without_comparison(
    shared_data: Path, tmp_path: Path
) -> None:
    stages = tmp_path / "stages"
    (stages / "trial1165").mkdir(parents=True)
    shutil.copy(shared_data / "dyntom-variants" / "trial1165" / "story.json", stages / "trial1165")
    output = _run(stages, tmp_path / "out")
    assert "nothing to compare" in output
    assert len(_load(tmp_path / "out" / "trial1165" / "question_new.json")) == 56


def test_trajectory_keys_in_any_shape_give_the_same_questions(shared_data: Path) -> None:
    story = _load(shared_data / "dyntom" / "trial50" / "story.json")
    expected = generate_questions(story, rng=stage_rng(3, "trial50"))
    reshaped = json.loads(json.dumps(story))
    sketch = reshaped["sketch"]
    per_scenario = sketch["mental states analysis in every scenario"]
    # The shapes the release uses for story keys, here on the trajectory's keys,
    # in a scrambled order; the analysis' state names in lower case.
    new_keys = {5: "5", 4: "Scenario 4", 3: "scenario_3", 2: "scenario2", 1: "scenario 1"}
    sketch["mental states analysis in every scenario"] = {
        new_keys[n]: per_scenario[f"scenario {n}"] for n in (5, 4, 3, 2, 1)
    }
    analysis = sketch["analysis of mental states across scenarios"]
    sketch["analysis of mental states across scenarios"] = {
        k.lower(): v for k, v in analysis.items()
    }
    # Dialogues are not read: any shape, or none, gives the same questions.
    del reshaped["story"]
    assert generate_questions(reshaped, rng=stage_rng(3, "trial50")) == expected


def test_unchanged_belief_makes_no_the_gold_answer_of_every_whether_question(
    shared_data: Path,
) -> None:
    story = _load(shared_data / "dyntom-variants" / "trial1165" / "story.json")
    # The authors read Belief's flag for all four states; Emotion's is ignored.
    story["sketch"]["analysis of mental states across scenarios"]["Belief"]["Changed"] = "False"
    questions = generate_questions(story, rng=stage_rng(0, "trial1165"))
    whether = {k: q for k, q in questions.items() if _kind(k) == "type_d_whether"}
    assert len(whether) == 12
    for key, question in whether.items():
        assert _gold(question) == "No", key
        # Every change of the state is now a distractor, none of them "No".
        distractors = question["option reasons"][1:]
        assert len(distractors) == 3
        assert {r["short"] for r in distractors} == {"type_d_whether_recognizae_if_change"}
        assert all(r["option"].startswith("Yes, from ") for r in distractors)
