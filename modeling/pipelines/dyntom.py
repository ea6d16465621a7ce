"""DynToM on the run engine: one prompt per social stage, answers as a JSON object.

The prompt shows the characters' profiles, the story (each scenario's background and
dialogue; never the sketch, which holds the gold trajectory) and every question of the
stage with lettered options (paper Appendix B.2). The reply is read tolerantly: code
fences, prose around the object, single quotes, trailing commas, upper-case letters and
values such as ``"b. Julia is happy"`` or ``"(b)"`` all parse; a question the object
leaves out is ``missing``, a reply with no answers at all is ``unparseable`` (or
``refused`` when it declines). Correctness is an exact letter match.
"""

from __future__ import annotations

import ast
import json
import re
import string
from collections.abc import Iterator, Sequence
from typing import Any

from django.db.models import Prefetch

from benchmarks.models import Benchmark, DynToMQuestion, DynToMScenario, Work

from .base import CallUnit, ParsedItem, Pipeline

_OPTION_PREFIX_RE = re.compile(r"^\s*\(?([a-z])[.)]\s+", re.IGNORECASE)
_FENCE_RE = re.compile(r"```[a-zA-Z]*\s*|```")
# A key followed by a letter, for replies whose object is not valid JSON or Python.
_PAIR_RE = re.compile(
    r"""["']?(?P<key>type_[a-z]+_[a-z]+_\d+)["']?\s*[:=]\s*["'(]?\s*(?P<letter>[a-zA-Z])\b"""
)
_REFUSAL_RE = re.compile(
    r"\b(I can(?:no|')t (?:help|assist|answer|comply)|I(?: am|'m) (?:sorry|unable|not able)|"
    r"I won't|as an AI)\b",
    re.IGNORECASE,
)
_TRAILING_COMMA_RE = re.compile(r",\s*([}\]])")
_ASCII_LETTERS = frozenset(string.ascii_letters)


def option_letter(index: int) -> str:
    return chr(ord("a") + index)


def option_text(option: str) -> str:
    """The option without its ``a. `` prefix (the release has it; other data may not)."""
    return _OPTION_PREFIX_RE.sub("", option, count=1)


def render_story(scenarios: Sequence[DynToMScenario | Any]) -> str:
    """The story from scenarios (instances, or rows with ``number``, ``background`` and
    ``dialogue``), in the order given."""
    parts = []
    for scenario in scenarios:
        lines = [f"Scenario {scenario.number}", f"Background: {scenario.background}"]
        # Turns {"speaker", "text"} in order, whatever shape the source file used.
        lines.extend(f"{turn['speaker']}: {turn['text']}" for turn in scenario.dialogue)
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def render_questions(questions: Sequence[DynToMQuestion | Any]) -> str:
    """The questions with lettered options (instances, or rows with ``key``, ``text``
    and ``options``), in the order given."""
    blocks = []
    for question in questions:
        options = "\n".join(
            f"{option_letter(i)}. {option_text(option)}"
            for i, option in enumerate(question.options)
        )
        blocks.append(f"[{question.key}] {question.text}\n{options}")
    return "\n\n".join(blocks)


def _json_candidates(text: str) -> list[str]:
    """Every balanced ``{...}`` span in the text, last first (CoT puts the answer last)."""
    spans = []
    depth = 0
    start = -1
    in_string = False
    quote = ""
    escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                in_string = False
            continue
        if ch == '"' and depth > 0:
            in_string, quote = True, ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return list(reversed(spans))


def _candidates(cleaned: str) -> Iterator[str]:
    """The whole reply first when it is one object (the usual case: no scan needed)."""
    stripped = cleaned.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        yield stripped
    yield from _json_candidates(cleaned)


def _load_object(candidate: str) -> dict[str, Any] | None:
    for attempt in (candidate, _TRAILING_COMMA_RE.sub(r"\1", candidate)):
        try:
            value = json.loads(attempt)
        except ValueError:
            try:
                value = ast.literal_eval(attempt)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
        if isinstance(value, dict):
            return value
    return None


def _letter(value: Any) -> str | None:
    """``"b"``, ``"B"``, ``"b."``, ``"(b)"``, ``"b. text"``, ``["b"]`` -> ``"b"``."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str):
        return None
    if len(value) == 1:  # the usual answer; skips the regex (71 per reply add up)
        return value.lower() if value in _ASCII_LETTERS else None
    match = re.match(r"^\s*\(?\s*([a-zA-Z])\s*(?:[.):]|\s|$)", value)
    return match.group(1).lower() if match else None


def parse_answers(text: str, keys: list[str]) -> dict[str, str | None]:
    """Question key -> letter (``None`` when given but not a letter) for the keys found."""
    wanted = set(keys)
    cleaned = _FENCE_RE.sub("", text)
    for candidate in _candidates(cleaned):
        obj = _load_object(candidate)
        if obj is None:
            continue
        # Some models nest the answers, e.g. {"answers": {...}}.
        nested = [v for v in obj.values() if isinstance(v, dict)]
        for answers in (obj, *nested):
            found = {}
            for k, v in answers.items():
                key = k.strip() if isinstance(k, str) else str(k).strip()
                if key in wanted:
                    found[key] = v
            if found:
                return {key: _letter(value) for key, value in found.items()}
    pairs = {m["key"]: m["letter"].lower() for m in _PAIR_RE.finditer(cleaned)}
    return {key: letter for key, letter in pairs.items() if key in wanted}


# Stages read in the first page, doubling up to the last size (see iter_units).
FIRST_UNITS_PAGE = 4
LAST_UNITS_PAGE = 64


def _with_stages(works):
    """``works`` with their stage, scenarios and questions, as units are built from them."""
    return works.select_related("stage").prefetch_related(
        Prefetch("stage__scenarios", queryset=DynToMScenario.objects.order_by("number")),
        Prefetch(
            "stage__questions",
            # The type and mental state too: the harness export labels each
            # question with them (one query per question otherwise).
            queryset=DynToMQuestion.objects.order_by("position").only(
                "id",
                "stage_id",
                "key",
                "position",
                "text",
                "options",
                "gold_letter",
                "question_type",
                "mental_state",
            ),
        ),
    )


class DynToMPipeline(Pipeline):
    benchmark = Benchmark.DYNTOM
    methods = ("vanilla", "cot")
    item_field = "dyntom_question"
    # Paper section 5.1: temperature 0.7 and top-p 0.9 for every model.
    default_params = {"temperature": 0.7, "top_p": 0.9}

    def works(self, selection: dict[str, Any]):
        return _with_stages(self._selected(selection))

    @staticmethod
    def _selected(selection: dict[str, Any]):
        works = Work.objects.filter(benchmark=Benchmark.DYNTOM, stage__isnull=False)
        if keys := selection.get("works"):
            works = works.filter(key__in=keys)
        if split := selection.get("split"):
            works = works.filter(split=split)
        works = works.order_by("key")
        if limit := selection.get("limit"):
            works = works[: int(limit)]
        return works

    def build_units(self, *, selection, template) -> list[CallUnit]:
        return list(self.iter_units(selection=selection, template=template))

    def iter_units_for_run(self, *, run) -> Iterator[CallUnit]:
        return self.iter_units(selection=run.selection, template=run.template)

    def iter_units(self, *, selection, template) -> Iterator[CallUnit]:
        """The units in :meth:`build_units`'s order, read a few stages at a time.

        The first stages come from a small query so the engine's first wave of calls
        leaves before the rest are read and rendered; the pages double from there, so
        a wide first wave reads little more than it needs.
        """
        ids = list(self._selected(selection).values_list("pk", flat=True))
        start, page = 0, FIRST_UNITS_PAGE
        while start < len(ids):
            chunk = ids[start : start + page]
            start, page = start + len(chunk), min(2 * page, LAST_UNITS_PAGE)
            yield from self._units_of(chunk, template)

    @staticmethod
    def _units_of(work_ids: list[int], template) -> Iterator[CallUnit]:
        """The units of these works, read as rows rather than model instances: a
        stage's ~70 questions as instances (and the stage's JSON fields, which the
        prompt never shows) cost most of a page's reading, ~2 ms a stage, while the
        first wave waits for it."""
        works = list(
            Work.objects.filter(pk__in=work_ids, stage__isnull=False)
            .order_by("key")
            .values_list("key", "stage__id", "stage__characters_information", named=True)
        )
        stage_ids = [work.stage__id for work in works]
        scenarios: dict[int, list[Any]] = {}
        for scenario in (
            DynToMScenario.objects.filter(stage_id__in=stage_ids)
            .order_by("stage_id", "number")
            .values_list("stage_id", "number", "background", "dialogue", named=True)
        ):
            scenarios.setdefault(scenario.stage_id, []).append(scenario)
        questions: dict[int, list[Any]] = {}
        for question in (
            DynToMQuestion.objects.filter(stage_id__in=stage_ids)
            .order_by("stage_id", "position")
            .values_list("id", "stage_id", "key", "text", "options", "gold_letter", named=True)
        ):
            questions.setdefault(question.stage_id, []).append(question)
        for work in works:
            stage_questions = questions.get(work.stage__id)
            if not stage_questions:
                continue
            fields = {
                "characters_information": work.stage__characters_information,
                "story": render_story(scenarios.get(work.stage__id, [])),
                "questions": render_questions(stage_questions),
            }
            messages = []
            if template.system:
                messages.append({"role": "system", "content": template.system.format(**fields)})
            messages.append({"role": "user", "content": template.user.format(**fields)})
            yield CallUnit(
                key=f"dyntom:{work.key}",
                messages=messages,
                item_ids=[q.id for q in stage_questions],
                items=[
                    {"id": q.id, "key": q.key, "options": len(q.options), "gold": q.gold_letter}
                    for q in stage_questions
                ],
            )

    def parse(self, *, unit: CallUnit, text: str) -> list[ParsedItem]:
        answers = parse_answers(text, [item["key"] for item in unit.items])
        refused = not answers and bool(_REFUSAL_RE.search(text))
        parsed = []
        for item in unit.items:
            pk, key = item["id"], item["key"]
            last = option_letter(item["options"] - 1)
            if key not in answers:
                status = "refused" if refused else ("missing" if answers else "unparseable")
                parsed.append(ParsedItem(pk, "", status, False))
                continue
            letter = answers[key]
            if letter is None or not "a" <= letter <= last:
                parsed.append(
                    ParsedItem(
                        pk,
                        letter or "",
                        "unparseable",
                        False,
                        {"reason": f"not one of the option letters a-{last}"},
                    )
                )
                continue
            parsed.append(ParsedItem(pk, letter, "ok", letter == item["gold"]))
        return parsed
