"""Write CharToM-QA works back as the release's JSONL, one question per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.db.models import QuerySet

from ..importers.chartom_qa import DEFAULT_FILE_NAME
from ..models import QAItem


def export(works: QuerySet, out: Path) -> int:
    """Write the questions of ``works`` to ``out`` (a file, or a directory to hold
    chartom_qa.jsonl), books by key and questions in source order; returns lines written.

    ``target_character`` and ``directness`` are written only when the item has one,
    as the release's file has neither; fields kept in ``extra`` come back as they were.
    """
    items = (
        QAItem.objects.filter(work__in=works)
        .select_related("work", "character")
        .order_by("work__key", "position")
    )
    lines: list[str] = []
    for item in items:
        record: dict[str, Any] = {"book_name": item.work.key, "tom_dimension": item.dimension}
        if item.character is not None:
            record["target_character"] = item.character.name
        record.update(
            context_0=item.context_0,
            context_1000=item.context_1000,
            context_2000=item.context_2000,
            question=item.question,
            answer=item.answer,
            bonus_points=item.bonus_points,
            misleading_choices=item.misleading_choices,
        )
        if item.directness:
            record["directness"] = item.directness
        record.update(item.extra)
        lines.append(json.dumps(record, ensure_ascii=False))
    if out.is_dir():
        out = out / DEFAULT_FILE_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return len(lines)
