"""CharToM-QA import/export through the management commands, on the paper's examples."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from benchmarks.models import Character, QAItem, Work

pytestmark = pytest.mark.django_db

GORIOT = "Father Goriot by Honoré de Balzac"
MONTE_CRISTO = "The Count of Monte Cristo by Alexandre Dumas"
MODELS = (Work, Character, QAItem)


@pytest.fixture
def examples(shared_data: Path) -> Path:
    return shared_data / "chartom-qa" / "paper_examples.jsonl"


def source_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_lines(path: Path, records: list[dict[str, Any] | str]) -> Path:
    """Write records as JSONL; a str is written as the raw line (blank or broken)."""
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_import(path: Path, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(
        "import_benchmark", "chartom-qa", str(path), *args, "--no-progress", stdout=out, stderr=err
    )
    return out.getvalue(), err.getvalue()


def export_to(out: Path) -> str:
    stdout = StringIO()
    call_command("export_benchmark", "chartom-qa", str(out), stdout=stdout)
    return stdout.getvalue()


def snapshot() -> dict[str, list[dict]]:
    """Every stored row, timestamps included, so any write shows."""
    return {m.__name__: list(m.objects.order_by("pk").values()) for m in MODELS}


def test_import_paper_examples(examples: Path) -> None:
    out, err = run_import(examples, "--split", "test")

    assert {m.__name__: m.objects.count() for m in MODELS} == {
        "Work": 2,
        "Character": 2,
        "QAItem": 2,
    }
    assert "QAItem: 2 created, 0 unchanged, 0 updated" in out
    goriot = Work.objects.get(benchmark="chartom-qa", key=GORIOT)
    assert (goriot.title, goriot.kind, goriot.split) == (GORIOT, Work.Kind.BOOK, "test")
    vautrin = Character.objects.get(work=goriot)
    assert (vautrin.name, vautrin.is_main, vautrin.position) == ("Vautrin", True, 0)

    item = QAItem.objects.get(work=goriot)
    question = "Why did Vautrin choose to fill Eugène and Father Goriot's glasses first?"
    assert item.question == question
    assert item.character == vautrin
    assert item.position == 0
    assert item.dimension == "intention"
    assert item.context_0.startswith("..... Bring us some liquor, Turk!")
    assert item.context_1000 is None and item.context_2000 is None
    assert item.bonus_points == [
        "Vautrin deliberately tries to please Eugène and Father Goriot.",
        'To ensure that his "business" does not fall through.',
    ]
    assert len(item.misleading_choices) == 3
    assert item.directness is None
    expected_key = hashlib.sha1(f"{GORIOT}\x1fVautrin\x1f{question}".encode()).hexdigest()
    assert item.natural_key == expected_key
    # Reports read the published GPT-4o outcome from here.
    assert item.extra["published_results"]["multichoice_correct"] == 3
    assert item.extra["published_results"]["gpt-4o_multichoice_pick"] == 4
    monte_cristo = QAItem.objects.get(work__key=MONTE_CRISTO)
    assert monte_cristo.dimension == "belief"
    assert monte_cristo.character.name == "The Count of Monte Cristo"
    assert "published_results" in err


def test_unknown_field_is_warned_with_its_line(examples: Path) -> None:
    _, err = run_import(examples)

    assert f"{examples}: record line 1: kept unknown field(s) ['published_results']" in err
    assert f"{examples}: record line 2: kept unknown field(s) ['published_results']" in err


def test_reimport_changes_nothing(examples: Path) -> None:
    run_import(examples)
    before = snapshot()

    out, _ = run_import(examples)

    assert out.count(" 0 created,") == 3
    assert "QAItem: 0 created, 2 unchanged, 0 updated" in out
    assert "Work: 0 created, 2 unchanged, 0 updated" in out
    assert snapshot() == before


def test_export_round_trip(examples: Path, tmp_path: Path) -> None:
    run_import(examples)
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    assert "exported 2 record(s)" in export_to(out_dir)

    exported = out_dir / "chartom_qa.jsonl"
    assert source_records(exported) == source_records(examples)
    # Under the original's name, so the recorded source file is the same too.
    again = tmp_path / examples.name
    again.write_bytes(exported.read_bytes())
    before = snapshot()
    out, _ = run_import(again)
    assert "QAItem: 0 created, 2 unchanged, 0 updated" in out
    assert "Character: 0 created, 2 unchanged, 0 updated" in out
    assert snapshot() == before


def test_release_layout_without_target_character(examples: Path, tmp_path: Path) -> None:
    """The HuggingFace JSONL has no target_character and no published results."""
    records = source_records(examples)
    for record in records:
        del record["target_character"], record["published_results"]
    records[1]["tom_dimension"] = "Belief"  # the dimension is matched case-insensitively
    records[1]["directness"] = "Indirect"
    path = write_lines(tmp_path / "release.jsonl", ["", records[0], "  ", records[1]])

    _, err = run_import(path)

    assert err == ""
    assert Character.objects.count() == 0
    items = list(QAItem.objects.order_by("work__key"))
    assert [i.character for i in items] == [None, None]
    assert [i.dimension for i in items] == ["intention", "belief"]
    assert [i.directness for i in items] == [None, "indirect"]
    assert (
        items[0].natural_key
        == hashlib.sha1(f"{GORIOT}\x1f\x1f{records[0]['question']}".encode()).hexdigest()
    )
    out = tmp_path / "export.jsonl"
    export_to(out)
    records[1]["tom_dimension"] = "belief"
    records[1]["directness"] = "indirect"
    assert source_records(out) == records


def test_positions_follow_line_order_within_a_book(examples: Path, tmp_path: Path) -> None:
    records = source_records(examples)
    second = dict(records[0], question="What does Vautrin want from Eugène?")
    path = write_lines(tmp_path / "three.jsonl", [records[0], records[1], second])

    run_import(path)

    assert list(QAItem.objects.filter(work__key=GORIOT).values_list("position", "question")) == [
        (0, records[0]["question"]),
        (1, second["question"]),
    ]
    assert QAItem.objects.get(work__key=MONTE_CRISTO).position == 0
    assert Character.objects.filter(work__key=GORIOT).count() == 1


def _set(field: str, value: Any) -> Callable[[dict], dict | str]:
    return lambda record: {**record, field: value}


def _drop(field: str) -> Callable[[dict], dict | str]:
    return lambda record: {k: v for k, v in record.items() if k != field}


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (lambda record: json.dumps(record)[:-5], None, "malformed JSON"),
        (lambda record: "[1, 2]", None, "expected a JSON object"),
        (_set("tom_dimension", "curiosity"), "tom_dimension", "'curiosity' is not one of"),
        (_set("misleading_choices", ["a", "b"]), "misleading_choices", "expected 3 choices"),
        (_set("misleading_choices", ["a", "b", 3]), "misleading_choices", "list of strings"),
        (_set("bonus_points", "one point"), "bonus_points", "expected a list of strings"),
        (_drop("question"), "question", "missing"),
        (_set("answer", ""), "answer", "expected a non-empty string"),
        (_set("context_1000", 1000), "context_1000", "expected a string or null"),
        (_set("target_character", None), "target_character", "non-empty string"),
        (_set("directness", "sideways"), "directness", "'sideways' is not one of"),
    ],
    ids=[
        "malformed-line",
        "not-an-object",
        "bad-dimension",
        "two-choices",
        "non-string-choice",
        "bonus-points-not-list",
        "no-question",
        "empty-answer",
        "bad-context",
        "null-target",
        "bad-directness",
    ],
)
def test_bad_line_is_located_and_nothing_is_written(
    examples: Path,
    tmp_path: Path,
    mutate: Callable[[dict], dict | str],
    field: str | None,
    message: str,
) -> None:
    run_import(examples)
    before = snapshot()
    first, second = source_records(examples)
    first["answer"] = "A valid edit ahead of the bad line: it must not be written either."
    # Blank lines count: the bad record is on line 4 of the file.
    broken = write_lines(tmp_path / "broken.jsonl", [first, "", "", mutate(second)])

    with pytest.raises(CommandError) as excinfo:
        run_import(broken)

    text = str(excinfo.value)
    assert f"{broken}: record line 4:" in text
    if field is not None:
        assert f"field {field!r}" in text
    assert message in text
    assert snapshot() == before


def test_duplicate_question_is_refused(examples: Path, tmp_path: Path) -> None:
    first, second = source_records(examples)
    broken = write_lines(tmp_path / "dup.jsonl", [first, second, dict(first, answer="Other.")])

    with pytest.raises(CommandError) as excinfo:
        run_import(broken)

    assert (
        f"{broken}: record line 3: field 'question': same book, character and question as line 1"
        in str(excinfo.value)
    )
    assert QAItem.objects.count() == 0


# -- size limits ------------------------------------------------------------------------


def test_a_record_with_an_oversized_unknown_field_is_refused_with_its_place(
    examples: Path, tmp_path: Path
) -> None:
    run_import(examples)
    before = snapshot()
    records = source_records(examples)
    # Over the default 2 MB per stored field (TOMLAB_IMPORT_MAX_FIELD_BYTES), as the
    # 200 MB field of the report was: it must not reach `extra` and the API.
    records[1]["scraped_page"] = "x" * (3 * 1024 * 1024)
    path = write_lines(tmp_path / "big.jsonl", records)

    with pytest.raises(CommandError) as error:
        run_import(path)

    assert str(error.value) == (
        f"import failed, nothing was written: {path}: record line 2: field 'scraped_page': "
        "value is 3,145,728 bytes, over the 2,097,152-byte limit per stored field "
        "(settings.TOMLAB_IMPORT_MAX_FIELD_BYTES)"
    )
    assert snapshot() == before


def test_an_oversized_known_field_is_refused_too(examples: Path, tmp_path: Path, settings) -> None:
    settings.TOMLAB_IMPORT_MAX_FIELD_BYTES = 1000
    records = source_records(examples)
    records[0]["context_0"] = "é" * 600  # 600 characters, 1,200 bytes in UTF-8
    path = write_lines(tmp_path / "ctx.jsonl", records)

    with pytest.raises(CommandError, match=r"record line 1: field 'context_0': value is 1,200 "):
        run_import(path)

    assert snapshot() == {m.__name__: [] for m in MODELS}


def test_a_file_over_the_size_limit_is_refused_before_parsing(
    examples: Path, tmp_path: Path, settings
) -> None:
    run_import(examples)
    before = snapshot()
    settings.TOMLAB_IMPORT_MAX_BYTES = {**settings.TOMLAB_IMPORT_MAX_BYTES, "chartom-qa": 1000}
    # Broken JSON as well: the size error comes first, so nothing was parsed.
    path = write_lines(tmp_path / "big.jsonl", [*source_records(examples), "{not json"])

    with pytest.raises(CommandError) as error:
        run_import(path)

    size = path.stat().st_size
    assert str(error.value) == (
        f"import failed, nothing was written: {path}: file is {size:,} bytes, over the "
        "1,000-byte limit for chartom-qa files (settings.TOMLAB_IMPORT_MAX_BYTES['chartom-qa'])"
    )
    assert snapshot() == before
