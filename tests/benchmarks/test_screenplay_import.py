"""Raw screenplays built into ToM-in-AMC movies through ``import_benchmark screenplay``.

The three real scripts come from ``../shared/data/screenplays`` (never copied here);
``screenplays/`` beside this file holds two small scripts of our own (IMSDb-style
text with HTML residue and page furniture, and Fountain), and the messy variants of
them (CRLF, tabs, cp1252 bytes, double-encoded UTF-8, no indentation) are made in a
temp dir by each test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from benchmarks.importers.screenplay import build_movie
from benchmarks.importers.screenplay_parser import parse_screenplay
from benchmarks.models import Character, Scene, SpeakerInstance, Work
from benchmarks.services import benchmark_import
from studies.forms import WorkChoiceField
from studies.selectors import works_for_studies

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent / "screenplays"
SALT_ROAD = FIXTURES / "salt_road.txt"
NIGHT_FERRY = FIXTURES / "night_ferry.fountain"
MODELS = (Work, Character, Scene, SpeakerInstance)

# What reading each real script gave (checked by reading the scripts): title, scenes,
# history scenes, main characters by utterances, speaking characters, instances, and
# of those the main characters only named in the action (masked, 0 lines).
REAL = {
    "dead_poets_society.txt": (
        "Dead Poets Society", 105, 63,
        {"neil": 163, "keating": 147, "charlie": 141, "knox": 102, "todd": 83}, 48, 71, 26,
    ),
    "star_wars_a_new_hope.txt": (
        "Star Wars: A New Hope", 480, 288,
        {"luke": 253, "han": 152, "threepio": 119, "ben": 81, "leia": 57}, 59, 93, 66,
    ),
    "big_fish.fountain": (
        "Big Fish", 193, 115,
        {"edward": 297, "will": 143, "sandra": 59, "jenny": 58, "josephine": 46}, 43, 131, 63,
    ),
}  # fmt: skip


def run_import(*args: object) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(
        "import_benchmark",
        "screenplay",
        *map(str, args),
        "--no-progress",
        stdout=out,
        stderr=err,
    )
    return out.getvalue(), err.getvalue()


def snapshot() -> dict[str, list[dict]]:
    """Every stored row, timestamps included, so any write shows."""
    return {m.__name__: list(m.objects.order_by("pk").values()) for m in MODELS}


def name_pattern(forms: set[str]) -> re.Pattern[str]:
    alternatives = sorted(
        (r"\.?\s+".join(map(re.escape, form.replace(".", " ").split())) for form in forms),
        key=len,
        reverse=True,
    )
    return re.compile(r"(?<![\w'])(?:" + "|".join(alternatives) + r")(?!\w)", re.IGNORECASE)


def assert_masking_complete(work: Work) -> int:
    """No main character is named in a testing scene's speaker slots or narration.

    Narration is the heading, the action lines and the parentheticals; what characters
    *say* keeps names, as in the released data. A one-word name the script also uses
    as an ordinary word ("will", "hope") counts only capitalised. Returns the number
    of masked characters (instances) checked.
    """
    aliases = dict(work.characters.values_list("name", "aliases"))
    main = list(work.characters.filter(is_main=True).values_list("name", flat=True))
    patterns = {name: name_pattern({name, *aliases[name]}) for name in main}
    checked = 0
    for scene in work.scenes.filter(part=Scene.Part.TESTING):
        codes = set(scene.char_map.values())
        assert sorted(codes) == [f"P{i}" for i in range(len(codes))]
        assert set(scene.char_map) <= set(main)
        spoken = Counter(line["title"] for line in scene.lines if line["type"] == "dialog")
        for name, code in scene.char_map.items():
            assert spoken[code] == scene.char_counts[name]
            assert name not in spoken
            checked += 1
        for name, pattern in patterns.items():
            for line in scene.lines:
                texts = [line["title"]]
                if line["type"] == "scene":
                    texts.append(line["text"])
                else:
                    texts.extend(re.findall(r"\([^()]*\)", line["text"]))
                for text in texts:
                    for match in pattern.finditer(text):
                        assert match.group()[0].islower() and line["type"] == "scene", (
                            f"{work.key} {scene.source_id}: {name} unmasked in {line}"
                        )
    for scene in work.scenes.filter(part=Scene.Part.TRAINING):
        assert scene.char_map == {}
        assert not any(re.fullmatch(r"P\d+", line["title"]) for line in scene.lines)
    return checked


# -- the real scripts -------------------------------------------------------------------


@pytest.mark.parametrize("file_name", list(REAL))
def test_real_script_counts_characters_and_masking(shared_data: Path, file_name: str) -> None:
    title, scenes, history, mains, speakers, instances, silent = REAL[file_name]
    out, _ = run_import(shared_data / "screenplays" / file_name)

    work = Work.objects.get()
    assert (work.benchmark, work.key, work.title, work.kind, work.split, work.source) == (
        "tom-in-amc", title, title, "movie", "test", file_name,
    )  # fmt: skip
    assert work.scenes.count() == scenes
    assert work.scenes.filter(part=Scene.Part.TRAINING).count() == history == scenes * 3 // 5
    assert list(work.scenes.order_by("position").values_list("part", flat=True)) == (
        ["training"] * history + ["testing"] * (scenes - history)
    )
    main = work.characters.filter(is_main=True).order_by("position")
    assert dict(main.values_list("name", "utterance_count")) == mains
    assert list(main.values_list("position", flat=True)) == [0, 1, 2, 3, 4]
    assert work.characters.count() == speakers
    assert SpeakerInstance.objects.count() == instances
    assert all(i.candidates == list(mains) for i in SpeakerInstance.objects.all())
    assert assert_masking_complete(work) == instances
    assert f"{scenes} scenes ({history} history), {speakers} speaking characters" in out
    # The report's test scenes are the study form's (issue 49: "42 testing" vs "41 test scenes").
    (offered,) = works_for_studies()
    assert f"{file_name}: {offered.n_test} test scenes (a masked speaker to guess)" in out
    assert f"{speakers} speaking characters, {instances} masked instances ({silent} only" in out
    assert "main characters (utterances): " + ", ".join(f"{n} {c}" for n, c in mains.items()) in out
    assert f"Scene: {scenes} created, 0 unchanged, 0 updated" in out


def test_a_later_scene_with_nothing_to_guess_is_no_test_scene(shared_data: Path) -> None:
    out, _ = run_import(shared_data / "screenplays" / "dead_poets_society.txt")

    # 42 scenes follow the history; one names no main character, so 41 can be asked.
    later = Scene.objects.filter(part=Scene.Part.TESTING)
    assert later.count() == 42 and later.filter(instances__isnull=True).count() == 1
    assert (
        "dead_poets_society.txt: 41 test scenes (a masked speaker to guess); "
        "1 later scene(s) with no main character to guess"
    ) in out
    assert "testing" not in out
    (offered,) = works_for_studies()
    assert WorkChoiceField(works_for_studies()).label_from_instance(offered) == (
        "Dead Poets Society (ToM-in-AMC, 41 test scenes)"
    )


def test_dead_poets_repairs_and_unparsed_lines_are_reported(shared_data: Path) -> None:
    out, err = run_import(shared_data / "screenplays" / "dead_poets_society.txt")

    assert "mixed line endings: 5660 LF, 9 CRLF" in out
    assert "character cue not in capitals on 1 line(s): line 1234: 'Keating'" in err
    assert "character cue not indented on 1 line(s): line 1727: 'CHARLIE'" in err
    assert "dialogue not indented on 2 line(s): line 442:" in err
    # The boys' chant has no cue above it: kept as action text and reported.
    assert "15 line(s) could not be parsed and were kept as action text" in err
    assert "line 2016: 'Then I saw the Congo creeping through'" in err
    keating = Character.objects.get(name="keating")
    # The script's "Mr. Keating" and "John Keating" are Keating's too.
    assert keating.aliases == ["KEATING", "MR. KEATING", "JOHN KEATING"]
    nolan = Character.objects.get(name="mr. nolan")
    assert (nolan.is_main, nolan.aliases) == (False, ["MR. NOLAN", "MR NOLAN"])
    first = Scene.objects.get(position=0)
    assert first.lines[:3] == [
        {"type": "scene", "title": "INT. WELTON ACADEMY HALLWAY - DAY", "text": ""},
        {
            "type": "scene",
            "title": "NULL",
            "text": "A young boy, dressed in a school uniform and cap, fidgets as his mother "
            "adjusts his tie.",
        },
        dialog("mother", "Now remember, keep your shoulders back."),
    ]


def test_star_wars_footer_title_page_and_wrapped_headings(shared_data: Path) -> None:
    out, _ = run_import(shared_data / "screenplays" / "star_wars_a_new_hope.txt")

    assert "5 IMSDb footer" in out and "13 before the first scene heading" in out
    headings = set(Scene.objects.values_list("heading", flat=True))
    assert "EXT. TATOOINE - MOS EISLEY - STREET - ALLEYWAY - USED SPEEDER LOT" in headings
    assert not any(h.endswith("-") for h in headings)
    luke = Character.objects.get(name="luke")
    assert luke.aliases == ["LUKE", "LUKE'S VOICE", "LUKE SKYWALKER"]
    last = Scene.objects.order_by("-position").first()
    assert not any("Writers" in line["text"] or "THE END" in line["text"] for line in last.lines)
    # "INT. LUKE'S X-WING" with Luke speaking: the possessive stays after the code.
    cockpit = Scene.objects.filter(
        part="testing", heading__contains="X-WING FIGHTER - COCKPIT", char_map__has_key="luke"
    ).first()
    assert cockpit.heading == f"INT. {cockpit.char_map['luke']}'S X-WING FIGHTER - COCKPIT"


def test_big_fish_fountain_prologue_aliases_and_mojibake(shared_data: Path) -> None:
    _, err = run_import(shared_data / "screenplays" / "big_fish.fountain")

    edward = Character.objects.get(name="edward")
    # Cue spellings, then the full names the narration uses.
    assert edward.aliases == ["EDWARD", "ADULT EDWARD", "YOUNG EDWARD", "EDWARD BLOOM"]
    assert Character.objects.get(name="will").aliases == ["WILL", "YOUNG WILL", "WILL BLOOM"]
    assert Character.objects.get(name="dr. bennett").aliases == ["DR. BENNETT", "YOUNG DR. BENNETT"]
    assert not Character.objects.filter(name__contains="\u00c2").exists()
    # Before the first heading Edward narrates: kept as a scene without a heading.
    prologue = Scene.objects.get(position=0)
    assert prologue.heading == ""
    assert prologue.lines[0] == {
        "type": "scene",
        "title": "NULL",
        "text": "This is a Southern story, full of lies and fabrications, but truer for "
        "their inclusion.",
    }
    assert prologue.char_counts == {"edward": 2}
    assert Scene.objects.filter(heading="INT. TINY PARIS RESTAURANT (LA RUE 14°) - NIGHT (1998)")
    assert "mis-decoded characters repaired on 3 line(s)" in err
    assert not any("**" in line["text"] for s in Scene.objects.all() for line in s.lines)


# Builds every testing scene's char_map of the scripts named on the command line and
# prints them as JSON: run in fresh processes with different hash seeds.
CHAR_MAPS = r"""
import json, sys
from pathlib import Path
import django
django.setup()
from benchmarks.importers.screenplay import build_movie
from benchmarks.importers.screenplay_parser import parse_screenplay
out = {}
for name in sys.argv[1:]:
    path = Path(name)
    play = parse_screenplay(path.read_bytes(), fountain=path.suffix == ".fountain")
    movie = build_movie(play, title=path.stem, source=path.name)
    out[path.name] = {s["source_id"]: s["char_map"] for s in movie.scenes if s["part"] == "testing"}
print(json.dumps(out))
"""


def test_mask_codes_do_not_depend_on_the_process(shared_data: Path) -> None:
    paths = sorted(str(p) for p in (shared_data / "screenplays").iterdir())

    def char_maps(hash_seed: str) -> dict[str, dict[str, dict[str, str]]]:
        env = {
            **os.environ,
            "PYTHONHASHSEED": hash_seed,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
        }
        done = subprocess.run(
            [sys.executable, "-c", CHAR_MAPS, *paths],
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first, second = char_maps("1"), char_maps("2")

    assert first == second
    # Scenes with two or more masked characters are where an unordered set showed.
    assert sum(len(m) > 1 for maps in first.values() for m in maps.values()) >= 50


def test_codes_follow_the_order_of_first_appearance(shared_data: Path) -> None:
    testing = []
    for path in sorted((shared_data / "screenplays").iterdir()):
        play = parse_screenplay(path.read_bytes(), fountain=path.suffix == ".fountain")
        movie = build_movie(play, title=path.stem, source=path.name)
        testing += [s for s in movie.scenes if s["part"] == "testing"]

    several = 0
    for scene in testing:
        # Read the masked scene top to bottom: heading, then each line's speaker slot
        # and text (narration and parentheticals carry codes; speech never does).
        text = " ".join(f"{line['title']} {line['text']}" for line in scene["lines"])
        seen = list(dict.fromkeys(re.findall(r"\bP\d+\b", text)))
        assert seen == [f"P{n}" for n in range(len(scene["char_map"]))], scene["source_id"]
        assert sorted(scene["char_map"].values()) == sorted(seen)
        several += len(seen) > 1
    assert several >= 40


def test_reimport_is_unchanged(shared_data: Path) -> None:
    path = shared_data / "screenplays" / "dead_poets_society.txt"
    run_import(path)
    before = snapshot()

    out, _ = run_import(path)

    assert snapshot() == before
    for line in (
        "Work: 0 created, 1 unchanged, 0 updated",
        "Character: 0 created, 48 unchanged, 0 updated",
        "Scene: 0 created, 105 unchanged, 0 updated",
        "SpeakerInstance: 0 created, 71 unchanged, 0 updated",
    ):
        assert line in out


def test_export_is_tom_in_amc_json_and_imports_back_onto_the_same_rows(
    shared_data: Path, tmp_path: Path
) -> None:
    run_import(shared_data / "screenplays" / "dead_poets_society.txt")
    run_import(NIGHT_FERRY, "--split", "dev")
    lines = {(s.work.key, s.source_id): s.lines for s in Scene.objects.select_related("work")}

    call_command("export_benchmark", "tom-in-amc", str(tmp_path), stdout=StringIO())

    data = json.loads((tmp_path / "tom_in_amc.json").read_text(encoding="utf-8"))
    assert set(data) == {"test", "dev"}
    movie = data["test"]["Dead Poets Society"]
    assert list(movie) == ["chars", "training_scenes", "testing_scenes"]
    assert movie["chars"] == REAL["dead_poets_society.txt"][3]
    assert (len(movie["training_scenes"]), len(movie["testing_scenes"])) == (63, 42)
    for scene in movie["training_scenes"] + movie["testing_scenes"]:
        assert list(scene) == ["scene", "chars", "char_map"]
        assert all(list(line) == ["type", "title", "text"] for line in scene["scene"])
        assert set(scene["char_map"]) <= set(movie["chars"])
        text = " ".join(line["title"] + " " + line["text"] for line in scene["scene"])
        assert all(re.search(rf"\b{code}\b", text) for code in scene["char_map"].values())
        assert set(scene["char_map"]) <= set(scene["chars"])
    assert data["dev"]["The Night Ferry"]["chars"] == {
        "mcclane": 4, "ruby": 4, "priya": 4, "otto": 3, "sam": 3,
    }  # fmt: skip

    out, err = StringIO(), StringIO()
    call_command(
        "import_benchmark", "tom-in-amc", str(tmp_path), "--no-progress", stdout=out, stderr=err
    )
    assert err.getvalue() == ""
    for line in (
        "Work: 0 created, 0 unchanged, 2 updated",  # the source file name changes
        "Character: 0 created, 10 unchanged, 0 updated",
        "Scene: 0 created, 111 unchanged, 0 updated",
        "SpeakerInstance: 0 created, 79 unchanged, 0 updated",
    ):
        assert line in out.getvalue()

    SpeakerInstance.objects.all().delete()  # gold characters are protected
    Work.objects.all().delete()
    call_command(
        "import_benchmark", "tom-in-amc", str(tmp_path), "--no-progress", stdout=StringIO()
    )
    assert {(s.work.key, s.source_id): s.lines for s in Scene.objects.select_related("work")} == (
        lines
    )
    assert SpeakerInstance.objects.count() == 79


# -- our own scripts: IMSDb residue, page furniture, Fountain -------------------------


def scene_lines(source_id: str) -> list[dict[str, str]]:
    return Scene.objects.get(source_id=source_id).lines


def action(text: str) -> dict[str, str]:
    return {"type": "scene", "title": "NULL", "text": text}


def dialog(title: str, text: str) -> dict[str, str]:
    return {"type": "dialog", "title": title, "text": text}


def test_imsdb_text_with_html_furniture_and_numbered_headings() -> None:
    out, err = run_import(SALT_ROAD)

    work = Work.objects.get()
    assert work.title == "The Salt Road"
    assert "10 scenes (6 history), 7 speaking characters, 9 masked instances" in out
    assert "salt_road.txt: 4 test scenes (a masked speaker to guess)\n" in out
    assert "(1 only named in the action)" in out
    assert "main characters (utterances): mara 10, jonah 8, iris 7, hope 5, dr. abernathy 4" in out
    assert (
        "dropped: 4 transition, 4 before the first scene heading, 2 continued, 2 page number, "
        "1 draft header, 1 (MORE), 1 THE END" in out
    )
    assert "HTML residue removed on 5 line(s): line 1: '<html><head><title>" in err
    assert list(Scene.objects.values_list("heading", flat=True))[:6] == [
        "EXT. SALT FLATS - DAWN",
        "INT./EXT. GAS STATION - DAY",
        "EXT. SALT FLATS - FLASHBACK - DAY (1979)",
        "INT. GAS STATION - BACK ROOM - DAY",
        "I/E. PICKUP TRUCK - MOVING - NIGHT",
        "INT. SHERIFF'S OFFICE - NIGHT",
    ]
    assert scene_lines("training-0000")[1:4] == [
        {
            "type": "scene",
            "title": "NULL",
            "text": "A pickup truck crawls across white ground. MARA (40s, sunburnt, stubborn) "
            "drives. Beside her, her brother JONAH (30s) sleeps.",
        },
        dialog("mara", "Wake up. We're here."),
        dialog("jonah", "(groggy) Here is nowhere, Mara."),
    ]
    assert scene_lines("training-0000")[4]["text"] == "Mara kills the engine. Salt & silence."
    # Page furniture between IRIS's two halves is gone; the halves are one speech.
    back_room = scene_lines("training-0003")
    assert back_room[-1] == dialog("iris", "Don't listen to her. She's a dreamer, like your daddy.")
    # A blank line inside a speech (a scraping leftover) does not end it.
    speech = "And a second X. Smaller. With a skull. Great."
    assert dialog("jonah", speech) in scene_lines("training-0004")
    every = [line for s in Scene.objects.all() for line in s.lines]
    for junk in ("CONTINUED", "(MORE)", "12.", "CUT TO", "FADE", "THE END", "<", "&amp;", "*"):
        assert not any(junk in line["text"] or junk in line["title"] for line in every), junk
    characters = {c.name: c for c in Character.objects.all()}
    assert characters["mara"].aliases == ["MARA", "YOUNG MARA"]
    assert characters["jonah"].aliases == ["JONAH", "JONAH PRICE"]
    assert characters["dr. abernathy"].aliases == ["DR. ABERNATHY", "DR ABERNATHY"]
    assert [n for n, c in characters.items() if not c.is_main] == ["trucker", "mara and jonah"]


def test_masking_in_speaker_slots_headings_action_and_parentheticals() -> None:
    run_import(SALT_ROAD)
    assert assert_masking_complete(Work.objects.get()) == 9

    kitchen = Scene.objects.get(source_id="testing-0000")
    iris, hope = kitchen.char_map["iris"], kitchen.char_map["hope"]
    assert kitchen.heading == f"INT. {iris}'S KITCHEN - NIGHT"
    assert kitchen.lines[1]["text"] == (
        f"{iris} cuts pie. {hope} leans on the fridge. They hope the storm holds off."
    )
    # Names in what characters say stay, as in the released data.
    speech = "Mara will dig up the whole county. And Jonah will let her."
    assert dialog(iris, f"(to {hope}, sharp) {speech}") in kitchen.lines

    box = Scene.objects.get(source_id="testing-0001")
    mara, jonah = box.char_map["mara"], box.char_map["jonah"]
    assert box.lines[1]["text"] == (
        f"{mara}'s shovel hits wood. {jonah} drops to his knees beside her and brushes the salt "
        "away from a small box."
    )
    assert dialog(f"{mara} and {jonah}", "One, two, three --") in (box.lines)
    # Iris is only seen in a photograph: masked all the same (a name left in the action
    # would rule her out), with 0 lines, like the release's masked non-speakers.
    iris = box.char_map["iris"]
    assert box.lines[3] == action(
        f"They lift the lid. Inside: a photograph of {iris}, young, laughing."
    )
    assert box.char_counts == {"mara and jonah": 1, "mara": 1, "jonah": 1, "iris": 0}
    assert SpeakerInstance.objects.get(scene=box, code=iris).gold_character.name == "iris"

    counter = Scene.objects.get(source_id="testing-0002")
    doctor = counter.char_map["dr. abernathy"]
    assert counter.lines[1]["text"] == f"{doctor} waits at the counter. {doctor} taps his watch."
    assert counter.char_counts == {"dr. abernathy": 2, "iris": 1}

    instance = SpeakerInstance.objects.select_related("gold_character").get(
        scene=counter, code=doctor
    )
    assert instance.gold_character.name == "dr. abernathy"
    assert instance.candidates == ["mara", "jonah", "iris", "hope", "dr. abernathy"]


def test_group_cues_same_line_parentheticals_and_curly_apostrophes(tmp_path: Path) -> None:
    history = "".join(
        f"INT. KITCHEN {n} - DAY\n\nMARA\nMorning.\n\nJONAH\nMorning.\n\n" for n in range(3)
    )
    testing = (
        "EXT. YARD - DAY\n\nMara\u2019s dog barks at Jonah.\n\n"
        "MARA\n(to Jonah) Quiet, Jonah.\n\nJONAH\nYou first.\n\n"
        "EXT. ROAD - NIGHT\n\nThe truck stalls. Mara and Jonah push.\n\n"
        "MARA AND JONAH\n(together) Heave!\n"
    )
    path = tmp_path / "yard.txt"
    path.write_text(history + testing, encoding="utf-8")

    run_import(path, "--title", "Yard")

    yard, road = Scene.objects.filter(part="testing").order_by("position")
    mara, jonah = yard.char_map["mara"], yard.char_map["jonah"]
    assert yard.lines[1:3] == [
        action(f"{mara}\u2019s dog barks at {jonah}."),
        dialog(mara, f"(to {jonah}) Quiet, Jonah."),
    ]
    # Only a group cue speaks here, and its members are masked all the same.
    mara, jonah = road.char_map["mara"], road.char_map["jonah"]
    assert road.lines[1:] == [
        action(f"The truck stalls. {mara} and {jonah} push."),
        dialog(f"{mara} and {jonah}", "(together) Heave!"),
    ]
    assert road.char_counts == {"mara and jonah": 1, "mara": 0, "jonah": 0}
    assert assert_masking_complete(Work.objects.get()) == 4


def _variants(tmp_path: Path) -> dict[str, bytes]:
    """Messy copies of salt_road.txt, as real scrapes come."""
    text = SALT_ROAD.read_text(encoding="utf-8")
    lines = text.split("\n")

    def tabbed(line: str) -> str:
        indent = len(line) - len(line.lstrip(" "))
        return "\t" * (indent // 8) + " " * (indent % 8) + line.lstrip(" ")

    return {
        "crlf": text.replace("\n", "\r\n").encode(),
        "mixed": "".join(
            line + ("\r\n" if i % 3 else "\n") for i, line in enumerate(lines)
        ).encode(),
        "tabs": "\n".join(map(tabbed, lines)).encode(),
    }


def test_line_endings_and_tab_indentation_read_the_same() -> None:
    base = parse_screenplay(SALT_ROAD.read_bytes())
    for name, data in _variants(Path()).items():
        play = parse_screenplay(data)
        assert (play.title, play.scenes) == (base.title, base.scenes), name
    assert parse_screenplay(_variants(Path())["mixed"]).line_endings == {"CRLF": 139, "LF": 70}


def test_mixed_line_endings_import_reports_them(tmp_path: Path) -> None:
    path = tmp_path / "salt_road_mixed.txt"
    path.write_bytes(_variants(tmp_path)["mixed"])

    out, _ = run_import(path)

    assert "mixed line endings: 139 CRLF, 70 LF" in out
    assert Scene.objects.count() == 10


def test_cp1252_bytes_fall_back_and_are_reported(tmp_path: Path) -> None:
    text = SALT_ROAD.read_text(encoding="utf-8").replace(
        "Salt &amp; silence.", "Salt &amp; silence. The caf\u00e9\u2019s shut."
    )
    path = tmp_path / "salt_road_cp1252.txt"
    path.write_bytes(text.encode("cp1252"))

    out, err = run_import(path)

    assert "indented layout, cp1252" in out
    assert "not valid UTF-8, read as cp1252 on 1 line(s): line 28" in err
    assert scene_lines("training-0000")[4]["text"] == (
        "Mara kills the engine. Salt & silence. The caf\u00e9\u2019s shut."
    )


def test_double_encoded_utf8_is_repaired(tmp_path: Path) -> None:
    text = SALT_ROAD.read_text(encoding="utf-8").replace("Dad loved", "Dad lov\u00e9d \u2014")
    path = tmp_path / "salt_road_mojibake.txt"
    path.write_text(text.encode("utf-8").decode("cp1252"), encoding="utf-8")

    _, err = run_import(path)

    assert "mis-decoded characters repaired on 1 line(s)" in err
    truck = scene_lines("training-0004")
    assert dialog("mara", "Dad lov\u00e9d \u2014 a cliche.") in truck


def test_script_without_indentation_is_read_from_blank_lines(tmp_path: Path) -> None:
    flat = "\n".join(line.strip() for line in SALT_ROAD.read_text(encoding="utf-8").split("\n"))
    indented, play = parse_screenplay(SALT_ROAD.read_bytes()), parse_screenplay(flat.encode())

    assert play.layout == "flat"
    assert [s.heading for s in play.scenes] == [s.heading for s in indented.scenes]

    def speakers(p):
        return Counter(i.cue for s in p.scenes for i in s.items if hasattr(i, "cue"))

    assert speakers(play) == speakers(indented)


def test_fountain_forced_elements_notes_boneyard_and_emphasis() -> None:
    out, err = run_import(NIGHT_FERRY)

    assert err == ""
    assert "'The Night Ferry' (title from the script; fountain layout, utf-8): 6 scenes" in out
    assert (
        "dropped: 7 title page, 2 section or synopsis, 1 transition, 1 page break, 1 THE END" in out
    )
    assert list(Scene.objects.values_list("heading", flat=True)) == [
        "QUAYSIDE",  # forced with a leading "."
        "EXT. FERRY DECK - NIGHT",  # the "#2#" scene number dropped
        "int. engine room - night",
        "INT. CAPTAIN'S CABIN - NIGHT",
        "EXT. LIFEBOAT - NIGHT",
        "I/E. HARBOUR MASTER'S HUT - DAWN",
    ]
    assert scene_lines("training-0000") == [
        {"type": "scene", "title": "QUAYSIDE", "text": ""},
        action("McCLANE and Ruby study a tide table under a lamp."),
        dialog("mcclane", "We go at midnight."),
        dialog("ruby", "(whispering) Midnight is when the guards change."),
    ]
    deck = scene_lines("training-0001")
    assert deck[1] == action("SPLASH. A crate goes over the side.")
    assert [line["title"] for line in deck[2:]] == ["otto", "priya", "sam"]  # "^" dropped
    assert (
        scene_lines("training-0002")[2]["text"] == "Row, row, row your boat gently down the stream"
    )
    every = " ".join(line["text"] for s in Scene.objects.all() for line in s.lines)
    assert "never here" not in every and "tide times" not in every and "CUT TO" not in every
    assert Character.objects.get(name="mcclane").aliases == ["MCCLANE"]

    assert assert_masking_complete(Work.objects.get()) == 8
    cabin = Scene.objects.get(source_id="testing-0000")
    mcclane, ruby = cabin.char_map["mcclane"], cabin.char_map["ruby"]
    assert cabin.lines[1:] == [
        action(f"{mcclane} pockets a key. {ruby} watches the door."),
        dialog(mcclane, "The key was under his pillow. Classic."),
        dialog(ruby, f"(to {mcclane}) Classic is what gets us caught."),
        dialog(mcclane, "Then we'll be modern."),
    ]
    lifeboat = Scene.objects.get(source_id="testing-0001")
    assert lifeboat.lines[1]["text"] == (
        f"{lifeboat.char_map['ruby']} rows. {lifeboat.char_map['otto']} bails water. "
        f"{lifeboat.char_map['mcclane']}'s coat is soaked through."
    )
    assert lifeboat.lines[2]["text"] == "Keep bailing, Otto."  # speech keeps its names


def test_title_option_folder_import_and_the_service_default(tmp_path: Path) -> None:
    out, _ = run_import(SALT_ROAD, "--title", "Salt", "--split", "train")
    assert "'Salt' (title from --title;" in out
    assert Work.objects.get().split == "train"

    for fixture in (SALT_ROAD, NIGHT_FERRY):
        (tmp_path / fixture.name).write_bytes(fixture.read_bytes())
    (tmp_path / "notes.md").write_text("not a script")
    run_import(tmp_path)
    assert sorted(Work.objects.values_list("key", "split")) == [
        ("Salt", "train"), ("The Night Ferry", "test"), ("The Salt Road", "test"),
    ]  # fmt: skip

    report = benchmark_import(format_name="screenplay", path=SALT_ROAD)
    assert report.unchanged["Scene"] == 10
    assert "salt_road.txt: 4 test scenes (a masked speaker to guess)" in report.as_dict()["notes"]


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (b"  \r\n\n\t\n", "the file is empty"),
        (
            b"THE LONG WAIT\n\nMARA\nIs it here?\n\nJONAH\nNo.\n",
            "no scene headings (INT. / EXT. / INT./EXT. / I/E lines) found",
        ),
        (b"INT. ROOM - DAY\n\nNobody speaks.\n\nEXT. YARD - DAY\n\nStill nobody.\n",
         "no character cues with dialogue found"),
        (b"INT. ROOM - DAY\n\nMARA\nHi.\x00\x01\x02\n", "record line 4: binary data"),
    ],
)  # fmt: skip
def test_unusable_files_fail_naming_the_file(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "broken.txt"
    path.write_bytes(content)

    with pytest.raises(CommandError) as excinfo:
        run_import(path)

    assert str(excinfo.value).startswith(f"import failed, nothing was written: {path}: ")
    assert message in str(excinfo.value)
    assert not Work.objects.exists()


def test_option_errors(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="file not found"):
        run_import(tmp_path / "missing.txt")
    with pytest.raises(CommandError, match="--title names one movie"):
        run_import(SALT_ROAD, NIGHT_FERRY, "--title", "Both")
    with pytest.raises(CommandError, match="applies to a screenplay import"):
        call_command("import_benchmark", "tom-in-amc", str(tmp_path), "--title", "X")
    with pytest.raises(CommandError, match=r"no \.txt, \.fountain, \.spmd files"):
        run_import(tmp_path)


# -- HTML/JavaScript residue of an IMSDb page above the title page ------------------------

# What a raw IMSDb page leaves above the script: bold tags around an HTML comment that
# hides a frame-busting script.
IMSDB_RESIDUE = (
    b"<b><!--\r\n"
    b"</b>if (window!= top)\r\n"
    b"top.location.href=location.href\r\n"
    b"</b>\r\n"
    b"<b>// -->\r\n"
    b"</b>\r\n"
)


def test_residue_before_the_title_page_is_removed_and_reported(shared_data: Path, tmp_path: Path):
    script = tmp_path / "dead_poets_society.txt"
    script.write_bytes(
        IMSDB_RESIDUE + (shared_data / "screenplays" / "dead_poets_society.txt").read_bytes()
    )

    out, err = run_import(script)

    work = Work.objects.get()
    assert work.title == "Dead Poets Society"  # from the title page, not "<!"
    assert "'Dead Poets Society' (title from the script;" in out
    assert (
        f"{script}: HTML/JavaScript residue before the script removed on 6 line(s): "
        "line 1: '<b><!--'; line 2: '</b>if (window!= top)'; "
        "line 3: 'top.location.href=location.href'; line 4: '</b>'; line 5: '<b>// -->'; "
        "and 1 more"
    ) in err
    # The script itself reads as without the residue (same scenes, lines shifted by 6).
    assert Scene.objects.count() == REAL["dead_poets_society.txt"][1]
    assert "line 1240: 'Keating'" in err  # 1234 in the original


def test_residue_and_no_title_page_takes_the_file_name_and_title_overrides(
    shared_data: Path, tmp_path: Path
):
    original = (shared_data / "screenplays" / "dead_poets_society.txt").read_bytes()
    # Drop the title page line: the script then starts at its first scene heading.
    body = original.replace(b"   Dead Poets Society: Final Script", b"", 1)
    script = tmp_path / "welton_year.txt"
    script.write_bytes(IMSDB_RESIDUE + body)

    out, err = run_import(script)

    assert Work.objects.get().title == "welton year"
    assert "(title from the file name;" in out
    assert "residue before the script removed on 6 line(s)" in err

    out, _ = run_import(script, "--title", "Carpe Diem")
    assert "'Carpe Diem' (title from --title;" in out
    assert set(Work.objects.values_list("title", flat=True)) == {"welton year", "Carpe Diem"}


def test_residue_only_at_the_start_is_taken_for_residue() -> None:
    data = (
        b"<html><head><script>\n<!--\nif (window!= top)\ntop.location.href=location.href\n"
        b"// -->\n</script></head>\n\nTHE QUIET HOUR\n\nINT. KITCHEN - NIGHT\n\n"
        b"Mara reads. The comment <!-- ignore --> stays text.\n\n"
        b"                    MARA\n          Is it late?\n\n"
        b"                    JONAH\n          Very.\n\n"
        b"                    MARA\n          Then stay.\n\n"
        b"                    JONAH\n          I will.\n"
    )

    play = parse_screenplay(data)

    assert play.title == "The Quiet Hour"
    residue = [
        line for line, _ in play.repaired["HTML/JavaScript residue before the script removed"]
    ]
    assert residue == [1, 2, 3, 4, 5, 6]


# -- size limits ------------------------------------------------------------------------


def test_a_script_over_the_size_limit_is_refused_before_parsing(tmp_path: Path, settings) -> None:
    run_import(SALT_ROAD)
    before = snapshot()
    settings.TOMLAB_IMPORT_MAX_BYTES = {**settings.TOMLAB_IMPORT_MAX_BYTES, "screenplay": 2000}
    folder = tmp_path / "scripts"
    folder.mkdir()
    (folder / "a_small.txt").write_bytes(b"INT. ROOM - DAY\n\nMARA\nHi.\n")
    big = folder / "b_big.txt"
    big.write_bytes(SALT_ROAD.read_bytes() + b"\x00")  # binary too: never read

    with pytest.raises(CommandError) as error:
        run_import(folder)

    assert str(error.value) == (
        f"import failed, nothing was written: {big}: file is {big.stat().st_size:,} bytes, "
        "over the 2,000-byte limit for screenplay files "
        "(settings.TOMLAB_IMPORT_MAX_BYTES['screenplay'])"
    )
    assert snapshot() == before


def test_a_scene_over_the_field_limit_is_refused_naming_it(settings) -> None:
    settings.TOMLAB_IMPORT_MAX_FIELD_BYTES = 600

    with pytest.raises(CommandError) as error:
        run_import(SALT_ROAD)

    message = str(error.value)
    assert message.startswith("import failed, nothing was written: salt_road.txt: record Scene (")
    assert "field 'lines'" in message and "over the 600-byte limit per stored field" in message
    assert not Work.objects.exists()


# -- titles ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file_name", "title_page"),
    [
        # The IMSDb Pulp Fiction scrape's shape: quoted title in capitals, then a byline.
        ("dead_poets_society.txt", b'   "DEAD POETS SOCIETY" -- by Tom Schulman\r\n'),
        ("dead_poets_society.txt", b"   DEAD POETS SOCIETY, written by Tom Schulman\r\n"),
        ("star_wars_a_new_hope.txt", b'\t"STAR WARS: A NEW HOPE" -- by George Lucas\n'),
        ("star_wars_a_new_hope.txt", b"STAR WARS: A NEW HOPE - Screenplay by George Lucas\n"),
    ],
)
def test_a_title_page_loses_its_quotes_and_byline(
    shared_data: Path, tmp_path: Path, file_name: str, title_page: bytes
) -> None:
    data = (shared_data / "screenplays" / file_name).read_bytes()
    # Without the IMSDb footer, the title comes from the title page: put ours first.
    footer = data.find(b"Writers :")
    if footer != -1:
        data = data[: data.rfind(b"\n", 0, data.rfind(b"\n", 0, footer))]
    data = re.sub(rb"Dead Poets Society: Final Script", b"", data)
    path = tmp_path / file_name
    path.write_bytes(title_page + b"\n" + data)

    run_import(path)

    assert Work.objects.get().title == REAL[file_name][0]


def test_real_scripts_keep_their_titles_as_the_script_writes_them(shared_data: Path) -> None:
    for path in sorted((shared_data / "screenplays").iterdir()):
        play = parse_screenplay(path.read_bytes(), fountain=path.suffix == ".fountain")
        assert play.title == REAL[path.name][0]
        assert not re.search(r"[\"\u201c\u201d]|\bby\b|--", play.title)
