"""Write TVShowGuess works back as ``<key>.raw`` and, when annotated, ``<key>.tsv``.

The .raw file uses the release's CSV dialect (Excel: comma, ``"`` quoting only where
needed, ``\\r\\n`` rows), the Scene cell exactly as imported and Answer rebuilt from
the speaker instances as a Python dict literal in the file's code order. The .tsv
rows are the sheet's rows as imported, under its own header.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from django.db.models import Prefetch, QuerySet

from ..importers.tvshowguess import RAW_COLUMNS, TSV_HEADER
from ..models import Scene, SpeakerAnnotation, SpeakerInstance


def export(works: QuerySet, out: Path) -> int:
    """Write each work to ``out/<key>.raw`` (+ ``.tsv``); returns the number of scenes.

    ``out`` is a directory, created if needed. Four queries whatever the size.
    """
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; TVShowGuess exports to a directory")
    out.mkdir(parents=True, exist_ok=True)
    works = works.order_by("key").prefetch_related(
        Prefetch(
            "scenes",
            queryset=Scene.objects.order_by("position").prefetch_related(
                Prefetch(
                    "instances", queryset=SpeakerInstance.objects.select_related("gold_character")
                )
            ),
        ),
        Prefetch("speaker_annotations", queryset=SpeakerAnnotation.objects.order_by("row_number")),
    )
    count = 0
    for work in works:
        scenes = list(work.scenes.all())
        _write(out / f"{work.key}.raw", _raw_text(scenes), work.extra.get("raw_final_newline"))
        annotations = [a for a in work.speaker_annotations.all() if a.source == f"{work.key}.tsv"]
        if annotations:
            _write(
                out / f"{work.key}.tsv",
                _tsv_text(annotations, work.extra.get("tsv_header") or list(TSV_HEADER)),
                work.extra.get("tsv_final_newline"),
            )
        count += len(scenes)
    return count


def _raw_text(scenes: list[Scene]) -> str:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(RAW_COLUMNS)
    for position, scene in enumerate(scenes, start=1):
        writer.writerow(
            [scene.extra.get("no", str(position)), scene.source_text, _answer_literal(scene)]
        )
    return buffer.getvalue()


def _answer_literal(scene: Scene) -> str:
    """Answer as the release writes it: ``repr`` of the dict, codes in the file's order."""
    gold = {i.code: i.gold_character.name for i in scene.instances.all()}
    order = [code for code in scene.extra.get("answer_order", []) if code in gold]
    order += sorted(set(gold) - set(order), key=lambda code: (len(code), code))
    return repr({code: gold[code] for code in order})


def _tsv_text(annotations: list[SpeakerAnnotation], header: list[str]) -> str:
    rows = [header]
    for a in annotations:
        if a.raw:
            # The row as the sheet had it (qualifiers, spacing, columns the analysis
            # ignores): the fields are what we read from it.
            row = list(a.raw)
        else:
            row = [a.scene_source_id, a.need_history, a.facts_from_memory, a.code, a.guessed_name]
            for group in a.evidence_groups:
                row += [*group["evidence"], group["reasoning"]]
        rows.append(row)
    for number, row in enumerate(rows):
        # The authors' reader splits lines on tabs with no quoting, so a cell cannot
        # hold either; refuse instead of writing a file it would misread.
        if any("\t" in c or "\n" in c or "\r" in c for c in row):
            raise ValueError(f"annotation row {number} cannot be written as a TSV row: {row}")
    return "".join("\t".join(row) + "\n" for row in rows)


def _write(path: Path, text: str, final_newline: bool | None) -> None:
    # The release's .raw ends without a newline after its last row; keep what was read.
    if final_newline is False:
        text = text.removesuffix("\r\n").removesuffix("\n")
    path.write_text(text, encoding="utf-8", newline="")
