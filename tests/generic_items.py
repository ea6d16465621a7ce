"""A small mapped benchmark built straight through the ORM, for tests of studies,
runs and reports over generic multiple-choice items (``benchmarks.MCItem``).

The items are the demo's twelve (``fixtures/demo/generic/mini_tom.jsonl``, written by
us). Tests of the importer itself import files; everything downstream of the item bank
can start from these rows without depending on the importer's code paths.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from benchmarks.models import Benchmark, MCItem, Work

ITEMS_FILE = Path(__file__).resolve().parent.parent / "fixtures/demo/generic/mini_tom.jsonl"
LETTERS = "ABCDEFGHIJ"


def mini_tom_records() -> list[dict]:
    return [json.loads(line) for line in ITEMS_FILE.read_text(encoding="utf-8").splitlines()]


def make_generic_benchmark(
    *, name: str = "Mini ToM", version: str = "1", bilingual: bool = False
) -> Work:
    """A Work of kind item set with the twelve items; ``bilingual`` adds a "zh" text
    (the English marked as such: tests only need a second language to pick)."""
    languages = ["en", "zh"] if bilingual else ["en"]
    slug = name.lower().replace(" ", "-")
    work = Work.objects.create(
        benchmark=Benchmark.GENERIC,
        key=f"{slug}@{version}",
        title=name,
        kind=Work.Kind.ITEM_SET,
        source=str(ITEMS_FILE.name),
        extra={
            "name": name,
            "version": version,
            "languages": languages,
            "category_fields": ["ability", "order"],
        },
    )
    items = []
    for position, record in enumerate(mini_tom_records()):
        en = {
            "context": record["story"],
            "question": record["question"],
            "options": list(record["choices"]),
        }
        texts = {"en": en}
        if bilingual:
            texts["zh"] = {key: _zh(value) for key, value in en.items()}
        answers = [LETTERS.index(record["answer"])]
        categories = {"ability": record["ability"], "order": record["order"]}
        content = json.dumps([texts, answers, categories], sort_keys=True, ensure_ascii=False)
        items.append(
            MCItem(
                work=work,
                item_id=record["id"],
                position=position,
                texts=texts,
                answers=answers,
                categories=categories,
                metadata={},
                content_hash=hashlib.sha256(content.encode()).hexdigest(),
            )
        )
    MCItem.objects.bulk_create(items)
    return work


def _zh(value):
    if isinstance(value, list):
        return [f"（中文）{v}" for v in value]  # noqa: RUF001
    return f"（中文）{value}"  # noqa: RUF001
