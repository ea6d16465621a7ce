"""Human studies on a mapped benchmark's multiple-choice items (``benchmarks.MCItem``).

A generic study is the multiple-choice study (``studies.choice.services``) over one
benchmark imported through a field mapping (a ``Work`` with ``benchmark="generic"``):
each ``StudyItem`` is one item (``StudyItem.mc_item``), answered once
(``ChoiceAnswer.mc_item``, round 1). This module holds what is particular to it and
needs no participant: the draw of the items (by category, so that every chosen value
of a category field gets its share), the study's language, the order a participant
sees the options in, the option keys and the reading count of the time estimate.

Everything a generic study stores about how it was drawn and run is in
``Study.sampling`` (no column of its own): ``language``, ``category_field``,
``category_values``, ``per_category`` or ``items``, ``strata`` (items drawn per value),
``items_per_participant`` (the batch one participant answers; 0: all),
``shuffle_options``, ``practice``/``attention`` (how many were drawn) and
``practice_ids``/``attention_ids`` (those the researcher named), ``attention_instruction``
and ``skipped`` (items left out, by why). A redraw with the same settings and seed
always gives the same items.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from benchmarks.models import Benchmark, MCItem, Work

from ..errors import StudyError
from ..models import StudyItem

GENERIC = Benchmark.GENERIC.value  # "generic"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# What an attention check tells the participant to pick; ``{option}`` is the text of the
# item's correct option in the study's language, so the check survives shuffling.
DEFAULT_ATTENTION_INSTRUCTION = (
    "Attention check: whatever the story says, choose the option “{option}”."
)
OPTION_PLACEHOLDER = "{option}"
MAX_ITEMS = 100_000


class GenericSpecError(StudyError):
    """A generic study's setting that cannot be used: ``field`` names it (the form field
    and the ``create_study`` option of the same name)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.reason = message


@dataclass(frozen=True)
class GenericSpec:
    """How a generic study draws its items and runs them (the form's generic fields).

    ``language``: blank for the benchmark's first. ``category_field``: blank to draw
    from every item. ``category_values``: blank for every value of the field.
    ``per_category`` items per value, or ``items`` in all shared among the values (as
    evenly as their items allow); neither: every item of the chosen values.
    ``practice``/``attention``: how many such items to draw besides the test items;
    ``practice_ids``/``attention_ids``: items the researcher names for those roles.
    """

    language: str = ""
    category_field: str = ""
    category_values: tuple[str, ...] = ()
    per_category: int | None = None
    items: int | None = None
    items_per_participant: int | None = None
    shuffle_options: bool = True
    practice: int = 0
    attention: int = 0
    practice_ids: tuple[str, ...] = ()
    attention_ids: tuple[str, ...] = ()
    attention_instruction: str = DEFAULT_ATTENTION_INSTRUCTION

    @classmethod
    def from_sampling(cls, sampling: dict[str, Any]) -> GenericSpec:
        """The spec a study was drawn with, back from its ``sampling``."""
        return cls(
            language=sampling.get("language") or "",
            category_field=sampling.get("category_field") or "",
            category_values=tuple(sampling.get("category_values") or ()),
            per_category=sampling.get("per_category"),
            items=sampling.get("items"),
            items_per_participant=sampling.get("items_per_participant") or None,
            shuffle_options=bool(sampling.get("shuffle_options", True)),
            practice=sampling.get("practice") or 0,
            attention=sampling.get("attention") or 0,
            practice_ids=tuple(sampling.get("practice_ids") or ()),
            attention_ids=tuple(sampling.get("attention_ids") or ()),
            attention_instruction=sampling.get("attention_instruction")
            or DEFAULT_ATTENTION_INSTRUCTION,
        )


def ids_parse(text: str) -> tuple[str, ...]:
    """Item ids as a researcher types them: one per line or comma-separated."""
    return tuple(dict.fromkeys(p.strip() for p in re.split(r"[,\n\r]+", text or "") if p.strip()))


# -- the benchmark ------------------------------------------------------------------------


def work_languages(work: Work) -> list[str]:
    """The benchmark's languages, the default first (as the mapping listed them)."""
    languages = list((work.extra or {}).get("languages") or [])
    if languages:
        return languages
    seen: dict[str, None] = {}
    for texts in (
        MCItem.objects.filter(work=work).order_by("position").values_list("texts", flat=True)
    ):
        seen.update(dict.fromkeys(texts or {}))
    return list(seen)


@dataclass(frozen=True)
class GenericFacts:
    """What the study form offers for one mapped benchmark: languages and category values."""

    work: Work
    languages: list[str]
    items: int
    # field -> value -> items with it, fields in the mapping's order, values sorted.
    categories: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def version(self) -> str:
        return str((self.work.extra or {}).get("version") or "")


def generic_facts(works: list[Work]) -> list[GenericFacts]:
    """Languages and category values (with item counts) of each mapped benchmark: one
    query over the items' categories, whatever the number of benchmarks."""
    counts: dict[int, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    n_items: Counter[int] = Counter()
    for work_id, categories in (
        MCItem.objects.filter(work__in=works).order_by().values_list("work_id", "categories")
    ):
        n_items[work_id] += 1
        for name, value in (categories or {}).items():
            counts[work_id][name][str(value)] += 1
    out = []
    for work in works:
        named = list((work.extra or {}).get("category_fields") or [])
        fields_ = named + sorted(set(counts[work.pk]) - set(named))
        out.append(
            GenericFacts(
                work=work,
                languages=work_languages(work),
                items=n_items[work.pk],
                categories={f: dict(sorted(counts[work.pk][f].items())) for f in fields_},
            )
        )
    return out


# -- the draw -----------------------------------------------------------------------------


def _usable(item: MCItem, language: str) -> str:
    """Why ``item`` cannot be asked in ``language`` ("" when it can)."""
    text = (item.texts or {}).get(language)
    if not text:
        return f"without a {language} text"
    options = text.get("options") or []
    if len(options) < 2:
        return "with fewer than two options"
    answers = item.answers or []
    if not answers or any(not isinstance(a, int) or not 0 <= a < len(options) for a in answers):
        return "without a correct option"
    return ""


def _shares(caps: dict[str, int], total: int, rng: random.Random) -> dict[str, int]:
    """``total`` items shared among the values as evenly as their items (``caps``) allow:
    a value with too few gives its part to the others; the remainder of an uneven split
    goes to values in a seeded order."""
    shares = dict.fromkeys(caps, 0)
    remaining = total
    open_ = [v for v in caps if caps[v] > 0]
    while remaining and open_:
        base, extra = divmod(remaining, len(open_))
        order = sorted(open_)
        rng.shuffle(order)
        for i, value in enumerate(order):
            give = min(base + (1 if i < extra else 0), caps[value] - shares[value])
            shares[value] += give
            remaining -= give
        open_ = [v for v in open_ if shares[v] < caps[v]]
    return shares


def _named(
    ids: tuple[str, ...], by_id: dict[str, MCItem], why: dict[str, str], role: str, work: Work
) -> list[MCItem]:
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise GenericSpecError(
            f"{role}_ids", f"no item {', '.join(map(repr, unknown[:5]))} in {work.title}"
        )
    if bad := [i for i in ids if why.get(i)]:
        raise GenericSpecError(f"{role}_ids", f"item {bad[0]!r} cannot be asked ({why[bad[0]]})")
    return [by_id[i] for i in ids]


def generic_sample(
    *, work: Work, spec: GenericSpec, seed: int
) -> tuple[list[tuple[int, dict[str, Any]]], dict[str, Any]]:
    """The items of a generic study over ``work``, drawn with ``seed``, and its ``sampling``.

    Returns (work id, StudyItem fields) pairs: test items grouped by category value in
    the benchmark's order, then practice, then attention items (with their roles).
    Each value is drawn with a generator seeded by the seed and the value, so adding a
    value does not redraw the others. Raises :class:`GenericSpecError` naming the
    setting for an unknown language, field, value or item, or counts it cannot meet.
    """
    if work.benchmark != GENERIC:
        raise GenericSpecError("works", f"{work.key} is not a mapped benchmark")
    languages = work_languages(work)
    language = spec.language or (languages[0] if languages else "")
    if language not in languages:
        raise GenericSpecError(
            "language",
            f"{work.title} has no {language!r} texts; its languages are "
            f"{', '.join(languages) or 'none'}",
        )
    items = list(MCItem.objects.filter(work=work).order_by("position", "pk"))
    why = {item.item_id: _usable(item, language) for item in items}
    skipped = Counter(reason for reason in why.values() if reason)
    by_id = {item.item_id: item for item in items}
    eligible = [item for item in items if not why[item.item_id]]

    facts = generic_facts([work])[0]
    field_ = spec.category_field
    if field_ and field_ not in facts.categories:
        raise GenericSpecError(
            "category_field",
            f"{work.title} has no category field {field_!r}; its fields are "
            f"{', '.join(facts.categories) or 'none'}",
        )
    if spec.category_values and not field_:
        raise GenericSpecError("category_field", "choose the field the values are of")
    known = list(facts.categories.get(field_, {})) if field_ else [""]
    if unknown := [v for v in spec.category_values if v not in known]:
        raise GenericSpecError(
            "category_values",
            f"{field_} has no value {', '.join(map(repr, unknown[:5]))} in {work.title}; "
            f"its values are {', '.join(known)}",
        )
    # The benchmark's order, however they were given: the same values, the same study.
    values = [v for v in known if v in spec.category_values] or known
    if (spec.attention_ids or spec.attention) and OPTION_PLACEHOLDER not in (
        spec.attention_instruction or ""
    ):
        raise GenericSpecError(
            "attention_instruction",
            f"write {OPTION_PLACEHOLDER} where the option to choose goes (the options "
            "are shuffled, so a check names the option, not its letter)",
        )
    if set(spec.practice_ids) & set(spec.attention_ids):
        both = sorted(set(spec.practice_ids) & set(spec.attention_ids))
        raise GenericSpecError("attention_ids", f"{both[0]!r} is a practice item already")
    practice = _named(spec.practice_ids, by_id, why, "practice", work)
    attention = _named(spec.attention_ids, by_id, why, "attention", work)
    named = {i.pk for i in practice + attention}

    def value_of(item: MCItem) -> str:
        return str((item.categories or {}).get(field_, "")) if field_ else ""

    groups: dict[str, list[MCItem]] = {v: [] for v in values}
    for item in eligible:
        if item.pk not in named and value_of(item) in groups:
            groups[value_of(item)].append(item)
    caps = {v: len(g) for v, g in groups.items()}
    label = (lambda v: f"{field_} {v!r}") if field_ else (lambda v: "the benchmark")
    if spec.per_category is not None and spec.items is not None:
        raise GenericSpecError("items", "give items per value or items in all, not both")
    if spec.per_category is not None:
        if spec.per_category < 1:
            raise GenericSpecError("per_category", "ask for at least one item per value")
        if short := [v for v in values if caps[v] < spec.per_category]:
            v = short[0]
            raise GenericSpecError(
                "per_category",
                f"{label(v)} has {caps[v]} item{'s' if caps[v] != 1 else ''} with a {language} "
                f"text; ask for at most {min(caps.values())} per value",
            )
        shares = dict.fromkeys(values, spec.per_category)
    elif spec.items is not None:
        if spec.items < len(values):
            raise GenericSpecError(
                "items",
                f"{spec.items} items cannot give each of the {len(values)} values a share: "
                f"ask for at least {len(values)}",
            )
        if spec.items > sum(caps.values()):
            raise GenericSpecError(
                "items",
                f"the chosen values have {sum(caps.values())} items with a {language} text; "
                "ask for at most that many",
            )
        shares = _shares(caps, spec.items, random.Random(f"{seed}:shares"))
    else:
        shares = caps
    if empty := [v for v in values if not shares[v]]:
        raise GenericSpecError(
            "category_values", f"{label(empty[0])} has no item with a {language} text"
        )
    tests: list[MCItem] = []
    left: list[MCItem] = []
    for value in values:
        pool = groups[value]
        picked = random.Random(f"{seed}:{field_}:{value}").sample(pool, shares[value])
        chosen = {i.pk for i in picked}
        tests += sorted(picked, key=lambda i: i.position)
        left += [i for i in pool if i.pk not in chosen]
    left.sort(key=lambda i: (i.position, i.pk))
    for role, count, extra in (
        ("practice", spec.practice, practice),
        ("attention", spec.attention, attention),
    ):
        if count < 0:
            raise GenericSpecError(role, "cannot be negative")
        if count > len(left):
            raise GenericSpecError(
                role,
                f"only {len(left)} item{'s' if len(left) != 1 else ''} of the chosen values "
                f"are left after the test items; ask for at most {len(left)}",
            )
        drawn = random.Random(f"{seed}:{role}").sample(left, count)
        drawn_ids = {i.pk for i in drawn}
        left = [i for i in left if i.pk not in drawn_ids]
        extra += sorted(drawn, key=lambda i: i.position)
    batch = spec.items_per_participant or 0
    if batch < 0:
        raise GenericSpecError("items_per_participant", "cannot be negative")
    plan = [(item, StudyItem.Role.TEST) for item in tests]
    plan += [(item, StudyItem.Role.PRACTICE) for item in practice]
    plan += [(item, StudyItem.Role.ATTENTION) for item in attention]
    sampling = {
        "language": language,
        "category_field": field_,
        "category_values": [v for v in values if field_],
        "per_category": spec.per_category,
        "items": spec.items,
        "strata": {v: shares[v] for v in values} if field_ else {},
        "items_per_participant": batch,
        "shuffle_options": spec.shuffle_options,
        "practice": spec.practice,
        "attention": spec.attention,
        "practice_ids": list(spec.practice_ids),
        "attention_ids": list(spec.attention_ids),
        "attention_instruction": spec.attention_instruction,
        "skipped": dict(sorted(skipped.items())),
    }
    return [
        (work.pk, {"mc_item": item, "role": role, "position": position})
        for position, (item, role) in enumerate(plan)
    ], sampling


# -- what a participant sees ----------------------------------------------------------------


def option_letter(index: int) -> str:
    """The key of the option at ``index``: A, B, C… (27 and on: their number)."""
    return LETTERS[index] if 0 <= index < len(LETTERS) else str(index + 1)


def study_language(sampling: dict[str, Any], item: MCItem) -> str:
    """The language the study shows ``item`` in (its first when the study has none)."""
    language = (sampling or {}).get("language") or ""
    if isinstance(item, InstructedItem):  # written in the study's language
        return language
    return language if language in (item.texts or {}) else next(iter(item.texts or {}), "")


def generic_options(item: MCItem, language: str) -> list[str]:
    return list(item.text(language).get("options") or [])


def shuffles(sampling: dict[str, Any]) -> bool:
    return bool((sampling or {}).get("shuffle_options", True))


def attention_instruction(sampling: dict[str, Any], item: MCItem, language: str) -> str:
    """The attention check's instruction with the option to choose (the item's first
    correct option, in the study's language): given away on purpose."""
    template = (sampling or {}).get("attention_instruction") or DEFAULT_ATTENTION_INSTRUCTION
    options = generic_options(item, language)
    answer = (item.answers or [0])[0]
    text = options[answer] if 0 <= answer < len(options) else ""
    return template.replace(OPTION_PLACEHOLDER, text)


def item_words(item: MCItem, language: str, words) -> int:
    """Words a participant reads for ``item``: context, question and options."""
    text = item.text(language)
    return (
        words(text.get("context"))
        + words(text.get("question"))
        + sum(words(str(o)) for o in text.get("options") or [])
    )


# -- instructed-response items the researcher writes ----------------------------------------

INSTRUCTED_QUESTION_MAX = 500
INSTRUCTED_OPTION_MAX = 200
INSTRUCTED_OPTIONS_MIN, INSTRUCTED_OPTIONS_MAX = 2, 10
INSTRUCTED_ITEM_ID = "instructed-{pk}"


@dataclass(frozen=True)
class InstructedItem:
    """An attention check the researcher wrote ("Select 'Iris' for this question"), read
    like a bank item (``MCItem``) by the pages that show and score items: the same
    ``text(language)`` and ``answers`` in every language, no context, no category. It is
    never a benchmark item: answers to it are attention checks only."""

    pk: int
    question: str
    options: tuple[str, ...]
    answer: int

    @property
    def item_id(self) -> str:
        return INSTRUCTED_ITEM_ID.format(pk=self.pk)

    @property
    def answers(self) -> list[int]:
        return [self.answer]

    categories: dict[str, Any] = field(default_factory=dict)

    def text(self, language: str = "") -> dict[str, Any]:
        return {"context": "", "question": self.question, "options": list(self.options)}


def instructed_parse(*, question: str, options: str | list[str], answer: str) -> dict[str, Any]:
    """A researcher's instructed-response item as ``StudyItem.instructed`` stores it.

    ``options``: one a line (or a list); ``answer``: the text of the option to pick,
    which must be one of them. Raises :class:`GenericSpecError` naming the field
    (``instructed_question``, ``instructed_options``, ``instructed_answer``).
    """
    question = (question or "").strip()
    if not question:
        raise GenericSpecError("instructed_question", "write the question participants see")
    if len(question) > INSTRUCTED_QUESTION_MAX:
        raise GenericSpecError(
            "instructed_question", f"at most {INSTRUCTED_QUESTION_MAX} characters"
        )
    lines = options.splitlines() if isinstance(options, str) else list(options)
    choices = [str(o).strip() for o in lines if str(o).strip()]
    if not INSTRUCTED_OPTIONS_MIN <= len(choices) <= INSTRUCTED_OPTIONS_MAX:
        raise GenericSpecError(
            "instructed_options",
            f"write {INSTRUCTED_OPTIONS_MIN} to {INSTRUCTED_OPTIONS_MAX} options, one a line "
            f"({len(choices)} given)",
        )
    if long := [o for o in choices if len(o) > INSTRUCTED_OPTION_MAX]:
        raise GenericSpecError(
            "instructed_options",
            f"an option has at most {INSTRUCTED_OPTION_MAX} characters ({long[0][:30]!r}…)",
        )
    folded = [o.casefold() for o in choices]
    if dupes := sorted({o for o in choices if folded.count(o.casefold()) > 1}):
        raise GenericSpecError("instructed_options", f"{dupes[0]!r} is written twice")
    wanted = (answer or "").strip()
    if not wanted:
        raise GenericSpecError("instructed_answer", "write the option participants must pick")
    if wanted.casefold() not in folded:
        raise GenericSpecError(
            "instructed_answer",
            f"{wanted!r} is not one of the options ({', '.join(map(repr, choices))})",
        )
    return {"question": question, "options": choices, "answer": folded.index(wanted.casefold())}


def instructed_item(study_item: StudyItem) -> InstructedItem | None:
    """``study_item``'s researcher-written check, or None for any other item."""
    data = study_item.instructed or {}
    if not data:
        return None
    return InstructedItem(
        pk=study_item.pk,
        question=data.get("question", ""),
        options=tuple(data.get("options") or ()),
        answer=int(data.get("answer", 0)),
    )


def shown_item(study_item: StudyItem) -> MCItem | InstructedItem | None:
    """What a generic study's item shows: its bank item, or the researcher's check."""
    return study_item.mc_item if study_item.mc_item_id else instructed_item(study_item)
