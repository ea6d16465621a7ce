"""Stage 1: reader notes (CSV and JSONL) into note batches, windows and constructions."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.chartom.books import book_text_import
from annotation.chartom.notes_import import NotesImportError, author_hash, note_batch_import
from annotation.models import Construction, NoteBatch, ReaderNote
from benchmarks.books import CUT_PREFIX

pytestmark = pytest.mark.django_db

DATA = Path(__file__).parent / "data"
CSV_SAMPLE = DATA / "sample_notes.csv"
JSONL_SAMPLE = DATA / "sample_notes.jsonl"
HEADER = "book,target_character,underlined_text,context,note\n"
GOOD_ROW = (
    'Father Goriot,Vautrin,"Vautrin filled Eugene\u2019s glass","Vautrin filled Eugene\u2019s '
    'glass and Goriot\u2019s likewise","He flatters them on purpose."\n'
)


@pytest.fixture
def novels(shared_data: Path) -> None:
    for path in sorted((shared_data / "novels").glob("*.txt")):
        book_text_import(path=path)


@pytest.fixture
def backend(db):
    from modeling.models import Backend

    return Backend.objects.create(
        name="notes-test",
        kind=Backend.Kind.OPENAI,
        base_url="http://127.0.0.1:9/v1",
        default_model="m",
    )


def write(tmp_path: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def test_csv_sample_makes_notes_windows_and_queued_constructions(
    novels, backend, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        batch = note_batch_import(path=CSV_SAMPLE, backend=backend, budget_tokens=5000)

    assert (batch.name, batch.source_name, batch.window_tokenizer) == (
        "sample_notes",
        "sample_notes.csv",
        "words",
    )
    assert batch.import_warnings == []
    notes = list(batch.notes.select_related("book").order_by("position"))
    assert [n.position for n in notes] == [1, 2, 3, 4, 5, 6]
    assert [n.book.title for n in notes] == [
        "Father Goriot by Honore de Balzac",
        "Father Goriot by Honore de Balzac",
        "Pride and Prejudice by Jane Austen",
        "Pride and Prejudice by Jane Austen",
        "Madame Bovary by Gustave Flaubert",
        "The Count of Monte Cristo by Alexandre Dumas",
    ]
    vautrin = notes[0]
    # The quoted multi-line note keeps its line break; CRLF rows are read as rows.
    assert "on his side\nbefore he can" in vautrin.note_text
    assert vautrin.context_0.startswith("\u201cHere it is, sir,\u201d")
    for note in notes:
        assert note.book_offset is not None
        assert len(note.context_2000) >= len(note.context_1000)
        # Mrs. Bennet speaks on the book's second page: her windows are the whole start.
        if note.target_character == "Mrs. Bennet":
            assert note.context_1000.startswith("PRIDE AND PREJUDICE")
        else:
            assert note.context_1000.startswith(CUT_PREFIX)
    assert vautrin.context_1000.endswith("poured out a few drops into his own glass")

    assert vautrin.author_hash == author_hash("reader-0042") == notes[3].author_hash
    assert len(vautrin.author_hash) == 64 and notes[1].author_hash == ""
    stored = json.dumps(list(ReaderNote.objects.values()), default=str)
    assert "reader-0042" not in stored and "reader-0007" not in stored

    constructions = Construction.objects.filter(note__batch=batch)
    assert constructions.count() == 24
    assert set(constructions.values_list("stage", "state")) == {("filter", "queued")}
    assert sorted(constructions.filter(note=vautrin).values_list("dimension", flat=True)) == [
        "belief",
        "desire",
        "emotion",
        "intention",
    ]
    assert len(callbacks) == 24  # one queued step per construction, sent on commit


def test_jsonl_with_other_key_spellings(novels) -> None:
    batch = note_batch_import(path=JSONL_SAMPLE, name="jsonl", enqueue=False)
    notes = list(batch.notes.order_by("position"))
    assert [n.target_character for n in notes] == [
        "Vautrin",
        "Rastignac",
        "Mr. Darcy",
        "Mrs. Bennet",
    ]
    assert notes[1].underlined_text == "\u201cHenceforth there is war between us.\u201d"
    assert notes[1].book_offset is not None
    assert notes[0].author_hash == author_hash("reader-0042") and notes[1].author_hash == ""
    assert Construction.objects.filter(note__batch=batch).count() == 16


@pytest.mark.parametrize(
    ("name", "delimiter", "encoding_prefix", "newline"),
    [
        ("semicolon.csv", ";", "\ufeff", "\r\n"),
        ("tabs.tsv", "\t", "", "\n"),
        ("notes.txt", ",", "\ufeff", "\r\n"),
    ],
)
def test_csv_dialects(novels, tmp_path, name, delimiter, encoding_prefix, newline) -> None:
    header = delimiter.join(["Book Name", "Target-Character", "HIGHLIGHT", "Context", "User note"])
    row = delimiter.join(
        [
            "Pride and Prejudice",
            "Mr. Darcy",
            '"She is tolerable, but not handsome enough"',
            '"He said: ""She is tolerable, but not handsome enough""\nto the room."',
            '"Darcy thinks he is\nabove them all."',
        ]
    )
    path = write(tmp_path, name, encoding_prefix + newline.join([header, row, ""]))
    batch = note_batch_import(path=path, enqueue=False)
    note = batch.notes.get()
    assert note.note_text in (
        "Darcy thinks he is\nabove them all.",
        "Darcy thinks he is\r\nabove them all.",
    )
    assert note.context.startswith('He said: "She is tolerable')
    assert note.book_offset is not None


def test_unknown_columns_and_unlocated_text_are_warnings(novels, tmp_path) -> None:
    path = write(
        tmp_path,
        "notes.jsonl",
        json.dumps(
            {
                "book": "madame bovary",
                "character": "Emma",
                "underlined": "a sentence that is not in the novel",
                "context": "somewhere",
                "note": "Emma is bored.",
                "likes": 12,
            }
        )
        + "\n",
    )
    batch = note_batch_import(path=path, enqueue=False)
    assert any("unknown column 'likes'" in w for w in batch.import_warnings)
    assert any(
        "not found in the book" in w and "no 1k/2k windows" in w for w in batch.import_warnings
    )
    note = batch.notes.get()
    assert (note.book_offset, note.context_1000, note.context_2000) == (None, None, None)
    assert note.context_0 == "somewhere"


def _jsonl(record: dict) -> str:
    return json.dumps(record) + "\n"


VALID = {
    "book": "Father Goriot",
    "target_character": "Vautrin",
    "underlined_text": "Vautrin filled",
    "context": "Vautrin filled the glasses.",
    "note": "He flatters them.",
}


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "missing.jsonl",
            _jsonl(VALID) + _jsonl({k: v for k, v in VALID.items() if k != "note"}),
            "record line 2: field 'note_text': missing",
        ),
        (
            "empty.jsonl",
            _jsonl({**VALID, "underlined_text": "  "}),
            "record line 1: field 'underlined_text': empty",
        ),
        (
            "book.jsonl",
            _jsonl(VALID) + "\n" + _jsonl({**VALID, "book": "Les Misérables"}),
            "record line 3: field 'book': no imported book titled 'Les Misérables'",
        ),
        ("broken.jsonl", _jsonl(VALID) + "{not json\n", "record line 2: malformed JSON"),
        ("list.jsonl", "[1, 2]\n", "record line 1: expected a JSON object, got list"),
        (
            "type.jsonl",
            _jsonl({**VALID, "context": ["a"]}),
            "record line 1: field 'context': expected text, got list",
        ),
        (
            "twice.jsonl",
            _jsonl({**VALID, "character": "Goriot"}),
            "record line 1: field 'character': both 'target_character' and 'character'",
        ),
        ("cells.csv", HEADER + GOOD_ROW + "a,b,c,d,e,f\n", "record row 2 (line 3): 6 cells"),
        (
            "nocolumn.csv",
            "book,character,underlined,note\nFather Goriot,Vautrin,x,y\n",
            "record row 1 (line 2): field 'context': missing",
        ),
        ("blank.csv", HEADER, "no notes in the file"),
    ],
)
def test_bad_input_is_located_and_nothing_is_written(novels, tmp_path, name, text, message) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(NotesImportError) as caught:
        note_batch_import(path=path, enqueue=False)
    assert str(caught.value).startswith(str(path))
    assert message in str(caught.value)
    assert not NoteBatch.objects.exists() and not ReaderNote.objects.exists()


def test_size_limits(novels, tmp_path, settings) -> None:
    settings.TOMLAB_IMPORT_MAX_FIELD_BYTES = 100
    path = write(tmp_path, "big.jsonl", _jsonl({**VALID, "note": "x" * 200}))
    with pytest.raises(NotesImportError, match="record line 1: field 'note': value is 200 bytes"):
        note_batch_import(path=path, enqueue=False)
    settings.TOMLAB_IMPORT_MAX_BYTES = {**settings.TOMLAB_IMPORT_MAX_BYTES, "chartom-notes": 10}
    with pytest.raises(NotesImportError, match="over the 10-byte limit"):
        note_batch_import(path=path, enqueue=False)


def test_unreadable_files(tmp_path) -> None:
    with pytest.raises(NotesImportError, match="file not found"):
        note_batch_import(path=tmp_path / "none.csv", enqueue=False)
    path = write(tmp_path, "latin.csv", HEADER + "caf\xe9\n", encoding="latin-1")
    with pytest.raises(NotesImportError, match="not UTF-8"):
        note_batch_import(path=path, enqueue=False)


def test_queueing_needs_a_backend(novels) -> None:
    with pytest.raises(NotesImportError, match="backend is needed"):
        note_batch_import(path=CSV_SAMPLE)


def test_a_title_prefix_shared_by_two_books_is_refused(novels, tmp_path) -> None:
    other = write(
        tmp_path,
        "other.txt",
        "Title: Father Goriot\nAuthor: Someone Else\n"
        "*** START OF THE PROJECT GUTENBERG EBOOK X ***\nText.\n",
    )
    book_text_import(path=other)
    path = write(tmp_path, "n.jsonl", _jsonl(VALID))
    with pytest.raises(NotesImportError, match="no imported book titled 'Father Goriot'"):
        note_batch_import(path=path, enqueue=False)


def test_import_notes_command(novels, backend) -> None:
    out, err = StringIO(), StringIO()
    call_command(
        "chartom_import_notes",
        str(CSV_SAMPLE),
        "--backend",
        "notes-test",
        "--name",
        "sample",
        "--params",
        '{"temperature": 0.7}',
        stdout=out,
        stderr=err,
    )
    assert "'sample': 6 note(s), 24 construction(s), plot windows for 6 (words tokens)" in (
        out.getvalue()
    )
    batch = NoteBatch.objects.get()
    assert (batch.backend, batch.params) == (backend, {"temperature": 0.7})

    with pytest.raises(CommandError, match="--backend is required"):
        call_command("chartom_import_notes", str(CSV_SAMPLE))
    with pytest.raises(CommandError, match="no backend named 'nope'"):
        call_command("chartom_import_notes", str(CSV_SAMPLE), "--backend", "nope")
    with pytest.raises(CommandError, match=r"nothing was written: .*none\.csv: file not found"):
        call_command("chartom_import_notes", "none.csv", "--no-enqueue")
    assert NoteBatch.objects.count() == 1


def test_demo_loads_once_without_queueing(shared_data, django_capture_on_commit_callbacks) -> None:
    from annotation.chartom.demo import DEMO_BATCH, chartom_demo_load

    with django_capture_on_commit_callbacks() as callbacks:
        batch = chartom_demo_load(shared_data)
    assert batch.name == DEMO_BATCH and batch.backend is None
    assert batch.import_warnings == []
    assert batch.notes.filter(book_offset__isnull=False).count() == 3
    assert Construction.objects.filter(note__batch=batch).count() == 12
    assert callbacks == []
    assert chartom_demo_load(shared_data).pk == batch.pk
    assert NoteBatch.objects.count() == 1
