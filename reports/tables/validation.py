"""DynToM validation report: retention per step, agreement per criterion, distributions.

- ``retention``: per step (profiles+relationships, trajectories, scenarios, questions),
  objects decided, kept and the share kept, beside the paper's (section 3.1: 92%,
  85.4%, 88.7%; it gives none for questions). Outcomes are the effective ones (a
  researcher's override counts); objects still pending or undecided are left out.
- ``agreement``: Krippendorff's alpha (ordinal) per rubric criterion over the objects
  scored on it, with a percentile bootstrap CI over objects (``metrics``).
- ``distribution``: how often each score was given, per criterion.
- ``accepted-sets``: the accepted-set version of each batch the report used.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from annotation.dyntom.validation import selectors as validation_selectors
from annotation.dyntom.validation.rubrics import KIND_LABELS, KINDS
from metrics import ordinal_alpha, ordinal_alpha_ci
from reports.report_types import Cell, Chart, Report, Table
from reports.tables import N_RESAMPLES, pct

KEY = "dyntom-validation"
# Paper section 3.1 (human validation): share of generated objects kept per step.
PAPER_RETENTION = {"context": 92.0, "trajectory": 85.4, "scenario": 88.7, "question": None}
DECIDED = ("keep", "discard", "regenerate")


def build_validation_report(
    *, batch_ids: list[int] | None = None, seed: int = 0, n_resamples: int = N_RESAMPLES
) -> Report:
    """The validation report over ``batch_ids`` (default: every batch)."""
    data = validation_selectors.report_data(batch_ids=batch_ids)
    report = Report(benchmark=KEY, title="DynToM validation report")
    report.tables.append(_retention(data["objects"]))
    kinds = {o["id"]: o["kind"] for o in data["objects"]}
    by_criterion = sorted(_by_criterion(data["ratings"], kinds).items(), key=lambda i: _order(i[0]))
    report.tables.append(_agreement(by_criterion, seed=seed, n_resamples=n_resamples))
    report.tables.append(_distribution(by_criterion))
    report.tables.append(_accepted_sets(data["accepted_sets"]))
    report.charts.append(
        Chart(
            key="retention",
            title="Retention per step: ours and the paper's",
            kind="bar",
            table="retention",
            x="Step",
            series=["Retention %", "Paper %"],
            y_label="% kept",
        )
    )
    report.facts = {
        "batches": len({o["batch"] for o in data["objects"]}),
        "objects": len(data["objects"]),
        "scores": len(data["ratings"]),
        "accepted_set_versions": ", ".join(
            f"{s['batch']} v{s['version']}" for s in data["accepted_sets"]
        )
        or "none yet",
    }
    return report


def _retention(objects: list[dict[str, Any]]) -> Table:
    rows: list[list[Cell]] = []
    for kind in KINDS:
        outcomes = Counter(o["outcome"] for o in objects if o["kind"] == kind)
        decided = sum(outcomes[o] for o in DECIDED)
        kept = outcomes["keep"]
        rows.append(
            [
                KIND_LABELS[kind],
                sum(outcomes.values()),
                decided,
                kept,
                pct(kept / decided) if decided else None,
                PAPER_RETENTION[kind],
            ]
        )
    return Table(
        key="retention",
        title="Retention per step",
        columns=["Step", "Objects", "Decided", "Kept", "Retention %", "Paper %"],
        rows=rows,
        note="Kept / decided (keep, discard or regenerate, overrides included); "
        "pending and undecided objects are not counted. Paper: DynToM section 3.1.",
    )


# (kind, criterion) -> object id -> its scores, in the tables' order.
ByCriterion = list[tuple[tuple[str, str], dict[int, list[int]]]]


def _by_criterion(
    ratings: list[tuple[str, int, int]], kinds: dict[int, str]
) -> dict[tuple[str, str], dict[int, list[int]]]:
    """(kind, criterion) -> object id -> its scores, objects in id order (the scores
    come unsorted; no statistic here depends on the order of objects or scores)."""
    units: dict[tuple[str, int], list[int]] = defaultdict(list)
    for criterion, object_id, value in ratings:
        units[criterion, object_id].append(value)
    grouped: dict[tuple[str, str], dict[int, list[int]]] = defaultdict(dict)
    for criterion, object_id in sorted(units):
        grouped[kinds[object_id], criterion][object_id] = units[criterion, object_id]
    return grouped


def _order(key: tuple[str, str]) -> tuple[int, str]:
    return (KINDS.index(key[0]) if key[0] in KINDS else len(KINDS), key[1])


def _agreement(by_criterion: ByCriterion, *, seed: int, n_resamples: int) -> Table:
    rows: list[list[Cell]] = []
    for (kind, criterion), per_object in by_criterion:
        units = list(per_object.values())
        alpha = ordinal_alpha(units)
        low, high = ordinal_alpha_ci(units, n_resamples=n_resamples, seed=seed)
        rows.append(
            [
                KIND_LABELS.get(kind, kind),
                criterion,
                len(units),
                sum(len(u) for u in units),
                None if alpha is None else round(alpha, 4),
                None if low is None else round(low, 4),
                None if high is None else round(high, 4),
            ]
        )
    return Table(
        key="agreement",
        title="Inter-annotator agreement per criterion (Krippendorff's alpha, ordinal)",
        columns=["Object", "Criterion", "Objects", "Scores", "Alpha", "CI low", "CI high"],
        rows=rows,
        note=f"95% percentile bootstrap over objects, {n_resamples} resamples; alpha is "
        "empty where it is undefined (no variation in the scores).",
    )


def _distribution(by_criterion: ByCriterion) -> Table:
    rows: list[list[Cell]] = []
    for (kind, criterion), per_object in by_criterion:
        counts = Counter(v for values in per_object.values() for v in values)
        total = sum(counts.values())
        for value in sorted(counts):
            rows.append(
                [
                    KIND_LABELS.get(kind, kind),
                    criterion,
                    value,
                    counts[value],
                    pct(counts[value] / total),
                ]
            )
    return Table(
        key="distribution",
        title="Score distributions",
        columns=["Object", "Criterion", "Score", "Count", "Share %"],
        rows=rows,
        note="Submitted scores only; yes/no criteria are 1 (yes) and 0 (no).",
    )


def _accepted_sets(sets: list[dict[str, Any]]) -> Table:
    return Table(
        key="accepted-sets",
        title="Accepted sets used",
        columns=["Batch", "Version", "Objects", "Stages", "Rule versions"],
        rows=[
            [
                s["batch"],
                s["version"],
                s["objects"],
                s["stages"],
                ", ".join(f"{k} v{v}" for k, v in sorted(s["rule_versions"].items())),
            ]
            for s in sets
        ],
        note="The newest accepted-set version of each batch at the time of the report.",
    )
