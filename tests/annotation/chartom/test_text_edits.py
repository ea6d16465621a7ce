"""Edit distance and word diff of annotator edits (code points, not UTF-16 units)."""

from __future__ import annotations

import pytest

from annotation.chartom.text_edits import diff_segments, edit_distance, unified_diff


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("", "", 0),
        ("", "abc", 3),
        ("abc", "", 3),
        ("kitten", "sitting", 3),
        ("flaw", "lawn", 2),
        ("same text", "same text", 0),
        # One emoji is one character, however many UTF-16 units it takes.
        ("a😀b", "ab", 1),
        ("cafe", "cafe\u0301", 1),
        ("Goriot misses his daughters.", "Goriot misses his two daughters.", 4),
    ],
)
def test_edit_distance(a: str, b: str, expected: int) -> None:
    assert edit_distance(a, b) == expected
    assert edit_distance(b, a) == expected


def test_edit_distance_matches_the_textbook_table_on_random_pairs() -> None:
    import random

    def reference(a: str, b: str) -> int:
        table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i in range(len(a) + 1):
            table[i][0] = i
        for j in range(len(b) + 1):
            table[0][j] = j
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                table[i][j] = min(
                    table[i - 1][j] + 1,
                    table[i][j - 1] + 1,
                    table[i - 1][j - 1] + (a[i - 1] != b[j - 1]),
                )
        return table[-1][-1]

    rng = random.Random(7)
    for _ in range(200):
        a = "".join(rng.choice("ab😀") for _ in range(rng.randint(0, 8)))
        b = "".join(rng.choice("ab😀") for _ in range(rng.randint(0, 8)))
        assert edit_distance(a, b) == reference(a, b)


def test_unified_diff_marks_words_and_keeps_spacing() -> None:
    old = "Why does Vautrin pour the wine first?"
    new = "Why does Vautrin pour his neighbours' wine first?"
    assert unified_diff(old, new) == (
        "Why does Vautrin pour [-the-]{+his neighbours'+} wine first?"
    )
    assert unified_diff(old, old) == ""
    assert unified_diff("", "new text") == "{+new text+}"
    assert unified_diff("line one\nline two", "line one\nline 2") == "line one\nline [-two-]{+2+}"


def test_diff_segments_rebuild_both_texts() -> None:
    old = "Goriot longs to see his daughters 😢"
    new = "Goriot longs to see both daughters again 😢"
    segments = diff_segments(old, new)
    assert "".join(text for op, text in segments if op != "+") == old
    assert "".join(text for op, text in segments if op != "-") == new
