"""Readers of the LLM replies of CharToM-QA construction, one per prompt format.

Tolerant of how models really answer (quotes, markdown bold, list numbering, extra
blank lines, a leading "Answer:" or an echoed label), strict about meaning: a reply
whose verdict, question or list cannot be read without guessing raises
:class:`ReplyInvalid` with the reason, and the step is left for a retry.
"""

from __future__ import annotations

import re

from annotation.dyntom.generation.replies import ReplyInvalid

__all__ = [
    "ReplyInvalid",
    "bonus_points_reply",
    "description_reply",
    "distractors_reply",
    "filter_reply",
    "question_reply",
    "verification_reply",
]

DESCRIPTION_MAX = 2000
QUOTE_PAIRS = {'"': '"', "\u201c": "\u201d", "'": "'", "\u2018": "\u2019", "\u00ab": "\u00bb"}
# A bullet or a list number before a line: "- ", "* ", "1. ", "2) ", "(3) ".
_BULLET = r"(?:[-*\u2022]\s+|\(?\d{1,2}[.)]\s+)?"
# An echoed label before the content: "Answer:", "[Answer]:", "**Verdict:**", ...
_LABEL = re.compile(
    r"^\s*(?:\*\*|__)?\[?\s*(?:final\s+)?(?:answer|response|reply|verdict|judge?ment|decision|"
    r"result|output|question|candidate\s+question|description|tom\s+description|reason)"
    r"\s*\]?\s*(?:\*\*|__)?\s*[:\uff1a]\s*(?:\*\*|__)?",
    re.IGNORECASE,
)
_ITEM = re.compile(r"^\s*(?:[-*\u2022]\s+|\(?\d{1,2}[.)]\s+)")
_INTRO = re.compile(
    r"^\s*(?:the|my|here\s+is\s+the|here'?s\s+the)\b[^:\n]{0,120}\b(?:is|are|question|description)"
    r"\s*[:\uff1a]\s*$",
    re.IGNORECASE,
)


def _unwrap(text: str) -> str:
    """Strip markdown emphasis, a bullet and quotes around a whole piece of text."""
    text = text.strip()
    while True:
        before = text
        text = re.sub(rf"^{_BULLET}", "", text).strip()
        for mark in ("**", "__", "*", "_", "`"):
            if len(text) > 2 * len(mark) and text.startswith(mark) and text.endswith(mark):
                text = text[len(mark) : -len(mark)].strip()
        if len(text) >= 2 and QUOTE_PAIRS.get(text[0]) == text[-1]:
            inner = text[1:-1]
            # "a" and "b": two quoted parts, not one quoted whole.
            if text[0] not in inner and text[-1] not in inner:
                text = inner.strip()
        if text == before:
            return text


def _lines(reply: str) -> list[str]:
    """Logical lines: echoed labels and wrapping removed, hard-wrapped lines joined.

    A line continues the one before when that one does not end a sentence and this one
    is neither a list item nor after a blank line (a question wrapped at 72 columns).
    """
    lines: list[str] = []
    joinable = False
    for raw in reply.replace("\r\n", "\n").split("\n"):
        line = _unwrap(raw)
        if not line or set(line) <= set("-*_=#`"):
            joinable = False
            continue
        if not lines and _INTRO.match(line):
            continue
        labelled = _LABEL.match(line) is not None
        line = _unwrap(_LABEL.sub("", line, count=1))
        # Bold inside the text ("**Intention of Vautrin:** ...") is layout, not content.
        line = re.sub(r"(\*\*|__)(.+?)\1", r"\2", line)
        if not line:
            continue
        if joinable and not labelled and not _ITEM.match(raw):
            lines[-1] = f"{lines[-1]} {line}"
        else:
            lines.append(line)
        joinable = not re.search(r"[.?!:;\"\u201d\u00bb)]$", lines[-1])
    return lines


def _verdict(reply: str, words: dict[str, str], what: str) -> tuple[str, str]:
    """(verdict, the text after it) for a reply whose first line starts with a verdict."""
    lines = _lines(reply)
    if not lines:
        raise ReplyInvalid(f"empty reply: expected {what}")
    first = lines[0]
    alternatives = "|".join(sorted(map(re.escape, words), key=len, reverse=True))
    match = re.match(
        rf"^(?:\*\*|__)?({alternatives})\b\s*[.,:;!\-\u2013\u2014)]*\s*(?:\*\*|__)?[.,:;]?\s*(.*)$",
        first,
        re.I,
    )
    if not match:
        raise ReplyInvalid(f"the reply does not start with {what}: {first[:80]!r}")
    rest = _unwrap(match.group(2))
    if re.match(rf"^/\s*({alternatives})\b", rest, re.I):
        raise ReplyInvalid(f"the reply gives both answers of {what}: {first[:80]!r}")
    reason = " ".join(filter(None, [rest, *(lines[1:])])).strip()
    return words[match.group(1).lower()], reason


def filter_reply(reply: str) -> tuple[str, str]:
    """Table 8: ``("yes" | "no", the dimension's description or the reason)``."""
    verdict, reason = _verdict(reply, {"yes": "yes", "no": "no"}, '"Yes" or "No"')
    if not reason:
        raise ReplyInvalid(f'"{verdict.capitalize()}" without the description or reason after it')
    return verdict, reason


def verification_reply(reply: str) -> tuple[bool, str]:
    """Table 11: ``(appropriate?, reason)``; the reason may be empty."""
    words = {
        "appropriate": "appropriate",
        "inappropriate": "inappropriate",
        "not appropriate": "inappropriate",
    }
    verdict, reason = _verdict(reply, words, '"Appropriate" or "Inappropriate"')
    return verdict == "appropriate", reason


def description_reply(reply: str) -> str:
    """Table 9: the ToM description only, as one paragraph."""
    lines = _lines(reply)
    if not lines:
        raise ReplyInvalid("empty reply: expected the ToM description")
    text = " ".join(lines)
    if len(text) > DESCRIPTION_MAX:
        raise ReplyInvalid(
            f"the description is {len(text)} characters, over {DESCRIPTION_MAX}: "
            "expected a short statement"
        )
    return text


def question_reply(reply: str) -> str:
    """Table 10: exactly one question, ending with a question mark."""
    lines = _lines(reply)
    questions = [line for line in lines if line.rstrip().endswith("?")]
    if not questions:
        raise ReplyInvalid(f"no question (a line ending with '?') in the reply: {reply[:80]!r}")
    if len(questions) > 1:
        raise ReplyInvalid(f"{len(questions)} questions in the reply; expected one")
    if len(lines) > 1 and lines[-1] != questions[0] and lines[0] != questions[0]:
        raise ReplyInvalid("the question is surrounded by other text; expected the question only")
    return questions[0]


def _labelled(reply: str, label: str, what: str) -> list[tuple[str | None, str]]:
    """``[(number or None, content)]`` of the lines ``[<label> N]: content``.

    Text before the first labelled line is an introduction and is skipped. A line right
    under a labelled one continues it; any other unlabelled line is refused.
    """
    pattern = re.compile(
        rf"^\s*{_BULLET}(?:\*\*|__)?\[?\s*{label}\s*(\d+)?\s*\]?\s*(?:\*\*|__)?\s*"
        rf"[:\uff1a]\s*(?:\*\*|__)?\s*(.*)$",
        re.IGNORECASE,
    )
    items: list[list] = []
    after_blank = False
    for raw in reply.replace("\r\n", "\n").split("\n"):
        if not raw.strip() or set(raw.strip()) <= set("-*_=#`"):
            after_blank = True
            continue
        match = pattern.match(raw)
        if match:
            items.append([match.group(1), match.group(2)])
        elif items and not after_blank:
            items[-1][1] += " " + raw.strip()
        elif items:
            raise ReplyInvalid(f"a line that is not a {what}: {raw.strip()[:80]!r}")
        after_blank = False
    found = [(number, _unwrap(content)) for number, content in items]
    for number, content in found:
        if not content:
            raise ReplyInvalid(f"an empty {what}{f' {number}' if number else ''}")
    return found


def bonus_points_reply(reply: str) -> list[str]:
    """Table 12: the points of ``[Bonus Point]: "..."`` lines, in order, repeats dropped."""
    found = _labelled(reply, r"bonus\s*points?", "bonus point")
    if not found:
        raise ReplyInvalid('no "[Bonus Point]:" line in the reply')
    points: list[str] = []
    for _, content in found:
        if content.casefold() not in {p.casefold() for p in points}:
            points.append(content)
    return points


def distractors_reply(reply: str) -> list[str]:
    """Table 13: exactly three distinct ``[Distraction Choice N]:`` contents, N = 1, 2, 3."""
    found = _labelled(
        reply, r"distract(?:ion|or|ing)\s*(?:candidate\s*)?(?:choice|option)?", "distraction choice"
    )
    if len(found) != 3:
        raise ReplyInvalid(f"expected 3 distraction choices, got {len(found)}")
    numbers = [number for number, _ in found]
    if any(numbers) and sorted(int(n or 0) for n in numbers) != [1, 2, 3]:
        raise ReplyInvalid(f"distraction choices numbered {', '.join(map(str, numbers))}")
    choices = [_strip_parens(content) for _, content in found]
    if len({c.casefold() for c in choices}) < 3:
        raise ReplyInvalid("two distraction choices are the same")
    return choices


def _strip_parens(text: str) -> str:
    # The format shows "(Choice Content)": some models keep the brackets around it.
    if text.startswith("(") and text.endswith(")") and text.count("(") == 1:
        return text[1:-1].strip()
    return text
