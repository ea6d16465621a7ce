"""Reading a speaker-guessing reply (``P0: NAME`` lines) and scoring it against gold.

One reading for every reply, ours or imported: the engine's ``parse`` and
``import_predictions`` both call :func:`read_name` / :func:`score_answer`, so a run and
an imported file are scored alike.

Tolerated: the paper's ``P0-NAME`` form and ``P0: NAME``, ``P0 = NAME``, ``P0 is
NAME``; markdown (``**P0**: Rachel``); several answers on one line; any case; an
option letter (``P0: (b)`` or ``P0: (b) Rachel``); aliases (``ADULT EDWARD`` for
``edward``) and a unique first or last word (``Hunt`` for ``Ethan Hunt``); extra words
around the name (``P0: Rachel, because she cries``; the candidate named first wins).
A code answered twice (reasoning, then a final list) keeps its last readable answer.
A name that is no candidate is ``unparseable``; a code the reply leaves out is
``missing`` when other codes were answered, else ``unparseable`` (``refused`` when the
reply declines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

OK, UNPARSEABLE, MISSING, REFUSED = "ok", "unparseable", "missing", "refused"

# "P0" as a label: start of the answer or after a separator, then ":", "-", "=", "is".
_CODE_RE = re.compile(
    r"(?<![\w])[\*\[\(\"'`_]*P\s?(\d{1,2})[\*\]\)\"'`_]*\s*(?:[:=\u2013\u2014-]+|\bis\b)\s*",
    re.IGNORECASE,
)
_LETTER_RE = re.compile(r"^\s*\(?([a-z])\)(?:\s+|$)|^\s*([a-z])[.)](?:\s+|$)|^\s*([a-z])\s*$", re.I)
_REFUSAL_RE = re.compile(
    r"\b(I can(?:no|')t (?:help|assist|answer|comply|determine)|"
    r"I(?: am|'m) (?:sorry|unable|not able)|I won't|as an AI)\b",
    re.IGNORECASE,
)
_WORD_RE = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*")
_TITLE_WORDS = {"mr", "mrs", "ms", "miss", "dr", "sir", "lady", "lord", "young", "old", "adult"}


def _fold(text: str) -> str:
    return " ".join(_WORD_RE.findall(text.casefold()))


@dataclass
class NameReader:
    """Matches answer text to one of a scene's candidates.

    ``candidates`` are the names as shown to the model (perturbed names in a perturbed
    run), in display order (option letters a, b, … follow it); ``aliases`` maps a
    candidate to other spellings (cue names, nicknames).
    """

    candidates: list[str]
    aliases: dict[str, list[str]] = field(default_factory=dict)
    _forms: list[tuple[str, str]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        forms: dict[str, set[str]] = {}
        for name in self.candidates:
            for spelling in [name, *self.aliases.get(name, [])]:
                folded = _fold(spelling)
                if folded:
                    forms.setdefault(folded, set()).add(name)
        # A first or last word ("hunt" of "ethan hunt") stands for its candidate when no
        # other candidate has it; titles ("young", "mr") never do.
        words: dict[str, set[str]] = {}
        for folded, owners in list(forms.items()):
            parts = folded.split()
            if len(parts) < 2:
                continue
            for word in {parts[0], parts[-1]} - _TITLE_WORDS:
                words.setdefault(word, set()).update(owners)
        for word, owners in words.items():
            if len(owners) == 1 and word not in forms:
                forms[word] = owners
        # Longest spellings first, so "adult edward" is found before "edward".
        self._forms = sorted(
            ((f, next(iter(o))) for f, o in forms.items() if len(o) == 1),
            key=lambda fo: -len(fo[0]),
        )

    def read(self, answer: str) -> str | None:
        """The candidate ``answer`` names, or None when it names none."""
        text = answer.strip()
        match = _LETTER_RE.match(text)
        if match:
            letter = next(g for g in match.groups() if g).lower()
            rest = text[match.end() :].strip()
            if not rest:
                index = ord(letter) - ord("a")
                return self.candidates[index] if 0 <= index < len(self.candidates) else None
            text = rest
        folded = _fold(text)
        if not folded:
            return None
        exact = [name for form, name in self._forms if form == folded]
        if exact:
            return exact[0]
        # The candidate named first, by whole words.
        padded = f" {folded} "
        best: tuple[int, int, str] | None = None
        for form, name in self._forms:
            at = padded.find(f" {form} ")
            if at >= 0 and (best is None or (at, -len(form)) < best[:2]):
                best = (at, -len(form), name)
        return best[2] if best else None


def answers_by_code(text: str, codes: list[str]) -> dict[str, list[str]]:
    """Every answer text the reply gives each asked code, in order of appearance."""
    wanted = {code.upper() for code in codes}
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        marks = list(_CODE_RE.finditer(line))
        for i, mark in enumerate(marks):
            code = f"P{int(mark.group(1))}"
            if code not in wanted:
                continue
            end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
            value = line[mark.end() : end].strip().strip(",;*`").strip()
            if value:
                found.setdefault(code, []).append(value)
    return found


@dataclass
class ReadAnswer:
    """One masked speaker's answer: the candidate (as shown) or why there is none."""

    code: str
    answer: str  # the text given, "" when none
    name: str | None  # the candidate as shown, None when not one
    status: str


def read_reply(text: str, codes: list[str], reader: NameReader) -> dict[str, ReadAnswer]:
    """Each asked code's answer in ``text``: the last one that names a candidate."""
    found = answers_by_code(text, codes)
    refused = not found and bool(_REFUSAL_RE.search(text))
    result = {}
    for code in codes:
        given = found.get(code.upper(), [])
        if not given:
            status = REFUSED if refused else (MISSING if found else UNPARSEABLE)
            result[code] = ReadAnswer(code, "", None, status)
            continue
        named = [(value, reader.read(value)) for value in given]
        readable = [(value, name) for value, name in named if name is not None]
        value, name = readable[-1] if readable else named[-1]
        result[code] = ReadAnswer(code, value, name, OK if name is not None else UNPARSEABLE)
    return result


def read_name(answer: str, candidates: list[str], aliases: dict[str, list[str]] | None = None):
    """The candidate one answer names (tolerant, as in a reply), or None."""
    return NameReader(candidates, aliases or {}).read(answer)


@dataclass
class Scored:
    """A read answer scored against gold, ready for a Prediction row."""

    parsed_answer: str
    parse_status: str
    correct: bool
    details: dict[str, Any]


def score_answer(
    *,
    answer: str | None,
    candidates: list[str],
    gold: str,
    aliases: dict[str, list[str]] | None = None,
    shown: dict[str, str] | None = None,
) -> Scored:
    """Score one answer: the candidate it names (original spelling) against ``gold``.

    ``shown`` maps a candidate to the name the model saw (perturbation); answers are
    read against the shown names and stored as the original candidate. ``None`` is a
    missing answer.
    """
    shown = shown or {}
    if answer is None:
        return Scored("", MISSING, False, {})
    display = [shown.get(c, c) for c in candidates]
    original = dict(zip(display, candidates, strict=True))
    shown_aliases = {shown.get(c, c): v for c, v in (aliases or {}).items()}
    name = NameReader(display, shown_aliases).read(answer)
    if name is None:
        return Scored(
            answer[:500],
            UNPARSEABLE,
            False,
            {"reason": "not one of the candidates: " + ", ".join(display)},
        )
    candidate = original[name]
    details = {"shown_as": name} if name != candidate else {}
    return Scored(candidate, OK, candidate.casefold() == gold.casefold(), details)
