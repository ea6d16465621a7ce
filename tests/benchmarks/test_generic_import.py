# ruff: noqa: RUF001 (Chinese text: full-width punctuation is meant)
"""The generic importer: any multiple-choice benchmark read through a field mapping.

The whole ToMBench release (../shared/data/tombench) imports from its 20 JSONL files
and from its spreadsheet to the same items. Every option shape and answer shape the
mapping takes gives the same items as the plain one, from files written here. Each bad
input is refused naming its record and field, and leaves the item bank as it was.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from django.core.management import CommandError, call_command

from benchmarks.importers import ImportDataError
from benchmarks.importers.generic import (
    ERRORS_LISTED,
    MappingError,
    RecordErrors,
    mapping_parse,
    options_split,
)
from benchmarks.models import Benchmark, MCItem, Work
from benchmarks.services import benchmark_import

pytestmark = pytest.mark.django_db

# Three items written for these tests: a comma inside an option, two options in one.
ITEMS = [
    {
        "id": "q1",
        "story": "Mia puts her marble in the basket and leaves the room.",
        "question": "Where will Mia look for her marble?",
        "options": ["In the basket", "In the box", "Under the bed"],
        "answer": 0,
        "ability": "False belief",
    },
    {
        "id": "q2",
        "story": "Leo gets a jumper he dislikes from his grandmother.",
        "question": "What does Leo show his grandmother?",
        "options": ["Anger", "Joy, though he is sad", "Fear", "Boredom"],
        "answer": 1,
        "ability": "Hidden emotion",
    },
    {
        "id": "q3",
        "story": "Ana says the rainy day is lovely weather for a picnic.",
        "question": "Does Ana mean what she says?",
        "options": ["Yes", "No"],
        "answer": 1,
        "ability": "Irony",
    },
]
LETTERS = "ABCD"
PLAIN = {
    "id": "id",
    "context": "story",
    "question": "question",
    "options": "choices",
    "answer": "answer",
    "categories": {"ability": "ability"},
}


def jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    return path


def plain_records(answer=lambda item: LETTERS[item["answer"]]) -> list[dict[str, Any]]:
    return [
        {
            "id": item["id"],
            "story": item["story"],
            "question": item["question"],
            "choices": item["options"],
            "answer": answer(item),
            "ability": item["ability"],
        }
        for item in ITEMS
    ]


def run(path: Path, mapping: dict[str, Any] | str, *, name="Mini", version="1") -> Any:
    return benchmark_import(
        format_name="generic", path=path, mapping=mapping, name=name, version=version
    )


def stored(version: str = "1", name: str = "mini") -> list[tuple]:
    """The items of a benchmark as compared across imports: id, texts, answers, categories."""
    return [
        (item.item_id, item.texts, item.answers, item.categories)
        for item in MCItem.objects.filter(work__key=f"{name}@{version}").order_by("item_id")
    ]


@pytest.fixture
def reference(tmp_path) -> list[tuple]:
    """The items as the plain mapping (a list of options, a letter) imports them."""
    run(jsonl(tmp_path / "plain.jsonl", plain_records()), PLAIN, version="ref")
    items = stored("ref")
    assert [i[0] for i in items] == ["q1", "q2", "q3"]
    assert items[1][1]["en"]["options"] == ["Anger", "Joy, though he is sad", "Fear", "Boredom"]
    assert [i[2] for i in items] == [[0], [1], [1]]
    return items


def nothing_written() -> bool:
    return not Work.objects.filter(benchmark=Benchmark.GENERIC).exists() and not (
        MCItem.objects.exists()
    )


# -- the whole ToMBench release ------------------------------------------------------------


def test_tombench_from_its_jsonl_files_and_its_spreadsheet_gives_the_same_items(shared_data):
    """Imports the release twice (3,4 MB of JSONL, 1 MB of XLSX) and once more: ~8 s,
    the price of checking all 2,860 items of both forms of the release."""
    folder = shared_data / "tombench"
    out = io.StringIO()
    for version, path in (("jsonl", folder), ("xlsx", folder / "ToMBench_release_v1_0618.xlsx")):
        call_command(
            "import_benchmark",
            "--format",
            "generic",
            "--mapping",
            "ToMBench",
            "--name",
            "ToMBench",
            "--version",
            version,
            str(path),
            "--no-progress",
            stdout=out,
            stderr=io.StringIO(),
        )
    jsonl_items = stored("jsonl", "tombench")
    xlsx_items = stored("xlsx", "tombench")

    assert len(jsonl_items) == 2860
    assert xlsx_items == jsonl_items
    work = Work.objects.get(key="tombench@jsonl")
    assert work.kind == Work.Kind.ITEM_SET and work.title == "ToMBench"
    assert work.extra["languages"] == ["zh", "en"]
    assert work.extra["category_fields"] == ["ability", "task"]
    bilingual = [i for i in jsonl_items if set(i[1]) == {"zh", "en"}]
    # One item of the release has an English question and options from another story
    # (four options against two in Chinese): it keeps its Chinese text only.
    assert [i[0] for i in jsonl_items if set(i[1]) != {"zh", "en"}] == ["strange-story-task-293"]
    assert len(bilingual) == 2859
    tasks = {i[3]["task"] for i in jsonl_items}
    assert len(tasks) == 20 and "Discrepant Emotions" in tasks
    # Knowledge-Attention Links line 11 writes its answer "A. ".
    odd = MCItem.objects.get(work=work, item_id="knowledge-attention-links-11")
    assert odd.answers == [0]
    assert odd.texts["en"]["options"][0] == 'Xiao Fang says "This is an airplane"'
    assert odd.texts["zh"]["options"][0] == "小芳说“这是飞机”"  # the "A. " label stripped
    # The index (1, 2, 1, 2… per story) stays with the item as metadata.
    assert odd.metadata == {"序号\nINDEX": 1}

    again = io.StringIO()
    call_command(
        "import_benchmark",
        "generic",
        str(folder),
        "--mapping",
        "tombench",
        "--name",
        "ToMBench",
        "--version",
        "jsonl",
        "--no-progress",
        stdout=again,
        stderr=io.StringIO(),
    )
    assert "MCItem: 0 created, 2860 unchanged, 0 updated" in again.getvalue()


# -- option shapes ----------------------------------------------------------------------------


def _columns_csv(tmp_path: Path) -> Path:
    path = tmp_path / "items.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            ["id", "story", "question", *[f"OPTION-{x}" for x in LETTERS], "answer", "ability"]
        )
        for item in ITEMS:
            options = item["options"] + [""] * (4 - len(item["options"]))
            writer.writerow(
                [
                    item["id"],
                    item["story"],
                    item["question"],
                    *options,
                    LETTERS[item["answer"]],
                    item["ability"],
                ]
            )
    return path


def _labelled(tmp_path: Path, write) -> Path:
    records = plain_records()
    for record, item in zip(records, ITEMS, strict=True):
        record["choices"] = write(item["options"])
    return jsonl(tmp_path / "labelled.jsonl", records)


OPTION_SHAPES = {
    "one column per option (empty trailing columns dropped)": (
        _columns_csv,
        {**PLAIN, "options": [f"OPTION-{x}" for x in LETTERS]},
    ),
    "A. x, B. y, C. z": (
        lambda p: _labelled(p, lambda o: ", ".join(f"{LETTERS[i]}. {x}" for i, x in enumerate(o))),
        PLAIN,
    ),
    "(a) x (b) y": (
        lambda p: _labelled(p, lambda o: " ".join(f"({'abcd'[i]}) {x}" for i, x in enumerate(o))),
        PLAIN,
    ),
    "A) x, one per line": (
        lambda p: _labelled(p, lambda o: "\n".join(f"{LETTERS[i]}) {x}" for i, x in enumerate(o))),
        {**PLAIN, "options": {"field": "choices", "shape": "labelled"}},
    ),
    "a list with its own labels": (
        lambda p: _labelled(p, lambda o: [f"{LETTERS[i]}. {x}" for i, x in enumerate(o)]),
        PLAIN,
    ),
}


@pytest.mark.parametrize("shape", list(OPTION_SHAPES))
def test_each_option_shape_gives_the_same_items(tmp_path, reference, shape):
    write, mapping = OPTION_SHAPES[shape]

    run(write(tmp_path), mapping, version="shape")

    assert stored("shape") == reference


def test_a_story_over_the_csv_default_cell_limit_imports_and_leaves_the_limit_alone(tmp_path):
    """csv's cell limit is the process's: the importer raises it for its own read only,
    so an invite CSV read later in the same worker still refuses a 140 kB cell."""
    default = csv.field_size_limit()
    path = _columns_csv(tmp_path)
    rows = list(csv.reader(path.open(encoding="utf-8", newline="")))
    rows[1][1] = "A long story. " * 12_000  # 168 kB, over the default 128 KiB
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)

    run(path, {**PLAIN, "options": [f"OPTION-{x}" for x in LETTERS]}, version="long")

    items = stored("long")
    assert len(items) == len(ITEMS)
    assert items[0][1]["en"]["context"] == rows[1][1].strip()
    assert csv.field_size_limit() == default == 131_072


def test_the_labelled_string_splitter_keeps_commas_and_needs_labels_in_order():
    assert options_split("A. Joy, though sad, B. Fear; C. Calm") == [
        "Joy, though sad",
        "Fear",
        "Calm",
    ]
    assert options_split("（A）甲，（B）乙") == ["甲", "乙"]
    # "C." before "B." is text of option A: labels run in order.
    assert options_split("A. Plan C. is late B. Stay") == ["Plan C. is late", "Stay"]
    assert options_split("Yes or no") is None


# -- answer shapes ----------------------------------------------------------------------------

ANSWER_SHAPES = {
    "letter": (lambda item: LETTERS[item["answer"]], "letter"),
    "letter with a stray label": (lambda item: f"{LETTERS[item['answer']]}. ", "auto"),
    "letter in brackets, lower case": (lambda item: f"({'abcd'[item['answer']]})", "auto"),
    "0-based index": (lambda item: item["answer"], "index0"),
    "1-based index as text": (lambda item: str(item["answer"] + 1), "index1"),
    "the option's text": (lambda item: item["options"][item["answer"]], "auto"),
    "the option's text, other case": (lambda item: item["options"][item["answer"]].upper(), "text"),
    "a list of letters": (lambda item: [LETTERS[item["answer"]]], "auto"),
}


@pytest.mark.parametrize("shape", list(ANSWER_SHAPES))
def test_each_answer_shape_gives_the_same_items(tmp_path, reference, shape):
    write, kind = ANSWER_SHAPES[shape]
    path = jsonl(tmp_path / "a.jsonl", plain_records(answer=write))

    run(path, {**PLAIN, "answer": {"field": "answer", "as": kind}}, version="answer")

    assert stored("answer") == reference


def test_several_correct_options(tmp_path):
    records = plain_records()
    records[1]["answer"] = "B, D"
    records[0]["answer"] = ["In the basket", "Under the bed"]

    run(jsonl(tmp_path / "m.jsonl", records), PLAIN)

    assert [i[2] for i in stored()] == [[0, 2], [1, 3], [1]]


# -- formats ----------------------------------------------------------------------------------


def _xlsx(path: Path, sheets: dict[str, list[list[Any]]]) -> Path:
    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for title, rows in sheets.items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(row)
    workbook.save(path)
    return path


def test_json_tsv_xlsx_folder_and_zip_give_the_same_items(tmp_path, reference):
    records = plain_records()
    (tmp_path / "array.json").write_text(json.dumps(records), encoding="utf-8")
    (tmp_path / "keyed.json").write_text(json.dumps({"meta": 1, "data": records}))
    (tmp_path / "nested.json").write_text(json.dumps({"payload": {"items": records}}))
    header = ["id", "story", "question", "choices", "answer", "ability"]
    tsv = tmp_path / "items.tsv"
    tsv.write_text(
        "\t".join(header)
        + "\n"
        + "".join(
            "\t".join(
                r[h]
                if h != "choices"
                else " ".join(f"({'abcd'[i]}) {x}" for i, x in enumerate(r[h]))
                for h in header
            )
            + "\n"
            for r in records
        ),
        encoding="utf-8-sig",
    )
    # Two sheets with their columns in another order and an empty last column, and a
    # draft sheet the mapping leaves out.
    padded = [dict(r, choices=r["choices"] + [None] * (4 - len(r["choices"]))) for r in records]
    sheets = {
        "First ": [
            ["ability", "answer", "question", "story", "A", "B", "C", "D", "id", None],
            *[
                [r["ability"], r["answer"], r["question"], r["story"], *r["choices"], r["id"]]
                for r in padded[:1]
            ],
        ],
        "Second": [
            ["id", "story", "question", "answer", "ability", "A", "B", "C", "D", None],
            *[
                [r["id"], r["story"], r["question"], r["answer"], r["ability"], *r["choices"]]
                for r in padded[1:]
            ],
        ],
        "OLD draft": [["junk"], ["not an item"]],
    }
    _xlsx(tmp_path / "book.xlsx", sheets)
    columns = {**PLAIN, "options": ["A", "B", "C", "D"], "sheets": {"exclude": ["OLD*"]}}

    run(tmp_path / "array.json", PLAIN, version="array")
    run(tmp_path / "keyed.json", PLAIN, version="keyed")  # found: the one key with a list
    run(tmp_path / "nested.json", {**PLAIN, "records": "payload.items"}, version="nested")
    run(tsv, PLAIN, version="tsv")
    report = run(tmp_path / "book.xlsx", columns, version="xlsx")

    for version in ("array", "keyed", "nested", "tsv", "xlsx"):
        assert stored(version) == reference, version
    assert any("OLD draft" in note for note in report.notes)

    folder = tmp_path / "parts"
    folder.mkdir()
    for item in plain_records():
        jsonl(folder / f"{item['ability']}.jsonl", [item])
    (folder / "README.md").write_text("not data")
    by_file = {**PLAIN, "categories": {"ability": "$file"}}
    run(folder, by_file, version="folder")
    archive = tmp_path / "parts.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.iterdir()):
            zf.write(path, f"release/{path.name}")
    run(archive, by_file, version="zip")

    assert stored("folder") == reference
    assert stored("zip") == reference


def test_sheet_and_file_names_become_the_same_category_whatever_their_case(tmp_path):
    """ "Discrepant emotions " (a sheet) and "Discrepant Emotions.jsonl" (a file)."""
    record = plain_records()[:1]
    jsonl(tmp_path / "Discrepant Emotions.jsonl", record)
    header = list(record[0])
    row = [
        record[0][h]
        if h != "choices"
        else ", ".join(f"{LETTERS[i]}. {x}" for i, x in enumerate(record[0][h]))
        for h in header
    ]
    _xlsx(tmp_path / "book.xlsx", {"Discrepant emotions ": [header, row]})
    mapping = {**PLAIN, "categories": {"task": {"field": "$source", "case": "title"}}}

    run(tmp_path / "Discrepant Emotions.jsonl", mapping, version="file")
    run(tmp_path / "book.xlsx", mapping, version="sheet")

    assert stored("file") == stored("sheet")
    assert stored("file")[0][3] == {"task": "Discrepant Emotions"}


# -- languages, context, ids, metadata ---------------------------------------------------------


BILINGUAL = {
    "id": "id",
    "languages": [
        {"language": "en", "context": "story", "question": "question", "options": ["A", "B"]},
        {
            "language": "zh",
            "context": "故事",
            "question": "问题",
            "options": ["选项A", "选项B", "选项C"],
        },
    ],
    "answer": "answer",
    "categories": {"ability": "ability"},
}


def _bilingual(tmp_path: Path, third_zh: str = "") -> Path:
    return jsonl(
        tmp_path / "bi.jsonl",
        [
            {
                "id": "b1",
                "story": "Ben hides the key.",
                "question": "Where is the key?",
                "A": "Hidden",
                "B": "Lost",
                "故事": "本藏起了钥匙。",
                "问题": "钥匙在哪里？",
                "选项A": "A.藏起来了",
                "选项B": "B.丢了",
                "选项C": third_zh,
                "answer": "A",
                "ability": "Belief",
                "source_note": "written for the test",
            }
        ],
    )


def test_per_language_fields_share_the_answer_and_categories(tmp_path):
    run(_bilingual(tmp_path), BILINGUAL)

    item = MCItem.objects.get()
    assert item.languages == ["en", "zh"] or set(item.languages) == {"en", "zh"}
    assert item.text("zh") == {
        "context": "本藏起了钥匙。",
        "question": "钥匙在哪里？",
        "options": ["藏起来了", "丢了"],
    }
    assert item.text("en")["options"] == ["Hidden", "Lost"]
    assert item.answers == [0] and item.categories == {"ability": "Belief"}
    assert item.metadata == {"source_note": "written for the test"}
    assert item.work.extra["languages"] == ["en", "zh"]


def test_a_language_with_other_options_is_refused_or_dropped(tmp_path):
    path = _bilingual(tmp_path, third_zh="C.不知道")
    with pytest.raises(ImportDataError) as refused:
        run(path, BILINGUAL)
    assert refused.value.record == "line 1" and refused.value.field == "选项A, 选项B, 选项C"
    assert "every language of an item needs the same options" in refused.value.message
    assert nothing_written()

    report = run(path, {**BILINGUAL, "mismatched_languages": "drop"})

    assert MCItem.objects.get().languages == ["en"]
    assert any("kept without zh" in w for w in report.warnings)


def test_context_fields_are_joined_with_their_labels(tmp_path):
    records = plain_records()
    for r in records:
        r["setting"] = "A school"
    mapping = {**PLAIN, "context": ["setting", {"field": "story", "label": "Story"}]}

    run(jsonl(tmp_path / "c.jsonl", records), mapping)

    assert MCItem.objects.get(item_id="q1").text()["context"] == (
        "setting: A school\n\nStory: Mia puts her marble in the basket and leaves the room."
    )


def test_ids_from_a_template_or_a_hash_and_repeats_of_the_same_item(tmp_path):
    records = plain_records()
    path = jsonl(tmp_path / "Task One.jsonl", [*records, records[0]])
    template = {**PLAIN, "id": {"template": "{$file|slug}-{$n}"}}

    report = run(path, {k: v for k, v in PLAIN.items() if k != "id"}, version="hash")
    run(path.with_name("Task One.jsonl"), template, version="template")

    hashed = stored("hash")
    assert len(hashed) == 3 and all(i[0].startswith("h-") for i in hashed)
    assert any("line 4: id 'h-" in w and "kept once" in w for w in report.warnings)
    assert [i[0] for i in stored("template")] == [f"task-one-{n}" for n in (1, 2, 3, 4)]


def test_reimport_changes_nothing_and_a_changed_item_is_updated(tmp_path):
    path = jsonl(tmp_path / "i.jsonl", plain_records())
    first = run(path, PLAIN)
    again = run(path, PLAIN)
    records = plain_records()
    records[2]["question"] = "Does Ana mean it?"
    changed = run(jsonl(path, records), PLAIN)

    assert first.created["MCItem"] == 3 and first.created["Work"] == 1
    assert again.created["MCItem"] == 0 and again.unchanged["MCItem"] == 3
    assert again.updated["MCItem"] == 0 and again.unchanged["Work"] == 1
    assert changed.updated["MCItem"] == 1 and changed.unchanged["MCItem"] == 2
    assert MCItem.objects.get(item_id="q3").text()["question"] == "Does Ana mean it?"


# -- bad input: located, and nothing written ---------------------------------------------------


def _refused(path: Path, mapping: dict[str, Any] = PLAIN) -> ImportDataError:
    with pytest.raises(ImportDataError) as refused:
        run(path, mapping)
    assert nothing_written()
    return refused.value


def test_an_answer_naming_no_option(tmp_path):
    records = plain_records()
    records[2]["answer"] = "C"  # q3 has two options

    error = _refused(jsonl(tmp_path / "x.jsonl", records))

    assert (error.record, error.field) == ("line 3", "answer")
    assert "names no option (the item has 2: A to B)" in error.message
    assert str(error).startswith(f"{tmp_path / 'x.jsonl'}: record line 3: field 'answer'")


def test_an_option_list_of_one(tmp_path):
    records = plain_records()
    records[1]["choices"] = ["Anger"]

    error = _refused(jsonl(tmp_path / "x.jsonl", records))

    assert (error.record, error.field) == ("line 2", "choices")
    assert "1 option: an item needs at least 2" in error.message


def test_a_missing_mapped_field(tmp_path):
    records = plain_records()
    del records[0]["question"]

    error = _refused(jsonl(tmp_path / "x.jsonl", records))

    assert (error.record, error.field) == ("line 1", "question")
    assert "missing" in error.message


def test_duplicate_ids_with_different_content_name_both_records(tmp_path):
    records = plain_records()
    records[2]["id"] = "q1"

    error = _refused(jsonl(tmp_path / "x.jsonl", records))

    assert (error.record, error.field) == ("line 3", "id")
    assert "'q1' is also the id of" in error.message and "record line 1" in error.message


def test_a_digit_when_the_mapping_says_letter_is_ambiguous(tmp_path):
    records = plain_records()
    records[1]["answer"] = "2"

    error = _refused(
        jsonl(tmp_path / "x.jsonl", records),
        {**PLAIN, "answer": {"field": "answer", "as": "letter"}},
    )

    assert (error.record, error.field) == ("line 2", "answer")
    assert "is a number, but the mapping says a letter" in error.message


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, settings):
    """A sparse file: 200 MB long, no byte written (and none read: the check is a stat)."""
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as fh:
        fh.truncate(settings.TOMLAB_IMPORT_MAX_BYTES["generic"] + 1)

    error = _refused(path)

    assert settings.TOMLAB_IMPORT_MAX_BYTES["generic"] == 200 * 1024 * 1024
    assert "over the 209,715,200-byte limit for generic files" in error.message
    assert error.path == str(path)


@pytest.mark.parametrize(
    ("mapping", "key", "message"),
    [
        ('{"question": "q", "options": "o", "answer": "a",}', "", "not JSON"),
        ({**PLAIN, "optoins": "choices"}, "optoins", "unknown key"),
        (
            {**PLAIN, "answer": {"field": "answer", "as": "digit"}},
            "answer.as",
            "'digit' is not one of",
        ),
        ({k: v for k, v in PLAIN.items() if k != "answer"}, "answer", "missing"),
        ({**PLAIN, "options": ["only one"]}, "options", "at least 2"),
        ({**PLAIN, "id": {"template": "{$row}"}}, "id.template", "'$row' is not one of"),
        (
            {
                "languages": [{"language": "english!", "question": "q", "options": "o"}],
                "answer": "a",
            },
            "languages[0].language",
            "not a language code",
        ),
        ({**PLAIN, "languages": []}, "context", "inside each language"),
    ],
)
def test_a_bad_mapping_names_its_key(tmp_path, mapping, key, message):
    with pytest.raises(MappingError) as refused:
        mapping_parse(mapping)

    assert key in refused.value.key and message in refused.value.message
    with pytest.raises(ValueError):
        run(jsonl(tmp_path / "x.jsonl", plain_records()), mapping)
    assert nothing_written()


def test_every_failing_record_is_listed_with_what_the_others_parsed_to(tmp_path):
    records = plain_records() * 2
    records = [dict(r, id=f"{r['id']}-{n}") for n, r in enumerate(records)]
    records[1]["answer"] = "Z"
    records[3]["choices"] = "not labelled"
    records[5].pop("ability")
    path = jsonl(tmp_path / "x.jsonl", records)
    path.write_text(path.read_text() + "{broken\n")

    with pytest.raises(RecordErrors) as refused:
        run(path, PLAIN)

    errors = refused.value.errors
    assert refused.value.total == 4
    assert [(e.record, e.field) for e in errors] == [
        ("line 2", "answer"),
        ("line 4", "choices"),
        ("line 6", "ability"),
        ("line 7", None),
    ]
    details = refused.value.details
    assert [p["title"] for p in details["preview"]] == ["q1-0", "q3-2", "q2-4"]
    assert details["categories"]["ability"] == [
        ["False belief", 1],
        ["Hidden emotion", 1],
        ["Irony", 1],
    ]
    assert details["fields"][0]["fields"][0] == {"name": "id", "mapped": True}
    assert nothing_written()


def test_the_listed_failures_are_capped_and_counted(tmp_path):
    records = [dict(plain_records()[0], id=f"x{n}", answer="Z") for n in range(ERRORS_LISTED + 5)]

    with pytest.raises(RecordErrors) as refused:
        run(jsonl(tmp_path / "x.jsonl", records), PLAIN)

    assert len(refused.value.errors) == ERRORS_LISTED
    assert refused.value.total == ERRORS_LISTED + 5
    assert str(refused.value).endswith(f"(and {ERRORS_LISTED + 4} more failing records)")


# -- the command --------------------------------------------------------------------------------


def test_the_command_takes_a_mapping_file_and_lists_failing_records(tmp_path):
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps(PLAIN))
    records = plain_records()
    path = jsonl(tmp_path / "items.jsonl", records)
    out = io.StringIO()

    call_command(
        "import_benchmark",
        "--format=generic",
        f"--mapping={mapping}",
        "--name=Mini ToM",
        "--version=2.0",
        str(path),
        "--no-progress",
        stdout=out,
    )

    assert Work.objects.get().key == "mini-tom@2.0"
    assert "MCItem: 3 created" in out.getvalue()
    records[0]["answer"] = "Q"
    records[2]["answer"] = "Q"
    err = io.StringIO()
    with pytest.raises(CommandError, match=r"nothing was written: .*record line 1: field 'answer'"):
        call_command(
            "import_benchmark",
            "generic",
            str(jsonl(path, records)),
            f"--mapping={mapping}",
            "--name=Mini ToM",
            "--version=2.1",
            "--no-progress",
            stderr=err,
        )
    assert "record line 3: field 'answer'" in err.getvalue()
    with pytest.raises(CommandError, match="no mapping preset named 'nope'"):
        call_command("import_benchmark", "generic", str(path), "--mapping=nope", "--name=x")
    with pytest.raises(CommandError, match="apply to --format generic"):
        call_command("import_benchmark", "dyntom", str(path), "--name=x")


def test_the_documented_hi_tom_like_example(tmp_path):
    """docs/formats.md's worked example, as written there."""
    (tmp_path / "hitom.json").write_text(
        json.dumps(
            {
                "version": "1",
                "data": [
                    {
                        "sample_id": "ho-0001",
                        "story": "Ava entered the den. Noah entered the den. The apple is in "
                        "the box…",
                        "question": "Where does Noah think Ava thinks the apple is?",
                        "choices": ["box", "basket", "crate", "drawer"],
                        "answer": "box",
                        "question_order": 2,
                        "deception": False,
                        "story_length": 1,
                    }
                ],
            }
        )
    )
    mapping = {
        "_about": "Hi-ToM-like: higher-order beliefs, orders 0-4",
        "records": "data",
        "id": "sample_id",
        "context": "story",
        "question": "question",
        "options": "choices",
        "answer": {"field": "answer", "as": "text"},
        "categories": {"order": "question_order", "length": "story_length"},
    }

    run(tmp_path / "hitom.json", mapping, name="Hi-ToM", version="1.0")

    item = MCItem.objects.get(work__key="hi-tom@1.0")
    assert (item.item_id, item.answers) == ("ho-0001", [0])
    assert item.categories == {"order": "2", "length": "1"}
    assert item.metadata == {"deception": False}


def test_a_background_import_keeps_its_mapping_name_and_version(tmp_path):
    """``import_benchmark --background``: the job holds the options the worker needs."""
    from benchmarks.models import ImportJob
    from benchmarks.services import import_job_run

    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps(PLAIN))
    path = jsonl(tmp_path / "items.jsonl", plain_records())
    out = io.StringIO()
    call_command(
        "import_benchmark",
        "generic",
        str(path),
        f"--mapping={mapping}",
        "--name=Mini",
        "--version=3",
        "--background",
        stdout=out,
    )
    job = ImportJob.objects.get()

    assert import_job_run(job_id=job.pk) == "succeeded"
    assert [i[0] for i in stored("3")] == ["q1", "q2", "q3"]
    assert job.options == {"mapping": PLAIN, "name": "Mini", "version": "3"}
