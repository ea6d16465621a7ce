"""How the dry run shows a mapped benchmark's item: shared by the importer and the
upload pages (``benchmarks.uploads``), which the importer reaches for its zip checks,
so this lives apart from both."""

from __future__ import annotations

import string
from typing import Any

PREVIEW_ITEMS = 3
LETTERS = string.ascii_uppercase


def item_preview(row: dict[str, Any]) -> dict[str, Any]:
    """An item as the dry run shows it: texts per language, options keyed A, B…, the
    correct ones marked, categories and metadata."""
    answers = set(row["answers"])
    return {
        "kind": "mc-item",
        "title": row["item_id"],
        "categories": dict(row["categories"]),
        "answers": [LETTERS[i] if i < len(LETTERS) else str(i) for i in sorted(answers)],
        "texts": [
            {
                "language": language,
                "context": texts.get("context", "")[:800],
                "question": texts.get("question", ""),
                "options": [
                    {
                        "key": LETTERS[i] if i < len(LETTERS) else str(i),
                        "text": option,
                        "correct": i in answers,
                    }
                    for i, option in enumerate(texts.get("options", []))
                ],
                "gold": texts.get("gold", ""),
            }
            for language, texts in row["texts"].items()
        ],
        "metadata": {
            k: (v if not isinstance(v, str) else v[:200]) for k, v in row["metadata"].items()
        },
    }
