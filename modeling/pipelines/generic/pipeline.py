# ruff: noqa: RUF001
"""Any mapped multiple-choice benchmark on the run engine: one item per prompt.

A run answers one item set (a Work of benchmark "generic", kind "item_set") in one of
its languages, optionally only the items whose categories take given values. Each
prompt shows the item's context, question and options lettered A, B, … in that
language; with the run option ``shuffle`` the options appear in an order drawn from
the run's stored ``shuffle_seed`` and the item's id, so the same seed shows every
item the same way in every run (replies stay cached, runs compare item by item) and
another seed shows other orders.

The reply is read by :func:`~.answers.read_choice` (a letter or the option's text).
``parsed_answer`` is the chosen option's letter in the item's own order, whatever
order was shown; a shuffled prediction's ``details`` keep the order shown
(``order[i]`` is the item's index of the option shown at position i) and the letter
the model gave (``shown``). Correct means the option is among the item's answers.
"""

from __future__ import annotations

import hashlib
import random
from typing import TYPE_CHECKING, Any

from benchmarks.models import Benchmark, MCItem, Work

from ..base import CallUnit, ParsedItem, Pipeline
from .answers import OK, option_letter, read_choice
from .prompts import GENERIC_TEMPLATE_LANGUAGES

if TYPE_CHECKING:
    from modeling.models import PromptTemplate, Run

VANILLA, COT = "vanilla", "cot"
SELECTION_KEYS = ("works", "language", "categories", "limit")
OPTION_KEYS = ("shuffle", "shuffle_seed")
MAX_SEED = 2**31 - 1
# RunCall.unit_key holds 200 characters; longer item ids are hashed.
_UNIT_KEY_MAX = 200
# Shown when an item has no context (a question that stands alone).
_NO_CONTEXT = {"en": "(none)", "zh": "（无）"}
_LABEL = Benchmark.GENERIC.label


def option_order(*, seed: int, item_id: str, count: int) -> list[int]:
    """The order a shuffled run shows an item's options in: ``order[i]`` is the item's
    index of the option shown at position i. A function of the seed and the item id
    only (random.Random seeded with a string is the same on every platform)."""
    order = list(range(count))
    random.Random(f"{seed}:{item_id}").shuffle(order)
    return order


def letters_text(count: int, language: str) -> str:
    """ "A, B, C or D" / "A、B、C 或 D": the letters a reply may give."""
    letters = [option_letter(i) for i in range(count)]
    if count < 2:
        return "".join(letters)
    if _template_language(language) == "zh":
        return "、".join(letters[:-1]) + " 或 " + letters[-1]
    return ", ".join(letters[:-1]) + " or " + letters[-1]


def unit_key(item_id: str) -> str:
    key = f"generic:{item_id}"
    if len(key) <= _UNIT_KEY_MAX:
        return key
    return "generic:h-" + hashlib.sha256(item_id.encode()).hexdigest()


def _template_language(language: str) -> str:
    """The default template for ``language``: its own where we wrote one ("zh-CN" -> "zh"),
    else English instructions around the item's text."""
    base = (language or "").split("-")[0].split("_")[0].lower()
    return base if base in GENERIC_TEMPLATE_LANGUAGES else "en"


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
        return value.strip().lower() in ("true", "yes", "1")
    raise ValueError(f"option {name}: expected true or false, got {value!r}")


def _int(name: str, value: Any, low: int, high: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"option {name}: expected a whole number, got {value!r}") from None
    if isinstance(value, bool) or (isinstance(value, float) and value != number):
        raise ValueError(f"option {name}: expected a whole number, got {value!r}")
    if not low <= number <= high:
        raise ValueError(f"option {name}: expected a number from {low} to {high}")
    return number


def parse_categories(text: str) -> dict[str, list[str]]:
    """``FIELD=VALUE`` lines -> ``{field: [values]}`` (a field may take several lines),
    as the run form and ``run_model --category`` take them; ValueError for a bad line."""
    categories: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        field, sep, value = line.partition("=")
        if not sep or not field.strip() or not value.strip():
            raise ValueError(f"{line.strip()!r}: expected FIELD=VALUE")
        values = categories.setdefault(field.strip(), [])
        if value.strip() not in values:
            values.append(value.strip())
    return categories


def item_set(key: str) -> Work:
    """The generic benchmark (item set) named ``key``; ValueError naming it otherwise."""
    work = Work.objects.filter(benchmark=Benchmark.GENERIC, key=key).first()
    if work is None:
        raise ValueError(f"works: no {_LABEL} item set {key!r}")
    return work


def _items(work: Work):
    return MCItem.objects.filter(work=work).order_by("position", "pk")


def _matches(categories: dict[str, Any], wanted: dict[str, list[str]]) -> bool:
    return all(str(categories.get(field, "")) in values for field, values in wanted.items())


class GenericPipeline(Pipeline):
    benchmark = Benchmark.GENERIC
    methods = (VANILLA, COT)
    item_field = "mc_item"
    # Greedy decoding: a multiple-choice answer is scored once, not sampled.
    default_params = {"temperature": 0.0}

    def default_template_name(self, method: str) -> str:
        return f"generic-{method}-en"

    def template_name(self, *, method: str, selection: dict[str, Any]) -> str:
        return f"generic-{method}-{_template_language(selection.get('language', ''))}"

    # -- settings --------------------------------------------------------------------

    def clean_options(self, *, method: str, options: dict[str, Any]) -> dict[str, Any]:
        if unknown := sorted(set(options) - set(OPTION_KEYS)):
            raise ValueError(
                f"option(s) {', '.join(unknown)} do not apply to {_LABEL} runs; "
                f"they take {', '.join(OPTION_KEYS)}"
            )
        shuffle = _bool("shuffle", options.get("shuffle", False))
        seed = options.get("shuffle_seed")
        if not shuffle:
            if seed not in (None, ""):
                raise ValueError("option shuffle_seed: set shuffle=true to shuffle the options")
            return {"shuffle": False}
        # Default 0: every run shows the same orders unless told otherwise, so runs of
        # different models answer the very same prompts.
        seed = 0 if seed in (None, "") else _int("shuffle_seed", seed, 0, MAX_SEED)
        return {"shuffle": True, "shuffle_seed": seed}

    def clean_selection(self, *, selection: dict[str, Any]) -> dict[str, Any]:
        """One item set, a language it has (default: its first), category values it
        has (``{"ability": ["false belief", …]}``: values of one field are alternatives,
        fields all apply) and a limit; ValueError naming the field at fault, also when
        no item is left."""
        if unknown := sorted(set(selection) - set(SELECTION_KEYS)):
            raise ValueError(
                f"selection: {', '.join(unknown)} do not apply to {_LABEL} runs; "
                f"they take {', '.join(SELECTION_KEYS)}"
            )
        keys = selection.get("works") or []
        if isinstance(keys, str):
            keys = [keys]
        if not keys:
            raise ValueError(
                f"works: choose the {_LABEL} item set to run (its key, e.g. tombench@1.0)"
            )
        if len(keys) > 1:
            raise ValueError(f"works: a run answers one item set; got {', '.join(keys)}")
        work = item_set(keys[0])
        rows = list(_items(work).values_list("item_id", "texts", "categories"))
        name = f"{work.title} ({work.key})"
        if not rows:
            raise ValueError(f"works: {name} has no items")

        languages = list(work.extra.get("languages") or [])
        for _, texts, _ in rows:
            languages += [lang for lang in texts if lang not in languages]
        language = selection.get("language") or languages[0]
        if not isinstance(language, str) or language not in languages:
            raise ValueError(f"language {language!r}: {name} has {', '.join(languages)}")

        wanted = self._clean_categories(selection.get("categories"), work, rows, name)
        chosen = [(item_id, texts) for item_id, texts, cats in rows if _matches(cats, wanted)]
        # An item without a text in the run's language is left out, as a study leaves
        # it out (ToMBench has one whose English part the release lost): the run's
        # call count says how many are asked.
        if chosen and not any(language in texts for _, texts in chosen):
            raise ValueError(
                f"language {language!r}: no chosen item of {name} has a {language} text"
            )
        chosen = [(item_id, texts) for item_id, texts in chosen if language in texts]
        limit = selection.get("limit")
        if limit not in (None, ""):
            try:
                limit = int(limit)
            except (TypeError, ValueError):
                raise ValueError(f"limit: expected a whole number, got {limit!r}") from None
            if limit < 1:
                raise ValueError("limit: expected at least 1")
            chosen = chosen[:limit]
        if not chosen:
            described = "; ".join(f"{f} in {', '.join(v)}" for f, v in wanted.items())
            raise ValueError(f"categories: no item of {name} has {described}")
        clean: dict[str, Any] = {"works": [work.key], "language": language}
        if wanted:
            clean["categories"] = wanted
        if limit not in (None, ""):
            clean["limit"] = limit
        return clean

    @staticmethod
    def _clean_categories(
        value: Any, work: Work, rows: list[tuple], name: str
    ) -> dict[str, list[str]]:
        if value in (None, "", {}):
            return {}
        if not isinstance(value, dict):
            raise ValueError('categories: expected {"field": ["value", …]}')
        known: dict[str, set[str]] = {}
        for field in work.extra.get("category_fields") or []:
            known.setdefault(field, set())
        for _, _, categories in rows:
            for field, cat in categories.items():
                known.setdefault(field, set()).add(str(cat))
        wanted: dict[str, list[str]] = {}
        for field, values in value.items():
            if field not in known:
                raise ValueError(
                    f"categories: {name} has no category field {field!r}; it has "
                    f"{', '.join(known) or 'none'}"
                )
            values = [values] if isinstance(values, str) else values
            if not isinstance(values, list) or not values:
                raise ValueError(f"categories: {field}: expected a list of values")
            values = list(dict.fromkeys(str(v) for v in values))
            if unknown := [v for v in values if v not in known[field]]:
                raise ValueError(
                    f"categories: {field}: {', '.join(map(repr, unknown))} not among "
                    f"{name}'s values: {', '.join(sorted(known[field]))}"
                )
            wanted[field] = values
        return wanted

    # -- units -----------------------------------------------------------------------

    def build_units(self, *, selection, template) -> list[CallUnit]:
        return self._units(selection=selection, template=template, options={})

    def units_for_run(self, *, run: Run) -> list[CallUnit]:
        return self._units(
            selection=run.selection,
            template=run.template,
            options=run.params.get("options") or {},
        )

    def _units(
        self, *, selection: dict[str, Any], template: PromptTemplate, options: dict[str, Any]
    ) -> list[CallUnit]:
        keys = selection.get("works") or []
        if not keys:
            return []
        work = Work.objects.filter(benchmark=Benchmark.GENERIC, key=keys[0]).first()
        if work is None:
            return []
        language = selection.get("language") or ""
        wanted = selection.get("categories") or {}
        shuffle = bool(options.get("shuffle"))
        seed = int(options.get("shuffle_seed") or 0)
        items = [
            item
            for item in _items(work).only("id", "item_id", "texts", "answers", "categories")
            if _matches(item.categories, wanted) and (not language or language in item.texts)
        ]
        if limit := selection.get("limit"):
            items = items[: int(limit)]
        units = []
        for item in items:
            text = item.text(language)
            options_ = list(text.get("options") or [])
            count = len(options_)
            order = option_order(seed=seed, item_id=item.item_id, count=count)
            if not shuffle:
                order = list(range(count))
            shown = [options_[i] for i in order]
            fields = {
                "context": text.get("context") or _NO_CONTEXT[_template_language(language)],
                "question": text.get("question", ""),
                "options": "\n".join(f"{option_letter(i)}. {o}" for i, o in enumerate(shown)),
                "letters": letters_text(count, language),
            }
            messages = []
            if template.system:
                messages.append({"role": "system", "content": template.system.format(**fields)})
            messages.append({"role": "user", "content": template.user.format(**fields)})
            units.append(
                CallUnit(
                    key=unit_key(item.item_id),
                    messages=messages,
                    item_ids=[item.pk],
                    items=[
                        {
                            "id": item.pk,
                            "options": shown,
                            "order": order if shuffle else None,
                            "answers": list(item.answers),
                        }
                    ],
                )
            )
        return units

    # -- replies ---------------------------------------------------------------------

    def parse(self, *, unit: CallUnit, text: str) -> list[ParsedItem]:
        return [score_reply(item, text) for item in unit.items]


def score_reply(item: dict[str, Any], text: str) -> ParsedItem:
    """Read ``text`` as the reply to ``item`` (a unit's item: its options as shown, the
    order shown or None, its answers) and score it."""
    reading = read_choice(text, item["options"])
    order = item.get("order")
    details: dict[str, Any] = {}
    if order is not None:
        details["order"] = order
    if reading.how:
        details["read"] = reading.how
    if reading.reason:
        details["reason"] = reading.reason
    if reading.status != OK or reading.index is None:
        return ParsedItem(item["id"], "", reading.status, False, details)
    index = order[reading.index] if order is not None else reading.index
    if order is not None:
        details["shown"] = reading.letter
    return ParsedItem(item["id"], option_letter(index), OK, index in item["answers"], details)
