"""A generic multiple-choice benchmark's report: people and model runs on the same items.

One researcher-named benchmark is one Work (benchmark "generic", kind item set) with
its ``MCItem`` rows; its report covers that one work (``build_report(..., work_id=)``):

- ``runs``: what each run is, its predictions and unparseable answers;
- ``accuracy``: each human study, all studies pooled (with more than one) and each run,
  item-level accuracy with a 95% interval and the chance level of the items it answered;
- ``humans-vs-runs``: each run beside the people on the items both answered, with the
  paired difference and its interval;
- ``by-<field>``: the same per value of every category field (ability, task, order…),
  with a bar chart with error bars per field;
- ``human-agreement``: majority share, pairwise agreement, Krippendorff's alpha and,
  where every item has as many answers, Fleiss' kappa among the people;
- ``item-agreement``: per item the people's majority pick, its share and their
  agreement; ``gold-disagreement``: the items where most people picked a wrong option.

Item-level accuracy: each item's share of correct answers (over the participants who
answered it, or over a run's samples; its first sample only with ``samples="first"``),
averaged over the items; intervals resample
items (``metrics.mean_ci``, seeded). A person's pick is scored against the item's gold
as the bank holds it (``selectors.generic_pick_correct``); a model's unparseable,
refused or missing answer counts as wrong.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.text import slugify

from metrics import (
    agreement_cis,
    chance_baseline,
    fleiss_kappa,
    krippendorff_alpha,
    mean_ci,
    percent_agreement,
)
from metrics.allocation import WIDEST, stratified_bootstrap_pair
from reports import selectors
from reports.report_types import SAMPLES_FIRST, SAMPLES_MEAN, Cell, Chart, Report, Table
from reports.selectors import generic_pick_correct, option_letter
from reports.tables import (
    N_RESAMPLES,
    excluded_note,
    first_samples_note,
    pct,
    prediction_stats,
    run_label,
    runs_table,
    single_unit_note,
    single_unit_rows,
)

POOLED = "Humans: all studies pooled"
EXCERPT_CHARS = 120
# Table keys the category tables must not take.
FIXED_KEYS = {
    "runs",
    "accuracy",
    "humans-vs-runs",
    "human-agreement",
    "item-agreement",
    "gold-disagreement",
}


@dataclass(frozen=True)
class _Item:
    pk: int
    item_id: str
    position: int
    answers: tuple[int, ...]
    options: int
    categories: Mapping[str, Any]
    question: str

    @property
    def gold(self) -> str:
        return ", ".join(option_letter(a) for a in self.answers)


@dataclass
class _System:
    """One row of the comparison: a human study, the pooled studies, or a run.

    ``outcomes[item pk]`` holds one 0/1 per answer (a person's pick, a run's sample);
    ``picks[item pk]`` the people's options (empty for a run).
    """

    label: str
    kind: str
    study_id: int | None = None  # a human study's own row (not the pooled one)
    outcomes: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    picks: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    participants: set[int] = field(default_factory=set)

    def answered(self, items: Iterable[_Item]) -> list[_Item]:
        return [item for item in items if self.outcomes.get(item.pk)]

    def scores(self, items: Iterable[_Item]) -> list[float]:
        """Each answered item's accuracy, in the items' order."""
        return [sum(o) / len(o) for item in items if (o := self.outcomes.get(item.pk))]


def build(
    report: Report,
    work: Mapping[str, Any],
    runs: list[dict[str, Any]],
    studies: list[dict[str, Any]],
    *,
    seed: int,
    include_excluded: bool = False,
    samples: str = SAMPLES_MEAN,
) -> None:
    """Fill ``report`` for the generic benchmark ``work`` (``selectors.generic_work``);
    a run's answers to an item are all its samples, or its first with ``samples="first"``."""
    work_id = work["id"]
    rows = selectors.generic_item_rows(work_id)
    fields = selectors.generic_category_fields(work, (r["categories"] for r in rows))
    # Questions are quoted in the language people answered in, else the benchmark's
    # first: "the items most people got wrong" reads as they read them.
    languages = list(
        dict.fromkeys(
            [
                *selectors.generic_study_languages(s["id"] for s in studies),
                *((work.get("extra") or {}).get("languages") or []),
            ]
        )
    )
    items = [_item(r, languages) for r in rows]
    by_pk = {item.pk: item for item in items}

    predictions = list(selectors.generic_prediction_rows([r["id"] for r in runs], work_id))
    report.tables.append(runs_table(runs, prediction_stats(predictions)))
    models: dict[int, _System] = {r["id"]: _System(run_label(r), "model") for r in runs}
    # The runs table describes every sample a run has; the accuracy reads the chosen ones.
    first_only = samples == SAMPLES_FIRST
    for p in predictions:
        if p["item_id"] in by_pk and not (first_only and p["sample_index"]):
            # Unparseable, refused and missing answers are stored as False or null: wrong.
            models[p["run_id"]].outcomes[p["item_id"]].append(float(bool(p["correct"])))

    picks = (
        selectors.generic_choice_rows(
            [s["id"] for s in studies], work_id, include_excluded=include_excluded
        )
        if studies
        else []
    )
    humans = _human_systems(studies, picks, by_pk)
    by_study = {s.study_id: s for s in humans if s.study_id is not None}
    reference = humans[-1] if humans else None  # the pooled studies, or the one study
    systems = [*humans, *(models[r["id"]] for r in runs)]

    report.facts = {
        "name": work["title"],
        "version": work["version"],
        "work": work["key"],
        "work_id": work_id,
        **report.facts,
        "category_fields": ", ".join(fields),
    }
    if picks:
        report.facts["human_answers"] = len(picks)
        report.facts["participants"] = len({p["participant_id"] for p in picks})
    excluded = excluded_note(studies, include_excluded=include_excluded) if studies else ""
    common = [i for i in items if all(s.outcomes.get(i.pk) for s in systems)] if systems else []
    report.facts["items_every_system_answered"] = len(common)

    report.tables.append(
        _accuracy_table(systems, items, len(common), seed=seed, note=excluded, samples=samples)
    )
    report.charts.append(
        Chart(
            key="accuracy",
            title="Accuracy (95% CI)",
            kind="bar",
            table="accuracy",
            x="System",
            series=["Accuracy %"],
            error_low=["CI low %"],
            error_high=["CI high %"],
            y_label="accuracy (%)",
        )
    )
    if reference is not None and runs:
        report.tables.append(_versus_table(reference, runs, models, items, seed=seed))
    designs = selectors.generic_study_designs(s["id"] for s in studies) if studies else {}
    if designs:
        report.facts["design"] = "; ".join(
            f"#{study_id}: {d['text']}" for study_id, d in designs.items()
        )
    for study in studies:
        if (design := designs.get(study["id"])) and study["id"] in by_study:
            report.tables.append(_design_table(study, by_study[study["id"]], design, by_pk, seed))
    keys = set(FIXED_KEYS)
    for name in fields:
        key = _category_key(name, keys)
        table = _category_table(key, name, systems, items, seed=seed)
        report.tables.append(table)
        report.charts.append(
            Chart(
                key=key,
                title=f"Accuracy by {name} (95% CI)",
                kind="bar",
                table=key,
                x=table.columns[0],
                series=[f"{s.label} %" for s in systems],
                error_low=[f"{s.label} CI low %" for s in systems],
                error_high=[f"{s.label} CI high %" for s in systems],
                y_label="accuracy (%)",
            )
        )
    if reference is not None:
        report.tables.append(_agreement_table(humans, items, seed=seed, note=excluded))
        report.tables.append(_item_table(reference, items, fields))
        report.tables.append(_disagreement_table(reference, items, fields))


def _item(row: Mapping[str, Any], languages: Sequence[str] = ()) -> _Item:
    # The first of ``languages`` the item has (the studies', then the work's order): the
    # stored JSON object's keys may come back reordered (PostgreSQL's jsonb sorts them).
    all_texts = row["texts"] or {}
    first = next((lang for lang in languages if lang in all_texts), None)
    texts = all_texts[first] if first else next(iter(all_texts.values()), {})
    return _Item(
        pk=row["id"],
        item_id=row["item_id"],
        position=row["position"],
        answers=tuple(row["answers"] or ()),
        options=len(texts.get("options") or []),
        categories=row["categories"] or {},
        question=str(texts.get("question") or ""),
    )


def _human_systems(
    studies: Sequence[Mapping[str, Any]], picks: Sequence[Mapping[str, Any]], items: Mapping
) -> list[_System]:
    """One system per study with counted picks, then all of them pooled (with two or
    more): the last one is the people the other tables read."""
    by_study = {
        s["id"]: _System(f"Humans: {s['name']} (#{s['id']})", "humans", study_id=s["id"])
        for s in studies
    }
    pooled = _System(POOLED, "humans")
    for pick in picks:
        item = items.get(pick["item_id"])
        if item is None:
            continue
        outcome = float(generic_pick_correct(pick["option"], item.answers))
        for system in (by_study[pick["study_id"]], pooled):
            system.outcomes[item.pk].append(outcome)
            system.picks[item.pk].append(pick["option"])
            system.participants.add(pick["participant_id"])
    answered = [s for s in by_study.values() if s.outcomes]
    return [*answered, pooled] if len(answered) > 1 else answered


def _chance(items: Sequence[_Item]) -> float | None:
    # An item always has two options or more (the importer refuses fewer); max() keeps
    # a damaged row from failing the whole report.
    return chance_baseline([max(1, i.options) for i in items])


def _estimate(system: _System, items: Sequence[_Item], *, seed: int) -> list[Cell]:
    """``[n items, accuracy %, CI low %, CI high %]`` of ``system`` on ``items``."""
    scores = system.scores(items)
    mean, low, high = mean_ci(scores, n_resamples=N_RESAMPLES, seed=seed)
    return [len(scores), pct(mean), pct(low), pct(high)]


def _accuracy_table(
    systems: Sequence[_System],
    items: Sequence[_Item],
    common: int,
    *,
    seed: int,
    note: str,
    samples: str,
) -> Table:
    run_answers = "its first sample" if samples == SAMPLES_FIRST else "over its samples"
    rows: list[list[Cell]] = []
    single: list[str] = []
    for system in systems:
        answered = system.answered(items)
        n, accuracy, low, high = _estimate(system, answered, seed=seed)
        if n == 1:
            single.append(system.label)
        rows.append(
            [
                system.label,
                system.kind,
                len(system.participants) if system.kind == "humans" else None,
                n,
                sum(len(system.outcomes[i.pk]) for i in answered),
                accuracy,
                low,
                high,
                pct(_chance(answered)),
            ]
        )
    return Table(
        key="accuracy",
        title="Accuracy: people and models",
        columns=[
            "System",
            "Kind",
            "Participants",
            "Items",
            "Answers",
            "Accuracy %",
            "CI low %",
            "CI high %",
            "Chance %",
        ],
        rows=rows,
        note=(
            f"Item-level accuracy on the items each system answered (Items, of {len(items)}): "
            "each item's share of correct answers (people: over the participants who "
            f"answered it; a run: {run_answers}), averaged over the items. 95% CI: "
            f"percentile bootstrap over items ({N_RESAMPLES} resamples, seeded). Chance: "
            "the mean of 1 / number of options over the same items. Unparseable, refused "
            "and missing model answers count as wrong. Items every system here answered: "
            f"{common}; humans-vs-runs compares each run with the people on the items "
            "both answered." + first_samples_note(samples) + single_unit_note(single, "item") + note
        ),
        no_interval=single_unit_rows(single, "item"),
    )


def _versus_table(
    people: _System,
    runs: Sequence[Mapping[str, Any]],
    models: Mapping[int, _System],
    items: Sequence[_Item],
    *,
    seed: int,
) -> Table:
    rows: list[list[Cell]] = []
    for run in runs:
        model = models[run["id"]]
        shared = [i for i in items if people.outcomes.get(i.pk) and model.outcomes.get(i.pk)]
        human = people.scores(shared)
        machine = model.scores(shared)
        difference = mean_ci(
            [m - h for m, h in zip(machine, human, strict=True)],
            n_resamples=N_RESAMPLES,
            seed=seed,
        )
        rows.append(
            [
                model.label,
                len(shared),
                *_estimate(people, shared, seed=seed)[1:],
                *_estimate(model, shared, seed=seed)[1:],
                *(pct(v) for v in difference),
                pct(_chance(shared)),
            ]
        )
    answered = len(people.answered(items))
    return Table(
        key="humans-vs-runs",
        title="People beside each run, on the items both answered",
        columns=[
            "Run",
            "Shared items",
            "Humans %",
            "Humans CI low %",
            "Humans CI high %",
            "Run %",
            "Run CI low %",
            "Run CI high %",
            "Difference %",
            "Difference CI low %",
            "Difference CI high %",
            "Chance %",
        ],
        rows=rows,
        note=(
            f"People ({people.label}) answered {answered} of the {len(items)} items; each "
            "run is compared with them on the items both answered (Shared items). "
            "Difference: run minus people in percentage points, its 95% CI a paired "
            "bootstrap over the shared items (seeded)."
        ),
    )


def _design_table(
    study: Mapping[str, Any],
    people: _System,
    design: Mapping[str, Any],
    items: Mapping[int, _Item],
    seed: int,
) -> Table:
    """One study's accuracy by its stratum field as its design estimates it: a
    stratum's figure is the mean of its item means (items weighted equally, however
    many answers the design gave each), the overall figure weights strata by their
    share of the study's test items, and the intervals resample items within strata
    and answers within items (``metrics.allocation.stratified_bootstrap``). Unbiased
    under an adaptive design; for a uniform one it equals the plain item mean."""
    name = design["field"]
    strata: dict[str, list[list[bool]]] = defaultdict(list)
    model: dict[str, list[float]] = defaultdict(list)
    widest = design["design"] == WIDEST and design["model"]
    for mc_id in design["items"]:
        item = items.get(mc_id)
        if item is None:
            continue
        key = _category_value(item, name)
        strata[key].append([bool(o) for o in people.outcomes.get(mc_id, ())])
        model[key].append(float(design["model"].get(mc_id, 0.0)))
    human, diff = stratified_bootstrap_pair(
        strata, model=model if widest else None, n_resamples=N_RESAMPLES, seed=seed
    )
    columns = [name, "Items", "Answers", "Accuracy %", "CI low %", "CI high %"]
    if widest:
        columns += ["Human - model %", "Difference CI low %", "Difference CI high %"]
    rows: list[list[Cell]] = []
    for key in [*sorted(strata), ""]:
        members = strata[key] if key else [i for group in strata.values() for i in group]
        row: list[Cell] = [
            key or "Overall (strata weighted by items)",
            len(members),
            sum(len(outcomes) for outcomes in members),
            *(pct(v) for v in human[key]),
        ]
        if widest:
            row += [pct(v) for v in diff[key]]
        rows.append(row)
    return Table(
        key=f"design-{study['id']}",
        title=f"Humans: {study['name']} (#{study['id']}) by {name}, as designed",
        columns=columns,
        rows=rows,
        note=(
            f"Design: {design['text']}. Per value of {name!r}: the mean of the item means "
            "of the study's test items (items weighted equally, however many answers each "
            "got), the overall figure weighting each value by its share of items; 95% "
            "CI: a bootstrap resampling items within each value and answers within each "
            f"item ({N_RESAMPLES} resamples, seeded)."
            + (
                " Human - model: the runs named by the design, their per-item accuracy "
                "fixed when the study went live."
                if widest
                else ""
            )
        ),
    )


def _category_key(name: str, taken: set[str]) -> str:
    base = f"by-{slugify(name) or 'field'}"
    key, n = base, 2
    while key in taken:
        key, n = f"{base}-{n}", n + 1
    taken.add(key)
    return key


def _category_value(item: _Item, name: str) -> str:
    value = item.categories.get(name)
    return "(none)" if value in (None, "") else str(value)


def _category_table(
    key: str, name: str, systems: Sequence[_System], items: Sequence[_Item], *, seed: int
) -> Table:
    groups: dict[str, list[_Item]] = defaultdict(list)
    for item in items:
        groups[_category_value(item, name)].append(item)
    label = name if name not in ("Items", "Chance %") else f"{name} (category)"
    columns = [label, "Items", "Chance %"]
    for system in systems:
        columns += [
            f"{system.label} n",
            f"{system.label} %",
            f"{system.label} CI low %",
            f"{system.label} CI high %",
        ]
    rows: list[list[Cell]] = []
    for value in sorted(groups):
        members = groups[value]
        row: list[Cell] = [value, len(members), pct(_chance(members))]
        for system in systems:
            row += _estimate(system, system.answered(members), seed=seed)
        rows.append(row)
    return Table(
        key=key,
        title=f"Accuracy by {name}",
        columns=columns,
        rows=rows,
        note=(
            f"Per value of the category field {name!r}: Items of the benchmark with it, "
            "chance over them, and each system's item-level accuracy on those it "
            "answered (n) with a 95% bootstrap CI over items (seeded)."
        ),
    )


def _majority(picks: Sequence[int]) -> tuple[str, float | None]:
    """The most picked option(s) as letters ("B", or "B/C" for a tie) and their share."""
    if not picks:
        return "", None
    counts = Counter(picks)
    top = max(counts.values())
    letters = "/".join(option_letter(o) for o in sorted(o for o, n in counts.items() if n == top))
    return letters, top / len(picks)


def _agreement_table(
    humans: Sequence[_System], items: Sequence[_Item], *, seed: int, note: str
) -> Table:
    rows: list[list[Cell]] = []
    for system in humans:
        units = [system.picks[i.pk] for i in items if len(system.picks.get(i.pk, ())) >= 2]
        shares = [_majority(unit)[1] for unit in units]
        (pairs_low, pairs_high), (alpha_low, alpha_high) = agreement_cis(
            units, [percent_agreement, krippendorff_alpha], n_resamples=N_RESAMPLES, seed=seed
        )
        try:
            kappa = fleiss_kappa(units)
        except ValueError:  # items with unequal numbers of answers: Fleiss does not apply
            kappa = None
        alpha = krippendorff_alpha(units) if units else None
        rows.append(
            [
                system.label,
                len(units),
                round(sum(map(len, units)) / len(units), 3) if units else None,
                pct(sum(shares) / len(shares)) if shares else None,
                pct(percent_agreement(units)),
                pct(pairs_low),
                pct(pairs_high),
                _round(alpha),
                _round(alpha_low),
                _round(alpha_high),
                _round(kappa),
            ]
        )
    return Table(
        key="human-agreement",
        title="Agreement among people",
        columns=[
            "Humans",
            "Items with 2+ answers",
            "Answers per item",
            "Majority share %",
            "Pairwise agreement %",
            "Pairwise CI low %",
            "Pairwise CI high %",
            "Krippendorff's alpha",
            "Alpha CI low",
            "Alpha CI high",
            "Fleiss' kappa",
        ],
        rows=rows,
        note=(
            "Over the items two or more people answered, by the option picked: majority "
            "share (the most picked option's share of an item's answers, averaged), "
            "pairwise agreement (agreeing pairs of answers per item, averaged) and "
            "nominal Krippendorff's alpha, each 95% CI a bootstrap over items (seeded); "
            "Fleiss' kappa only where every item has the same number of answers." + note
        ),
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _item_cells(
    people: _System, item: _Item, fields: Sequence[str]
) -> tuple[list[Cell], str, float | None, float | None]:
    picks = people.picks[item.pk]
    outcomes = people.outcomes[item.pk]
    majority, share = _majority(picks)
    correct = sum(outcomes) / len(outcomes)
    categories = [_category_value(item, name) for name in fields]
    return [item.item_id, *categories], majority, share, correct


def _item_table(people: _System, items: Sequence[_Item], fields: Sequence[str]) -> Table:
    rows: list[list[Cell]] = []
    for item in people.answered(items):
        head, majority, share, correct = _item_cells(people, item, fields)
        picks = people.picks[item.pk]
        rows.append(
            [
                *head,
                len(picks),
                item.gold,
                majority,
                pct(share),
                pct(percent_agreement([picks])),
                pct(correct),
            ]
        )
    return Table(
        key="item-agreement",
        title="Each item: the people's picks",
        columns=[
            "Item",
            *_field_columns(fields),
            "Answers",
            "Gold",
            "Majority pick",
            "Majority share %",
            "Pairwise agreement %",
            "Correct %",
        ],
        rows=rows,
        note=(
            f"Every item the people ({people.label}) answered, in the benchmark's order. "
            "Majority pick: the most picked option (a tie lists each, B/C); pairwise "
            "agreement needs two answers."
        ),
    )


# Columns of the item tables a category field's column must not take.
ITEM_COLUMNS = {
    "Item",
    "Answers",
    "Gold",
    "Question",
    "Majority pick",
    "Majority share %",
    "Pairwise agreement %",
    "Correct %",
}


def _field_columns(fields: Sequence[str]) -> list[str]:
    """A category field's column in the item tables: its name, unless a fixed column
    has it (a field called "Gold")."""
    return [f"{name} (category)" if name in ITEM_COLUMNS else name for name in fields]


def _excerpt(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1].rstrip() + "…"


def _disagreement_table(people: _System, items: Sequence[_Item], fields: Sequence[str]) -> Table:
    found: list[tuple[float, int, list[Cell]]] = []
    for item in people.answered(items):
        head, majority, share, correct = _item_cells(people, item, fields)
        if correct is None or correct >= 0.5:
            continue
        row: list[Cell] = [
            *head,
            _excerpt(item.question),
            item.gold,
            majority,
            pct(share),
            pct(correct),
            len(people.picks[item.pk]),
        ]
        found.append((correct, item.position, row))
    found.sort(key=lambda entry: (entry[0], entry[1]))
    return Table(
        key="gold-disagreement",
        title="Items where most people disagree with the gold",
        columns=[
            "Item",
            *_field_columns(fields),
            "Question",
            "Gold",
            "Majority pick",
            "Majority share %",
            "Correct %",
            "Answers",
        ],
        rows=[row for _, _, row in found],
        note=(
            f"Items where fewer than half of the people's answers ({people.label}) are "
            "correct, fewest correct first: candidates for a wrong or ambiguous gold. "
            "Answers says how many people answered (one answer is thin evidence). The "
            f"question is cut at {EXCERPT_CHARS} characters."
        ),
    )
