"""How CharToM-QA answers and judge replies are read and scored, one response at a time.

Pure functions (no database): the run engine, ``import_predictions`` and the reports
all call these, so a reply reads the same wherever it comes from.

**Truncation.** The paper asks for answers about as long as the reference answer and
its evaluator (``evaluate_en.py`` in the authors' repository) cuts every response to
``max(n + 5, int(1.5 * n))`` words, ``n`` being the reference answer's word count,
before the judge sees it. Words are what that script counts: ``split(" ")``, so a
double space makes an empty word and a newline does not separate words; we do the
same, so our judge sees exactly the text the published one saw.

**Judge replies, two scoring modes.**

``strict`` (our default) follows the output format the judge is asked for:

* bonus points: after blank lines are dropped the reply must be one line starting
  with ``[Included Bonus Points]:``; ``None`` anywhere after it means no point;
  otherwise the rest is comma-separated indices with parentheses, quotes and spaces
  ignored, each a number from 1 to the item's number of bonus points. Anything else
  (two lines, a word, an index the item does not have) is ``unparseable``;
* defects: the reply must start with ``[Defects]:``; ``None`` (alone, or followed by
  punctuation) means no defect, any other text is the defect; nothing after the
  prefix, or another prefix, is ``unparseable``.

An unparseable reply is never read as zero points or no defect: it is left out of
BPC or PR and counted apart.

``reference`` reproduces the published evaluator, quirks included, to compare with
published numbers: it reads the reply with ``replace("\\n\\n", "\\n")`` (so three
newlines still leave a blank line), takes an index only when every character is a
digit once ``( ) ' "`` are removed (so ``1, 2`` with a space fails), stores a failed
bonus reply as the string ``"Null"`` and then counts ``len(set("Null"))`` = 3 covered
points; a defect reply not starting with ``[Defects]:`` is ``"Null"``, and any reply
whose text does not contain ``None`` is a penalty (``"Null"`` included). Its "rate of
token numbers" divides the responses' character counts (before truncation) by the
answers'. Where that script would crash (an empty index, as in ``1,2,``) we store
``"Null"``.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

GENERATIVE, MULTICHOICE = "generative", "multichoice"
JUDGE_BONUS, JUDGE_DEFECTS = "judge-bonus", "judge-defects"
STRICT, REFERENCE = "strict", "reference"
SCORING_MODES = (STRICT, REFERENCE)
OK, UNPARSEABLE, REFUSED = "ok", "unparseable", "refused"

BONUS_PREFIX = "[Included Bonus Points]:"
DEFECTS_PREFIX = "[Defects]:"
# What the published evaluator stores for a reply it cannot read.
REFERENCE_NULL = "Null"

# Plot windows in tokens, as the dataset names them (context_0, context_1000, ...).
CONTEXTS = (0, 1000, 2000)
CONTEXT_LABELS = {0: "0", 1000: "1k", 2000: "2k"}
# "2000" as a string is refused: the import format spells it 2000 or "2k".
_CONTEXT_SPELLINGS = {0: 0, 1000: 1000, 2000: 2000, "0": 0, "1k": 1000, "2k": 2000}
MULTICHOICE_OPTIONS = 4

_IGNORED_IN_INDEX = str.maketrans("", "", "()'\"“”‘’ \t")  # noqa: RUF001 - curly quotes
_QUOTES = " \t\"'“”‘’`"  # noqa: RUF001 - curly quotes
_NO_DEFECT_RE = re.compile(r"^none\s*(?:[.,;:!]|$)", re.IGNORECASE)
_REFUSAL_RE = re.compile(
    r"\b(I can(?:no|')t (?:help|assist|answer|comply)|I(?: am|'m) (?:sorry|unable|not able)|"
    r"I won't|as an AI)\b",
    re.IGNORECASE,
)
# A reply that is only an option number, e.g. "3", "(3)", "3.", "[3]", "(3).".
_BARE_PICK_RE = re.compile(r"^\W*(\d+)\W*$")
# A reply that starts with one, e.g. "(3). Vautrin deliberately flatters ...".
_LEADING_PICK_RE = re.compile(r"^\s*[(\[]?\s*(\d+)\s*[)\]]?\s*[.:)]?(?:\s|$)")
_PAREN_PICK_RE = re.compile(r"\((\d+)\)")
_BARE_LETTER_RE = re.compile(r"^\W*([a-zA-Z])\W*$")
# An imported letter with its option text, e.g. "b. Vautrin did this to ...".
_LEADING_LETTER_RE = re.compile(r"^\s*\(?([a-zA-Z])\s*[.):]\s")


class AnswerError(ValueError):
    """A value that cannot be scored against the item; ``field`` names the input field."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


def read_context(value: Any) -> int:
    """0, 1000 or 2000 from ``0``/``"0"``, ``1000``/``"1k"``, ``2000``/``"2k"``."""
    readable = isinstance(value, (int, str)) and not isinstance(value, bool)
    context = _CONTEXT_SPELLINGS.get(value) if readable else None
    if context is None:
        raise ValueError(f"{value!r} is not one of 0, 1000, 2000, '0', '1k', '2k'")
    return context


def option_letter(index: int) -> str:
    """0 -> "a": picks are stored as letters, as every multiple-choice answer is."""
    return chr(ord("a") + index)


# --- generative answers --------------------------------------------------------------------


def answer_words(answer: str) -> int:
    """The reference answer's length in the evaluator's words (see the module docstring)."""
    return len(answer.strip().replace("\n", "").split(" "))


def truncation_limit(answer: str) -> int:
    """``max(n + 5, int(1.5 * n))`` words, ``n`` the reference answer's word count."""
    n = answer_words(answer)
    return max(n + 5, int(1.5 * n))


def truncate_response(response: str, answer: str) -> str:
    """The response as the judge sees it: at most :func:`truncation_limit` words."""
    return " ".join(response.split(" ")[: truncation_limit(answer)])


@dataclass(frozen=True)
class Response:
    """A generative reply read against its item."""

    status: str  # ok, unparseable (empty) or refused
    judged_text: str  # truncated; what the judge and RougeL/BERTScore see
    details: dict[str, Any]


def read_response(text: str, *, answer: str) -> Response:
    """Status, truncated text and the lengths the reports' length ratios need."""
    stripped = text.strip()
    judged = truncate_response(stripped, answer)
    details = {
        "response_chars": len(text),
        "answer_chars": len(answer),
        "response_words": len(stripped.split()),
        "answer_words": len(answer.split()),
        "truncated": judged != stripped,
    }
    if not stripped:
        return Response(UNPARSEABLE, "", {**details, "reason": "empty response"})
    if _REFUSAL_RE.search(stripped) and len(stripped.split()) < 40:
        return Response(REFUSED, judged, details)
    return Response(OK, judged, details)


# --- multiple choice -----------------------------------------------------------------------


def choices_order(key: str, answer: str, misleading: Sequence[str]) -> list[str]:
    """The four choices in the order shown: a shuffle seeded by the item's key.

    The same item shows the same order in every run (so replies stay cached and runs
    compare), and the gold position varies across items.
    """
    choices = [answer, *misleading]
    random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16)).shuffle(choices)
    return choices


def gold_letter(choices: Sequence[str], answer: str) -> str:
    """The letter of the reference answer among ``choices`` (compared stripped)."""
    return option_letter([c.strip() for c in choices].index(answer.strip()))


def read_pick(text: str, options: int = MULTICHOICE_OPTIONS) -> str | None:
    """The chosen option as a letter, or None when the reply names none.

    Read: an option number alone (``3``, ``(3)``, ``3.``), a reply starting with one
    (``(3). Vautrin ...``), exactly one ``(k)`` in a longer reply, or a lone letter
    (``c``, ``(C)``, ``c. text``: imported files give letters). A reply naming two
    candidates in parentheses chooses none. A number outside 1..``options``
    is returned as given (digits), for the caller to reject.
    """
    stripped = text.strip()
    found = set(_PAREN_PICK_RE.findall(stripped))
    if len(found) > 1:
        return None  # "(1) or (3)": two candidates named, none chosen
    match = _BARE_PICK_RE.match(stripped) or _LEADING_PICK_RE.match(stripped)
    if match is None:
        if len(found) == 1:
            return _number_letter(found.pop(), options)
        letter = _BARE_LETTER_RE.match(stripped) or _LEADING_LETTER_RE.match(stripped)
        return letter.group(1).lower() if letter else None
    return _number_letter(match.group(1), options)


def _number_letter(digits: str, options: int) -> str:
    number = int(digits)
    return option_letter(number - 1) if 1 <= number <= options else digits


@dataclass(frozen=True)
class Pick:
    parsed_answer: str
    status: str
    correct: bool
    details: dict[str, Any]


def score_pick(
    answer: str | None, *, choices: Sequence[str], reference_answer: str, text_is_reply: bool
) -> Pick:
    """A multiple-choice answer scored against the item's reference answer.

    ``answer`` is a model reply (``text_is_reply``) or an imported answer (a letter or
    a number); None is an explicit "no answer" (``missing``). Unreadable answers are
    ``unparseable`` (or ``refused``) and wrong.
    """
    gold = gold_letter(choices, reference_answer)
    details = {"task": MULTICHOICE, "choices": list(choices), "gold_letter": gold}
    if answer is None:
        return Pick("", "missing", False, details)
    letter = read_pick(answer, len(choices))
    last = option_letter(len(choices) - 1)
    if letter is None or not (len(letter) == 1 and "a" <= letter <= last):
        refused = text_is_reply and letter is None and bool(_REFUSAL_RE.search(answer))
        details["reason"] = f"not one of the options 1-{len(choices)} (a-{last})"
        return Pick(answer.strip()[:500], REFUSED if refused else UNPARSEABLE, False, details)
    return Pick(letter, OK, letter == gold, details)


# --- the judge's replies -------------------------------------------------------------------


@dataclass(frozen=True)
class BonusReading:
    status: str  # ok or unparseable
    included: list[int] | None  # 1-based, distinct, sorted; None when unparseable
    reason: str = ""


def read_bonus_strict(reply: str, *, total: int) -> BonusReading:
    """The strict reading of a bonus-point reply (see the module docstring)."""
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    if not lines:
        return BonusReading(UNPARSEABLE, None, "empty reply")
    if len(lines) > 1:
        return BonusReading(UNPARSEABLE, None, f"{len(lines)} lines; expected one")
    line = lines[0]
    if not line.startswith(BONUS_PREFIX):
        return BonusReading(UNPARSEABLE, None, f"does not start with {BONUS_PREFIX}")
    rest = line[len(BONUS_PREFIX) :]
    if "None" in rest:
        return BonusReading(OK, [])
    included = set()
    for part in rest.split(","):
        token = part.translate(_IGNORED_IN_INDEX)
        if not (token.isascii() and token.isdigit()):
            return BonusReading(UNPARSEABLE, None, f"{part.strip()!r} is not an index")
        index = int(token)
        if not 1 <= index <= total:
            return BonusReading(
                UNPARSEABLE, None, f"index {index} is not a bonus point (1-{total})"
            )
        included.add(index)
    return BonusReading(OK, sorted(included))


def read_bonus_reference(reply: str) -> list[int] | str:
    """The published evaluator's reading: a list of indices, or ``"Null"``."""
    text = reply.replace("\n\n", "\n").strip()
    if len(text.split("\n")) != 1 or not text.startswith(BONUS_PREFIX):
        return REFERENCE_NULL
    content = text.replace(BONUS_PREFIX, "").strip()
    if "None" in content:
        return []
    indices = []
    for part in content.split(","):
        token = part.replace("(", "").replace(")", "").replace("'", "").replace('"', "")
        if not all(ch in "0123456789" for ch in token):
            return REFERENCE_NULL
        if not token:
            return REFERENCE_NULL  # int("") raises there: the script stops
        indices.append(int(token))
    return indices


@dataclass(frozen=True)
class DefectsReading:
    status: str  # ok or unparseable
    defects: list[str] | None  # [] for none; None when unparseable
    reason: str = ""


def read_defects_strict(reply: str) -> DefectsReading:
    """The strict reading of a defects reply (see the module docstring)."""
    text = reply.strip()
    if not text.startswith(DEFECTS_PREFIX):
        return DefectsReading(UNPARSEABLE, None, f"does not start with {DEFECTS_PREFIX}")
    content = text[len(DEFECTS_PREFIX) :].strip().strip(_QUOTES).strip()
    if not content:
        return DefectsReading(UNPARSEABLE, None, "no defect and no None after the prefix")
    if _NO_DEFECT_RE.match(content):
        return DefectsReading(OK, [])
    return DefectsReading(OK, [content])


def read_defects_reference(reply: str) -> str:
    """The published evaluator's reading: the text after the prefix, or ``"Null"``."""
    text = reply.strip()
    if text.startswith(DEFECTS_PREFIX):
        return text.replace(DEFECTS_PREFIX, "").strip()
    return REFERENCE_NULL


def bonus_judgement(reply: str, *, total: int) -> dict[str, Any]:
    """A bonus-point reply read both ways, as stored in a response's details."""
    strict = read_bonus_strict(reply, total=total)
    stored: dict[str, Any] = {"status": strict.status, "reference": read_bonus_reference(reply)}
    if strict.reason:
        stored["reason"] = strict.reason
    details: dict[str, Any] = {"bonus_points_total": total, "judge_bonus": stored}
    if strict.included is not None:
        details["bonus_points_included"] = [i - 1 for i in strict.included]  # 0-based
    return details


def defects_judgement(reply: str) -> dict[str, Any]:
    """A defects reply read both ways, as stored in a response's details."""
    strict = read_defects_strict(reply)
    stored: dict[str, Any] = {"status": strict.status, "reference": read_defects_reference(reply)}
    if strict.reason:
        stored["reason"] = strict.reason
    details: dict[str, Any] = {"judge_defects": stored}
    if strict.defects is not None:
        details["defects"] = strict.defects
    return details


def published_defects(value: str | list[str] | None) -> list[str]:
    """A published verdict's defects (text, list or null) as a list; "None" is none."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    return [d.strip() for d in items if d.strip() and not _NO_DEFECT_RE.match(d.strip())]


class ResponseScore(NamedTuple):
    """One judged response under one scoring mode.

    ``covered`` / ``penalised`` are None when that half was not judged or (strict)
    its reply was unparseable; ``bonus_status`` / ``defects_status`` say which.
    A named tuple: a report scores every response in both modes, 150,000 of them at
    100,000 predictions, and a frozen dataclass took about four times as long to make.
    """

    covered: int | None
    total: int
    penalised: bool | None
    bonus_status: str  # ok, unparseable or unjudged
    defects_status: str
    response_chars: int | None = None
    answer_chars: int | None = None
    response_words: int | None = None
    answer_words: int | None = None


UNJUDGED = "unjudged"


def response_score(details: Mapping[str, Any], mode: str = STRICT) -> ResponseScore:
    """How many bonus points a generative response covers and whether it is penalised.

    Reads what the judge merge or an import stored in ``details``. Imported verdicts
    (already parsed: 0-based ``bonus_points_included`` and ``defects``) score the
    same in both modes, except that a defect text containing ``None`` is no penalty
    in ``reference`` mode, as in the published script.
    """
    if mode not in SCORING_MODES:
        raise ValueError(f"scoring mode {mode!r} is not one of {', '.join(SCORING_MODES)}")
    total = int(details.get("bonus_points_total") or 0)
    bonus = details.get("judge_bonus")
    defects = details.get("judge_defects")
    included = details.get("bonus_points_included")
    listed = details.get("defects")
    if isinstance(listed, str):
        listed = [listed]
    # Imported verdicts have no raw reply: they were read already, so "ok".
    bonus_status = bonus["status"] if bonus else (OK if included is not None else UNJUDGED)
    defects_status = defects["status"] if defects else (OK if listed is not None else UNJUDGED)
    if mode == STRICT:
        covered = len(set(included)) if bonus_status == OK and included is not None else None
        penalised = (
            bool(published_defects(listed)) if defects_status == OK and listed is not None else None
        )
    else:
        if bonus:
            covered = len(set(bonus["reference"]))  # "Null" -> {"N", "u", "l"} -> 3
        elif included is not None:
            covered = len(set(included))
        else:
            covered = None
        if defects:
            penalised = "None" not in defects["reference"]
        elif listed is not None:
            penalised = "None" not in (" ".join(listed) if listed else "None")
        else:
            penalised = None
    return ResponseScore(
        covered,
        total,
        penalised,
        bonus_status,
        defects_status,
        details.get("response_chars"),
        details.get("answer_chars"),
        details.get("response_words"),
        details.get("answer_words"),
    )
