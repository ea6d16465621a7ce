"""DynToM validation report: retention per step, agreement per criterion, distributions.

- ``retention``: per step (profiles+relationships, trajectories, scenarios, questions),
  objects decided, kept and the share kept, beside the paper's (section 3.1: 92%,
  85.4%, 88.7%; it gives none for questions). Outcomes are the effective ones (a
  researcher's override counts); objects still pending or undecided are left out.
- ``agreement``: Krippendorff's alpha (ordinal) per rubric criterion over the objects
  scored on it, with a percentile bootstrap CI over objects (``metrics``).
- ``distribution``: how often each score was given, per criterion.
- ``review``: per step, objects decided, adjudicated by a reviewer, and decisions
  changed (outcome in force differs from the rules'), kept by the rules and kept after.
- ``agreement-review``: alpha per criterion before and after adjudication (after: the
  scores of an adjudicated object are its settled scores, one per annotator who scored).
- ``accepted-sets``: the accepted-set version of each batch the report used.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np

from annotation.dyntom.validation import review
from annotation.dyntom.validation import selectors as validation_selectors
from annotation.dyntom.validation.rubrics import KIND_LABELS, KINDS
from common.gc_pause import gc_paused
from metrics import krippendorff_alpha_of_counts, ordinal_alpha_ci_of_counts
from reports.report_types import Cell, Chart, Report, Table
from reports.tables import N_RESAMPLES, pct

KEY = "dyntom-validation"
# Paper section 3.1 (human validation): share of generated objects kept per step.
PAPER_RETENTION = {"context": 92.0, "trajectory": 85.4, "scenario": 88.7, "question": None}
DECIDED = ("keep", "discard", "regenerate")


@gc_paused()  # many live rows: see build_report
def build_validation_report(
    *, batch_ids: list[int] | None = None, seed: int = 0, n_resamples: int = N_RESAMPLES
) -> Report:
    """The validation report over ``batch_ids`` (default: every batch)."""
    data = validation_selectors.report_data(batch_ids=batch_ids)
    report = Report(benchmark=KEY, title="DynToM validation report")
    report.tables.append(_retention(data["objects"]))
    kinds = {o["id"]: o["kind"] for o in data["objects"]}
    by_criterion = _by_criterion(data["ratings"], kinds)
    report.tables.append(_agreement(by_criterion, seed=seed, n_resamples=n_resamples))
    report.tables.append(_distribution(by_criterion))
    changed = review.decisions_changed(batch_ids=batch_ids)
    report.tables.append(_review(data["objects"], changed))
    report.tables.append(_agreement_review(by_criterion, data["ratings"], data["settled"], kinds))
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
        "adjudicated": sum(1 for o in data["objects"] if o["adjudicated"]),
        "decisions_changed": sum(changed.values()),
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


@dataclass(frozen=True)
class Scored:
    """One criterion of one kind of object: its objects x score values counts."""

    kind: str
    criterion: str
    domain: np.ndarray  # the distinct scores given, ascending
    counts: np.ndarray  # objects (ascending id) x domain: how many annotators gave each


def _by_criterion(ratings: list[tuple[str, int, int]], kinds: dict[int, str]) -> list[Scored]:
    """Each (kind, criterion)'s counts, in the tables' order, grouped in arrays: the
    report reads 128,000 scores at 1,000 stages x 4 annotators, and grouping them in
    Python dicts and lists took longer than the statistics."""
    if not ratings:
        return []
    n = len(ratings)
    # Columns by itemgetter (zip(*ratings) over 128,000 rows took 0.12 s).
    criteria, object_ids, values = (list(map(itemgetter(i), ratings)) for i in range(3))
    # Each score's (kind, criterion) as one code, through dict lookups mapped in C: a
    # Python loop over the rows cost 0.1 s.
    names = sorted(set(criteria))
    kind_names = sorted(set(kinds.values()))
    name_code = {name: i for i, name in enumerate(names)}
    kind_code = {object_id: kind_names.index(kind) for object_id, kind in kinds.items()}
    codes = np.fromiter(map(kind_code.__getitem__, object_ids), np.int64, n) * len(names)
    codes += np.fromiter(map(name_code.__getitem__, criteria), np.int64, n)
    objects = np.fromiter(object_ids, np.int64, n)
    scores = np.fromiter(values, np.int64, n)
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    key_of = {
        code: (kind_names[code // len(names)], names[code % len(names)])
        for code in np.unique(codes).tolist()
    }
    out = []
    for code in sorted(key_of, key=lambda c: _order(key_of[c])):
        start, end = np.searchsorted(sorted_codes, [code, code + 1])
        rows = order[start:end]
        units, unit_of = np.unique(objects[rows], return_inverse=True)
        domain, value_of = np.unique(scores[rows], return_inverse=True)
        counts = np.bincount(
            unit_of.reshape(-1) * len(domain) + value_of.reshape(-1),
            minlength=len(units) * len(domain),
        ).reshape(len(units), len(domain))
        out.append(Scored(*key_of[code], domain, counts))
    return out


def _order(key: tuple[str, str]) -> tuple[int, str]:
    return (KINDS.index(key[0]) if key[0] in KINDS else len(KINDS), key[1])


def _agreement(by_criterion: list[Scored], *, seed: int, n_resamples: int) -> Table:
    rows: list[list[Cell]] = []
    for scored in by_criterion:
        alpha = krippendorff_alpha_of_counts(scored.counts, scored.domain, "ordinal")
        low, high = ordinal_alpha_ci_of_counts(
            scored.counts, scored.domain, n_resamples=n_resamples, seed=seed
        )
        rows.append(
            [
                KIND_LABELS.get(scored.kind, scored.kind),
                scored.criterion,
                len(scored.counts),
                int(scored.counts.sum()),
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


def _distribution(by_criterion: list[Scored]) -> Table:
    rows: list[list[Cell]] = []
    for scored in by_criterion:
        per_value = scored.counts.sum(axis=0)
        total = int(per_value.sum())
        for value, count in zip(scored.domain.tolist(), per_value.tolist(), strict=True):
            rows.append(
                [
                    KIND_LABELS.get(scored.kind, scored.kind),
                    scored.criterion,
                    value,
                    count,
                    pct(count / total),
                ]
            )
    return Table(
        key="distribution",
        title="Score distributions",
        columns=["Object", "Criterion", "Score", "Count", "Share %"],
        rows=rows,
        note="Submitted scores only; yes/no criteria are 1 (yes) and 0 (no).",
    )


def _review(objects: list[dict[str, Any]], changed: dict[str, int]) -> Table:
    rows: list[list[Cell]] = []
    for kind in KINDS:
        mine = [o for o in objects if o["kind"] == kind]
        rows.append(
            [
                KIND_LABELS[kind],
                sum(1 for o in mine if o["outcome"] in DECIDED),
                sum(1 for o in mine if o["adjudicated"]),
                changed.get(kind, 0),
                sum(1 for o in mine if o["rule_outcome"] == "keep"),
                sum(1 for o in mine if o["outcome"] == "keep"),
            ]
        )
    return Table(
        key="review",
        title="Review and adjudication",
        columns=[
            "Step",
            "Decided",
            "Adjudicated",
            "Decisions changed",
            "Kept by the rules",
            "Kept after review",
        ],
        rows=rows,
        note="Decisions changed: objects whose outcome in force differs from the fixed "
        "rules' (a reviewer's decision, or a researcher's override on the batch page).",
    )


def _agreement_review(
    before: list[Scored],
    ratings: list[tuple[str, int, int]],
    settled: list[tuple[int, str, int]],
    kinds: dict[int, str],
) -> Table:
    # After adjudication an object's scores on a settled criterion are the settled
    # score, once per annotator who scored it: the object then counts as agreed.
    value_of = {(object_id, criterion): value for object_id, criterion, value in settled}
    after_ratings = [
        (criterion, object_id, value_of.get((object_id, criterion), value))
        for criterion, object_id, value in ratings
    ]
    after = {(s.kind, s.criterion): s for s in _by_criterion(after_ratings, kinds)}
    settled_on: Counter[tuple[str, str]] = Counter(
        (kinds[object_id], criterion) for object_id, criterion, _ in settled if object_id in kinds
    )
    rows: list[list[Cell]] = []
    for scored in before:
        key = (scored.kind, scored.criterion)
        alpha_before = krippendorff_alpha_of_counts(scored.counts, scored.domain, "ordinal")
        later = after.get(key)
        alpha_after = (
            krippendorff_alpha_of_counts(later.counts, later.domain, "ordinal") if later else None
        )
        rows.append(
            [
                KIND_LABELS.get(scored.kind, scored.kind),
                scored.criterion,
                len(scored.counts),
                settled_on[key],
                None if alpha_before is None else round(alpha_before, 4),
                None if alpha_after is None else round(alpha_after, 4),
            ]
        )
    return Table(
        key="agreement-review",
        title="Agreement before and after adjudication (Krippendorff's alpha, ordinal)",
        columns=["Object", "Criterion", "Objects", "Settled", "Alpha before", "Alpha after"],
        rows=rows,
        note="Settled: objects a reviewer's decision in force gave a settled score on this "
        "criterion; after adjudication their scores are that score. A decision of the "
        "outcome alone leaves the scores, and alpha, as they were.",
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
