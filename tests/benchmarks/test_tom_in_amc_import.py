"""ToM-in-AMC import/export through the management commands.

The real release is not at hand, so :func:`amc_release` builds a small file in its
layout: invented dialogue, two movies in two splits, masked speakers as P0, P1, ….
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from benchmarks.models import Character, Scene, SpeakerInstance, Work

pytestmark = pytest.mark.django_db

LIGHTHOUSE = "the lighthouse keepers"
TRAIN = "night train to verona"


def _scene(heading: str, lines: list[tuple[str, str]], chars: dict, char_map: dict) -> dict:
    return {
        "scene": [
            {"type": "scene", "title": heading, "text": ""},
            *(
                {"type": "dialog", "title": who, "text": text}
                if who != "background"
                else {"type": "scene", "title": "NULL", "text": text}
                for who, text in lines
            ),
        ],
        "chars": chars,
        "char_map": char_map,
    }


def amc_release() -> dict[str, Any]:
    """A ToM-in-AMC file in the HuggingFace layout, with our own invented scenes."""
    return {
        "train": {
            LIGHTHOUSE: {
                "chars": {"maggie": 41, "tom": 30, "elena": 12},
                "training_scenes": [
                    _scene(
                        "EXT. LIGHTHOUSE GALLERY - NIGHT",
                        [
                            ("background", "P0 wipes salt off the lamp glass."),
                            ("P0", "Forty years and the sea still finds a way in."),
                            ("P1", "You say that every storm."),
                            ("P0", "And every storm I'm right."),
                        ],
                        {"maggie": 2, "tom": 1},
                        {"maggie": "P0", "tom": "P1"},
                    ),
                    _scene(
                        "INT. KEEPER'S KITCHEN - DAWN",
                        [
                            ("P0", "Elena wrote again. She wants to sell the boat."),
                            ("P1", "Then let her come and say it to my face."),
                            ("postman", "Letters for the rock!"),
                        ],
                        {"tom": 1, "maggie": 1, "postman": 1},
                        {"tom": "P0", "maggie": "P1"},
                    ),
                    _scene(
                        "EXT. JETTY - DAY",
                        [
                            ("background", "P0 steps off the ferry with one suitcase."),
                            ("P0", "Nobody came to meet me. Of course."),
                        ],
                        {"elena": 1},
                        {"elena": "P0"},
                    ),
                ],
                "testing_scenes": [
                    _scene(
                        "INT. LAMP ROOM - NIGHT",
                        [
                            ("P1", "Mum, the lamp's been on a timer since 1998."),
                            ("P0", "Timers fail. I don't."),
                            ("P2", "Leave her be, Elena."),
                        ],
                        {"elena": 1, "maggie": 1, "tom": 1},
                        {"maggie": "P0", "elena": "P1", "tom": "P2"},
                    ),
                    _scene(
                        "EXT. CLIFF PATH - DAY",
                        [
                            ("P0", "If we sell, where does she go?"),
                            ("P1", "Somewhere with a doctor closer than a boat ride."),
                        ],
                        {"tom": 1, "elena": 1},
                        {"tom": "P0", "elena": "P1"},
                    ),
                ],
            }
        },
        "dev": {
            TRAIN: {
                "chars": {"ivo": 25, "clara": 22, "the conductor": 9, "bruno": 7},
                "training_scenes": [
                    _scene(
                        "INT. SLEEPER CAR - NIGHT",
                        [
                            ("P0", "You took the top bunk. You always take the top bunk."),
                            ("P1", "Because you snore, Ivo."),
                        ],
                        {"clara": 1, "ivo": 1},
                        {"clara": "P0", "ivo": "P1"},
                    ),
                    _scene(
                        "INT. CORRIDOR - NIGHT",
                        [
                            ("P0", "Tickets, please. Ah. The couple from Munich."),
                            ("P1", "We're not a couple."),
                        ],
                        {"the conductor": 1, "clara": 1},
                        {"the conductor": "P0", "clara": "P1"},
                    ),
                ],
                "testing_scenes": [
                    _scene(
                        "INT. DINING CAR - NIGHT",
                        [
                            ("P0", "Someone's been in our compartment."),
                            ("P1", "Bruno? He said he'd wait in Bolzano."),
                            ("P2", "Bruno waits for no one, signorina."),
                        ],
                        {"ivo": 1, "clara": 1, "the conductor": 1},
                        {"ivo": "P0", "clara": "P1", "the conductor": "P2"},
                    ),
                    _scene(
                        "EXT. VERONA PLATFORM - DAWN",
                        [
                            ("background", "P0 waves from the platform; P1 freezes."),
                            ("P0", "You're late. Both of you."),
                        ],
                        {"bruno": 1, "ivo": 0},
                        {"bruno": "P0", "ivo": "P1"},
                    ),
                ],
            }
        },
    }


# 3 + 4 characters, 5 + 4 scenes, and the char_map entries of the testing scenes.
COUNTS = {Work: 2, Character: 7, Scene: 9, SpeakerInstance: 3 + 2 + 3 + 2}


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def run_import(path: Path, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(
        "import_benchmark", "tom-in-amc", str(path), *args, "--no-progress", stdout=out, stderr=err
    )
    return out.getvalue(), err.getvalue()


def counts() -> dict[type, int]:
    return {model: model.objects.count() for model in COUNTS}


def snapshot() -> dict[str, list[dict]]:
    """Every stored row, timestamps included, so any write shows."""
    return {m.__name__: list(m.objects.order_by("pk").values()) for m in COUNTS}


@pytest.fixture
def release(tmp_path: Path) -> Path:
    return write(tmp_path / "tom_in_amc.json", amc_release())


def test_import_creates_works_characters_scenes_and_instances(release: Path) -> None:
    out, err = run_import(release)

    assert counts() == COUNTS
    assert "Work: 2 created, 0 unchanged, 0 updated" in out
    assert "SpeakerInstance: 10 created" in out
    assert err == ""
    works = {w.key: w for w in Work.objects.all()}
    assert works[LIGHTHOUSE].split == "train"
    assert works[TRAIN].split == "dev"
    assert works[TRAIN].benchmark == "tom-in-amc"
    assert works[TRAIN].kind == Work.Kind.MOVIE
    assert works[TRAIN].title == TRAIN
    assert list(
        Character.objects.filter(work=works[TRAIN]).values_list(
            "name", "utterance_count", "position", "is_main"
        )
    ) == [
        ("ivo", 25, 0, True),
        ("clara", 22, 1, True),
        ("the conductor", 9, 2, True),
        ("bruno", 7, 3, True),
    ]

    scenes = list(Scene.objects.filter(work=works[LIGHTHOUSE]))
    assert [(s.source_id, s.position, s.part) for s in scenes] == [
        ("training-0000", 0, "training"),
        ("training-0001", 1, "training"),
        ("training-0002", 2, "training"),
        ("testing-0000", 3, "testing"),
        ("testing-0001", 4, "testing"),
    ]
    source_kitchen = amc_release()["train"][LIGHTHOUSE]["training_scenes"][1]
    kitchen = scenes[1]
    assert kitchen.lines == source_kitchen["scene"]
    assert kitchen.heading == "INT. KEEPER'S KITCHEN - DAWN"
    assert kitchen.char_counts == {"tom": 1, "maggie": 1, "postman": 1}
    assert kitchen.participants == ["tom", "maggie", "postman"]
    # Training scenes keep their mapping but give no instances to guess.
    assert kitchen.char_map == {"tom": "P0", "maggie": "P1"}
    assert not SpeakerInstance.objects.filter(scene__part=Scene.Part.TRAINING).exists()

    lamp_room = scenes[3]
    assert [(i.code, i.gold_character.name, i.candidates) for i in lamp_room.instances.all()] == [
        ("P0", "maggie", ["maggie", "tom", "elena"]),
        ("P1", "elena", ["maggie", "tom", "elena"]),
        ("P2", "tom", ["maggie", "tom", "elena"]),
    ]
    platform = Scene.objects.get(work=works[TRAIN], source_id="testing-0001")
    assert {i.code: i.gold_character.name for i in platform.instances.all()} == {
        "P0": "bruno",
        "P1": "ivo",
    }
    assert platform.instances.get(code="P0").candidates == [
        "ivo",
        "clara",
        "the conductor",
        "bruno",
    ]


def test_reimport_changes_nothing(release: Path) -> None:
    run_import(release)
    before = snapshot()

    out, _ = run_import(release)

    for line in out.splitlines()[1:]:
        assert " 0 created," in line and line.endswith(" 0 updated"), line
    assert "Scene: 0 created, 9 unchanged, 0 updated" in out
    assert snapshot() == before


def test_reimport_updates_a_changed_scene_only(release: Path, tmp_path: Path) -> None:
    run_import(release)
    data = amc_release()
    data["dev"][TRAIN]["testing_scenes"][0]["scene"][1]["text"] = "Someone was in here."

    out, _ = run_import(write(tmp_path / "changed.json", data))

    assert "Scene: 0 created, 8 unchanged, 1 updated" in out
    assert "SpeakerInstance: 0 created, 10 unchanged, 0 updated" in out
    scene = Scene.objects.get(work__key=TRAIN, source_id="testing-0000")
    assert scene.lines[1]["text"] == "Someone was in here."


def test_split_option_imports_only_that_split(release: Path) -> None:
    run_import(release, "--split", "dev")

    assert list(Work.objects.values_list("key", "split")) == [(TRAIN, "dev")]
    assert Scene.objects.count() == 4
    assert SpeakerInstance.objects.count() == 5


def test_export_round_trip(release: Path, tmp_path: Path) -> None:
    run_import(release)
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    out = StringIO()
    call_command("export_benchmark", "tom-in-amc", str(out_dir), stdout=out)

    assert "exported 9 record(s)" in out.getvalue()
    exported = out_dir / "tom_in_amc.json"
    exported_data = json.loads(exported.read_text(encoding="utf-8"))
    assert exported_data == amc_release()
    # Key order too (jsonb on PostgreSQL sorts keys its own way), so files diff cleanly.
    kitchen = exported_data["train"][LIGHTHOUSE]["training_scenes"][1]
    assert list(kitchen["chars"]) == ["tom", "maggie", "postman"]
    assert list(kitchen["scene"][1]) == ["type", "title", "text"]
    assert list(exported_data["dev"][TRAIN]["chars"]) == ["ivo", "clara", "the conductor", "bruno"]
    before = snapshot()
    # Same file name as the original, so the recorded source is the same too.
    out_text, _ = run_import(exported)
    assert "Work: 0 created, 2 unchanged, 0 updated" in out_text
    assert "SpeakerInstance: 0 created, 10 unchanged, 0 updated" in out_text
    assert snapshot() == before


def test_export_one_work_to_a_file(release: Path, tmp_path: Path) -> None:
    run_import(release)
    target = tmp_path / "one.json"

    call_command("export_benchmark", "tom-in-amc", str(target), "--work", TRAIN, stdout=StringIO())

    assert json.loads(target.read_text(encoding="utf-8")) == {"dev": amc_release()["dev"]}


def test_unknown_fields_are_kept_in_extra_warned_and_exported(
    release: Path, tmp_path: Path
) -> None:
    data = amc_release()
    movie = data["train"][LIGHTHOUSE]
    movie["genres"] = ["drama"]
    movie["testing_scenes"][1]["scene_number"] = 57
    movie["testing_scenes"][1]["scene"][1]["emotion"] = "worried"
    path = write(tmp_path / "tom_in_amc.json", data)

    _, err = run_import(path)

    assert "train/the lighthouse keepers" in err and "'genres'" in err
    assert "train/the lighthouse keepers/testing_scenes[1]" in err
    assert "'scene_number'" in err and "'emotion'" in err
    assert Work.objects.get(key=LIGHTHOUSE).extra == {"genres": ["drama"]}
    cliff = Scene.objects.get(work__key=LIGHTHOUSE, source_id="testing-0001")
    assert cliff.extra == {"scene_number": 57}
    assert cliff.lines[1]["emotion"] == "worried"
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    call_command("export_benchmark", "tom-in-amc", str(out_dir), stdout=StringIO())
    assert json.loads((out_dir / "tom_in_amc.json").read_text(encoding="utf-8")) == data


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """A mutation that sets data[a][b]... = value, the path given as 'a|b|...'."""

    def mutate(data: dict) -> None:
        *parents, last = path.split("|")
        node: Any = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def _delete(path: str) -> Callable[[dict], None]:
    def mutate(data: dict) -> None:
        *parents, last = path.split("|")
        node: Any = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        del node[last]

    return mutate


LAMP = f"train|{LIGHTHOUSE}|testing_scenes|0"
DINING = f"dev|{TRAIN}|testing_scenes|0"


@pytest.mark.parametrize(
    ("mutate", "record", "field", "message"),
    [
        (
            _set("validation", {}),
            "top level",
            "validation",
            "unknown split key",
        ),
        (
            _set(f"{DINING}|char_map|roberta", "P3"),
            f"dev/{TRAIN}/testing_scenes[0]",
            "char_map",
            "'roberta' is not one of the movie's chars",
        ),
        (
            _set(f"{LAMP}|char_map|tom", "P0"),
            f"train/{LIGHTHOUSE}/testing_scenes[0]",
            "char_map",
            "code 'P0' given to 'maggie' and 'tom'",
        ),
        (
            _delete(f"{DINING}|scene|2|type"),
            f"dev/{TRAIN}/testing_scenes[0]/scene[2]",
            "type",
            "missing",
        ),
        (
            _delete(f"{DINING}|scene|1|text"),
            f"dev/{TRAIN}/testing_scenes[0]/scene[1]",
            "text",
            "missing",
        ),
        (
            _set(f"{DINING}|scene|3|type", "monologue"),
            f"dev/{TRAIN}/testing_scenes[0]/scene[3]",
            "type",
            "'monologue' is not one of scene, dialog",
        ),
        (
            _set(f"dev|{TRAIN}|chars|bruno", -1),
            f"dev/{TRAIN}",
            "chars",
            "must be a non-negative integer",
        ),
        (
            _delete(f"dev|{TRAIN}|training_scenes|1|char_map"),
            f"dev/{TRAIN}/training_scenes[1]",
            "char_map",
            "missing",
        ),
    ],
    ids=[
        "unknown-split",
        "char-map-unknown-character",
        "duplicate-code",
        "line-without-type",
        "line-without-text",
        "bad-line-type",
        "negative-count",
        "scene-without-char-map",
    ],
)
def test_bad_record_is_located_and_nothing_is_written(
    release: Path,
    tmp_path: Path,
    mutate: Callable[[dict], None],
    record: str,
    field: str,
    message: str,
) -> None:
    run_import(release)
    before = snapshot()
    data = amc_release()
    # A valid change ahead of the bad record: it must not be written either.
    data["train"][LIGHTHOUSE]["chars"]["maggie"] = 99
    data["train"][LIGHTHOUSE]["training_scenes"][0]["scene"][1]["text"] = "Changed."
    mutate(data)
    broken = write(tmp_path / "broken.json", data)

    with pytest.raises(CommandError) as excinfo:
        run_import(broken)

    text = str(excinfo.value)
    assert str(broken) in text
    assert f"record {record}:" in text
    assert f"field {field!r}" in text
    assert message in text
    assert snapshot() == before


def test_malformed_json_is_located_and_nothing_is_written(release: Path, tmp_path: Path) -> None:
    run_import(release)
    before = snapshot()
    text = json.dumps(amc_release(), indent=1)
    broken = tmp_path / "broken.json"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")

    with pytest.raises(CommandError) as excinfo:
        run_import(broken)

    assert str(broken) in str(excinfo.value)
    assert "malformed JSON" in str(excinfo.value)
    assert "record line " in str(excinfo.value)
    assert snapshot() == before


def test_movie_in_two_splits_is_refused(tmp_path: Path) -> None:
    data = amc_release()
    data["test"] = {LIGHTHOUSE: copy.deepcopy(data["train"][LIGHTHOUSE])}
    broken = write(tmp_path / "broken.json", data)

    with pytest.raises(CommandError, match=r"record test/the lighthouse keepers: movie also in"):
        run_import(broken)

    assert counts() == dict.fromkeys(COUNTS, 0)


# -- size limits ------------------------------------------------------------------------


def test_a_file_over_the_size_limit_is_refused_before_parsing(
    release: Path, tmp_path: Path, settings
) -> None:
    run_import(release)
    before = snapshot()
    settings.TOMLAB_IMPORT_MAX_BYTES = {**settings.TOMLAB_IMPORT_MAX_BYTES, "tom-in-amc": 500}
    broken = tmp_path / "broken.json"
    broken.write_text(release.read_text()[:-5])  # malformed too: the size comes first

    with pytest.raises(CommandError) as error:
        run_import(broken)

    assert str(error.value).startswith(
        f"import failed, nothing was written: {broken}: file is {broken.stat().st_size:,} bytes, "
        "over the 500-byte limit for tom-in-amc files"
    )
    assert snapshot() == before


def test_a_stored_value_over_the_field_limit_names_its_row(release: Path, settings) -> None:
    # The scene lines are stored as one JSON value; no field of the release may hold
    # more than TOMLAB_IMPORT_MAX_FIELD_BYTES, wherever it would be stored.
    settings.TOMLAB_IMPORT_MAX_FIELD_BYTES = 200

    with pytest.raises(CommandError) as error:
        run_import(release)

    message = str(error.value)
    assert message.startswith(f"import failed, nothing was written: {release}: record ")
    assert "field " in message and "over the 200-byte limit per stored field" in message
    assert all(n == 0 for n in counts().values())
