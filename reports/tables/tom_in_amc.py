"""ToM-in-AMC tables (also the scene tables of TVShowGuess, which shares its format).

- ``accuracy`` (Table 4): instance and scene accuracy with 95% CIs per run, under the
  Random (chance) and Majority baselines;
- ``by-speakers`` (Tables 5 and 11): accuracy by the number of masked speakers in the
  scene, 1, 2, 3…, then Easy (< 3) and Hard (≥ 3);
- ``by-genre`` (Table 12) and, with two runs or more over two genres or more,
  ``genre-correlation`` (Figure 5): Spearman's rho between systems over their per-genre
  accuracies.

A run is scored on the masked speakers it answered, first sample only (the papers'
systems answer once); baselines are computed over every masked speaker.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reports import selectors
from reports.metrics import (
    EASY,
    HARD,
    accuracy,
    accuracy_ci,
    chance_baseline,
    correlation_matrix,
    majority_baseline,
    scene_accuracy_ci,
    speaker_difficulty,
)
from reports.report_types import Cell, Chart, Report, Table
from reports.tables import N_RESAMPLES, pct, prediction_stats, run_label, runs_table

NO_GENRE = "(no genre)"
RANDOM = "Random"
MAJORITY = "Majority"
DIFFICULTY_LABELS = {EASY: "Easy (<3)", HARD: "Hard (≥3)"}


@dataclass
class SpeakerData:
    """What the speaker tables are computed from; TVShowGuess reuses it."""

    items: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    # run id -> first-sample prediction rows (correct, scene_id, speakers, genres, …)
    outcomes: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    frequency: dict[tuple[int, str], int] = field(default_factory=dict)
    frequency_fallback: set[int] = field(default_factory=set)

    def labels(self) -> list[str]:
        return [run_label(r) for r in self.runs]


def build(report: Report, runs: list[dict[str, Any]], *, seed: int) -> None:
    build_speaker_tables(report, runs, seed=seed)


def build_speaker_tables(report: Report, runs: list[dict[str, Any]], *, seed: int) -> SpeakerData:
    """Add the runs, accuracy, by-speakers and by-genre tables; return the data used."""
    benchmark = report.benchmark
    predictions = list(selectors.speaker_prediction_rows([r["id"] for r in runs]))
    frequency, fallback = selectors.character_frequencies(benchmark)
    data = SpeakerData(
        items=selectors.speaker_item_rows(benchmark),
        runs=runs,
        frequency=frequency,
        frequency_fallback=fallback,
    )
    for run in runs:
        data.outcomes[run["id"]] = []
    for p in predictions:
        if p["sample_index"] == 0:
            data.outcomes[p["run_id"]].append(p)
    report.tables.append(runs_table(runs, prediction_stats(predictions)))
    report.tables.append(_accuracy_table(data, seed=seed))
    report.charts.append(
        Chart(
            key="accuracy",
            title="Instance and scene accuracy (95% CI)",
            kind="bar",
            table="accuracy",
            x="System",
            series=["Accuracy %", "Scene accuracy %"],
            error_low=["CI low %", "Scene CI low %"],
            error_high=["CI high %", "Scene CI high %"],
            y_label="accuracy (%)",
        )
    )
    by_speakers = _group_table(
        data,
        key="by-speakers",
        title="Accuracy by number of masked speakers in the scene",
        group_column="Speakers",
        groups_of=_speaker_groups,
        order=_speaker_order,
    )
    report.tables.append(by_speakers)
    report.charts.append(_systems_chart(by_speakers, data, x="Speakers"))
    by_genre = _group_table(
        data,
        key="by-genre",
        title="Accuracy by genre",
        group_column="Genre",
        groups_of=lambda row: row["genres"] or [NO_GENRE],
        order=lambda g: (g == NO_GENRE, str(g)),
    )
    works: dict[str, set[int]] = defaultdict(set)
    for item in data.items:
        for genre in item["genres"] or [NO_GENRE]:
            works[genre].add(item["work_id"])
    by_genre.columns.insert(1, "Works")
    for row in by_genre.rows:
        row.insert(1, len(works[row[0]]))
    report.tables.append(by_genre)
    report.charts.append(_systems_chart(by_genre, data, x="Genre"))
    # A correlation across genres needs two systems and two genres to rank.
    genres = {g for item in data.items for g in item["genres"] or []}
    if len(runs) >= 2 and len(genres) >= 2:
        _add_genre_correlation(report, data)
    return data


def _correct(p: dict[str, Any]) -> bool:
    # Unparseable answers are stored as False; a missing judgement is not a right one.
    return p["correct"] is True


def _item_chance(items: Sequence[dict[str, Any]]) -> float | None:
    return chance_baseline([len(i["candidates"]) for i in items])


def _item_majority(data: SpeakerData, items: Sequence[dict[str, Any]]) -> float | None:
    return majority_baseline(
        [(i["work_id"], i["gold"]) for i in items],
        [[(i["work_id"], c) for c in i["candidates"]] for i in items],
        data.frequency,
    )


def _scene_chance(items: Sequence[dict[str, Any]]) -> float | None:
    """Expected scene accuracy of independent uniform guesses: mean over scenes of Π 1/k."""
    per_scene: dict[Hashable, float] = defaultdict(lambda: 1.0)
    for i in items:
        per_scene[i["scene_id"]] *= 1 / len(i["candidates"])
    return math.fsum(per_scene.values()) / len(per_scene) if per_scene else None


def _accuracy_table(data: SpeakerData, *, seed: int) -> Table:
    scenes = {i["scene_id"] for i in data.items}
    n = len(data.items)
    # Baselines are expected values, not samples: they have no interval.
    rows: list[list[Cell]] = [
        [
            *(RANDOM, "", "chance", n, pct(_item_chance(data.items)), None, None),
            *(len(scenes), pct(_scene_chance(data.items)), None, None),
        ],
        [
            *(MAJORITY, "", "baseline", n, pct(_item_majority(data, data.items)), None, None),
            *(len(scenes), None, None, None),
        ],
    ]
    for run in data.runs:
        outcomes = data.outcomes[run["id"]]
        correct = [_correct(p) for p in outcomes]
        clusters = [p["scene_id"] for p in outcomes]
        instance = accuracy_ci(correct, clusters=clusters, n_resamples=N_RESAMPLES, seed=seed)
        scene = scene_accuracy_ci(correct, clusters, n_resamples=N_RESAMPLES, seed=seed)
        rows.append(
            [
                run_label(run),
                run["model"],
                run["method"],
                instance.n,
                pct(instance.accuracy),
                pct(instance.ci_low),
                pct(instance.ci_high),
                scene.n,
                pct(scene.accuracy),
                pct(scene.ci_low),
                pct(scene.ci_high),
            ]
        )
    note = (
        "Instances are masked speakers; a scene is correct when all its speakers are. "
        "95% CIs: percentile bootstrap over scenes. Random: expected accuracy of a uniform "
        "guess among the candidates. Majority: the candidate most often a masked speaker "
        "in the work's training scenes."
    )
    if data.frequency_fallback:
        note += (
            f" {len(data.frequency_fallback)} work(s) have no training scenes; there "
            "Majority counts the evaluated scenes' answers (an optimistic baseline)."
        )
    note += " Runs: first sample, on the speakers they answered."
    return Table(
        key="accuracy",
        title="Instance and scene accuracy",
        columns=[
            "System",
            "Model",
            "Method",
            "Instances",
            "Accuracy %",
            "CI low %",
            "CI high %",
            "Scenes",
            "Scene accuracy %",
            "Scene CI low %",
            "Scene CI high %",
        ],
        rows=rows,
        note=note,
    )


def _speaker_groups(row: dict[str, Any]) -> list[Hashable]:
    return [row["speakers"], DIFFICULTY_LABELS[speaker_difficulty(row["speakers"])]]


def _speaker_order(group: Hashable) -> tuple[int, Any]:
    if isinstance(group, int):
        return (0, group)
    return (1, list(DIFFICULTY_LABELS.values()).index(group))


def _group_table(
    data: SpeakerData,
    *,
    key: str,
    title: str,
    group_column: str,
    groups_of,
    order,
) -> Table:
    """Random, Majority and each run's accuracy per group (an item may be in several)."""
    items_by: dict[Hashable, list[dict[str, Any]]] = defaultdict(list)
    for item in data.items:
        for group in groups_of(item):
            items_by[group].append(item)
    run_by: dict[int, dict[Hashable, list[bool]]] = {}
    for run_id, outcomes in data.outcomes.items():
        run_by[run_id] = defaultdict(list)
        for p in outcomes:
            for group in groups_of(p):
                run_by[run_id][group].append(_correct(p))
    groups = sorted(set(items_by) | {g for r in run_by.values() for g in r}, key=order)
    rows: list[list[Cell]] = []
    for group in groups:
        items = items_by.get(group, [])
        rows.append(
            [
                group if isinstance(group, str) else str(group),
                len(items),
                pct(_item_chance(items)) if items else None,
                pct(_item_majority(data, items)) if items else None,
                *(pct(accuracy(run_by[r["id"]].get(group, []))) for r in data.runs),
            ]
        )
    return Table(
        key=key,
        title=title,
        columns=[
            group_column,
            "Instances",
            f"{RANDOM} %",
            f"{MAJORITY} %",
            *(f"{label} %" for label in data.labels()),
        ],
        rows=rows,
        note="Instances: masked speakers in the group; runs are scored on those they answered.",
    )


def _systems_chart(table: Table, data: SpeakerData, *, x: str) -> Chart:
    return Chart(
        key=table.key,
        title=table.title,
        kind="bar",
        table=table.key,
        x=x,
        series=[f"{RANDOM} %", f"{MAJORITY} %", *(f"{label} %" for label in data.labels())],
        y_label="accuracy (%)",
    )


def _add_genre_correlation(report: Report, data: SpeakerData) -> None:
    # From unrounded accuracies: rounding to 2 decimals could create ties.
    series: dict[str, dict[Hashable, float | None]] = {}
    for run, label in zip(data.runs, data.labels(), strict=True):
        by_genre: dict[Hashable, list[bool]] = defaultdict(list)
        for p in data.outcomes[run["id"]]:
            for genre in p["genres"] or []:
                by_genre[genre].append(_correct(p))
        series[label] = {genre: accuracy(values) for genre, values in by_genre.items()}
    names, matrix = correlation_matrix(series, method="spearman")
    genres = len({g for values in series.values() for g in values})
    report.tables.append(
        Table(
            key="genre-correlation",
            title="Spearman correlation between systems across genres",
            columns=["System", *names],
            rows=[
                [name, *(None if v is None else round(v, 3) for v in values)]
                for name, values in zip(names, matrix, strict=True)
            ],
            note=(
                f"Spearman's rho of per-genre accuracies ({genres} genre(s) in all), over the "
                "genres both systems answered; empty where fewer than two or no variation."
            ),
        )
    )
    report.charts.append(
        Chart(
            key="genre-correlation",
            title="Correlation between systems across genres",
            kind="heatmap",
            table="genre-correlation",
            y_label="Spearman's rho",
        )
    )
