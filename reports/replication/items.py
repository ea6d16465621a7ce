"""The items a package names: their natural keys and the hashes of their text.

A package never carries database ids. Each item it names is a row of ``items.csv``
under a package-local id (``I1``, ``I2``, …) with its natural key and, one row per
field, the sha256 of that field's text, so an import finds the item in another bank
and refuses it, naming the item and the field, when its text differs by a character.

Natural keys and hashed fields, per kind (the unique constraints of
``benchmarks.models``):

==========  ======================================  ==========================================
kind        natural key                             hashed fields
==========  ======================================  ==========================================
scene       benchmark, work key, scene source id    heading, lines
speaker     … scene source id, code (P0, P1, …)     gold (the gold character's name), candidates
qa          benchmark, work key, QA natural key     question, answer, misleading_choices,
                                                    bonus_points, context_0/1000/2000
stage       benchmark, work key (the trial)         scenarios (number, background, dialogue)
question    benchmark, work key, question key       text, options, gold_letter
mc          benchmark, work key, item id            texts (every language), answers, categories
==========  ======================================  ==========================================

``mc`` is a multiple-choice item of a benchmark imported through a field mapping
(``benchmarks.MCItem``; the work key holds its name and version, e.g. ``tombench@1.0``).

A field's text is the string itself, or for lists and objects their JSON with sorted
keys and no spaces (``canonical``), so the hash does not depend on the database's
JSON formatting.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Model, Prefetch

from benchmarks.models import (
    DynToMQuestion,
    DynToMScenario,
    DynToMStage,
    MCItem,
    QAItem,
    Scene,
)
from benchmarks.models import SpeakerInstance as Speaker

KINDS = ("scene", "speaker", "qa", "stage", "question", "mc")
FIELDS: dict[str, tuple[str, ...]] = {
    "scene": ("heading", "lines"),
    "speaker": ("gold", "candidates"),
    "qa": (
        "question",
        "answer",
        "misleading_choices",
        "bonus_points",
        "context_0",
        "context_1000",
        "context_2000",
    ),
    "stage": ("scenarios",),
    "question": ("text", "options", "gold_letter"),
    "mc": ("texts", "answers", "categories"),
}


def canonical(value: Any) -> str:
    """The text a field's hash is taken over (None: the empty string)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()


@dataclass(frozen=True, order=True)
class ItemKey:
    """An item's natural key; ``code`` is the masked speaker's code (speakers only)."""

    kind: str
    benchmark: str
    work: str
    key: str
    code: str = ""

    def label(self) -> str:
        """How an error message names the item."""
        names = {
            "scene": "scene",
            "speaker": "masked speaker",
            "qa": "CharToM-QA item",
            "stage": "DynToM stage",
            "question": "DynToM question",
            "mc": "multiple-choice item",
        }
        where = f"{self.benchmark} work {self.work!r}"
        if self.kind == "stage":
            return f"{names['stage']} {where}"
        code = f" {self.code}" if self.code else ""
        return f"{names[self.kind]} {self.key}{code} of {where}"


def field_values(kind: str, obj: Model) -> dict[str, Any]:
    """The hashed fields of one item (loaded as ``_load`` loads it)."""
    if kind == "scene":
        return {"heading": obj.heading, "lines": obj.lines}
    if kind == "speaker":
        return {"gold": obj.gold_character.name, "candidates": obj.candidates}
    if kind == "qa":
        return {name: getattr(obj, name) for name in FIELDS["qa"]}
    if kind == "stage":
        scenarios = [[s.number, s.background, s.dialogue] for s in obj.scenarios.all()]
        return {"scenarios": scenarios}
    if kind == "mc":
        return {name: getattr(obj, name) for name in FIELDS["mc"]}
    return {"text": obj.text, "options": obj.options, "gold_letter": obj.gold_letter}


def field_hashes(kind: str, obj: Model) -> dict[str, str]:
    return {name: sha256(value) for name, value in field_values(kind, obj).items()}


def _load(kind: str, ids: Iterable[int]) -> list[Model]:
    ids = list(ids)
    if kind == "scene":
        return list(Scene.objects.filter(pk__in=ids).select_related("work"))
    if kind == "speaker":
        return list(
            Speaker.objects.filter(pk__in=ids).select_related("scene__work", "gold_character")
        )
    if kind == "qa":
        return list(QAItem.objects.filter(pk__in=ids).select_related("work"))
    if kind == "stage":
        return list(
            DynToMStage.objects.filter(pk__in=ids)
            .select_related("work")
            .prefetch_related(
                Prefetch("scenarios", queryset=DynToMScenario.objects.order_by("number"))
            )
        )
    if kind == "mc":
        return list(MCItem.objects.filter(pk__in=ids).select_related("work"))
    return list(DynToMQuestion.objects.filter(pk__in=ids).select_related("stage__work"))


def item_key(kind: str, obj: Model) -> ItemKey:
    if kind == "scene":
        return ItemKey(kind, obj.work.benchmark, obj.work.key, obj.source_id)
    if kind == "speaker":
        work = obj.scene.work
        return ItemKey(kind, work.benchmark, work.key, obj.scene.source_id, obj.code)
    if kind == "qa":
        return ItemKey(kind, obj.work.benchmark, obj.work.key, obj.natural_key)
    if kind == "stage":
        return ItemKey(kind, obj.work.benchmark, obj.work.key, obj.work.key)
    if kind == "mc":
        return ItemKey(kind, obj.work.benchmark, obj.work.key, obj.item_id)
    work = obj.stage.work
    return ItemKey(kind, work.benchmark, work.key, obj.key)


class ItemRegistry:
    """Collects the items a package names (by database id) and gives each a package id.

    ``add`` while reading the study and runs; ``freeze`` then numbers the items in
    natural-key order (so the ids do not depend on database ids) and ``ref`` answers
    the package id of an item.
    """

    def __init__(self) -> None:
        self._ids: dict[str, set[int]] = defaultdict(set)
        self._refs: dict[tuple[str, int], str] = {}
        self.rows: list[dict[str, Any]] = []

    def add(self, kind: str, pk: int | None) -> None:
        if pk is not None:
            self._ids[kind].add(pk)

    def freeze(self) -> None:
        found: list[tuple[ItemKey, int, dict[str, str]]] = []
        for kind in KINDS:
            for obj in _load(kind, self._ids.get(kind, ())):
                found.append((item_key(kind, obj), obj.pk, field_hashes(kind, obj)))
        found.sort(key=lambda entry: entry[0])
        for n, (key, pk, hashes) in enumerate(found, start=1):
            ref = f"I{n}"
            self._refs[(key.kind, pk)] = ref
            for name, digest in hashes.items():
                self.rows.append(
                    {
                        "item": ref,
                        "kind": key.kind,
                        "benchmark": key.benchmark,
                        "work": key.work,
                        "key": key.key,
                        "code": key.code,
                        "field": name,
                        "sha256": digest,
                    }
                )

    def ref(self, kind: str, pk: int | None) -> str:
        return "" if pk is None else self._refs[(kind, pk)]

    def works(self) -> list[tuple[str, str]]:
        """(benchmark, work key) of every item named, sorted."""
        return sorted({(r["benchmark"], r["work"]) for r in self.rows})


class ItemMismatch(ValueError):
    """An item of the package is missing from the bank or differs from it."""


def items_resolve(rows: Iterable[dict[str, Any]]) -> tuple[dict[str, Model], list[str]]:
    """Find the package's items in the bank and check their hashes.

    Returns ``(found, problems)``: the bank's object for each package id found, and one
    sentence per item missing or per field whose text differs, naming both. A kind the
    package does not know is a problem too.
    """
    by_ref: dict[str, tuple[ItemKey, dict[str, str]]] = {}
    for row in rows:
        key = ItemKey(row["kind"], row["benchmark"], row["work"], row["key"], row["code"] or "")
        by_ref.setdefault(row["item"], (key, {}))[1][row["field"]] = row["sha256"]
    problems: list[str] = []
    found: dict[str, Model] = {}
    wanted: dict[str, dict[ItemKey, str]] = defaultdict(dict)
    for ref, (key, _) in by_ref.items():
        if key.kind not in KINDS:
            problems.append(f"items.csv item {ref}: unknown kind {key.kind!r}")
            continue
        wanted[key.kind][key] = ref
    for kind, keys in wanted.items():
        bank = _bank_lookup(kind, keys)
        for key, ref in sorted(keys.items()):
            obj = bank.get(key)
            if obj is None:
                problems.append(f"{key.label()} (package item {ref}) is not in this item bank")
                continue
            expected = by_ref[ref][1]
            actual = field_hashes(kind, obj)
            for name in sorted(expected):
                if name not in actual:
                    problems.append(f"{key.label()}: field {name!r} is not a hashed field")
                elif actual[name] != expected[name]:
                    problems.append(
                        f"{key.label()} (package item {ref}): field {name!r} differs from "
                        "this item bank's text"
                    )
            found[ref] = obj
    return found, problems


def _bank_lookup(kind: str, keys: Iterable[ItemKey]) -> dict[ItemKey, Model]:
    """The bank's items of these keys, loaded for hashing, by key (missing: absent)."""
    keys = list(keys)
    works = {(k.benchmark, k.work) for k in keys}
    ids: list[int] = []
    for benchmark, work in works:
        if kind == "scene":
            qs = Scene.objects.filter(work__benchmark=benchmark, work__key=work)
        elif kind == "speaker":
            qs = Speaker.objects.filter(scene__work__benchmark=benchmark, scene__work__key=work)
        elif kind == "qa":
            qs = QAItem.objects.filter(work__benchmark=benchmark, work__key=work)
        elif kind == "stage":
            qs = DynToMStage.objects.filter(work__benchmark=benchmark, work__key=work)
        elif kind == "mc":
            qs = MCItem.objects.filter(work__benchmark=benchmark, work__key=work)
        else:
            qs = DynToMQuestion.objects.filter(
                stage__work__benchmark=benchmark, stage__work__key=work
            )
        ids += list(qs.values_list("pk", flat=True))
    wanted = set(keys)
    return {key: obj for obj in _load(kind, ids) if (key := item_key(kind, obj)) in wanted}
