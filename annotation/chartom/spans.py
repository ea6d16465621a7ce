"""Key-note spans: fragments of a note's text as character offsets.

A span is ``[start, end]`` with Python ``str`` indices (code points) into
``ReaderNote.note_text``, so ``note_text[start:end]`` is the fragment on every
database and in every export.

The browser works in UTF-16 code units, where an emoji is two units and "é" may be
two code points. Rather than converting offsets the page computed, the server cuts
the note into tokens (:func:`note_tokens`: words, spaces, and single grapheme
clusters such as an emoji or a punctuation mark) and renders each with its
code-point ``start``/``end``; the page only ever sends offsets it read from those
tokens. A selection therefore always falls on grapheme-cluster boundaries: it cannot
split a surrogate pair, a base letter from its combining mark, or a ZWJ emoji
sequence. :func:`spans_clean` checks that again for whatever a client sends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# The `regex` module's \X is Unicode's extended grapheme cluster (UAX #29); the
# standard `re` has no such class. It is installed with transformers.
import regex

from .text_edits import shown
from .workflow import WorkflowError

JOINER = " … "
# An apostrophe or hyphen between letters keeps a word whole ("Goriot's", "half-hearted").
_WORD_JOINERS = {"'", "\u2019", "-"}


@dataclass(frozen=True)
class Token:
    start: int
    end: int
    text: str
    kind: str  # "word", "space" or "mark" (punctuation, emoji, any other single cluster)


def grapheme_bounds(text: str) -> set[int]:
    """Every code-point index where a grapheme cluster starts or the text ends."""
    bounds = {0, len(text)}
    for match in regex.finditer(r"\X", text):
        bounds.add(match.start())
    return bounds


def _cluster_kind(cluster: str) -> str:
    if cluster.isspace():
        return "space"
    if cluster[0].isalnum():
        return "word"
    return "mark"


def note_tokens(text: str) -> list[Token]:
    """The note cut into words, runs of spaces and single other clusters, in order.

    The tokens cover the text exactly; each boundary is a grapheme-cluster boundary.
    """
    clusters = [(m.start(), m.end(), m.group()) for m in regex.finditer(r"\X", text)]
    tokens: list[Token] = []
    i = 0
    while i < len(clusters):
        start, end, cluster = clusters[i]
        kind = _cluster_kind(cluster)
        j = i + 1
        if kind in ("word", "space"):
            while j < len(clusters):
                next_kind = _cluster_kind(clusters[j][2])
                if next_kind == kind:
                    j += 1
                elif (
                    kind == "word"
                    and clusters[j][2] in _WORD_JOINERS
                    and j + 1 < len(clusters)
                    and _cluster_kind(clusters[j + 1][2]) == "word"
                ):
                    j += 2
                else:
                    break
        end = clusters[j - 1][1]
        tokens.append(Token(start=start, end=end, text=text[start:end], kind=kind))
        i = j
    return tokens


def spans_parse(raw: str) -> Any:
    """Spans as the page posts them (JSON text), parsed; shape checks are
    :func:`spans_clean`'s. A WorkflowError for anything that is not JSON, including
    what ``json.loads`` refuses with other errors: nesting thousands deep
    (``RecursionError``) and integers past Python's 4,300-digit limit (``ValueError``).
    """
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise WorkflowError("spans: not a list of [start, end] pairs") from None


def _as_pairs(spans: Any) -> list[tuple[int, int]]:
    if not isinstance(spans, list | tuple):
        raise WorkflowError("spans: expected a list of [start, end] pairs")
    pairs: list[tuple[int, int]] = []
    for n, span in enumerate(spans, start=1):
        if (
            not isinstance(span, list | tuple)
            or len(span) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in span)
        ):
            raise WorkflowError(f"spans: fragment {n} is not a pair of whole numbers")
        pairs.append((span[0], span[1]))
    return pairs


def spans_clean(text: str, spans: Any, *, allow_empty: bool = False) -> list[list[int]]:
    """Validated spans: in bounds, on cluster boundaries, trimmed, sorted and merged.

    Leading and trailing spaces of a fragment are dropped; fragments that overlap,
    touch or are separated only by spaces become one (the key note reads better and
    the choice of whether to include a space changes nothing). Raises
    :class:`WorkflowError` naming the ``spans`` field and the fragment.
    """
    if isinstance(spans, list | tuple) and len(spans) > max(1, len(text)):
        # More fragments than characters cannot be a selection; refused before the
        # per-fragment checks, which would otherwise run once for each.
        raise WorkflowError(f"spans: {len(spans)} fragments for a note of {len(text)} characters")
    pairs = _as_pairs(spans)
    bounds = grapheme_bounds(text)
    trimmed: list[tuple[int, int]] = []
    for n, (start, end) in enumerate(pairs, start=1):
        if not 0 <= start < end <= len(text):
            raise WorkflowError(
                f"spans: fragment {n} [{shown(start)}, {shown(end)}] is outside the note "
                f"(0 to {len(text)} characters) or empty"
            )
        if start not in bounds or end not in bounds:
            raise WorkflowError(
                f"spans: fragment {n} [{start}, {end}] cuts a character in two "
                "(a combining mark or an emoji sequence)"
            )
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end:
            trimmed.append((start, end))
    trimmed.sort()
    merged: list[list[int]] = []
    for start, end in trimmed:
        if merged and (start <= merged[-1][1] or text[merged[-1][1] : start].isspace()):
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if not merged and not allow_empty:
        raise WorkflowError(
            "spans: select at least one fragment of the note, or mark that the note "
            "states nothing about this dimension"
        )
    return merged


def key_note_text(note_text: str, spans: list[list[int]]) -> str:
    """The key note: the fragments in order, joined with an ellipsis."""
    return JOINER.join(note_text[start:end] for start, end in spans)


def spans_from_fragments(note_text: str, fragments: list[str]) -> list[list[int]]:
    """Spans for fragments quoted as text, each found after the one before it.

    For gold sets written by hand and for the page without JavaScript. Raises
    :class:`WorkflowError` naming a fragment that is not in the note.
    """
    spans: list[list[int]] = []
    cursor = 0
    for fragment in fragments:
        fragment = fragment.strip()
        if not fragment:
            continue
        start = note_text.find(fragment, cursor)
        if start < 0:
            start = note_text.find(fragment)
        if start < 0:
            raise WorkflowError(f"fragments: {shown(fragment)} is not in the note text")
        spans.append([start, start + len(fragment)])
        cursor = start + len(fragment)
    return spans_clean(note_text, spans, allow_empty=True)


def _positions(text: str, spans: list[list[int]]) -> set[int]:
    # Spaces are left out so trimming or merging across a space changes no score.
    return {i for start, end in spans for i in range(start, end) if not text[i].isspace()}


def span_f1(text: str, gold: list[list[int]], predicted: list[list[int]]) -> float:
    """Character-overlap F1 of ``predicted`` against ``gold`` (spaces not counted).

    Both empty ("no key note" on both sides) is full agreement, 1.0.
    """
    gold_chars, predicted_chars = _positions(text, gold), _positions(text, predicted)
    if not gold_chars and not predicted_chars:
        return 1.0
    overlap = len(gold_chars & predicted_chars)
    if overlap == 0:
        return 0.0
    precision = overlap / len(predicted_chars)
    recall = overlap / len(gold_chars)
    return 2 * precision * recall / (precision + recall)


def span_compare_segments(
    text: str, gold: list[list[int]], predicted: list[list[int]]
) -> list[tuple[str, str]]:
    """The note as ``(label, text)`` runs: ``both``, ``missed`` (gold only), ``extra``
    (predicted only) or ``none`` — for showing an annotator where they differed."""
    gold_chars = {i for start, end in gold for i in range(start, end)}
    predicted_chars = {i for start, end in predicted for i in range(start, end)}

    def label(i: int) -> str:
        in_gold, in_predicted = i in gold_chars, i in predicted_chars
        if in_gold and in_predicted:
            return "both"
        if in_gold:
            return "missed"
        if in_predicted:
            return "extra"
        return "none"

    segments: list[tuple[str, str]] = []
    for i, char in enumerate(text):
        current = label(i)
        if segments and segments[-1][0] == current:
            segments[-1] = (current, segments[-1][1] + char)
        else:
            segments.append((current, char))
    return segments


def token_rows(text: str, spans: list[list[int]]) -> list[dict[str, Any]]:
    """Tokens for the selection widget, each marked when a span covers it."""
    covered = {i for start, end in spans for i in range(start, end)}
    return [
        {
            "start": token.start,
            "end": token.end,
            "text": token.text,
            "kind": token.kind,
            "selected": token.kind != "space" and token.start in covered,
        }
        for token in note_tokens(text)
    ]
