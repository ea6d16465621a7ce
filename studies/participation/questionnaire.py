"""The exit questionnaire: the researcher's one-line-per-question syntax, the items it
makes, the answers they accept, and the columns they export.

A line is ``[* ]Question text [tag]…[: choice | choice | …]``:

- ``* `` first: the question must be answered (when it is shown);
- no tag: a single choice when choices follow the colon, else free text, as before
  tags existed, so every questionnaire written then reads the same;
- ``[multi]``: several choices may be ticked;
- ``[likert 1=Never,5=Always]``: one rating on labelled points (``[likert 1-7]``: no
  labels); ``[grid 1=Disagree,5=Agree]: statement | statement``: one rating a statement;
- ``[number 0-120]``: a whole number in a range (``[number 0-24 decimal]``, or a bound
  written with a point, takes decimals; ``[number]``: any number);
- ``[text 500]``: free text of at most that many characters;
- ``[if q2=Yes]``: shown only when the earlier question q2 was answered Yes (ticked Yes,
  for a ``[multi]``; for a ``[likert]`` the point's number or label).

Keys are ``q1``, ``q2``… by position, so rewording a question keeps its answers' column.
Items are stored as dicts on ``Study.exit_questions``; those saved before tags existed
hold only ``key``, ``label`` and ``choices``, and ``item`` reads both. Nothing here
touches the database: ``recruitment`` stores and ``exports`` writes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..errors import StudyError

CHOICE, MULTI, LIKERT, GRID, NUMBER, TEXT = "choice", "multi", "likert", "grid", "number", "text"
TYPE_NAMES = {
    CHOICE: "single choice",
    MULTI: "multiple choice",
    LIKERT: "Likert item",
    GRID: "Likert grid",
    NUMBER: "number",
    TEXT: "free text",
}
TAGS = ("single", "multi", "likert", "grid", "number", "text", "if")
MAX_ITEMS = 60
MAX_LABEL = 300
MAX_OPTION = 200
MAX_OPTIONS = 30
MAX_POINTS = 11
TEXT_LIMIT = 500  # a free-text answer's limit when the line sets none (as before tags)
MAX_TEXT_LIMIT = 5000
MAX_NUMBER_CHARS = 30

_TRAILING_TAG = re.compile(r"\[([^\[\]]*)\]\s*$")
_INTEGER = re.compile(r"^-?\d+$")
_DECIMAL = re.compile(r"^-?\d+(?:\.\d+)?$")
# "0-120", "0 to 120", or with an en dash as a word processor writes it.
_RANGE = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(?:-|\u2013|to)\s*(-?\d+(?:\.\d+)?)$")
_CONDITION = re.compile(r"^(q\d+)\s*=\s*(.+)$", re.IGNORECASE)


class QuestionnaireSyntaxError(StudyError):
    """The researcher's text does not parse: one message per faulty line, each naming it."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class AnswersInvalid(StudyError):
    """A participant's answers are refused: a message per question key, and what they
    sent, so the page can show both."""

    def __init__(self, errors: dict[str, str], submitted: dict[str, list[str]]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = errors
        self.submitted = submitted


# -- reading stored items -----------------------------------------------------------------


def item(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored question with every field its type has (old ones hold key, label, choices)."""
    choices = list(stored.get("choices") or [])
    kind = stored.get("type") or (CHOICE if choices else TEXT)
    full = {
        "key": stored["key"],
        "label": stored["label"],
        "type": kind,
        "required": bool(stored.get("required")),
        "choices": choices,
        "show_if": stored.get("show_if"),
    }
    if kind in (LIKERT, GRID):
        full["scale"] = [dict(point) for point in stored["scale"]]
    if kind == GRID:
        full["statements"] = list(stored["statements"])
    if kind == NUMBER:
        full["min"], full["max"] = stored.get("min"), stored.get("max")
        full["decimal"] = bool(stored.get("decimal"))
    if kind == TEXT:
        full["max_length"] = int(stored.get("max_length") or TEXT_LIMIT)
    return full


def items(questions: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [item(q) for q in questions or []]


def values_of(question: Mapping[str, Any]) -> list[str]:
    """The answers a choice, multiple-choice or Likert question accepts."""
    if question["type"] in (LIKERT, GRID):
        return [point["value"] for point in question["scale"]]
    return list(question["choices"])


def scale_text(scale: list[dict[str, str]]) -> str:
    """``1=Never, 2, 3, 4, 5=Always``: the points as the codebook and the page list them."""
    return ", ".join(p["value"] + (f"={p['label']}" if p["label"] else "") for p in scale)


# -- parsing ------------------------------------------------------------------------------


def parse(text: str) -> list[dict[str, Any]]:
    """The researcher's text as stored items; every faulty line is named in the error."""
    questions: list[dict[str, Any]] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        try:
            questions.append(_line(line, key=f"q{len(questions) + 1}", earlier=questions))
        except _Problem as exc:
            problems.append(f"line {number}: {exc}")
            # Keep the numbering of the lines after it: q3 is still the third question.
            questions.append({"key": f"q{len(questions) + 1}", "type": None})
    if len(questions) > MAX_ITEMS:
        problems.append(f"at most {MAX_ITEMS} questions")
    if problems:
        raise QuestionnaireSyntaxError(problems)
    return questions


class _Problem(Exception):
    """What is wrong with one line of the text, or with one answer."""


def _split_colon(line: str) -> tuple[str, str | None]:
    """The question part and the choices part: the first colon outside brackets."""
    depth = 0
    for i, char in enumerate(line):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        elif char == ":" and depth == 0:
            return line[:i], line[i + 1 :]
    return line, None


def _tags(head: str) -> tuple[str, list[tuple[str, str]]]:
    """Peel the known ``[tag …]`` off the end of the question; an unknown bracket is
    part of the wording (``Age [years]``), unless it looks like a misspelt tag."""
    tags: list[tuple[str, str]] = []
    while match := _TRAILING_TAG.search(head):
        word, _, rest = match.group(1).strip().partition(" ")
        word = word.casefold()
        if word.startswith("if") and "=" in word:  # [if q2=Yes] with no space after "if"
            word, rest = "if", match.group(1).strip()[2:]
        if word not in TAGS:
            close = difflib.get_close_matches(word, TAGS, n=1, cutoff=0.75)
            if close:
                raise _Problem(
                    f"unknown tag [{match.group(1).strip()}]; did you mean [{close[0]}]?"
                )
            break
        tags.insert(0, (word, rest.strip()))
        head = head[: match.start()]
    return head.strip(), tags


def _line(line: str, *, key: str, earlier: list[dict[str, Any]]) -> dict[str, Any]:
    required = line.startswith("*")
    if required:
        line = line[1:].strip()
    head, rest = _split_colon(line)
    label, tags = _tags(head)
    if not label:
        raise _Problem("the question has no text before its tags or colon")
    if len(label) > MAX_LABEL:
        raise _Problem(f"the question is over {MAX_LABEL} characters")
    options = [c.strip() for c in (rest or "").split("|") if c.strip()]
    kinds = [word for word, _ in tags if word != "if"]
    if len(kinds) > 1:
        raise _Problem(f"one type a question: [{kinds[0]}] and [{kinds[1]}] both given")
    if len([word for word, _ in tags if word == "if"]) > 1:
        raise _Problem("one [if …] a question")
    kind = kinds[0] if kinds else (CHOICE if options else TEXT)
    spec = next((arg for word, arg in tags if word == kind), "")
    question: dict[str, Any] = {"key": key, "label": label, "type": kind, "required": required}
    question["choices"] = []
    if kind in ("single", CHOICE, MULTI):
        question["type"] = MULTI if kind == MULTI else CHOICE
        if not options:
            raise _Problem(
                f"[{kind}] needs its choices after a colon, e.g. 'Question [{kind}]: A | B'"
            )
        question["choices"] = _options(options, what="choice")
    elif options and kind != GRID:
        raise _Problem(
            f"a {TYPE_NAMES[kind]} takes nothing after the colon"
            + ("; for several statements use [grid …]" if kind == LIKERT else "")
        )
    if kind in (LIKERT, GRID):
        question["scale"] = _scale(spec, kind=kind)
    if kind == GRID:
        if not options:
            raise _Problem(
                "[grid …] needs its statements after a colon: 'Question [grid 1-5]: A | B'"
            )
        question["statements"] = _options(options, what="statement")
    if kind == NUMBER:
        question.update(_number_range(spec))
    if kind == TEXT:
        question["max_length"] = _text_limit(spec)
    condition = next((arg for word, arg in tags if word == "if"), None)
    if condition is not None:
        question["show_if"] = _condition(condition, earlier=earlier)
    return question


def _options(options: list[str], *, what: str) -> list[str]:
    if len(options) > MAX_OPTIONS:
        raise _Problem(f"at most {MAX_OPTIONS} {what}s")
    seen: set[str] = set()
    for option in options:
        if len(option) > MAX_OPTION:
            raise _Problem(f"the {what} '{option[:30]}…' is over {MAX_OPTION} characters")
        if option.casefold() in seen:
            raise _Problem(f"the {what} '{option}' is given twice")
        seen.add(option.casefold())
    return options


def _scale(spec: str, *, kind: str) -> list[dict[str, str]]:
    """``1=Never,5=Always`` or ``1-7`` (or both: ``1-7, 1=No, 7=Yes``): whole-number points."""
    example = f"e.g. [{kind} 1=Never,5=Always] or [{kind} 1-7]"
    span: tuple[int, int] | None = None
    labels: dict[int, str] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        value, equals, label = part.partition("=")
        if equals:
            if not _INTEGER.match(value.strip()) or not label.strip():
                raise _Problem(f"'{part}' is not a point: write number=label, {example}")
            if len(label.strip()) > MAX_OPTION:
                raise _Problem(f"the point label '{label.strip()[:30]}…' is too long")
            labels[int(value)] = label.strip()
        elif (match := _RANGE.match(part)) and _INTEGER.match(match.group(1)):
            span = (int(match.group(1)), int(match.group(2)))
        else:
            raise _Problem(f"'{part}' is neither a range nor number=label, {example}")
    if span is None:
        if len(labels) < 2:
            raise _Problem(f"[{kind} …] needs its points, {example}")
        span = (min(labels), max(labels))
    low, high = span
    if not 2 <= high - low + 1 <= MAX_POINTS:
        raise _Problem(f"a scale has 2 to {MAX_POINTS} points, from low to high ({example})")
    outside = [n for n in labels if not low <= n <= high]
    if outside:
        raise _Problem(f"point {outside[0]} is outside {low}-{high}")
    return [{"value": str(n), "label": labels.get(n, "")} for n in range(low, high + 1)]


def _number_range(spec: str) -> dict[str, Any]:
    words = spec.split()
    decimal = bool(words) and words[-1].casefold() == "decimal"
    if decimal:
        words = words[:-1]
    if not words:
        return {"min": None, "max": None, "decimal": decimal}
    match = _RANGE.match(" ".join(words))
    if not match:
        raise _Problem(f"'{spec}' is not a range: e.g. [number 0-120] or [number 0-24 decimal]")
    low, high = match.groups()
    decimal = decimal or "." in low or "." in high
    if Decimal(low) > Decimal(high):
        raise _Problem(f"the range {low}-{high} runs backwards")
    return {"min": low, "max": high, "decimal": decimal}


def _text_limit(spec: str) -> int:
    if not spec:
        return TEXT_LIMIT
    if not _INTEGER.match(spec) or not 1 <= int(spec) <= MAX_TEXT_LIMIT:
        raise _Problem(f"[text {spec}]: the limit is a number of characters, 1 to {MAX_TEXT_LIMIT}")
    return int(spec)


def _condition(spec: str, *, earlier: list[dict[str, Any]]) -> dict[str, str]:
    match = _CONDITION.match(spec.strip())
    if not match:
        raise _Problem(f"[if {spec}]: write [if q2=Yes], naming an earlier question and an answer")
    key, value = match.group(1).casefold(), match.group(2).strip()
    target = next((q for q in earlier if q["key"] == key), None)
    if target is None:
        last = f"q1 to q{len(earlier)}" if earlier else "none: this is the first question"
        raise _Problem(f"[if {spec}]: {key} is not an earlier question ({last})")
    if target["type"] is None:
        raise _Problem(f"[if {spec}]: {key} has an error of its own")
    if target["type"] not in (CHOICE, MULTI, LIKERT):
        raise _Problem(
            f"[if {spec}]: {key} is a {TYPE_NAMES[target['type']]}; "
            "a condition reads a single choice, a multiple choice or a Likert item"
        )
    accepted = values_of(target)
    if target["type"] == LIKERT:  # a point by its label as well as its number
        by_label = {p["label"].casefold(): p["value"] for p in target["scale"] if p["label"]}
        value = by_label.get(value.casefold(), value)
    if value not in accepted:
        raise _Problem(f"[if {spec}]: {key} has no answer '{value}' (it has {', '.join(accepted)})")
    return {"key": key, "value": value}


# -- writing back -------------------------------------------------------------------------


def text(questions: list[Mapping[str, Any]]) -> str:
    """The questionnaire back as the researcher types it (``parse`` reads it back the same)."""
    lines = []
    for q in items(questions):
        tags = []
        if q["type"] == MULTI:
            tags.append("[multi]")
        elif q["type"] in (LIKERT, GRID):
            tags.append(f"[{q['type']} {_scale_spec(q['scale'])}]")
        elif q["type"] == NUMBER:
            bounds = f" {q['min']}-{q['max']}" if q["min"] is not None else ""
            decimal = " decimal" if q["decimal"] and "." not in bounds else ""
            tags.append(f"[number{bounds}{decimal}]")
        elif q["type"] == TEXT and q["max_length"] != TEXT_LIMIT:
            tags.append(f"[text {q['max_length']}]")
        if q["show_if"]:
            tags.append(f"[if {q['show_if']['key']}={q['show_if']['value']}]")
        after = q["statements"] if q["type"] == GRID else q["choices"]
        line = ("* " if q["required"] else "") + " ".join([q["label"], *tags])
        lines.append(line + (": " + " | ".join(after) if after else ""))
    return "\n".join(lines)


def _scale_spec(scale: list[dict[str, str]]) -> str:
    """A scale as ``_scale`` reads it: its labelled points, after its range when an end
    has no label (``1-7, 4=Neutral``)."""
    labelled = [f"{p['value']}={p['label']}" for p in scale if p["label"]]
    if not (scale[0]["label"] and scale[-1]["label"]):
        labelled.insert(0, f"{scale[0]['value']}-{scale[-1]['value']}")
    return ",".join(labelled)


def summary(question: Mapping[str, Any]) -> str:
    """What a question takes, in a few words (the editor's preview and the codebook)."""
    q = item(question)
    if q["type"] in (CHOICE, MULTI):
        return " | ".join(q["choices"])
    if q["type"] in (LIKERT, GRID):
        return scale_text(q["scale"])
    if q["type"] == NUMBER:
        kind = "a number" if q["decimal"] else "a whole number"
        return kind + (f" from {q['min']} to {q['max']}" if q["min"] is not None else "")
    return f"at most {q['max_length']} characters"


# -- answers ------------------------------------------------------------------------------


def answers_clean(
    questions: list[Mapping[str, Any]], submitted: Mapping[str, list[str]]
) -> dict[str, Any]:
    """The answers to store, or ``AnswersInvalid`` with a message per question.

    ``submitted`` maps each form field to its values (a multiple choice sends several;
    a grid one field a statement, ``q4_1``…). Questions are read in order, so a hidden
    question (its condition unmet) is neither required nor kept.
    """
    clean: dict[str, Any] = {}
    errors: dict[str, str] = {}
    visible: set[str] = set()
    for q in items(questions):
        if q["show_if"] and not _met(q["show_if"], clean, visible):
            continue
        visible.add(q["key"])
        try:
            value = _answer(q, submitted)
        except _Problem as exc:
            errors[q["key"]] = str(exc)
            continue
        if value in ("", [], {}):
            if q["required"]:
                errors[q["key"]] = _missing(q)
            continue
        clean[q["key"]] = value
    if errors:
        raise AnswersInvalid(errors, {k: list(v) for k, v in submitted.items()})
    return clean


def _met(condition: Mapping[str, str], clean: Mapping[str, Any], visible: set[str]) -> bool:
    answer = clean.get(condition["key"])
    chosen = answer if isinstance(answer, list) else [answer]
    return condition["key"] in visible and condition["value"] in chosen


def _first(submitted: Mapping[str, list[str]], name: str) -> str:
    values = submitted.get(name) or [""]
    return (values[0] or "").strip()


def _answer(q: dict[str, Any], submitted: Mapping[str, list[str]]) -> Any:
    key = q["key"]
    if q["type"] == MULTI:
        picked = [v.strip() for v in submitted.get(key) or [] if v.strip()]
        if any(v not in q["choices"] for v in picked):
            raise _Problem("choose among the options")
        return [c for c in q["choices"] if c in picked]  # the options' order, once each
    if q["type"] == GRID:
        rows = {}
        points = values_of(q)
        for n, _statement in enumerate(q["statements"], start=1):
            value = _first(submitted, f"{key}_{n}")
            if value and value not in points:
                raise _Problem("choose one of the points for each statement")
            if value:
                rows[str(n)] = value
        if q["required"] and rows and len(rows) < len(q["statements"]):
            raise _Problem("rate every statement")
        return rows
    value = _first(submitted, key)
    if not value:
        return ""
    if q["type"] in (CHOICE, LIKERT):
        if value not in values_of(q):
            raise _Problem("choose one of the options")
        return value
    if q["type"] == NUMBER:
        return _number(q, value)
    if len(value) > q["max_length"]:
        raise _Problem(f"at most {q['max_length']} characters (this is {len(value)})")
    return value


def _number(q: dict[str, Any], value: str) -> str:
    written = value.replace(",", ".") if q["decimal"] else value  # 2,5 as well as 2.5
    pattern = _DECIMAL if q["decimal"] else _INTEGER
    expected = "a number" if q["decimal"] else "a whole number"
    if q["min"] is not None:
        expected += f" from {q['min']} to {q['max']}"
    if len(written) > MAX_NUMBER_CHARS or not pattern.match(written):
        raise _Problem(f"enter {expected}")
    number = Decimal(written)  # the pattern admits only plain numbers
    if q["min"] is not None and not Decimal(q["min"]) <= number <= Decimal(q["max"]):
        raise _Problem(f"enter {expected}")
    # "f": Decimal("10").normalize() alone would print 1E+1.
    return format(number.normalize(), "f") if q["decimal"] else str(int(number))


def _missing(q: dict[str, Any]) -> str:
    return {
        MULTI: "tick at least one option",
        GRID: "rate every statement",
        NUMBER: "enter a number",
        TEXT: "write an answer",
    }.get(q["type"], "choose an answer")


# -- the page -----------------------------------------------------------------------------


def form_items(
    questions: list[Mapping[str, Any]],
    *,
    submitted: Mapping[str, list[str]] | None = None,
    errors: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The questions as the participant's page draws them, with what they sent kept."""
    submitted, errors = submitted or {}, errors or {}
    labels = {q["key"]: q["label"] for q in items(questions)}
    drawn = []
    for q in items(questions):
        key = q["key"]
        sent = [v.strip() for v in submitted.get(key) or []]
        entry = {**q, "error": errors.get(key, ""), "value": sent[0] if sent else ""}
        if q["type"] in (CHOICE, MULTI):
            entry["options"] = [
                {"value": c, "label": c, "checked": c in sent, "n": n}
                for n, c in enumerate(q["choices"], start=1)
            ]
        if q["type"] == LIKERT:
            entry["options"] = _points(q, sent)
        if q["type"] == GRID:
            entry["rows"] = [
                {
                    "name": f"{key}_{n}",
                    "statement": statement,
                    "options": _points(q, submitted.get(f"{key}_{n}") or []),
                }
                for n, statement in enumerate(q["statements"], start=1)
            ]
        if q["show_if"]:
            entry["show_if_label"] = labels[q["show_if"]["key"]]
            entry["show_if_text"] = _answer_text(q["show_if"], questions)
        drawn.append(entry)
    return drawn


def _points(q: dict[str, Any], sent: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "value": p["value"],
            "label": p["label"],
            "checked": p["value"] in sent,
            "n": n,
        }
        for n, p in enumerate(q["scale"], start=1)
    ]


def _answer_text(condition: Mapping[str, str], questions: list[Mapping[str, Any]]) -> str:
    """The condition's answer as the participant reads it: a Likert point with its label."""
    target = next(q for q in items(questions) if q["key"] == condition["key"])
    if target["type"] == LIKERT:
        point = next(p for p in target["scale"] if p["value"] == condition["value"])
        return f"{point['value']} ({point['label']})" if point["label"] else point["value"]
    return condition["value"]


# -- exports ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One column of the wide export: a question, or a statement of a grid, or an option
    of a multiple choice (1 ticked, 0 not)."""

    name: str
    key: str
    type: str
    question: str
    part: str  # the grid's statement or the multiple choice's option; "" for the rest
    values: str
    required: bool
    shown_if: str


def columns(questions: list[Mapping[str, Any]]) -> list[Column]:
    """The wide export's answer columns for one version of the questionnaire."""
    out = []
    for q in items(questions):
        condition = f"{q['show_if']['key']}={q['show_if']['value']}" if q["show_if"] else ""
        common = {"key": q["key"], "type": q["type"], "question": q["label"]}
        common |= {"required": q["required"], "shown_if": condition}
        if q["type"] == MULTI:
            for n, option in enumerate(q["choices"], start=1):
                name = f"{q['key']}_{n}"
                out.append(Column(name, part=option, values="1 ticked, 0 not", **common))
        elif q["type"] == GRID:
            for n, statement in enumerate(q["statements"], start=1):
                out.append(Column(f"{q['key']}_{n}", part=statement, values=summary(q), **common))
        else:
            out.append(Column(q["key"], part="", values=summary(q), **common))
    return out


def cells(questions: list[Mapping[str, Any]], answers: Mapping[str, Any]) -> dict[str, str]:
    """One participant's answers as the wide export's cells. Empty: not answered or not
    shown; a multiple choice answered with some option ticked has 0 for the others."""
    row: dict[str, str] = {}
    for q in items(questions):
        answer = answers.get(q["key"])
        if q["type"] == MULTI:
            ticked = answer if isinstance(answer, list) else []
            for n, option in enumerate(q["choices"], start=1):
                row[f"{q['key']}_{n}"] = ("1" if option in ticked else "0") if ticked else ""
        elif q["type"] == GRID:
            rated = answer if isinstance(answer, dict) else {}
            for n in range(1, len(q["statements"]) + 1):
                row[f"{q['key']}_{n}"] = rated.get(str(n), "")
        else:
            row[q["key"]] = "" if answer is None else str(answer)
    return row


def long_answers(
    questions: list[Mapping[str, Any]], answers: Mapping[str, Any]
) -> list[dict[str, str]]:
    """The long export's rows for one participant: one a question, one a grid statement
    (key ``q4_1``…); a multiple choice's ticks joined with " | "."""
    rows = []
    for q in items(questions):
        answer = answers.get(q["key"])
        if q["type"] == GRID:
            rated = answer if isinstance(answer, dict) else {}
            for n, statement in enumerate(q["statements"], start=1):
                rows.append(
                    {
                        "key": f"{q['key']}_{n}",
                        "question": f"{q['label']}: {statement}",
                        "choices": summary(q),
                        "answer": rated.get(str(n), ""),
                    }
                )
            continue
        if isinstance(answer, list):
            answer = " | ".join(answer)
        choices = summary(q) if q["type"] in (CHOICE, MULTI, LIKERT) else ""
        rows.append(
            {"key": q["key"], "question": q["label"], "choices": choices, "answer": answer or ""}
        )
    return rows
