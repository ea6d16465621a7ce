"""CharToM-QA plot windows cut from the books at import (``import_benchmark --books``).

Real data: the paper's two published items (their ``context_1000``/``context_2000``
were never published) and the two novels they are from. The windows make both items
usable in a read/not-read study, which two participants then take in two rounds through
the real pages.
"""

from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils.html import escape

from annotation.chartom.books import book_text_import
from benchmarks.books import (
    CUT_PREFIX,
    WordTokenizer,
    book_name_match,
    gutenberg_strip,
    underlined_locate,
)
from benchmarks.models import QAItem, Work
from benchmarks.services import benchmark_import
from studies.choice import services as cs
from studies.choice.views import paragraphs
from studies.models import Assignment, ChoiceAnswer
from studies.participation.services import participants_invite
from studies.services import study_launch

pytestmark = pytest.mark.django_db

GORIOT = "Father Goriot by Honoré de Balzac"
MONTE_CRISTO = "The Count of Monte Cristo by Alexandre Dumas"
# Where each item's context_0 ends in its book (the PG text has "Corked!", with quotes
# of its own, where the paper's copy has "Corked").
ENDS = {
    GORIOT: "\u201cCorked!\u201d he cried.",
    MONTE_CRISTO: "dinner-party at Auteuil, he slept soundly.",
}
FILES = {GORIOT: "father_goriot_pg1237.txt", MONTE_CRISTO: "count_of_monte_cristo_pg1184.txt"}


@pytest.fixture
def examples(shared_data: Path) -> Path:
    return shared_data / "chartom-qa" / "paper_examples.jsonl"


@pytest.fixture
def novels(shared_data: Path) -> Path:
    return shared_data / "novels"


def run_import(path: Path, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(
        "import_benchmark", "chartom-qa", str(path), *args, "--no-progress", stdout=out, stderr=err
    )
    return out.getvalue(), err.getvalue()


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_records(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def book_text(novels: Path, name: str) -> str:
    return gutenberg_strip((novels / FILES[name]).read_text(encoding="utf-8-sig")).text


# --- the windows ---------------------------------------------------------------------------


def test_books_folder_fills_both_windows_of_the_paper_items(examples, novels) -> None:
    out, _ = run_import(examples, "--split", "test", "--books", str(novels))

    assert "plot windows: 2 of 2 items got context_1000/context_2000 (tokenizer: words)" in out
    assert f"'{GORIOT}' cut from father_goriot_pg1237.txt" in out
    assert f"'{MONTE_CRISTO}' cut from count_of_monte_cristo_pg1184.txt" in out
    words = WordTokenizer()
    for item in QAItem.objects.select_related("work"):
        name = item.work.key
        text = book_text(novels, name)
        assert item.context_0.startswith(CUT_PREFIX)  # kept as published
        for size in (1000, 2000):
            window = getattr(item, f"context_{size}")
            assert window.startswith(CUT_PREFIX) and window.endswith(ENDS[name])
            body = window[len(CUT_PREFIX) :]
            # A piece of the book, ending where context_0 ends, of exactly that many tokens.
            assert body in text and len(words.spans(body)) == size
        assert item.context_2000.endswith(item.context_1000[len(CUT_PREFIX) :])

    # Again: the same windows, nothing changes.
    out, _ = run_import(examples, "--split", "test", "--books", str(novels))
    assert "QAItem: 0 created, 2 unchanged, 0 updated" in out


def test_books_are_matched_by_their_gutenberg_title_not_their_file_name(
    examples, novels, tmp_path
) -> None:
    folder = tmp_path / "library"
    folder.mkdir()
    shutil.copy(novels / FILES[GORIOT], folder / "book-a.txt")
    shutil.copy(novels / FILES[MONTE_CRISTO], folder / "book-b.txt")
    shutil.copy(novels / "pride_and_prejudice_pg1342.txt", folder / "book-c.txt")
    (folder / "notes.md").write_text("not a book", encoding="utf-8")

    out, _ = run_import(examples, "--books", str(folder))

    assert f"'{GORIOT}' cut from book-a.txt" in out
    assert f"'{MONTE_CRISTO}' cut from book-b.txt" in out


@pytest.mark.parametrize(
    ("name", "title", "score"),
    [
        (GORIOT, "Father Goriot by Honore de Balzac", 3),  # the PG header has no accent
        (MONTE_CRISTO, "THE COUNT OF MONTE CRISTO by Alexandre Dumas [père]", 3),
        ("Count of Monte Cristo, by Dumas", MONTE_CRISTO, 2),
        ("Father Goriot", "Father Goriot by Honore de Balzac", 1),
        (GORIOT, "Father Goriot", 1),
        ("Stand by Me", "Stand by Me by Stephen King", 1),
        (GORIOT, "Pride and Prejudice by Jane Austen", 0),
        (GORIOT, "Father Goriot by Someone Else", 0),
        ("Goriot", "Father Goriot by Honore de Balzac", 0),
    ],
)
def test_book_names_match_titles(name: str, title: str, score: int) -> None:
    assert book_name_match(name, title) == score


def test_books_already_imported_are_used_when_the_folder_lacks_them(
    examples, novels, tmp_path
) -> None:
    # Imported for construction under a shorter title of the researcher's choosing.
    book_text_import(path=novels / FILES[GORIOT], title="Father Goriot")
    empty = tmp_path / "empty"
    empty.mkdir()

    out, _ = run_import(examples, "--books", str(empty))

    assert "plot windows: 1 of 2 items got context_1000/context_2000" in out
    assert f"'{GORIOT}' cut from imported book 'Father Goriot'" in out
    assert (
        f"1 without windows: book '{MONTE_CRISTO}' not found in {empty} nor among the "
        "imported books" in out
    )
    goriot = QAItem.objects.get(work__key=GORIOT)
    assert goriot.context_2000.endswith(ENDS[GORIOT])
    assert QAItem.objects.get(work__key=MONTE_CRISTO).context_2000 is None


def test_the_summary_says_why_items_got_no_windows(examples, novels, tmp_path) -> None:
    rows = records(examples)
    kept = dict(rows[0], question="Who kept windows?", context_1000="w1", context_2000="w2")
    lost = dict(rows[0], question="Where is this?", context_0="..... The spaceship landed at noon.")
    unknown = dict(rows[1], book_name="Madame Bovary by Gustave Flaubert", question="Emma?")
    path = write_records(tmp_path / "mixed.jsonl", [*rows, kept, lost, unknown])
    folder = tmp_path / "two"
    folder.mkdir()
    for name in (GORIOT, MONTE_CRISTO):
        shutil.copy(novels / FILES[name], folder / FILES[name])

    out, err = run_import(path, "--books", str(folder))

    assert "plot windows: 2 of 5 items got context_1000/context_2000" in out
    assert "1 already had both windows (kept)" in out
    assert "1 without windows: context_0 not found in father_goriot_pg1237.txt" in out
    assert "1 without windows: book 'Madame Bovary by Gustave Flaubert' not found" in out
    assert f"{path}: record line 4: the underlined text was not found in the book" in err
    stored = QAItem.objects.get(question="Who kept windows?")
    assert (stored.context_1000, stored.context_2000) == ("w1", "w2")


def test_two_copies_of_a_book_are_ambiguous(examples, novels, tmp_path) -> None:
    folder = tmp_path / "twice"
    folder.mkdir()
    shutil.copy(novels / FILES[GORIOT], folder / "a.txt")
    shutil.copy(novels / FILES[GORIOT], folder / "b.txt")

    out, _ = run_import(examples, "--books", str(folder))

    assert f"1 without windows: book '{GORIOT}' is ambiguous: a.txt, b.txt all match" in out


def test_a_missing_books_folder_is_named_and_nothing_is_written(examples, tmp_path) -> None:
    missing = tmp_path / "no-such-folder"
    with pytest.raises(
        CommandError, match=rf"nothing was written: {missing}: books folder not found"
    ):
        run_import(examples, "--books", str(missing))
    assert not Work.objects.exists() and not QAItem.objects.exists()

    a_file = tmp_path / "file.txt"
    a_file.write_text("x", encoding="utf-8")
    with pytest.raises(CommandError, match="not a folder"):
        run_import(examples, "--books", str(a_file))
    with pytest.raises(CommandError, match="--books applies to chartom-qa"):
        call_command("import_benchmark", "dyntom", str(tmp_path), "--books", str(tmp_path))
    with pytest.raises(CommandError, match="foreground"):
        run_import(examples, "--books", str(tmp_path), "--background")
    with pytest.raises(ValueError, match="applies to chartom-qa imports, not dyntom"):
        benchmark_import(format_name="dyntom", path=tmp_path, books=tmp_path)
    assert not Work.objects.exists()


def test_a_bad_record_after_the_windows_writes_nothing(examples, novels, tmp_path) -> None:
    rows = records(examples)
    broken = dict(rows[1], misleading_choices=["only one"])
    path = write_records(tmp_path / "broken.jsonl", [rows[0], broken])
    with pytest.raises(CommandError, match="record line 2: field 'misleading_choices'"):
        run_import(path, "--books", str(novels))
    assert not QAItem.objects.exists()


def test_punctuation_the_copy_lost_does_not_hide_the_text(novels) -> None:
    text = book_text(novels, GORIOT)
    offset, warnings = underlined_locate(text, 'a grimace. "Corked" he cried.')
    assert text[:offset].endswith("a grimace.\n\n\u201cCorked!\u201d he cried.")
    assert warnings == []


# --- the browser import ----------------------------------------------------------------------


def test_researcher_imports_with_books_in_the_admin(client, researcher, examples, novels) -> None:
    client.force_login(researcher)
    url = reverse("admin:benchmarks_work_import")
    changelist = client.get(reverse("admin:benchmarks_work_changelist")).content.decode()
    assert url in changelist
    assert "Books folder (CharToM-QA)" in client.get(url).content.decode()

    missing = novels.parent / "no-such-novels"
    refused = client.post(
        url, {"format": "chartom-qa", "path": str(examples), "books": str(missing)}
    )
    assert refused.status_code == 400
    assert f"nothing was written: {missing}: books folder not found" in refused.content.decode()
    assert not QAItem.objects.exists()
    wrong = client.post(url, {"format": "dyntom", "path": str(examples), "books": str(novels)})
    assert "A books folder applies to chartom-qa imports." in wrong.content.decode()

    done = client.post(
        url, {"format": "chartom-qa", "path": str(examples), "split": "test", "books": str(novels)}
    )
    page = done.content.decode()
    assert done.status_code == 200 and 'data-testid="import-report"' in page
    assert "plot windows: 2 of 2 items got context_1000/context_2000" in page
    assert QAItem.objects.filter(context_2000__isnull=False).count() == 2


def test_annotators_cannot_import(client, annotator) -> None:
    client.force_login(annotator)
    response = client.get(reverse("admin:benchmarks_work_import"))
    assert response.status_code == 302  # not staff: the admin's log-in page


# --- the study --------------------------------------------------------------------------------


def _rater(client, name: str, participant, *args, **data):
    return client.post(reverse(f"rater:{name}", args=[participant.token, *args]), data)


def test_both_paper_items_go_through_a_two_round_read_not_read_study(
    client, researcher, examples, novels
) -> None:
    run_import(examples, "--split", "test", "--books", str(novels))
    books = list(Work.objects.filter(benchmark="chartom-qa").order_by("key"))
    created = cs.choice_study_create(
        name="Paper items", benchmark="chartom-qa", works=books, seed=2
    )
    assert (created.items, created.skipped) == (2, {})  # no item refused for want of windows
    study_launch(study=created.study)
    ann, ben = participants_invite(study=created.study, labels=["Ann", "Ben"])
    for participant, read in ((ann, books[0]), (ben, books[1])):
        client.get(reverse("rater:start", args=[participant.token]))
        _rater(client, "consent", participant)
        assert _rater(client, "choice-books", participant, read=[read.pk]).status_code == 302
    client.force_login(researcher)
    client.post(reverse("studies:choice-design", args=[created.study.pk]))
    client.logout()

    for participant in (ann, ben):
        mine = list(Assignment.objects.filter(participant=participant).order_by("position"))
        # One question about the book read, one about the other: both paper items.
        assert sorted(a.seen for a in mine) == [False, True]
        for assignment in mine:
            item = assignment.study_item.qa_item
            order = cs.option_order(assignment.option_seed, 4)
            long_only = next(p for p in paragraphs(item.context_2000) if len(p) > 40)[:40]
            page = client.get(reverse("rater:start", args=[participant.token])).content.decode()
            assert escape(item.question) in page and escape(long_only) not in page  # c = 0
            wrong = next(i for i, o in enumerate(order) if o != 0)
            answer = {"action": "submit", "option": str(wrong)}
            assert (
                _rater(client, "choice-answer", participant, assignment.pk, **answer).status_code
                == 302
            )
            page = client.get(reverse("rater:start", args=[participant.token])).content.decode()
            assert escape(long_only) in page and ">Change answer</button>" in page  # c = 2k
            change = {"action": "change", "option": str(order.index(0))}
            assert (
                _rater(client, "choice-answer", participant, assignment.pk, **change).status_code
                == 302
            )

    answers = ChoiceAnswer.objects.filter(assignment__study_item__study=created.study)
    assert answers.count() == 8  # 2 participants x 2 questions x 2 rounds
    assert set(answers.values_list("assignment__study_item__qa_item", flat=True)) == set(
        QAItem.objects.values_list("pk", flat=True)
    )
    assert sorted(answers.values_list("correct", flat=True)) == [False] * 4 + [True] * 4
