"""Declarative keep/discard rules of DynToM validation: a small JSON language, pure code.

A rule set (stored per rubric kind, versioned, in :class:`annotation.models.DecisionRule`)
is a JSON object::

    {"rules": [RULE, ...], "otherwise": "keep"}

The rules are tried in order; the first whose ``when`` holds decides. A rule is::

    {"when": CONDITION, "then": "keep" | "discard" | "regenerate" | "undecided",
     "add_annotators": 1,        # "undecided" only: raise the object's k by this much
     "max_annotators": 5}        # "undecided" only: skipped once this many have scored

A condition is one statistic of one criterion's submitted scores compared with a value::

    {"stat": "mean" | "median" | "min" | "max", "criterion": KEY | "*", "op": OP, "value": x}
    {"stat": "count", "criterion": KEY | "*", "score_op": OP, "score": s, "op": OP, "value": n}
    {"all": [CONDITION, ...]}     {"any": [CONDITION, ...]}

``OP`` is one of ``< <= > >= == !=``. ``"criterion": "*"`` holds when it holds for any
criterion of the rubric (the reason names the first one, in rubric order). ``count``
counts the scores that pass ``score_op score`` (e.g. "2+ annotators scored
answerability <= 2"). A yes/no criterion is scored 1 (yes) and 0 (no), so "any no" is
``count <= 0 >= 1`` and "mean below 4.0" never mixes the two scales by accident.

Nothing here touches the database: :func:`rule_spec_validate` checks a spec against a
rubric's criterion keys and :func:`decide` turns scores into an outcome with its reason.
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KEEP, DISCARD, REGENERATE, UNDECIDED, PENDING = (
    "keep",
    "discard",
    "regenerate",
    "undecided",
    "pending",
)
OUTCOMES = (KEEP, DISCARD, REGENERATE, UNDECIDED)
OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
STATS: dict[str, Callable[[Sequence[float]], float]] = {
    "mean": statistics.fmean,
    "median": statistics.median,
    "min": min,
    "max": max,
}
ANY_CRITERION = "*"


class RuleError(ValueError):
    """A rule spec that cannot be evaluated; the message says where and why."""


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` returns: the outcome, its reason, and how much to raise k."""

    outcome: str
    reason: str
    add_annotators: int = 0


# --- validation -----------------------------------------------------------------------


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RuleError(f"{where}: expected a number, got {value!r}")
    return float(value)


def _op(value: Any, where: str) -> str:
    if value not in OPS:
        raise RuleError(f"{where}: operator must be one of {' '.join(OPS)}, got {value!r}")
    return value


def _validate_condition(cond: Any, keys: Sequence[str], where: str) -> None:
    if not isinstance(cond, Mapping):
        raise RuleError(f"{where}: a condition must be an object, got {cond!r}")
    for combinator in ("all", "any"):
        if combinator in cond:
            parts = cond[combinator]
            if set(cond) != {combinator} or not isinstance(parts, list) or not parts:
                raise RuleError(f"{where}: {combinator!r} takes a non-empty list and nothing else")
            for i, part in enumerate(parts):
                _validate_condition(part, keys, f"{where}.{combinator}[{i}]")
            return
    stat = cond.get("stat")
    allowed = {"stat", "criterion", "op", "value"}
    if stat == "count":
        allowed |= {"score_op", "score"}
        _op(cond.get("score_op"), f"{where}.score_op")
        _number(cond.get("score"), f"{where}.score")
    elif stat not in STATS:
        raise RuleError(f"{where}.stat: one of {', '.join([*STATS, 'count'])}, got {stat!r}")
    unknown = set(cond) - allowed
    if unknown:
        raise RuleError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    criterion = cond.get("criterion")
    if criterion != ANY_CRITERION and criterion not in keys:
        raise RuleError(
            f"{where}.criterion: {criterion!r} is not a criterion of the rubric "
            f"({', '.join(keys)}) nor {ANY_CRITERION!r}"
        )
    _op(cond.get("op"), f"{where}.op")
    _number(cond.get("value"), f"{where}.value")


def rule_spec_validate(spec: Any, criterion_keys: Sequence[str]) -> None:
    """Raise :class:`RuleError` naming the first problem of ``spec``; ``None`` if sound."""
    if not isinstance(spec, Mapping):
        raise RuleError("the rule set must be a JSON object with 'rules' and 'otherwise'")
    unknown = set(spec) - {"rules", "otherwise"}
    if unknown:
        raise RuleError(f"unknown top-level field(s) {', '.join(sorted(unknown))}")
    if spec.get("otherwise", KEEP) not in OUTCOMES:
        raise RuleError(f"otherwise: one of {', '.join(OUTCOMES)}, got {spec.get('otherwise')!r}")
    rules = spec.get("rules")
    if not isinstance(rules, list):
        raise RuleError("rules: expected a list of rules")
    for i, rule in enumerate(rules):
        where = f"rules[{i}]"
        if not isinstance(rule, Mapping):
            raise RuleError(f"{where}: a rule must be an object")
        unknown = set(rule) - {"when", "then", "add_annotators", "max_annotators"}
        if unknown:
            raise RuleError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        if rule.get("then") not in OUTCOMES:
            raise RuleError(f"{where}.then: one of {', '.join(OUTCOMES)}, got {rule.get('then')!r}")
        if "when" not in rule:
            raise RuleError(f"{where}: 'when' is missing")
        _validate_condition(rule["when"], criterion_keys, f"{where}.when")
        extra = {"add_annotators", "max_annotators"} & set(rule)
        if extra and rule["then"] != UNDECIDED:
            raise RuleError(f"{where}: {', '.join(sorted(extra))} only go with then 'undecided'")
        for field in extra:
            value = rule[field]
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 50:
                raise RuleError(f"{where}.{field}: a whole number from 1 to 50, got {value!r}")


# --- evaluation -----------------------------------------------------------------------


def _fmt(x: float) -> str:
    """3.75 -> '3.75', 4.0 -> '4.0', 2.3333 -> '2.33' (reasons are read by people)."""
    text = f"{x:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _count(x: float) -> str:
    """Counts and yes/no scores read as whole numbers: 'scores <= 0', '>= 2'."""
    return str(int(x)) if float(x).is_integer() else _fmt(x)


def _check(
    cond: Mapping[str, Any], scores: Mapping[str, Sequence[float]], keys: Sequence[str]
) -> str | None:
    """The reason text when ``cond`` holds, else ``None``."""
    if "all" in cond:
        reasons = [_check(part, scores, keys) for part in cond["all"]]
        return None if any(r is None for r in reasons) else " and ".join(reasons)  # type: ignore[arg-type]
    if "any" in cond:
        for part in cond["any"]:
            reason = _check(part, scores, keys)
            if reason is not None:
                return reason
        return None
    criteria = keys if cond["criterion"] == ANY_CRITERION else [cond["criterion"]]
    compare = OPS[cond["op"]]
    for key in criteria:
        values = scores.get(key) or []
        if not values:
            continue
        if cond["stat"] == "count":
            passes = OPS[cond["score_op"]]
            stat = sum(1 for v in values if passes(v, cond["score"]))
            label = f"{stat} score(s) {cond['score_op']} {_count(cond['score'])} on {key}"
        else:
            stat = STATS[cond["stat"]](values)
            label = f"{cond['stat']} {key} {_fmt(stat)}"
        if compare(stat, cond["value"]):
            shown = _count(cond["value"]) if cond["stat"] == "count" else _fmt(cond["value"])
            return f"{label} {cond['op']} {shown}"
    return None


def decide(
    spec: Mapping[str, Any],
    scores: Mapping[str, Sequence[float]],
    *,
    criterion_keys: Sequence[str],
    submitted: int,
    k: int,
    subject: str = "",
) -> Decision:
    """The outcome for one object from its submitted scores (criterion -> values).

    ``pending`` until ``k`` annotators have submitted. ``subject`` (e.g. "trajectory")
    starts the reason: "trajectory: mean rationality 3.75 < 4.0".
    """
    prefix = f"{subject}: " if subject else ""
    if submitted < k:
        return Decision(PENDING, f"{prefix}{submitted} of {k} annotators have scored")
    for rule in spec.get("rules", []):
        if rule["then"] == UNDECIDED and submitted >= rule.get("max_annotators", math.inf):
            continue  # the extra annotator has scored: let the next rules decide
        reason = _check(rule["when"], scores, criterion_keys)
        if reason is None:
            continue
        add = rule.get("add_annotators", 1) if rule["then"] == UNDECIDED else 0
        return Decision(rule["then"], prefix + reason, add)
    otherwise = spec.get("otherwise", KEEP)
    return Decision(otherwise, f"{prefix}no rule applies ({submitted} annotators): {otherwise}")


def stage_outcome(outcomes: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """A stage's outcome from its objects' (kind, effective outcome) pairs, with a reason.

    Paper Appendix A: a stage whose profiles, relationship, trajectory or any scenario is
    discarded is discarded; a failed question is regenerated, not the stage. The stage
    is kept once every object is kept.
    """
    failed = [kind for kind, outcome in outcomes if outcome == DISCARD and kind != "question"]
    if failed:
        return DISCARD, f"discarded: {', '.join(sorted(set(failed)))}"
    waiting = sum(1 for _, outcome in outcomes if outcome in (PENDING, UNDECIDED))
    if waiting:
        return PENDING, f"{waiting} object(s) still to decide"
    regenerate = sum(1 for kind, outcome in outcomes if outcome in (REGENERATE, DISCARD))
    if regenerate:
        return REGENERATE, f"{regenerate} question(s) to regenerate"
    return KEEP, "every object kept"
