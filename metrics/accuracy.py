"""Accuracy with bootstrap intervals, baselines and the ToM-in-AMC difficulty split.

Outcomes are booleans, one per answered unit (a masked speaker, a question); ``None``
means "no judgement" (e.g. a generative CharToM-QA prediction) and is left out, never
counted as wrong; unparseable answers arrive as ``False`` already.

Instance accuracy (ToM-in-AMC Section 5: "an instance is a masked speaker in a scene")
is resampled by scene when ``clusters`` are given, because the speakers of one scene are
guessed together and their errors are correlated; resampling instances as if they were
independent would make the interval too narrow.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from metrics.bootstrap import check_bootstrap_args, percentile_interval, resamplable

EASY = "easy"
HARD = "hard"
# ToM-in-AMC Table 5: "Easy < 3" speakers, "Hard >= 3".
HARD_FROM_SPEAKERS = 3
# Cap on the int64 index matrix one bootstrap chunk allocates (about 16 MB).
_CHUNK_CELLS = 2_000_000
# Cap on a cached resamples x clusters multiplicity matrix (8 MB of float64; four kept).
_MULTIPLICITY_CELLS = 1_000_000


@dataclass(frozen=True)
class AccuracyEstimate:
    """An accuracy and its bootstrap interval, all fractions in 0..1.

    ``n`` and ``correct`` count the outcomes, so ``accuracy == correct / n`` always.
    ``units`` is how many units the bootstrap resampled: ``n`` for item resampling,
    the number of clusters (e.g. scenes) for a cluster bootstrap. Everything but the
    counts is ``None`` when there are no outcomes, and the interval is ``None`` over a
    single unit (``units == 1``: one scene, one item; ``bootstrap.resamplable``).
    """

    n: int
    correct: int
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    units: int = 0


def accuracy(outcomes: Sequence[bool | None]) -> float | None:
    """Share of ``True`` among the judged outcomes; ``None`` when there are none."""
    judged = [bool(o) for o in outcomes if o is not None]
    if not judged:
        return None
    return sum(judged) / len(judged)


def accuracy_ci(
    outcomes: Sequence[bool | None],
    *,
    clusters: Sequence[Hashable] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> AccuracyEstimate:
    """Instance accuracy with a seeded percentile bootstrap interval.

    Without ``clusters`` the items are resampled. Resampling ``n`` Bernoulli outcomes
    with replacement makes the correct count Binomial(n, p̂), so that is drawn directly
    (same distribution, O(n_resamples) instead of O(n · n_resamples)).
    With ``clusters`` (one label per outcome, e.g. the scene id) whole clusters are
    resampled and each resample's accuracy is its correct outcomes over its outcomes.
    """
    check_bootstrap_args(n_resamples, level)
    if clusters is not None and len(clusters) != len(outcomes):
        raise ValueError(f"{len(outcomes)} outcomes but {len(clusters)} cluster labels")
    labels = clusters if clusters is not None else range(len(outcomes))
    pairs = [(bool(o), c) for o, c in zip(outcomes, labels, strict=True) if o is not None]
    n = len(pairs)
    correct = sum(o for o, _ in pairs)
    if clusters is None:
        return accuracy_ci_of_counts(n, correct, n_resamples=n_resamples, seed=seed, level=level)
    if n == 0:
        return AccuracyEstimate(0, 0, None, None, None, 0)

    # Cluster codes in first-seen order: the order decides which cluster each draw picks.
    codes: dict[Hashable, int] = {}
    index = np.array([codes.setdefault(c, len(codes)) for _, c in pairs], dtype=np.int64)
    hits = np.array([o for o, _ in pairs], dtype=np.int64)
    return cluster_accuracy_ci(
        np.bincount(index, minlength=len(codes)),
        np.bincount(index, weights=hits, minlength=len(codes)).astype(np.int64),
        n_resamples=n_resamples,
        seed=seed,
        level=level,
    )


def accuracy_ci_of_counts(
    n: int, correct: int, *, n_resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> AccuracyEstimate:
    """:func:`accuracy_ci` without clusters, from the counts alone: ``correct`` of ``n``
    outcomes (the same draws, so the same interval)."""
    check_bootstrap_args(n_resamples, level)
    if n == 0:
        return AccuracyEstimate(0, 0, None, None, None, 0)
    point = correct / n
    if not resamplable(n):
        return AccuracyEstimate(n, correct, point, None, None, n)
    stats = np.random.default_rng(seed).binomial(n, point, size=n_resamples) / n
    return AccuracyEstimate(n, correct, point, *percentile_interval(stats, level), n)


def first_seen_codes(labels: np.ndarray) -> np.ndarray:
    """Each label's code 0..k-1, numbered in the order the labels first appear.

    The array form of the ``dict.setdefault`` numbering in :func:`accuracy_ci`, so
    counts per cluster made from arrays line up with the same bootstrap draws.
    """
    labels = np.asarray(labels)
    if labels.size == 0:
        return np.zeros(0, dtype=np.int64)
    if labels.dtype.kind in "iu":
        low, high = int(labels.min()), int(labels.max())
        if high - low < 4 * labels.size + 1024:
            return _first_seen_dense(labels.reshape(-1) - low, high - low + 1)
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.reshape(-1)]


def _first_seen_dense(values: np.ndarray, span: int) -> np.ndarray:
    """:func:`first_seen_codes` of integers in 0..span-1, with a table instead of a sort
    (ids of a few thousand stages among 50,000 answers: about a tenth of the time)."""
    n = values.size
    first = np.full(span, n, dtype=np.int64)
    np.minimum.at(first, values, np.arange(n, dtype=np.int64))
    present = np.flatnonzero(first < n)
    code = np.empty(span, dtype=np.int64)
    code[present[np.argsort(first[present], kind="stable")]] = np.arange(present.size)
    return code[values]


def cluster_accuracy_ci(
    cluster_n: np.ndarray,
    cluster_correct: np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> AccuracyEstimate:
    """:func:`accuracy_ci` with clusters, from each cluster's outcome and correct counts.

    Whole clusters are resampled; a resample's accuracy is its correct outcomes over its
    outcomes. The clusters' order matters (it decides which cluster a draw picks): pass
    them in first-seen order (:func:`first_seen_codes`) for :func:`accuracy_ci`'s interval.
    """
    (estimate,) = cluster_accuracy_cis(
        [(cluster_n, cluster_correct)], n_resamples=n_resamples, seed=seed, level=level
    )
    return estimate


def cluster_accuracy_cis(
    clusters: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> list[AccuracyEstimate]:
    """:func:`cluster_accuracy_ci` of each ``(cluster_n, cluster_correct)``, with the
    same draws (seed) for each: the estimates a report's runs get, one call apiece.

    Those over the same number of clusters share one product with the draws'
    multiplicities: a pass over the matrix for all of them, where one call apiece made
    two (20 runs: 40 matrix-vector products, which a loaded machine's BLAS threads
    made the slowest part of a DynToM report). Exact either way: every sum is an
    integer far below 2**53, so the estimates are the same to the bit.
    """
    check_bootstrap_args(n_resamples, level)
    estimates: dict[int, AccuracyEstimate] = {}
    by_size: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = defaultdict(list)
    for position, (cluster_n, cluster_correct) in enumerate(clusters):
        if len(cluster_n) != len(cluster_correct):
            raise ValueError(f"{len(cluster_n)} cluster sizes but {len(cluster_correct)} counts")
        cluster_n = np.asarray(cluster_n, dtype=np.int64)
        cluster_correct = np.asarray(cluster_correct, dtype=np.int64)
        n, correct, k = int(cluster_n.sum()), int(cluster_correct.sum()), len(cluster_n)
        if n == 0:
            estimates[position] = AccuracyEstimate(0, 0, None, None, None, 0)
        elif not resamplable(k):
            estimates[position] = AccuracyEstimate(n, correct, correct / n, None, None, k)
        elif n_resamples * k <= _MULTIPLICITY_CELLS:
            by_size[k].append((position, cluster_n, cluster_correct))
        else:
            stats = np.concatenate(
                [
                    cluster_correct[draws].sum(axis=1) / cluster_n[draws].sum(axis=1)
                    for draws in _cluster_draws(k, n_resamples, seed)
                ]
            )
            estimates[position] = _estimate(cluster_n, cluster_correct, stats, level)
    for k, group in by_size.items():
        # Each resample's sums as one product with how often it drew each cluster: the
        # same draws, and reused by every call with the same k (a report's runs over the
        # same stages). Columns: each estimate's correct counts, then its sizes.
        columns = np.empty((k, 2 * len(group)), dtype=np.float64)
        for i, (_, cluster_n, cluster_correct) in enumerate(group):
            columns[:, 2 * i] = cluster_correct
            columns[:, 2 * i + 1] = cluster_n
        sums = _draw_multiplicities(k, n_resamples, seed) @ columns
        for i, (position, cluster_n, cluster_correct) in enumerate(group):
            stats = sums[:, 2 * i] / sums[:, 2 * i + 1]
            estimates[position] = _estimate(cluster_n, cluster_correct, stats, level)
    return [estimates[position] for position in range(len(clusters))]


def _estimate(
    cluster_n: np.ndarray, cluster_correct: np.ndarray, stats: np.ndarray, level: float
) -> AccuracyEstimate:
    n, correct = int(cluster_n.sum()), int(cluster_correct.sum())
    return AccuracyEstimate(
        n, correct, correct / n, *percentile_interval(stats, level), len(cluster_n)
    )


def _cluster_draws(k: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """The cluster bootstrap's draws (resamples x k cluster indexes), chunk by chunk.

    The chunking is part of the stream: ``integers`` drops the unused half of its last
    64-bit draw at the end of each call, so other chunks would give other draws.
    """
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_CELLS // k)
    for start in range(0, n_resamples, chunk):
        yield rng.integers(0, k, size=(min(chunk, n_resamples - start), k))


@functools.lru_cache(maxsize=4)
def _draw_multiplicities(k: int, n_resamples: int, seed: int) -> np.ndarray:
    """How many times each resample drew each cluster (resamples x k, float64)."""
    times = np.empty((n_resamples, k), dtype=np.float64)
    row = 0
    for draws in _cluster_draws(k, n_resamples, seed):
        rows = draws.shape[0]
        offsets = (np.arange(rows, dtype=np.int64) * k)[:, None]
        times[row : row + rows] = np.bincount(
            (draws + offsets).reshape(-1), minlength=rows * k
        ).reshape(rows, k)
        row += rows
    times.flags.writeable = False  # shared by every caller through the cache
    return times


def mean_ci(
    values: Sequence[float],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float | None, float | None, float | None]:
    """``(mean, ci_low, ci_high)`` of per-unit values with a seeded percentile
    bootstrap over the units: each item's accuracy over its raters or samples (item-level
    accuracy), or each item's paired difference between two systems.

    The draws are :func:`cluster_accuracy_ci`'s over as many clusters as there are
    values, so 0/1 values give the interval ``accuracy_ci(values, clusters=range(n))``
    gives. ``(None, None, None)`` for no values; one value is its own mean, with no
    interval (``bootstrap.resamplable``).
    """
    check_bootstrap_args(n_resamples, level)
    scores = np.asarray(values, dtype=np.float64)
    k = len(scores)
    if k == 0:
        return None, None, None
    if not resamplable(k):
        return float(scores.mean()), None, None
    if n_resamples * k <= _MULTIPLICITY_CELLS:
        stats = (_draw_multiplicities(k, n_resamples, seed) @ scores) / k
    else:
        stats = np.concatenate(
            [scores[draws].mean(axis=1) for draws in _cluster_draws(k, n_resamples, seed)]
        )
    return float(scores.mean()), *percentile_interval(stats, level)


def scene_accuracy_ci(
    outcomes: Sequence[bool | None],
    scenes: Sequence[Hashable],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> AccuracyEstimate:
    """Scene accuracy: a scene counts as correct when all its judged outcomes are.

    (The TVShowGuess/ToM-in-AMC scorer prints both "characters correct" and "scenes
    correct".) Scenes whose outcomes are all ``None`` are left out; ``n`` counts scenes
    and the bootstrap resamples scenes.
    """
    if len(scenes) != len(outcomes):
        raise ValueError(f"{len(outcomes)} outcomes but {len(scenes)} scene labels")
    per_scene: dict[Hashable, bool] = {}
    for outcome, scene in zip(outcomes, scenes, strict=True):
        if outcome is None:
            continue
        per_scene[scene] = per_scene.get(scene, True) and bool(outcome)
    return accuracy_ci(list(per_scene.values()), n_resamples=n_resamples, seed=seed, level=level)


def chance_baseline(candidate_counts: Sequence[int]) -> float | None:
    """Expected accuracy of guessing uniformly: the mean of 1/k over units with k options.

    This is the "Random" row of ToM-in-AMC Table 4. ``None`` for no units.
    """
    if any(k < 1 for k in candidate_counts):
        raise ValueError("every unit needs at least one candidate")
    if not candidate_counts:
        return None
    return sum(1 / k for k in candidate_counts) / len(candidate_counts)


ABOVE_CHANCE = "above"
NEAR_CHANCE = "near"
BELOW_CHANCE = "below"


def wilson_interval(correct: int, total: int, *, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of ``correct``/``total`` (95% for z = 1.96).

    Closed form, so a page can afford it on every poll; unlike the normal
    approximation it stays inside 0..1 and is sensible at 0% and 100%.
    """
    if total < 1 or not 0 <= correct <= total:
        raise ValueError(f"need 0 <= correct <= total and total >= 1, got {correct}/{total}")
    return score_interval(correct / total, total, z=z)


def score_interval(p: float, n: float, *, z: float) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` of ``n`` answers, ``n`` possibly
    an effective number (answers clustered in items count for fewer) and ``z`` any
    quantile (Student's t's over few items)."""
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def accuracy_vs_chance(correct: int, total: int, chance: float | None) -> str | None:
    """Whether an accuracy is clearly above, near or clearly below guessing.

    "above" when the whole 95% Wilson interval lies above ``chance``, "below" when it
    lies below, "near" otherwise; ``None`` when chance or the accuracy is unknown. Issue
    16: 11% speaker-guessing accuracy was shown in green, while guessing among ~6
    candidates gives ~17%; and 30% of 10 answers is not clearly better than 25%.
    """
    if chance is None or total < 1:
        return None
    low, high = wilson_interval(correct, total)
    if low > chance:
        return ABOVE_CHANCE
    if high < chance:
        return BELOW_CHANCE
    return NEAR_CHANCE


def majority_choice(options: Sequence[Hashable], frequency: Mapping[Hashable, float]) -> Hashable:
    """The option ``frequency`` ranks highest; a tie goes to the option listed first.

    The one definition of the Majority guess: ``train_baseline majority`` writes it as a
    prediction and the reports score it (:func:`majority_baseline`), so the two agree.
    ToM-in-AMC lists candidates by utterances, so a tie goes to the character who
    speaks most. A missing option counts 0.
    """
    if not options:
        raise ValueError("every unit needs at least one candidate")
    best = options[0]
    for option in options[1:]:
        if frequency.get(option, 0) > frequency.get(best, 0):
            best = option
    return best


def majority_baseline(
    golds: Sequence[Hashable],
    candidates: Sequence[Sequence[Hashable]],
    frequency: Mapping[Hashable, float],
) -> float | None:
    """Accuracy of always naming the most frequent candidate (:func:`majority_choice`).

    ToM-in-AMC Table 4 lists a "Majority" row (34.9 dev / 36.0 test) above "Random"
    (22.1 / 25.0); §5 describes it as the most frequent character in the training part.
    For every masked speaker, guess the candidate that ``frequency`` ranks highest, where
    ``frequency`` counts how often each character is a masked speaker in the *training*
    scenes (counting on the evaluated scenes themselves would leak the answers). Keys
    are whatever identifies a character (e.g. ``(work_id, name)``); ``candidates`` are
    in their listed order, which settles ties. ``None`` for no units.
    """
    if len(golds) != len(candidates):
        raise ValueError(f"{len(golds)} gold answers but {len(candidates)} candidate sets")
    if not golds:
        return None
    hits = sum(
        majority_choice(options, frequency) == gold
        for gold, options in zip(golds, candidates, strict=True)
    )
    return hits / len(golds)


def speaker_difficulty(n_speakers: int) -> str:
    """``"easy"`` for scenes with fewer than 3 masked speakers, else ``"hard"``.

    ToM-in-AMC Table 5 splits scenes at 3 speakers (Table 11 gives the per-count
    breakdown that :func:`accuracy_by_group` reproduces with the count as the group).
    """
    if n_speakers < 1:
        raise ValueError(f"a scene has at least one masked speaker, got {n_speakers}")
    return HARD if n_speakers >= HARD_FROM_SPEAKERS else EASY


def accuracy_by_group(
    outcomes: Sequence[bool | None],
    groups: Sequence[Hashable],
    *,
    clusters: Sequence[Hashable] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[Hashable, AccuracyEstimate]:
    """:func:`accuracy_ci` per group (genre, number of speakers, mental state...).

    Keys come out sorted when they are mutually comparable, else in first-seen order.
    Every group uses the same ``seed``, so adding a group does not move the others.
    """
    if len(groups) != len(outcomes):
        raise ValueError(f"{len(outcomes)} outcomes but {len(groups)} group labels")
    if clusters is not None and len(clusters) != len(outcomes):
        raise ValueError(f"{len(outcomes)} outcomes but {len(clusters)} cluster labels")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        members[group].append(index)
    try:
        keys = sorted(members)
    except TypeError:
        keys = list(members)
    return {
        key: accuracy_ci(
            [outcomes[i] for i in members[key]],
            clusters=None if clusters is None else [clusters[i] for i in members[key]],
            n_resamples=n_resamples,
            seed=seed,
            level=level,
        )
        for key in keys
    }


def accuracy_by_difficulty(
    outcomes: Sequence[bool | None],
    n_speakers: Sequence[int],
    *,
    clusters: Sequence[Hashable] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, AccuracyEstimate]:
    """ToM-in-AMC Table 5: accuracy on easy (< 3 speakers) and hard (>= 3) scenes.

    ``n_speakers`` gives, per outcome, the number of masked speakers of its scene.
    Keys are ``"easy"`` then ``"hard"``, each present only when it has outcomes.
    """
    by_level = accuracy_by_group(
        outcomes,
        [speaker_difficulty(k) for k in n_speakers],
        clusters=clusters,
        n_resamples=n_resamples,
        seed=seed,
        level=level,
    )
    return {key: by_level[key] for key in (EASY, HARD) if key in by_level}
