"""Simulated studies for the allocation designs of issue 50: ``make bench-allocation``.

For each data set and design (uniform, balanced, widest) it runs ``--studies`` studies
at the same number of answers and prints, per design: the widest stratum's 95%
half-width of human accuracy and of human - model (mean over studies, in points, and
as a share of the uniform design's), how often the 95% intervals hold the true values
(coverage), the largest bias over strata, and the answers per item the design gave
the smallest and the largest stratum, and the floor: the same with endless answers.

    .venv/bin/python scripts/bench_allocation.py [--studies 1000] [--processes 2]

The data sets keep the structure of the real data in ../shared/data (TOMLAB_SHARED_DATA):

- ToMBench: 2,860 items in 31 strata, its abilities as the task files give them (an
  item labelled with two abilities, "Belief: Location false beliefs Belief: Second-order
  beliefs", counts under the first, as one item has one stratum: 31 strata, the
  number of abilities the ToMBench paper names), 20 to 560 items each. There are no
  human answers in the release: each ability's human accuracy is drawn once (seeded)
  between 70% and 97%, the model's 0 to 25 points below it.
- TVShowGuess (friends.raw and friends.tsv): the 149 masked speakers of the annotated
  scenes, in three strata by the authors' dependence type (needs earlier scenes:
  "direct"; needs facts remembered about the show: "indirect"; neither: "none"; as
  metrics.tvshowguess reads the sheet). Each stratum's human accuracy is the share of
  the sheet's real guesses that are right (Jeffreys-smoothed: (right + 1/2) / (guesses
  + 1), as 87 of the 89 guesses are right); the model lags it by 20 points, the
  distance the ToM-in-AMC paper reports between humans and its models.

Simulated people and items: item i of stratum h has difficulty d_i ~ N(delta_h, 1) on
the log-odds scale and rater r a skill s_r ~ N(0, 0.5²); the rater answers it right
with probability sigmoid(s_r - d_i). The model is right on item i with probability
sigmoid(theta_h - d_i), drawn once per item: the fixed run of the study. delta_h and
theta_h are set so that the stratum's accuracies are the ones above.

What the intervals are checked against: the issue's estimator resamples items within
strata, so its intervals are about the kind of item (all the stories of an ability
that could have been written), not about the few the benchmark happens to hold. Every
simulated study therefore draws its items afresh, and the true value of a stratum is
the mean over that kind of item and over raters (a Gauss-Hermite integral). The bias
is measured against the drawn items' own mean (the mean of their true accuracies, and
of true accuracy - the run's 0/1 outcome), which is itself unbiased for the true value
but spares the Monte Carlo error the spread of items, so that a bias of 0.5 points is
visible at all.

How a study runs, as the engine runs it: participants arrive one after another, each
is handed a batch of places (``--batch``), ``--in-flight`` participants answer at once
(their places count as pending), and the next participant's strata come from
``metrics.allocation.next_strata`` on the tallies kept by ``tally_update`` as answers
are submitted; within a stratum the item with the fewest places goes first. Every item
first gets ``--phase-one`` answers; the budget is ``--per-item`` answers per item, so
uniform gives every item exactly that. The estimates are
``metrics.allocation.stratified_bootstrap_pair`` with seed 0 (a report's seed).
Studies share the items, raters and model run across designs (one seed per study).

The floor line runs the same estimator on the same studies' items with endlessly many
answers per item (a million, each item's share right at its true value): the widest
half-width no allocation of human answers goes below, human - model's by the same
Newcombe interval the designs' rows use.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from metrics.allocation import (  # noqa: E402 - after the path is set
    DESIGNS,
    UNIFORM,
    Tally,
    next_strata,
    stratified_bootstrap_counts,
    tally_update,
)

ITEM_SD = 1.0  # items' difficulty spread within a stratum, log-odds
RATER_SD = 0.5  # raters' skill spread, log-odds
# The ability labels' leading words; a label naming two abilities repeats one.
_ABILITY_START = re.compile(
    r"\s+(?=(?:Belief|Desire|Emotion|Intention|Knowledge|Non-literal communication):)",
    re.IGNORECASE,
)
_HERMITE = np.polynomial.hermite.hermgauss(64)


@dataclass(frozen=True)
class DataSet:
    name: str
    sizes: dict[str, int]  # items per stratum
    human: dict[str, float]  # the kind of item's human accuracy
    model: dict[str, float]  # and the model's
    batch: int  # places per participant (at most the smallest stratum's items)


@dataclass(frozen=True)
class Settings:
    per_item: int
    phase_one: int
    in_flight: int
    resamples: int


def tombench(folder: Path) -> DataSet:
    sizes: dict[str, int] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                label = json.loads(line)["能力\nABILITY"].strip()
                first = _ABILITY_START.split(label)[0]
                sizes[first] = sizes.get(first, 0) + 1
    keys = sorted(sizes)
    rng = np.random.default_rng(2026)  # the accuracies are part of the data set: fixed
    human = rng.uniform(0.70, 0.97, size=len(keys))
    model = human - rng.uniform(0.0, 0.25, size=len(keys))
    return DataSet(
        "ToMBench",
        {k: sizes[k] for k in keys},
        dict(zip(keys, human.tolist(), strict=True)),
        dict(zip(keys, model.tolist(), strict=True)),
        batch=20,
    )


def tvshowguess(folder: Path) -> DataSet:
    # The project's readers of the release need Django's settings (field lengths).
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from benchmarks.importers.tvshowguess import read_annotation_sheet, read_raw_scenes
    from metrics.tvshowguess import dependence_type

    gold = {
        (scene.source_id, code): name
        for scene in read_raw_scenes(folder / "friends.raw")
        for code, name in scene.answer.items()
    }
    sizes: dict[str, int] = {}
    right: dict[str, int] = {}
    guessed: dict[str, int] = {}
    for row in read_annotation_sheet(folder / "friends.tsv", warn=lambda _: None).rows:
        name = gold.get((row.scene_source_id, row.code))
        kind = dependence_type(row.need_history, row.facts_from_memory)
        if name is None or kind is None:
            continue  # a scene friends.raw lacks, or an unsolvable speaker
        sizes[kind] = sizes.get(kind, 0) + 1
        if row.guessed_name:
            guessed[kind] = guessed.get(kind, 0) + 1
            right[kind] = right.get(kind, 0) + (row.guessed_name.casefold() == name.casefold())
    keys = sorted(sizes)
    human = {k: (right.get(k, 0) + 0.5) / (guessed.get(k, 0) + 1) for k in keys}
    return DataSet(
        "TVShowGuess",
        {k: sizes[k] for k in keys},
        human,
        {k: human[k] - 0.20 for k in keys},
        batch=10,
    )


# -- the population -------------------------------------------------------------------


def _mean_sigmoid(centre: np.ndarray | float, sd: float) -> np.ndarray:
    """E[sigmoid(centre + sd·Z)], Z standard normal (Gauss-Hermite, 64 nodes)."""
    nodes, weights = _HERMITE
    x = np.asarray(centre, dtype=float)[..., None] + sd * math.sqrt(2) * nodes
    return (weights / (1 + np.exp(-x))).sum(axis=-1) / math.sqrt(math.pi)


def _centre_for(accuracy: float, sd: float) -> float:
    """The centre whose E[sigmoid(centre + sd·Z)] is ``accuracy`` (bisection)."""
    low, high = -20.0, 20.0
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if _mean_sigmoid(mid, sd) < accuracy else (low, mid)
    return (low + high) / 2


@dataclass(frozen=True)
class Population:
    keys: list[str]
    stratum: np.ndarray  # each item's stratum index
    delta: np.ndarray  # per stratum: mean item difficulty
    theta: np.ndarray  # per stratum: the model's ability
    truth_human: np.ndarray  # per stratum
    truth_diff: np.ndarray

    @classmethod
    def of(cls, data: DataSet) -> Population:
        keys = sorted(data.sizes)
        spread = math.hypot(ITEM_SD, RATER_SD)
        delta = np.array([-_centre_for(data.human[k], spread) for k in keys])
        # The model's centre theta - delta gives its accuracy over items.
        theta = np.array([_centre_for(data.model[k], ITEM_SD) for k in keys]) + delta
        human = _mean_sigmoid(-delta, spread)
        model = _mean_sigmoid(theta - delta, ITEM_SD)
        stratum = np.repeat(np.arange(len(keys)), [data.sizes[k] for k in keys])
        return cls(keys, stratum, delta, theta, human, human - model)


@dataclass(frozen=True)
class Study:
    """One simulated study's draws, shared by every design."""

    difficulty: np.ndarray  # per item
    p: np.ndarray  # per item: the share of raters who get it right
    run: np.ndarray  # per item: the model run's 0/1 outcome
    skill: np.ndarray  # per participant
    luck: np.ndarray  # per participant and place: uniform draws

    @classmethod
    def draw(cls, population: Population, data: DataSet, settings: Settings, seed: int) -> Study:
        rng = np.random.default_rng([seed, 50])
        n = population.stratum.size
        difficulty = population.delta[population.stratum] + ITEM_SD * rng.standard_normal(n)
        p = _mean_sigmoid(-difficulty, RATER_SD)
        q = 1 / (1 + np.exp(difficulty - population.theta[population.stratum]))
        run = (rng.random(n) < q).astype(float)
        participants = math.ceil(n * settings.per_item / data.batch)
        skill = RATER_SD * rng.standard_normal(participants)
        luck = rng.random((participants, data.batch))
        return cls(difficulty, p, run, skill, luck)


# -- one study, as the engine runs it -----------------------------------------------


def run_study(
    design: str, population: Population, data: DataSet, settings: Settings, study: Study
) -> tuple[np.ndarray, np.ndarray]:
    """Answers and correct answers per item after the study's budget is spent."""
    keys = population.keys
    members = [np.flatnonzero(population.stratum == h).tolist() for h in range(len(keys))]
    item_key = [keys[h] for h in population.stratum.tolist()]
    run = study.run.tolist()
    answers = [0] * len(item_key)
    correct = [0] * len(item_key)
    tallies = {key: Tally(items=len(members[h])) for h, key in enumerate(keys)}
    index = {key: h for h, key in enumerate(keys)}
    handed = [0] * len(keys)  # places per stratum, pending included
    pending = dict.fromkeys(keys, 0)
    budget = len(item_key) * settings.per_item
    open_batches: deque[tuple[int, list[int]]] = deque()
    given = participant = 0

    def submit(who: int, items: list[int]) -> None:
        chance = 1 / (1 + np.exp(study.difficulty[items] - study.skill[who]))
        outcomes = (study.luck[who, : len(items)] < chance).tolist()
        for item, outcome in zip(items, outcomes, strict=True):
            key = item_key[item]
            m, c = answers[item], correct[item]
            answers[item], correct[item] = m + 1, c + outcome
            pending[key] -= 1
            tallies[key] = tally_update(
                tallies[key], before=(m, c), after=(m + 1, c + outcome), model=run[item]
            )

    while given < budget:
        size = min(data.batch, budget - given)
        chosen = next_strata(
            design, tallies, size, min_per_item=settings.phase_one, pending=pending
        )
        items = []
        for key in chosen:
            h = index[key]
            # Items of a stratum take places in turn: the one with the fewest goes first.
            items.append(members[h][handed[h] % len(members[h])])
            handed[h] += 1
            pending[key] += 1
        open_batches.append((participant, items))
        participant += 1
        given += len(items)
        if len(open_batches) >= settings.in_flight:
            submit(*open_batches.popleft())
    while open_batches:
        submit(*open_batches.popleft())
    return np.array(answers), np.array(correct)


@dataclass(frozen=True)
class Outcome:
    """One design's figures on one study, per stratum (arrays over strata)."""

    half_width: np.ndarray  # 2 x strata: human, difference; NaN without an interval
    covered: np.ndarray  # 2 x strata, booleans
    # Estimate - the drawn items' mean; human - model's is the same number, as both
    # sides subtract the run's fixed outcomes.
    error: np.ndarray  # 2 x strata
    per_item: np.ndarray  # answers per item, per stratum


def measure(
    design: str, population: Population, data: DataSet, settings: Settings, seed: int
) -> Outcome:
    study = Study.draw(population, data, settings, seed)
    answers, correct = run_study(design, population, data, settings, study)
    human, diff = _estimates(population, study, answers, correct, settings)
    truths = (population.truth_human, population.truth_diff)
    drawn = (
        np.bincount(population.stratum, weights=study.p) / np.bincount(population.stratum),
        np.bincount(population.stratum, weights=study.p - study.run)
        / np.bincount(population.stratum),
    )
    half_width = np.full((2, len(population.keys)), np.nan)
    covered = np.zeros((2, len(population.keys)), dtype=bool)
    error = np.zeros((2, len(population.keys)))
    for side, result in enumerate((human, diff)):
        for h, key in enumerate(population.keys):
            estimate, low, high = result[key]
            error[side, h] = estimate - drawn[side][h]
            if low is not None and high is not None:
                half_width[side, h] = (high - low) / 2
                covered[side, h] = low <= truths[side][h] <= high
    per_item = np.bincount(population.stratum, weights=answers) / np.bincount(population.stratum)
    return Outcome(half_width, covered, error, per_item)


def _estimates(
    population: Population,
    study: Study,
    answers: np.ndarray,
    correct: np.ndarray,
    settings: Settings,
) -> tuple[dict, dict]:
    """The report's estimates and intervals (human, human - model) per stratum."""
    strata: dict[str, list[tuple[int, int]]] = {key: [] for key in population.keys}
    model: dict[str, list[float]] = {key: [] for key in population.keys}
    for item, (m, c) in enumerate(zip(answers.tolist(), correct.tolist(), strict=True)):
        key = population.keys[population.stratum[item]]
        strata[key].append((m, c))
        model[key].append(float(study.run[item]))
    human, diff = stratified_bootstrap_counts(strata, model=model, n_resamples=settings.resamples)
    assert diff is not None
    return human, diff


# Answers per item that stand for "endlessly many": an item's mean is then its true
# value to within 0.0005, and the answers' noise in the interval is a millionth of it.
ENDLESS = 1_000_000


def floor(population: Population, data: DataSet, settings: Settings, seed: int) -> Outcome:
    """The study's figures with endlessly many answers on every item (``ENDLESS``, each
    item's share right at its true value): the same items, model run and estimator
    (``stratified_bootstrap_counts``, human - model's Newcombe interval) as the
    designs, so its widest half-width is the least any allocation of human answers
    can reach on these items: what is left is the items' own spread, human and model."""
    study = Study.draw(population, data, settings, seed)
    answers = np.full(study.p.size, ENDLESS)
    correct = np.rint(study.p * ENDLESS).astype(np.int64)
    human, diff = _estimates(population, study, answers, correct, settings)
    half_width = np.full((2, len(population.keys)), np.nan)
    covered = np.zeros((2, len(population.keys)), dtype=bool)
    truths = (population.truth_human, population.truth_diff)
    for side, result in enumerate((human, diff)):
        for h, key in enumerate(population.keys):
            _estimate, low, high = result[key]
            if low is not None and high is not None:
                half_width[side, h] = (high - low) / 2
                covered[side, h] = low <= truths[side][h] <= high
    per_item = np.full(len(population.keys), float(ENDLESS))
    return Outcome(half_width, covered, np.zeros((2, len(population.keys))), per_item)


FLOOR = "floor"


def _studies(job: tuple[DataSet, Settings, str, list[int]]) -> list[Outcome]:
    data, settings, design, seeds = job
    population = Population.of(data)
    if design == FLOOR:
        return [floor(population, data, settings, seed) for seed in seeds]
    return [measure(design, population, data, settings, seed) for seed in seeds]


def _chunks(seeds: range, parts: int) -> Iterator[list[int]]:
    size = max(1, math.ceil(len(seeds) / parts))
    for start in range(0, len(seeds), size):
        yield list(seeds[start : start + size])


# -- the table ------------------------------------------------------------------------


def summary(outcomes: list[Outcome]) -> dict[str, float]:
    widths = np.stack([o.half_width for o in outcomes])  # studies x 2 x strata
    covered = np.stack([o.covered for o in outcomes])
    errors = np.stack([o.error for o in outcomes])  # the same for both sides (see Outcome)
    per_item = np.stack([o.per_item for o in outcomes]).mean(axis=0)
    bias = errors.mean(axis=0)  # 2 x strata
    bias_se = errors.std(axis=0, ddof=1) / math.sqrt(len(outcomes))
    worst = np.abs(bias).argmax(axis=1)
    coverage = covered.mean(axis=0)  # 2 x strata
    return {
        "widest_human": float(np.nanmax(widths[:, 0], axis=1).mean()),
        "widest_diff": float(np.nanmax(widths[:, 1], axis=1).mean()),
        "coverage_human": float(coverage[0].mean()),
        "coverage_diff": float(coverage[1].mean()),
        "lowest_human": float(coverage[0].min()),
        "lowest_diff": float(coverage[1].min()),
        "bias_human": float(bias[0, worst[0]]),
        "bias_human_se": float(bias_se[0, worst[0]]),
        "per_item_low": float(per_item.min()),
        "per_item_high": float(per_item.max()),
    }


def print_table(data: DataSet, settings: Settings, rows: dict[str, dict[str, float]]) -> None:
    sizes = sorted(data.sizes.values())
    print(
        f"\n{data.name}: {sum(sizes):,} items in {len(sizes)} strata ({sizes[0]} to "
        f"{sizes[-1]} items); {settings.per_item} answers per item "
        f"({sum(sizes) * settings.per_item:,} in all), phase one {settings.phase_one} per "
        f"item, {data.batch} places per participant, {settings.in_flight} in flight"
    )
    print(
        "design    | widest ±, human    | widest ±, human-model | coverage human  "
        "| coverage h-m    | max |bias|        | answers/item"
    )
    base = rows[UNIFORM]
    for design in DESIGNS:
        r = rows[design]
        human, diff = r["widest_human"], r["widest_diff"]
        print(
            f"{design:9} | {100 * human:5.1f} pts ({human / base['widest_human']:.2f}x) "
            f"| {100 * diff:5.1f} pts ({diff / base['widest_diff']:.2f}x)    "
            f"| {r['coverage_human']:.3f} (≥{r['lowest_human']:.3f}) "
            f"| {r['coverage_diff']:.3f} (≥{r['lowest_diff']:.3f}) "
            f"| {100 * abs(r['bias_human']):.2f} ± {100 * r['bias_human_se']:.2f} pts "
            f"| {r['per_item_low']:.1f}-{r['per_item_high']:.1f}"
        )
    r = rows[FLOOR]
    human, diff = r["widest_human"], r["widest_diff"]
    print(
        f"floor     | {100 * human:5.1f} pts ({human / base['widest_human']:.2f}x) "
        f"| {100 * diff:5.1f} pts ({diff / base['widest_diff']:.2f}x)    "
        f"| {r['coverage_human']:.3f} (≥{r['lowest_human']:.3f}) "
        f"| {r['coverage_diff']:.3f} (≥{r['lowest_diff']:.3f}) "
        "| (the same items and estimator, endlessly many answers per item)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=1000, help="simulated studies per design")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--per-item", type=int, default=3, help="budget: answers per item")
    parser.add_argument("--phase-one", type=int, default=2, help="answers every item gets first")
    parser.add_argument("--in-flight", type=int, default=4, help="participants answering at once")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--only", choices=("tombench", "tvshowguess"), help="one data set")
    args = parser.parse_args()
    if args.studies < 2 or args.phase_one < 1 or args.per_item < args.phase_one:
        parser.error("need --studies >= 2 and 1 <= --phase-one <= --per-item")
    shared = Path(os.environ.get("TOMLAB_SHARED_DATA", ROOT.parent / "shared" / "data"))
    settings = Settings(args.per_item, args.phase_one, args.in_flight, args.resamples)
    loaders = {"tombench": tombench, "tvshowguess": tvshowguess}
    print(f"{args.studies} studies per design, {args.processes} processes; load {_load()}")
    for name, load in loaders.items():
        if args.only and name != args.only:
            continue
        data = load(shared / name)
        started = time.perf_counter()
        rows: dict[str, dict[str, float]] = {}
        with ProcessPoolExecutor(args.processes) as pool:
            for design in (*DESIGNS, FLOOR):
                jobs = [
                    (data, settings, design, seeds)
                    for seeds in _chunks(range(args.studies), args.processes * 4)
                ]
                rows[design] = summary([o for part in pool.map(_studies, jobs) for o in part])
        print_table(data, settings, rows)
        print(f"({time.perf_counter() - started:.0f} s; load {_load()})")


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
