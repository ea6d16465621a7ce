"""TVShowGuess import/export on the real friends.raw + friends.tsv, and on broken copies."""

from __future__ import annotations

import ast
import csv
import shutil
from collections import Counter
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmarks.models import Character, Scene, SpeakerAnnotation, SpeakerInstance, Work
from benchmarks.services import benchmark_import

pytestmark = pytest.mark.django_db

MODELS = (Work, Character, Scene, SpeakerInstance, SpeakerAnnotation)
FRIENDS = ["phoebe", "rachel", "chandler", "monica", "ross", "joey"]


@pytest.fixture
def raw_path(shared_data: Path) -> Path:
    return shared_data / "tvshowguess" / "friends.raw"


def _import(path: Path) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(
        "import_benchmark", "tvshowguess", str(path), "--split", "test", "--no-progress",
        stdout=out, stderr=err,
    )  # fmt: skip
    return out.getvalue(), err.getvalue()


def _snapshot() -> dict[str, list[tuple]]:
    """Every row of the item bank with its last write time: equal means untouched."""
    return {m.__name__: sorted(m.objects.values_list("pk", "updated_at")) for m in MODELS}


def _raw_rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _tsv_rows(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


def test_import_counts_instances_and_annotations(raw_path):
    progress: list[int] = []

    report = benchmark_import(
        format_name="tvshowguess", path=raw_path, split="test", progress=progress.append
    )

    work = Work.objects.get()
    assert (work.benchmark, work.key, work.title, work.kind, work.split) == (
        "tvshowguess", "friends", "Friends", "tv_show", "test",
    )  # fmt: skip
    assert work.licence_note.startswith("MIT License. Copyright (c) 2022 YisiSang")
    assert list(work.characters.values_list("name", "position", "is_main")) == [
        (name, i, True) for i, name in enumerate(FRIENDS)
    ]
    assert Scene.objects.count() == 53
    assert set(Scene.objects.values_list("part", flat=True)) == {"testing"}
    assert sum(progress) == 53
    assert SpeakerInstance.objects.count() == 149
    sizes = Counter(len(s.extra["answer_order"]) for s in Scene.objects.all())
    assert sizes == {2: 31, 3: 10, 4: 6, 5: 3, 6: 3}
    assert Counter(len(i.candidates) for i in SpeakerInstance.objects.all()) == {
        2: 62, 3: 30, 4: 24, 5: 15, 6: 18,
    }  # fmt: skip
    annotations = SpeakerAnnotation.objects.select_related("instance__scene")
    assert annotations.count() == 151
    linked = [a for a in annotations if a.instance_id]
    assert len(linked) == 149
    assert all(
        (a.instance.scene.source_id, a.instance.code) == (a.scene_source_id, a.code) for a in linked
    )
    assert sorted(
        annotations.filter(instance=None).values_list("scene_source_id", "code", "row_number")
    ) == [("09x05 2562", "P0", 150), ("09x05 2562", "P1", 151)]
    assert any("'09x05 2562' is not in friends.raw" in w for w in report.warnings)


def test_first_scene_lines_instances_and_annotation(raw_path):
    benchmark_import(format_name="tvshowguess", path=raw_path, split="test")

    scene = Scene.objects.get(source_id="09x01 2500")
    assert (scene.position, scene.episode) == (0, "09x01")
    assert scene.heading.startswith("[Scene: Rachel's Room, Joey moves Ross's coat")
    assert scene.heading.endswith("sees that it's an engagement ring.]")
    assert scene.lines[:4] == [
        {"type": "dialog", "title": "P0", "text": "Joey."},
        {
            "type": "scene",
            "title": "NULL",
            "text": "(He turns to face Rachel on one knee with the box open.)",
        },
        {"type": "dialog", "title": "P0", "text": "(seeing the ring) Oh my God. (Pause) Okay."},
        {"type": "scene", "title": "NULL", "text": "(Joey is stunned.)"},
    ]
    assert scene.lines[-1] == {"type": "scene", "title": "NULL", "text": "Opening Credits"}
    assert scene.participants == ["P0", "P1", "P2", "P3", "mr. geller", "P4", "P5"]
    assert scene.char_map == {
        "rachel": "P0", "joey": "P1", "ross": "P2", "monica": "P3", "chandler": "P4",
        "phoebe": "P5",
    }  # fmt: skip
    assert scene.char_counts["mr. geller"] == 3
    assert scene.source_text.startswith("09x01 2500\r['phoebe', 'rachel', 'chandler'")
    p0 = scene.instances.select_related("gold_character").get(code="P0")
    assert p0.gold_character.name == "rachel"
    assert p0.candidates == FRIENDS
    annotation = p0.annotations.get()
    assert (annotation.row_number, annotation.need_history, annotation.facts_from_memory) == (
        1, "no", "no",
    )  # fmt: skip
    assert annotation.evidence_groups == [
        {"evidence": ["inside_scene(background)", "", ""], "reasoning": ""},
        {"evidence": ["", "", ""], "reasoning": ""},
        {"evidence": ["", "", ""], "reasoning": ""},
    ]
    assert annotation.raw[:5] == ["09x01 2500", "no", "no", "P0", ""]
    assert len(annotation.raw) == 17


def test_scene_parts_split_on_carriage_returns(raw_path):
    benchmark_import(format_name="tvshowguess", path=raw_path, split="test")

    scene = Scene.objects.get(extra__no="28")
    assert scene.source_id == "09x03 2531"
    assert scene.source_text.startswith("09x03 2531\r['phoebe', 'joey']\r [SCENE: Restaurant]\r")
    assert scene.heading == "[SCENE: Restaurant]"
    assert scene.lines[0] == {
        "type": "dialog",
        "title": "mike",
        "text": "I gotta tell you, I can't believe I'm doing this with you. Although I did "
        "just get out of a nine-year relationship, so I guess I should be open and taking "
        "some risks.",
    }
    assert scene.lines[1]["title"] == "P0"
    assert scene.lines[1]["text"].startswith("Everything is gonna be fine.")
    assert len(scene.lines) == 21
    assert not any("\r" in line["text"] or "\r" in line["title"] for line in scene.lines)
    assert scene.participants == ["mike", "P0", "everyone", "P1", "mary ellen"]
    assert dict(scene.instances.values_list("code", "gold_character__name")) == {
        "P0": "joey",
        "P1": "phoebe",
    }


def test_reimport_through_the_command_changes_nothing(raw_path):
    first, _ = _import(raw_path)
    before = _snapshot()

    second, warnings = _import(raw_path)

    assert " 53 created" in first
    summary = [line for line in second.splitlines() if line.startswith("  ")]
    assert len(summary) == len(MODELS)
    assert all(" 0 created" in line and " 0 updated" in line for line in summary)
    assert "scene '09x05 2562' is not in friends.raw" in warnings
    assert _snapshot() == before


def test_export_round_trips_the_release_files(raw_path, tmp_path):
    _import(raw_path)
    out = StringIO()

    call_command("export_benchmark", "tvshowguess", str(tmp_path), stdout=out)

    assert "exported 53 record(s)" in out.getvalue()
    original, exported = _raw_rows(raw_path), _raw_rows(tmp_path / "friends.raw")
    assert exported[0] == original[0] == ["No.", "Scene", "Answer"]
    assert [(r[0], r[1]) for r in exported] == [(r[0], r[1]) for r in original]
    assert [ast.literal_eval(r[2]) for r in exported[1:]] == [
        ast.literal_eval(r[2]) for r in original[1:]
    ]
    # Same dialect, quoting and code order, so the files are equal byte for byte.
    assert (tmp_path / "friends.raw").read_bytes() == raw_path.read_bytes()
    assert _tsv_rows(tmp_path / "friends.tsv") == _tsv_rows(raw_path.with_suffix(".tsv"))
    assert (tmp_path / "friends.tsv").read_bytes() == raw_path.with_suffix(".tsv").read_bytes()
    before = _snapshot()

    again, _ = _import(tmp_path / "friends.raw")

    summary = [line for line in again.splitlines() if line.startswith("  ")]
    assert all(" 0 created" in line and " 0 updated" in line for line in summary)
    assert _snapshot() == before


def _set_answer(no: str, answer: str) -> Callable[[list[list[str]]], None]:
    def edit(rows: list[list[str]]) -> None:
        next(r for r in rows if r[0] == no)[2] = answer

    return edit


def _rename_scene(no: str, old: str, new: str) -> Callable[[list[list[str]]], None]:
    def edit(rows: list[list[str]]) -> None:
        row = next(r for r in rows if r[0] == no)
        row[1] = row[1].replace(old, new, 1)

    return edit


def _flatten_scene(no: str) -> Callable[[list[list[str]]], None]:
    def edit(rows: list[list[str]]) -> None:
        row = next(r for r in rows if r[0] == no)
        row[1] = row[1].replace("\r", "")

    return edit


def _drop_tsv_cell(rows: list[list[str]]) -> None:
    del rows[3][8:]


def _tsv_code(rows: list[list[str]]) -> None:
    rows[1][3] = "P9"


BROKEN_RAW = {
    "gold not a candidate": (
        _set_answer("53", "{'P0': 'rachel', 'P1': 'gunther'}"),
        ["record No. 53 (line 54)", "field 'Answer'", "'gunther'", "not in the candidate list"],
    ),
    "duplicate scene id": (
        _rename_scene("2", "09x01 2501", "09x01 2500"),
        ["record No. 2 (line 3)", "field 'Scene'", "'09x01 2500'", "No. 1 (line 2)"],
    ),
    "malformed answer": (
        _set_answer("10", "{'P0': 'ross', 'P1': 'rachel', 'P2': 'joey'"),
        ["record No. 10 (line 11)", "field 'Answer'", "cannot parse"],
    ),
    "answer code never speaks": (
        _set_answer("5", "{'P0': 'joey', 'P3': 'rachel'}"),
        ["record No. 5 (line 6)", "field 'Answer'", "['P3'] never speak"],
    ),
    # What a viewer that drops "\r" shows: speakers can no longer be told from text.
    "scene without line breaks": (
        _flatten_scene("3"),
        ["record No. 3 (line 4)", "field 'Scene'", "no line breaks"],
    ),
}
BROKEN_TSV = {
    "tsv row with a cell missing": (
        _drop_tsv_cell,
        ["record row 3 (line 4)", "field 'columns'", "has 8 columns; expected at least 9"],
    ),
    "tsv code not in the scene": (
        _tsv_code,
        ["record row 1 (line 2)", "field 'Character Code'", "'P9' is not a mask code"],
    ),
}


@pytest.mark.parametrize(
    ("kind", "edit", "expected"),
    [("raw", *v) for v in BROKEN_RAW.values()] + [("tsv", *v) for v in BROKEN_TSV.values()],
    ids=[*BROKEN_RAW, *BROKEN_TSV],
)
def test_broken_copy_is_refused_and_nothing_changes(raw_path, tmp_path, kind, edit, expected):
    _import(raw_path)
    before = _snapshot()
    broken = tmp_path / "friends.raw"
    shutil.copy(raw_path, broken)
    shutil.copy(raw_path.with_suffix(".tsv"), broken.with_suffix(".tsv"))
    if kind == "raw":
        rows = _raw_rows(broken)
        edit(rows)
        with broken.open("w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(rows)
    else:
        rows = _tsv_rows(broken.with_suffix(".tsv"))
        edit(rows)
        broken.with_suffix(".tsv").write_text("".join("\t".join(r) + "\n" for r in rows))

    with pytest.raises(CommandError) as error:
        _import(broken)

    message = str(error.value)
    assert message.startswith(
        f"import failed, nothing was written: {broken.with_suffix('.' + kind)}: "
    )
    for fragment in expected:
        assert fragment in message
    assert _snapshot() == before
    assert (Scene.objects.count(), SpeakerInstance.objects.count()) == (53, 149)
    assert SpeakerAnnotation.objects.count() == 151


def test_missing_file_is_refused_and_nothing_changes(raw_path, tmp_path):
    _import(raw_path)
    before = _snapshot()
    missing = tmp_path / "friends.raw"

    with pytest.raises(CommandError) as error:
        _import(missing)

    assert str(error.value) == f"import failed, nothing was written: {missing}: file not found"
    assert _snapshot() == before


# -- a sheet in the shape of the release's tbbt.tsv (written in tests/benchmarks/tbbt_sheet.py)


def test_tbbt_shaped_sheet_is_read_by_position_with_its_qualifiers(tmp_path):
    from tests.benchmarks.tbbt_sheet import ROWS, write_tbbt

    raw = write_tbbt(tmp_path)

    report = benchmark_import(format_name="tvshowguess", path=raw)

    work = Work.objects.get(key="tbbt")
    assert work.title == "The Big Bang Theory"
    rows = list(SpeakerAnnotation.objects.filter(work=work).order_by("row_number"))
    assert len(rows) == 6 and all(r.instance_id for r in rows)
    penny = rows[1]
    assert (penny.guessed_name, penny.guess_qualifiers) == ("penny", ["abductive"])
    assert penny.instance.gold_character.name == "penny"
    assert rows[0].guess_qualifiers == []
    assert rows[3].need_history == "Unsolvable"
    # One evidence group (columns 5-8); the trailing space of the scene id is not kept.
    assert rows[5].evidence_groups == [
        {"evidence": ["history event", "fact(status)", ""], "reasoning": "multihop-character"}
    ]
    assert rows[5].scene_source_id == "08x01 102" and rows[5].raw == ROWS[5]
    # Its header words are known ones: nothing to warn about.
    assert report.warnings == []


def test_unexpected_header_words_warn_and_later_columns_are_ignored(tmp_path):
    from tests.benchmarks.tbbt_sheet import HEADER, ROWS, write_tbbt

    header = [*HEADER]
    header[1] = "history needed?"
    later = ["Comment", "Annotator", "Date", "Checked"]  # four: the size of a block
    raw = write_tbbt(tmp_path, header=[*header, *later])
    tsv = raw.with_suffix(".tsv")
    lines = tsv.read_text().splitlines()
    tsv.write_text(
        "\n".join([lines[0], *(f"{ln}\tlooks right\tA\t2022\tyes" for ln in lines[1:])]) + "\n"
    )

    report = benchmark_import(format_name="tvshowguess", path=raw)

    assert report.warnings == [
        f"{tsv}: line 1: column 2 is headed 'history needed?'; read by position as "
        "need history / need history event",
        *(
            f"{tsv}: line 1: column {10 + i} is headed {name!r}; kept, but not read by the "
            "analysis (as the authors' script)"
            for i, name in enumerate(later)
        ),
    ]
    rows = list(SpeakerAnnotation.objects.order_by("row_number"))
    assert [r.need_history for r in rows] == [r[1] for r in ROWS]
    # Columns 10-13 are no evidence group: only the raw row keeps them.
    assert all(len(r.evidence_groups) == 1 and len(r.raw) == 13 for r in rows)


def test_tbbt_shaped_sheet_exports_as_it_was_read(tmp_path):
    from tests.benchmarks.tbbt_sheet import write_tbbt

    source = tmp_path / "in"
    source.mkdir()
    raw = write_tbbt(source)
    _import(raw)

    call_command("export_benchmark", "tvshowguess", str(tmp_path / "out"), stdout=StringIO())

    exported = tmp_path / "out" / "tbbt.tsv"
    assert exported.read_bytes() == raw.with_suffix(".tsv").read_bytes()


@pytest.mark.parametrize("limit", ["tvshowguess-raw", "tvshowguess-sheet"])
def test_files_over_the_size_limit_are_refused_before_parsing(raw_path, tmp_path, settings, limit):
    _import(raw_path)
    before = _snapshot()
    settings.TOMLAB_IMPORT_MAX_BYTES = {**settings.TOMLAB_IMPORT_MAX_BYTES, limit: 5000}
    copy = tmp_path / "friends.raw"
    shutil.copy(raw_path, copy)
    shutil.copy(raw_path.with_suffix(".tsv"), copy.with_suffix(".tsv"))
    over = copy if limit == "tvshowguess-raw" else copy.with_suffix(".tsv")

    with pytest.raises(CommandError) as error:
        _import(copy)

    assert str(error.value) == (
        f"import failed, nothing was written: {over}: file is {over.stat().st_size:,} bytes, "
        f"over the 5,000-byte limit for {limit} files "
        f"(settings.TOMLAB_IMPORT_MAX_BYTES[{limit!r}])"
    )
    assert _snapshot() == before
