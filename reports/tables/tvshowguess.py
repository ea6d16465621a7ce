"""TVShowGuess tables: the ToM-in-AMC scene tables plus the authors' annotation shares.

``annotation-dependence``, ``annotation-reasoning`` and ``annotation-evidence`` recompute
the shares of the paper's analysis from the imported ``<show>.tsv`` rows (rules in
``metrics.tvshowguess``); ``accuracy-by-dependence`` scores each system (run or
human study) on the annotated speakers, split by how much the guess depends on memory of
earlier episodes. Human studies of the show get the ``human-*`` tables of
``reports.tables.tom_in_amc``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from metrics.tvshowguess import DEPENDENCE_TYPES, annotation_shares, dependence_type
from reports import selectors
from reports.report_types import Cell, Chart, Report, Table
from reports.tables import pct
from reports.tables.tom_in_amc import SpeakerData, _item_chance, build_speaker_tables

SHARE_TABLES = (
    ("dependence", "annotation-dependence", "Dependence", "Memory dependence"),
    ("reasoning", "annotation-reasoning", "Reasoning", "Reasoning type"),
    ("evidence", "annotation-evidence", "Evidence", "Evidence type"),
)
UNSOLVABLE = "unsolvable"


def build(
    report: Report,
    runs: list[dict[str, Any]],
    *,
    studies: list[dict[str, Any]] | None = None,
    seed: int,
    include_excluded: bool = False,
) -> None:
    data = build_speaker_tables(
        report, runs, studies=studies, seed=seed, include_excluded=include_excluded
    )
    annotations = selectors.speaker_annotation_rows(report.benchmark)
    if not annotations:
        return
    shares = annotation_shares(annotations)
    sources = ", ".join(sorted({a["source"] for a in annotations}))
    # The authors print one table per sheet (per show); with several sheets imported the
    # pooled share comes first and each sheet's own share follows in its own column.
    by_sheet: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for a in annotations:
        by_sheet[f"{a['work_key']}/{a['source']}"].append(a)
    sheets = (
        {name: annotation_shares(rows) for name, rows in sorted(by_sheet.items())}
        if len(by_sheet) > 1
        else {}
    )
    for attribute, key, column, title in SHARE_TABLES:
        counts = shares.counts[attribute]
        note = f"{shares.n} annotated masked speakers ({sources}); share = count / all of them."
        if sheets:
            note += " Then each sheet's own share (count / that sheet's rows), as the authors."
        if attribute == "evidence":
            note += " A speaker may cite several pieces of evidence (shares need not sum to 100)."
        if attribute == "dependence":
            unsolvable = shares.n - sum(counts.values())
            note += f" Unsolvable (no dependence type): {unsolvable}."
        unrecognised = {k: v for k, v in shares.unrecognised.items() if k.startswith(attribute)}
        if unrecognised:
            note += f" Not counted (unknown values): {unrecognised}."
        report.tables.append(
            Table(
                key=key,
                title=f"{title} (share of annotated speakers)",
                columns=[column, "Speakers", "Share %", *(f"{name} %" for name in sheets)],
                rows=[
                    [
                        label,
                        counts[label],
                        _round(share),
                        *(_round(getattr(s, attribute)[label]) for s in sheets.values()),
                    ]
                    for label, share in getattr(shares, attribute).items()
                ],
                note=note,
            )
        )
        report.charts.append(
            Chart(
                key=key,
                title=f"{title} (share of annotated speakers)",
                kind="bar",
                table=key,
                x=column,
                series=["Share %"],
                y_label="share of annotated speakers (%)",
            )
        )
    if data.systems:
        report.tables.append(_accuracy_by_dependence(data, annotations))


def _round(share: float | None) -> float | None:
    return None if share is None else round(share, 2)


def _accuracy_by_dependence(data: SpeakerData, annotations: list[dict[str, Any]]) -> Table:
    kind_of = {
        a["instance_id"]: dependence_type(a["need_history"], a["facts_from_memory"]) or UNSOLVABLE
        for a in annotations
        if a["instance_id"]
    }
    order = [*DEPENDENCE_TYPES, UNSOLVABLE]
    items_by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in data.items:
        if item["id"] in kind_of:
            items_by[kind_of[item["id"]]].append(item)
    rows: list[list[Cell]] = []
    for kind in order:
        if kind == UNSOLVABLE and not items_by.get(kind):
            continue
        items = items_by.get(kind, [])
        cells: list[Cell] = [kind, len(items), pct(_item_chance(items)) if items else None]
        for system in data.systems:
            n = right = 0
            for instance, (answers, correct) in system.outcomes.per_instance.items():
                if kind_of.get(instance) == kind:
                    n, right = n + answers, right + correct
            cells.append(pct(right / n) if n else None)
        rows.append(cells)
    return Table(
        key="accuracy-by-dependence",
        title="Accuracy by memory dependence of the annotated speakers",
        columns=["Dependence", "Instances", "Random %", *(f"{label} %" for label in data.labels())],
        rows=rows,
        note=(
            "Annotated masked speakers only; direct = needs earlier scenes, indirect = uses "
            "facts abstracted from memory, none = the scene alone suffices. Instances and "
            "Random: every annotated speaker of the type; systems (runs and human studies) "
            "on their own answers among them, as in the accuracy table (not only the "
            "common set)."
        ),
    )


def json_extras(report: Report) -> dict[str, dict[str, float | None]]:
    """The annotation shares in percent, ``{"dependence": {"direct": 26.49, …}, …}``."""
    extras: dict[str, dict[str, float | None]] = {}
    keys = {t.key for t in report.tables}
    for attribute, key, _column, _title in SHARE_TABLES:
        rows = report.table(key).rows if key in keys else []
        extras[attribute] = {row[0]: row[2] for row in rows}
    return extras
