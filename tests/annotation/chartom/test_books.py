"""Book import (Project Gutenberg texts) and the plot windows cut around notes."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.chartom.books import BookImportError, book_text_import
from annotation.models import BookText
from benchmarks.books import (
    CUT_PREFIX,
    WordTokenizer,
    gutenberg_strip,
    plot_tokenizer,
    plot_windows,
    text_tail,
    underlined_locate,
)

pytestmark = pytest.mark.django_db

# file -> (title found, first words of the story, last words of the story)
NOVELS = {
    "father_goriot_pg1237.txt": (
        "Father Goriot by Honore de Balzac",
        "FATHER GORIOT",
        "The Unconscious Humorists",
    ),
    "pride_and_prejudice_pg1342.txt": (
        "Pride and Prejudice by Jane Austen",
        "PRIDE AND PREJUDICE",
        "had been the means of uniting them.",
    ),
    "count_of_monte_cristo_pg1184.txt": (
        "The Count of Monte Cristo by Alexandre Dumas",
        "THE COUNT OF MONTE CRISTO",
        "The miser in Molière\u2019s comedy of _L\u2019Avare_.—Ed.",
    ),
    "madame_bovary_pg2413.txt": (
        "Madame Bovary by Gustave Flaubert",
        "Madame Bovary",
        "He has just received the cross of the Legion of Honour.",
    ),
}
LICENCE_WORDS = re.compile(
    r"Project Gutenberg|START OF TH|END OF TH|Produced by|www\.gutenberg|\ufeff|\r"
)


@pytest.fixture
def novels(shared_data: Path) -> Path:
    return shared_data / "novels"


@pytest.mark.parametrize("name", sorted(NOVELS))
def test_real_novels_are_stripped_and_titled(novels: Path, name: str) -> None:
    title, first, last = NOVELS[name]
    book = book_text_import(path=novels / name)

    assert book.title == title
    assert book.text.startswith(first)
    assert book.text.endswith(last)
    assert not LICENCE_WORDS.search(book.text)
    assert book.source_name == name
    has_markers = name in ("father_goriot_pg1237.txt", "pride_and_prejudice_pg1342.txt")
    assert bool(book.import_warnings) is not has_markers

    # Same text again: the same row, nothing changed.
    again = book_text_import(path=novels / name)
    assert again.pk == book.pk and BookText.objects.count() == 1


def test_father_goriot_bom_and_crlf_are_undone(novels: Path) -> None:
    raw = (novels / "father_goriot_pg1237.txt").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw
    book = book_text_import(path=novels / "father_goriot_pg1237.txt", title="Father Goriot")
    assert book.title == "Father Goriot"
    assert "\r" not in book.text and "Vautrin filled Eugene\u2019s glass" in book.text


def test_marker_variants_and_explicit_title(tmp_path: Path) -> None:
    path = tmp_path / "old.txt"
    path.write_text(
        "Some header\nTitle: A Tale\n\n***START OF THE PROJECT GUTENBERG EBOOK A TALE***\n"
        "Prepared by someone\n\nOnce upon a time.\n\nThe end.\n"
        "End of Project Gutenberg's A Tale\n*** END OF THE PROJECT GUTENBERG EBOOK A TALE ***\n"
        "licence text\n",
        encoding="utf-8",
    )
    book = book_text_import(path=path)
    assert (book.title, book.text) == ("A Tale", "Once upon a time.\n\nThe end.")


def test_a_closing_line_without_end_marker_cuts_the_licence(tmp_path: Path) -> None:
    path = tmp_path / "closing.txt"
    path.write_text(
        "*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nThe story.\n\n"
        "End of the Project Gutenberg EBook of X\n" + "licence text\n" * 500,
        encoding="utf-8",
    )
    book = book_text_import(path=path, title="X")
    assert book.text == "The story."
    assert book.import_warnings == ["only the Project Gutenberg start marker"]


def test_a_different_text_under_a_known_title_needs_replace(tmp_path: Path) -> None:
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("Title: Same\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nOne.\n")
    second.write_text("Title: Same\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nTwo.\n")
    book = book_text_import(path=first)
    with pytest.raises(BookImportError, match=r"b\.txt: a different text is already imported"):
        book_text_import(path=second)
    assert BookText.objects.get().text == "One."
    replaced = book_text_import(path=second, replace=True)
    assert (replaced.pk, replaced.text, replaced.source_name) == (book.pk, "Two.", "b.txt")


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(BookImportError, match=r"missing\.txt: cannot read file"):
        book_text_import(path=tmp_path / "missing.txt")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Title: X\n\ncaf\xe9".encode("latin-1"))
    with pytest.raises(BookImportError, match=r"latin1\.txt: not UTF-8"):
        book_text_import(path=latin1)


def test_import_books_command(novels: Path) -> None:
    out = StringIO()
    call_command(
        "chartom_import_books",
        str(novels / "pride_and_prejudice_pg1342.txt"),
        str(novels / "madame_bovary_pg2413.txt"),
        stdout=out,
        stderr=StringIO(),
    )
    assert "2 book(s) imported" in out.getvalue()
    assert "Pride and Prejudice by Jane Austen" in out.getvalue()
    with pytest.raises(CommandError, match="--title"):
        call_command(
            "chartom_import_books",
            str(novels / "pride_and_prejudice_pg1342.txt"),
            str(novels / "madame_bovary_pg2413.txt"),
            "--title",
            "Both",
        )
    with pytest.raises(CommandError, match=r"nope\.txt"):
        call_command("chartom_import_books", str(novels / "nope.txt"))


# --- windows -----------------------------------------------------------------------------


def test_windows_on_a_real_novel(novels: Path) -> None:
    text = gutenberg_strip((novels / "father_goriot_pg1237.txt").read_text("utf-8-sig")).text
    underlined = "then he\ndeliberately poured out a few drops into his own glass"
    # The note's copy has other quotes, spaces and an accent the PG text lacks.
    windows = plot_windows(
        text,
        "Vautrin filled Eugène's glass and Goriot's likewise, then he deliberately poured",
        "context as given",
    )
    end = text.index(underlined) + len("then he\ndeliberately poured")
    assert windows["book_offset"] == end
    assert windows["context_0"] == "context as given"
    tokens = WordTokenizer()
    for size in (1000, 2000):
        window = windows[f"context_{size}"]
        assert window.startswith(CUT_PREFIX)
        assert window.endswith("likewise, then he\ndeliberately poured")
        assert text[:end].endswith(window[len(CUT_PREFIX) :])
        assert len(tokens.spans(window[len(CUT_PREFIX) :])) == size


def test_windows_near_the_start_are_not_cut() -> None:
    text = "Short book. Anna smiled at Karl."
    windows = plot_windows(text, "Anna smiled", "")
    assert windows["context_1000"] == "Short book. Anna smiled"
    assert windows["book_offset"] == len("Short book. Anna smiled")


def test_unlocated_text_gives_no_windows_and_a_warning() -> None:
    windows = plot_windows("Nothing here.", "a sentence from another book", "ctx")
    assert windows["context_1000"] is None and windows["context_2000"] is None
    assert windows["book_offset"] is None
    assert "not found" in windows["warnings"][0]


def test_a_repeated_fragment_is_placed_by_the_context() -> None:
    text = "he said yes. Later, at the ball, he said yes. Then he left."
    offset, warnings = underlined_locate(text, "he said yes", "at the ball, he said yes")
    assert offset == text.index("Then") - 2 and not warnings
    offset, warnings = underlined_locate(text, "he said yes", "")
    assert offset == len("he said yes") and "occurs 2 times" in warnings[0]


UNICODE_TEXT = (
    "Cafe\u0301 au lait 😀 for Zoë. 👩\u200d👩\u200d👧 The family of Rene\u0301e waits; "
    "Renée finally speaks: «Non!» and everyone laughs."
)


def test_word_tokens_keep_combining_marks_and_emoji_whole() -> None:
    words = [UNICODE_TEXT[a:b] for a, b in WordTokenizer().spans(UNICODE_TEXT)]
    assert words[:6] == ["Cafe\u0301", "au", "lait", "😀", "for", "Zoë"]
    assert "👩\u200d👩\u200d👧" in words and "Rene\u0301e" in words


def test_offsets_survive_non_ascii_text() -> None:
    # The note writes the name precomposed; the book has the combining mark.
    offset, _ = underlined_locate(UNICODE_TEXT, "family of Renée", "")
    assert UNICODE_TEXT[:offset].endswith("family of Rene\u0301e")
    tail, cut = text_tail(UNICODE_TEXT, offset, 5, WordTokenizer())
    assert (tail, cut) == ("👩\u200d👩\u200d👧 The family of Rene\u0301e", True)


@pytest.fixture
def trained_tokenizer(tmp_path: Path) -> Path:
    """A tiny BPE tokenizer trained here: nothing is downloaded."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["[UNK]"])
    corpus = [UNICODE_TEXT, "The family waits and laughs at the ball."] * 20
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    folder = tmp_path / "tok"
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def test_a_local_tokenizer_file_counts_the_windows(trained_tokenizer: Path, settings) -> None:
    settings.TOMLAB_PLOT_TOKENIZER = str(trained_tokenizer)
    tokenizer = plot_tokenizer()
    assert tokenizer.name == f"tokenizers:{trained_tokenizer / 'tokenizer.json'}"
    spans = tokenizer.spans(UNICODE_TEXT)
    # Offsets are str indices: every token's text lies where the tokenizer says.
    assert all(0 <= a < b <= len(UNICODE_TEXT) for a, b in spans)
    assert UNICODE_TEXT[spans[-1][0] : spans[-1][1]] == "."
    offset, _ = underlined_locate(UNICODE_TEXT, "Renée finally speaks", "")
    tail, cut = text_tail(UNICODE_TEXT, offset, 3, tokenizer)
    assert cut and UNICODE_TEXT[:offset].endswith(tail)
    assert len(tokenizer.spans(tail)) == 3
    windows = plot_windows(UNICODE_TEXT, "everyone laughs", "")
    assert windows["context_1000"] == UNICODE_TEXT[: UNICODE_TEXT.index(" laughs") + 7]


def test_a_bad_tokenizer_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read tokenizer"):
        plot_tokenizer(str(tmp_path / "none.json"))
