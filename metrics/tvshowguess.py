"""The TVShowGuess authors' annotation shares (Sang et al., 2022), as plain functions.

Each annotated masked speaker is one row of ``friends.tsv``: a need-history flag, a
facts-from-memory flag and up to three evidence groups (three evidence cells and a
reasoning type each). The authors report, per annotated row, which kind of memory the
guess depends on, which reasoning it needs and which evidence it uses; every share is
a count over *all* annotated rows, so the shares of one table need not sum to 100
(a row can cite several pieces of evidence, an ``Unsolvable`` row has no dependence).

Rows are plain mappings shaped like ``SpeakerAnnotation`` values::

    {"need_history": "yes", "facts_from_memory": "no",
     "evidence_groups": [{"evidence": [e1, e2, e3], "reasoning": "commonsense"}, ...]}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEPENDENCE_TYPES = ("direct", "indirect", "none")
REASONING_TYPES = (
    "default conjunction",
    "multihop-character",
    "multihop-textual",
    "commonsense",
    "not required",
)
EVIDENCE_TYPES = (
    "linguistic style",
    "personality",
    "fact(attribute)",
    "fact(relation)",
    "fact(status)",
    "fact (any)",
    "memory",
    "inside scene(background)",
    "inside scene(mention)",
    "inside scene(exclusion)",
)
# Cell values as written in the release -> the row label of the authors' table.
# "fact (any)" is not a cell value: it totals the three fact kinds.
EVIDENCE_LABELS = {
    "linguistic style": "linguistic style",
    "personality": "personality",
    "fact(attribute)": "fact(attribute)",
    "fact(relation)": "fact(relation)",
    "fact(status)": "fact(status)",
    "history event": "memory",
    "inside_scene(background)": "inside scene(background)",
    "inside_scene(mention)": "inside scene(mention)",
    "inside_scene(exclusive)": "inside scene(exclusion)",
}
FACT_LABELS = frozenset({"fact(attribute)", "fact(relation)", "fact(status)"})
WRITTEN_REASONING = frozenset({"multihop-textual", "multihop-character", "commonsense"})
# Only the first evidence group counts, as in the authors' analysis script: the later
# groups record alternative ways to the answer, not more evidence for the same one.
EVIDENCE_COLUMNS = 3


def _cell(value: Any) -> str:
    return str(value or "").strip().lower()


def _first_group(evidence_groups: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    return evidence_groups[0] if evidence_groups else {}


def dependence_type(need_history: str, facts_from_memory: str) -> str | None:
    """``direct`` / ``indirect`` / ``none``; ``None`` for an ``Unsolvable`` row.

    Direct when the guess needs earlier scenes, else indirect when it uses facts the
    annotator abstracted from memory of the show, else none.
    """
    need = _cell(need_history)
    if need == "unsolvable":
        return None
    if need == "yes":
        return "direct"
    if _cell(facts_from_memory) == "yes":
        return "indirect"
    return "none"


def reasoning_type(evidence_groups: Sequence[Mapping[str, Any]]) -> str:
    """The first group's reasoning type, with the authors' reading of blank cells.

    ``no`` means no reasoning was required; a blank cell means the default conjunction
    of evidence when the group has a second evidence entry (two facts were combined),
    and no reasoning otherwise. Unknown values are returned as written.
    """
    group = _first_group(evidence_groups)
    written = _cell(group.get("reasoning"))
    if written in WRITTEN_REASONING:
        return written
    if written == "no":
        return "not required"
    if written:
        return written
    evidence = list(group.get("evidence") or [])
    has_second = len(evidence) > 1 and bool(_cell(evidence[1]))
    return "default conjunction" if has_second else "not required"


def evidence_label(cell: str) -> str:
    """One evidence cell's table label, by the authors' rules (lower-cased).

    ``history event`` is memory; ``personality`` and ``linguistic style`` are
    themselves; any ``kind(sub)`` becomes ``kind(sub)`` with underscores read as
    spaces, and the sub-kind ``exclusive`` is called ``exclusion`` (so
    ``inside_scene(exclusive)`` and ``inside_scene(exclusion)`` are one row). Anything
    else comes back as written, for the caller to count as unrecognised.
    """
    value = _cell(cell)
    if value in EVIDENCE_LABELS:
        return EVIDENCE_LABELS[value]
    if "(" in value:
        # As the authors' script: the kind is what precedes the first "(", the sub-kind
        # what lies between it and the first ")".
        begin, end = value.find("("), value.find(")")
        kind = " ".join(value[:begin].split("_"))
        sub = " ".join(value[begin + 1 : end].split("_"))
        if sub == "exclusive":
            sub = "exclusion"
        return f"{kind}({sub})"
    return value


def evidence_types(evidence_groups: Sequence[Mapping[str, Any]]) -> list[str]:
    """The labels of the first group's evidence entries, one per non-empty cell.

    An entry that is not a known type comes back as written (callers count it apart).
    """
    group = _first_group(evidence_groups)
    cells = [_cell(c) for c in list(group.get("evidence") or [])[:EVIDENCE_COLUMNS]]
    return [evidence_label(c) for c in cells if c]


@dataclass
class AnnotationShares:
    """Shares in percent (0..100) of all annotated rows, in the authors' row order.

    ``unrecognised`` counts cell values that fit no known type (reported, never
    silently dropped).
    """

    n: int
    dependence: dict[str, float | None]
    reasoning: dict[str, float | None]
    evidence: dict[str, float | None]
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    unrecognised: dict[str, int] = field(default_factory=dict)


def _percent(count: int, n: int) -> float | None:
    return 100.0 * count / n if n else None


def annotation_shares(rows: Iterable[Mapping[str, Any]]) -> AnnotationShares:
    """Dependence, reasoning and evidence shares over annotated rows (see the module doc)."""
    dependence: Counter[str] = Counter()
    reasoning: Counter[str] = Counter()
    evidence: Counter[str] = Counter()
    unrecognised: Counter[str] = Counter()
    n = 0
    for row in rows:
        n += 1
        groups = row.get("evidence_groups") or []
        kind = dependence_type(row.get("need_history", ""), row.get("facts_from_memory", ""))
        if kind is not None:
            dependence[kind] += 1
        reason = reasoning_type(groups)
        if reason in REASONING_TYPES:
            reasoning[reason] += 1
        else:
            unrecognised[f"reasoning: {reason}"] += 1
        for label in evidence_types(groups):
            if label in EVIDENCE_TYPES:
                evidence[label] += 1
                if label in FACT_LABELS:
                    evidence["fact (any)"] += 1
            else:
                unrecognised[f"evidence: {label}"] += 1
    return AnnotationShares(
        n=n,
        dependence={k: _percent(dependence[k], n) for k in DEPENDENCE_TYPES},
        reasoning={k: _percent(reasoning[k], n) for k in REASONING_TYPES},
        evidence={k: _percent(evidence[k], n) for k in EVIDENCE_TYPES},
        counts={
            "dependence": {k: dependence[k] for k in DEPENDENCE_TYPES},
            "reasoning": {k: reasoning[k] for k in REASONING_TYPES},
            "evidence": {k: evidence[k] for k in EVIDENCE_TYPES},
        },
        unrecognised=dict(unrecognised),
    )
