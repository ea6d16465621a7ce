"""Key-note spans: code-point offsets that survive combining marks and emoji."""

from __future__ import annotations

import pytest

from annotation.chartom.spans import (
    key_note_text,
    note_tokens,
    span_compare_segments,
    span_f1,
    spans_clean,
    spans_from_fragments,
)
from annotation.chartom.workflow import WorkflowError

# "é" written as e + U+0301, a family emoji (a ZWJ sequence of 5 code points, 8 UTF-16
# units) and a flag (two regional indicators).
CAFE = "cafe\u0301"
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
NOTE = f"Vautrin at the {CAFE} {FAMILY} smiles 😏 but he is plotting 🇫🇷 all along."


def test_tokens_cover_the_text_and_keep_clusters_whole() -> None:
    tokens = note_tokens(NOTE)
    assert "".join(t.text for t in tokens) == NOTE
    assert [t.start for t in tokens[1:]] == [t.end for t in tokens[:-1]]
    texts = [t.text for t in tokens if t.kind != "space"]
    assert CAFE in texts
    assert FAMILY in texts
    assert "😏" in texts
    assert "\U0001f1eb\U0001f1f7" in texts
    assert [t.kind for t in tokens if t.text == FAMILY] == ["mark"]


def test_words_keep_apostrophes_and_hyphens() -> None:
    words = [t.text for t in note_tokens("Goriot's half-hearted smile - 'no'.") if t.kind == "word"]
    assert words == ["Goriot's", "half-hearted", "smile", "no"]


def test_stored_offsets_slice_the_intended_text_in_python() -> None:
    start = NOTE.index(CAFE)
    end = NOTE.index("smiles") + len("smiles")
    spans = spans_clean(NOTE, [[start, end]])
    assert NOTE[spans[0][0] : spans[0][1]] == f"{CAFE} {FAMILY} smiles"
    # Python counts code points: the family is 5, not the 8 UTF-16 units a page would.
    assert spans[0][1] - spans[0][0] == len(CAFE) + 1 + 5 + 1 + 6


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda: NOTE.index(CAFE) + 4, id="between e and its accent"),
        pytest.param(lambda: NOTE.index(FAMILY) + 1, id="inside the ZWJ sequence"),
        pytest.param(lambda: NOTE.index(FAMILY) + 2, id="after the joiner"),
        pytest.param(lambda: NOTE.index("🇫🇷") + 1, id="between the regional indicators"),
    ],
)
def test_a_span_never_splits_a_character(cut) -> None:
    with pytest.raises(WorkflowError, match=r"spans: fragment 1 .* cuts a character"):
        spans_clean(NOTE, [[0, cut()]])
    with pytest.raises(WorkflowError, match="cuts a character"):
        spans_clean(NOTE, [[cut(), len(NOTE)]])


def test_spans_are_sorted_trimmed_and_merged() -> None:
    text = "he wants Eugene on his side so the scheme goes ahead"
    a = [text.index("wants"), text.index("Eugene") + len("Eugene")]
    b = [text.index("Eugene"), text.index("side") + len("side")]  # overlaps a
    c = [text.index("scheme") - 1, len(text)]  # leading space, later in the text
    assert spans_clean(text, [c, b, a]) == [[a[0], b[1]], [c[0] + 1, len(text)]]
    # Fragments separated only by spaces are one fragment.
    w1 = [0, 2]
    w2 = [3, 8]
    assert spans_clean(text, [w2, w1]) == [[0, 8]]
    assert key_note_text(text, spans_clean(text, [a, c])) == ("wants Eugene … scheme goes ahead")


@pytest.mark.parametrize(
    ("spans", "message"),
    [
        ("0-4", "expected a list"),
        ([[0]], "fragment 1 is not a pair"),
        ([[0, 4], ["1", 3]], "fragment 2 is not a pair"),
        ([[True, 3]], "not a pair"),
        ([[5, 5]], "outside the note"),
        ([[4, 2]], "outside the note"),
        ([[-1, 2]], "outside the note"),
        ([[0, 10_000]], "outside the note"),
        ([], "select at least one fragment"),
        ([[7, 8]], "select at least one fragment"),  # only a space
    ],
)
def test_bad_spans_are_refused_by_name(spans, message) -> None:
    with pytest.raises(WorkflowError, match=message):
        spans_clean("Vautrin is buttering them up", spans)


def test_fragments_quoted_as_text_become_spans() -> None:
    spans = spans_from_fragments(NOTE, [f"{CAFE} {FAMILY}", "plotting"])
    assert key_note_text(NOTE, spans) == f"{CAFE} {FAMILY} … plotting"
    with pytest.raises(WorkflowError, match="'scheming' is not in the note"):
        spans_from_fragments(NOTE, ["scheming"])


def test_f1_counts_overlapping_characters_without_spaces() -> None:
    text = "aaaa bbbb cccc"
    assert span_f1(text, [[0, 4]], [[0, 4]]) == 1.0
    assert span_f1(text, [], []) == 1.0
    assert span_f1(text, [[0, 4]], []) == 0.0
    assert span_f1(text, [[0, 4]], [[10, 14]]) == 0.0
    # gold 8 letters, predicted 4 of them: precision 1, recall 0.5
    assert span_f1(text, [[0, 9]], [[0, 4]]) == pytest.approx(2 / 3)
    # the space inside a merged span counts for nothing
    assert span_f1(text, [[0, 9]], [[0, 4], [5, 9]]) == 1.0


def test_compare_segments_mark_missed_and_extra_text() -> None:
    text = "aaaa bbbb cccc"
    assert span_compare_segments(text, [[0, 9]], [[5, 14]]) == [
        ("missed", "aaaa "),
        ("both", "bbbb"),
        ("extra", " cccc"),
    ]
