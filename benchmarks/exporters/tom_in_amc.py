"""Write ToM-in-AMC works back as the release's one JSON object of splits and movies."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from django.db.models import QuerySet

from ..importers.tom_in_amc import DEFAULT_FILE_NAME, LINE_FIELDS
from ..models import Character, Scene

PART_LISTS = {Scene.Part.TRAINING: "training_scenes", Scene.Part.TESTING: "testing_scenes"}


def export(works: QuerySet, out: Path) -> int:
    """Write ``works`` to ``out`` (a file, or a directory to hold tom_in_amc.json).

    Returns the number of scenes written. Three queries whatever the size.
    """
    works = list(works.order_by("key"))
    missing_split = [w.key for w in works if not w.split]
    if missing_split:
        # The format keeps movies under their split; there is nowhere to put these.
        raise ValueError(f"ToM-in-AMC works without a split: {', '.join(missing_split)}")
    chars: dict[int, dict[str, int | None]] = defaultdict(dict)
    for work_id, name, count in (
        Character.objects.filter(work__in=works, is_main=True)
        .order_by("work_id", "position", "name")
        .values_list("work_id", "name", "utterance_count")
    ):
        chars[work_id][name] = count
    scenes: dict[int, dict[str, list[dict[str, Any]]]] = defaultdict(
        lambda: {name: [] for name in PART_LISTS.values()}
    )
    count = 0
    for scene in (
        Scene.objects.filter(work__in=works, part__in=list(PART_LISTS))
        .order_by("work_id", "position")
        .values("work_id", "part", "lines", "participants", "char_counts", "char_map", "extra")
    ):
        scenes[scene["work_id"]][PART_LISTS[scene["part"]]].append(
            {
                "scene": [_line_in_source_order(line) for line in scene["lines"]],
                "chars": _in_order(scene["char_counts"], scene["participants"]),
                "char_map": scene["char_map"],
                **scene["extra"],
            }
        )
        count += 1
    data: dict[str, dict[str, Any]] = {}
    for work in works:
        data.setdefault(work.split, {})[work.key] = {
            "chars": chars[work.pk],
            **scenes[work.pk],
            **work.extra,
        }
    if out.is_dir():
        out = out / DEFAULT_FILE_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return count


# PostgreSQL's jsonb keeps object keys in its own order, not the source's. Lists keep
# theirs, so the scene's participants (its chars in source order) and the layout's
# field order put the written file back in the order it was read.


def _in_order(counts: dict[str, int], names: list[str]) -> dict[str, int]:
    ordered = {name: counts[name] for name in names if name in counts}
    return ordered | counts


def _line_in_source_order(line: dict[str, Any]) -> dict[str, Any]:
    return {name: line[name] for name in LINE_FIELDS if name in line} | line
