# ruff: noqa: RUF001, RUF002, RUF003
"""Reading a model's multiple-choice reply: which option it chose, if any (pure functions).

A reply names its option by letter (``B``, ``(B)``, ``b.``, ``Answer: C``, ``The
answer is (D)``, ``答案：C``, ``选项C``, ``I choose B``) or by the option's whole text
(compared without case and whitespace, and it must equal exactly one option). A
chain-of-thought reply reasons first and states its answer last, and its reasoning
names other options on the way, so the reading goes from the most explicit statement
to the least:

1. the whole reply is one letter, or one option's text;
2. the last "answer" statement (``Answer: B``, ``the final answer is C``, ``答案是 C``);
3. the last choice statement (``I choose B``, ``I'd go with (A)``, ``我选择B``);
4. a reply that starts with a labelled option (``B. the red box``, ``(c) she thinks…``);
5. the last line, when it is a letter or an option's text (``**B**`` after reasoning);
6. mentions such as ``option B`` / ``选项B``, when they all name the same option.

A statement that names two options (``A or B``, ``答案：A和B``) or text equal to two
options is ambiguous: no choice. A letter past the last option (``E`` of four) is no
choice either. What none of the rules reads is unparseable (refused when the reply
declines). Letters are those shown to the model, in the order shown.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

OK, UNPARSEABLE, REFUSED = "ok", "unparseable", "refused"

LETTERS = string.ascii_uppercase


def option_letter(index: int) -> str:
    """0 -> "A": the key shown for an option (and stored as the parsed answer)."""
    return LETTERS[index]


def letters_range(count: int) -> str:
    return f"A–{option_letter(count - 1)}" if count > 1 else "A"


@dataclass(frozen=True)
class ChoiceReading:
    """What a reply chose: ``index`` into the options as shown (None when none)."""

    index: int | None
    status: str  # OK, UNPARSEABLE or REFUSED (Prediction.ParseStatus values)
    # How it was read ("letter", "text", "answer", "choice", "label", "last line",
    # "mention"), or why nothing was.
    how: str = ""
    reason: str = ""

    @property
    def letter(self) -> str:
        return option_letter(self.index) if self.index is not None else ""


# --- normalising ---------------------------------------------------------------------

# Markdown emphasis and code marks carry no answer: "**B**", "`B`".
_MARKUP_RE = re.compile(r"[*`]+|(?<!\w)_{1,2}|_{1,2}(?!\w)")
_BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}|\\text\{([^{}]*)\}")
_SPACE_RE = re.compile(r"\s+")
# Stripped from both ends of a text answer and an option before comparing them.
_EDGE_PUNCT = " \t\r\n.。!！?？,，;；:：\"'“”‘’「」『』"


def _clean(text: str) -> str:
    # NFKC folds full-width letters, digits, brackets and colons (Ｂ, （, ：) to ASCII.
    text = unicodedata.normalize("NFKC", text)
    text = _BOXED_RE.sub(lambda m: m.group(1) or m.group(2) or "", text)
    return _MARKUP_RE.sub("", text).strip()


def normalise_option(text: str) -> str:
    """Case- and whitespace-insensitive form of an option's text (or an answer's)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE_RE.sub("", folded.strip(_EDGE_PUNCT)).strip(_EDGE_PUNCT)


# --- letters -------------------------------------------------------------------------

_OPEN = r"[(\[【「<]"
_CLOSE = r"[)\]】」>]"
# A letter standing alone: no ASCII letter, digit or apostrophe next to it ("A's",
# "Bob" and "I'm" are words, not options). Chinese characters may touch it: "选项C".
_ALONE_BEFORE = r"(?<![A-Za-z0-9'’])"
_ALONE_AFTER = r"(?![A-Za-z0-9'’])"
_LETTER_AT_RE = re.compile(
    rf"\s*(?:(?:option|choice|letter)\s*|选项\s*|选\s*)?(?P<open>{_OPEN})?\s*"
    rf"(?P<letter>[A-Za-z]){_ALONE_AFTER}\s*(?P<close>{_CLOSE})?",
    re.IGNORECASE,
)
# After a letter, another one joined by "or", "and", a comma…: two options named.
_SECOND_LETTER_RE = re.compile(
    rf"^\s*(?:,|/|、|&|\+|\bor\b|\band\b|或者?|和|与|及|以及)\s*(?:option\s*|选项\s*)?"
    rf"{_OPEN}?\s*[A-Za-z]{_ALONE_AFTER}",
    re.IGNORECASE,
)
# What may follow a lower-case letter that is not in brackets: the end of the
# statement. "The answer is a bit unclear" names no option.
_STATEMENT_END_RE = re.compile(r"^\s*(?:[.,;:!?。，；：！？)]\s*|\s*$)")
_BARE_RE = re.compile(
    rf"^(?:option\s*|choice\s*|选项\s*|选\s*)?{_OPEN}?\s*(?P<letter>[A-Za-z])\s*{_CLOSE}?\s*[.。:：!！]?$",
    re.IGNORECASE,
)
_SEVERAL_BARE_RE = re.compile(
    rf"^{_OPEN}?\s*[A-Za-z]\s*{_CLOSE}?"
    rf"(?:\s*(?:,|/|、|&|\+|\bor\b|\band\b|或者?|和|与|及)\s*{_OPEN}?\s*[A-Za-z]\s*{_CLOSE}?)+"
    r"\s*[.。]?$",
    re.IGNORECASE,
)
_LABEL_RE = re.compile(rf"^{_OPEN}?\s*(?P<letter>[A-Za-z])\s*(?:{_CLOSE}|[.:：、])\s*\S")

# "Answer: B", "the final answer is (C)", "correct option: D", "答案：C", "正确答案是 B".
_ANSWER_RE = re.compile(
    r"(?:\b(?:final\s+|correct\s+|best\s+)?answer\b|\bcorrect\s+(?:option|choice)\b"
    r"|(?:最终|正确)?答案)"
    r"\s*(?:is|would\s+be|should\s+be|will\s+be|must\s+be|:|=|-|–|是|为|应该是|应为|应是)?"
    r"\s*[:：]?",
    re.IGNORECASE,
)
# "I choose B", "I'd go with (A)", "I pick option C", "我选择B", "选 C".
_CHOICE_RE = re.compile(
    r"(?:\b(?:choose|chose|choosing|pick|picked|select|selected|go\s+with|going\s+with)\b"
    r"|\bmy\s+(?:choice|pick)\s+is\b|我?选择|我选|应选)",
    re.IGNORECASE,
)
# "option B", "(B)", "选项C": a mention, which reasoning makes of several options.
_MENTION_RE = re.compile(
    rf"(?:\b(?:option|choice)\s*{_OPEN}?\s*|选项\s*{_OPEN}?\s*)(?P<letter>[A-Za-z]){_ALONE_AFTER}"
    rf"|{_OPEN}\s*(?P<bracketed>[A-Za-z])\s*{_CLOSE}",
    re.IGNORECASE,
)
_REFUSAL_RE = re.compile(
    r"\b(?:I can(?:no|')t (?:help|assist|answer|comply|determine)|I(?: am|'m) (?:sorry|unable|"
    r"not able)|I won't|as an AI)\b|抱歉|无法回答|不能回答|无法确定",
    re.IGNORECASE,
)


class _Ambiguous(Exception):
    pass


def _letter_after(tail: str) -> str | None:
    """The option letter that opens ``tail`` (what follows an answer statement), or None.

    Raises :class:`_Ambiguous` when a second letter is joined to it ("A or B").
    """
    line = tail.split("\n", 1)[0]
    match = _LETTER_AT_RE.match(line)
    if match is None:
        return None
    letter = match["letter"]
    # What follows the letter (or its closing bracket), spaces kept: "I think" is a word.
    rest = line[match.end() if match["close"] else match.end("letter") :]
    bracketed = bool(match["open"] or match["close"])
    if letter == "I" and not bracketed and re.match(r"\s+[a-z]", rest):
        return None  # the pronoun: "Answer: I think B"
    if letter.islower() and not bracketed and not _STATEMENT_END_RE.match(rest):
        return None  # an article or a word: "the answer is a bit unclear"
    if _SECOND_LETTER_RE.match(rest):
        raise _Ambiguous
    return letter.upper()


def _text_index(text: str, normalised: list[str]) -> int | None:
    """The one option whose text ``text`` is; raises :class:`_Ambiguous` for two."""
    wanted = normalise_option(text)
    if not wanted:
        return None
    hits = [i for i, option in enumerate(normalised) if option == wanted]
    if len(hits) > 1:
        raise _Ambiguous
    return hits[0] if hits else None


def _letter_reading(letter: str, count: int, how: str) -> ChoiceReading:
    index = LETTERS.index(letter)
    if index >= count:
        return ChoiceReading(
            None,
            UNPARSEABLE,
            how,
            f"{letter!r} is not one of the option letters {letters_range(count)}",
        )
    return ChoiceReading(index, OK, how)


def _statements(
    pattern: re.Pattern[str], text: str, normalised: list[str], how: str
) -> ChoiceReading | None:
    """The last statement of ``pattern`` that names an option (by letter or text)."""
    for match in reversed(list(pattern.finditer(text))):
        tail = text[match.end() :]
        letter = _letter_after(tail)
        if letter is not None:
            return _letter_reading(letter, len(normalised), how)
        index = _text_index(tail.split("\n", 1)[0], normalised)
        if index is not None:
            return ChoiceReading(index, OK, how)
    return None


def read_choice(reply: str, options: Sequence[str]) -> ChoiceReading:
    """Which of ``options`` (as shown, lettered A, B, …) ``reply`` chose; see the module."""
    count = len(options)
    text = _clean(reply or "")
    if not text:
        return ChoiceReading(None, UNPARSEABLE, reason="empty reply")
    normalised = [normalise_option(option) for option in options]
    try:
        return _read(text, normalised) or _nothing(text, count)
    except _Ambiguous:
        return ChoiceReading(None, UNPARSEABLE, reason="names more than one option")


def _read(text: str, normalised: list[str]) -> ChoiceReading | None:
    count = len(normalised)
    # 1. The whole reply: a letter, several letters, or an option's text.
    if bare := _BARE_RE.match(text):
        return _letter_reading(bare["letter"].upper(), count, "letter")
    if _SEVERAL_BARE_RE.match(text):
        letters = {c.upper() for c in re.findall(rf"{_ALONE_BEFORE}[A-Za-z]{_ALONE_AFTER}", text)}
        if len(letters) > 1:
            raise _Ambiguous
    index = _text_index(text, normalised)
    if index is not None:
        return ChoiceReading(index, OK, "text")
    # 2-3. Statements, the last one first: a CoT reply ends with its answer.
    for pattern, how in ((_ANSWER_RE, "answer"), (_CHOICE_RE, "choice")):
        reading = _statements(pattern, text, normalised, how)
        if reading is not None:
            return reading
    # 4. A reply that opens with a labelled option: "B. the red box".
    if label := _LABEL_RE.match(text):
        return _letter_reading(label["letter"].upper(), count, "label")
    # 5. The last line alone: a letter or an option's text.
    last = text.rsplit("\n", 1)[-1].strip()
    if last != text:
        if bare := _BARE_RE.match(last) or _LABEL_RE.match(last):
            return _letter_reading(bare["letter"].upper(), count, "last line")
        index = _text_index(last, normalised)
        if index is not None:
            return ChoiceReading(index, OK, "last line")
    # 6. Mentions, when they all name the same option.
    mentioned = {
        letter
        for m in _MENTION_RE.finditer(text)
        if LETTERS.index(letter := (m["letter"] or m["bracketed"]).upper()) < count
    }
    if len(mentioned) == 1:
        return _letter_reading(mentioned.pop(), count, "mention")
    if len(mentioned) > 1:
        raise _Ambiguous
    return None


def _nothing(text: str, count: int) -> ChoiceReading:
    if _REFUSAL_RE.search(text):
        return ChoiceReading(None, REFUSED, reason="the reply declines to answer")
    return ChoiceReading(
        None,
        UNPARSEABLE,
        reason=f"no option letter ({letters_range(count)}) or option text found",
    )
