"""metrics: accuracy, bootstrap, baselines, correlation, CharToM-QA metrics.

Expected values are worked out by hand in the comments next to each assertion.
Agreement and DynToM metrics have their own files (test_agreement.py,
test_dyntom.py).
"""

import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import metrics
from metrics import (
    AccuracyEstimate,
    accuracy,
    accuracy_by_difficulty,
    accuracy_by_group,
    accuracy_ci,
    agreement_ci,
    average_ranks,
    bonus_point_coverage,
    bonus_point_coverage_ci,
    bootstrap_ci,
    chance_baseline,
    cluster_accuracy_ci,
    cluster_accuracy_cis,
    correlation_matrix,
    first_seen_codes,
    length_ratio,
    majority_baseline,
    majority_choice,
    mean_ci,
    mean_sd,
    pearson,
    penalty_rate,
    percent_agreement,
    scene_accuracy_ci,
    speaker_difficulty,
    spearman,
)
from metrics.bootstrap import percentile_interval

REPO_ROOT = Path(__file__).resolve().parents[2]


# --- the package stays free of Django ---------------------------------------------


def test_every_metrics_module_imports_without_django():
    # A fresh interpreter without DJANGO_SETTINGS_MODULE: any module under
    # reports/metrics that imported Django (even indirectly) would put it in sys.modules.
    script = (
        "import importlib, pkgutil, sys\n"
        "import metrics as package\n"
        "names = [m.name for m in pkgutil.iter_modules(package.__path__)]\n"
        "for name in names:\n"
        "    importlib.import_module('metrics.' + name)\n"
        "leaked = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        "print(','.join(names))\n"
        "sys.exit('django imported: ' + ', '.join(leaked[:5]) if leaked else 0)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    imported = result.stdout.strip().split(",")
    assert {"accuracy", "agreement", "bootstrap", "chartom", "correlation", "dyntom"} <= set(
        imported
    )


def test_package_reexports_the_agreed_names():
    agreed = {
        "accuracy",
        "AccuracyEstimate",
        "accuracy_ci",
        "scene_accuracy_ci",
        "chance_baseline",
        "bootstrap_ci",
        "mean_sd",
        "pearson",
        "spearman",
        "correlation_matrix",
        "percent_agreement",
        "cohen_kappa",
        "fleiss_kappa",
        "krippendorff_alpha",
        "agreement_ci",
        "bonus_point_coverage",
        "penalty_rate",
        "compositional_analysis",
        "time_span_accuracy",
    }
    assert agreed <= set(metrics.__all__)
    assert all(callable(getattr(metrics, name)) for name in agreed)


# --- accuracy ------------------------------------------------------------------------


def test_accuracy_counts_true_and_leaves_out_none():
    # 2 correct of 3 judged; the None (no judgement) is not a wrong answer.
    assert accuracy([True, False, True, None]) == pytest.approx(2 / 3)


@pytest.mark.parametrize("outcomes", [[], [None, None]])
def test_accuracy_without_judged_outcomes_is_none(outcomes):
    assert accuracy(outcomes) is None
    assert accuracy_ci(outcomes) == AccuracyEstimate(0, 0, None, None, None, 0)


def test_accuracy_ci_is_deterministic_per_seed_and_contains_the_estimate():
    outcomes = [i % 3 != 0 for i in range(60)]  # 40 of 60 correct
    first = accuracy_ci(outcomes, seed=7)
    again = accuracy_ci(outcomes, seed=7)
    other = accuracy_ci(outcomes, seed=8)
    assert first == again
    assert (first.ci_low, first.ci_high) != (other.ci_low, other.ci_high)
    assert (first.n, first.correct, first.units) == (60, 40, 60)
    assert first.accuracy == pytest.approx(2 / 3)
    assert first.ci_low < first.accuracy < first.ci_high


def test_item_bootstrap_width_matches_the_binomial_standard_error():
    # p = 0.5, n = 100: se = sqrt(.25 / 100) = 0.05, so the 95% interval is about
    # 0.5 ± 1.96 * 0.05 = [0.402, 0.598]; a bootstrap of 1000 lands within 0.02.
    estimate = accuracy_ci([True, False] * 50, n_resamples=1000, seed=0)
    assert estimate.ci_low == pytest.approx(0.402, abs=0.02)
    assert estimate.ci_high == pytest.approx(0.598, abs=0.02)


def test_all_correct_gives_a_degenerate_interval():
    assert accuracy_ci([True] * 5) == AccuracyEstimate(5, 5, 1.0, 1.0, 1.0, 5)


def test_cluster_bootstrap_resamples_whole_scenes():
    # Every scene has 3 of 4 speakers right, so every resample of scenes is again
    # 3/4 correct: the interval collapses to 0.75, while the item bootstrap does not.
    outcomes = [True, True, True, False] * 10
    scenes = [i // 4 for i in range(40)]
    clustered = accuracy_ci(outcomes, clusters=scenes)
    assert clustered == AccuracyEstimate(40, 30, 0.75, 0.75, 0.75, 10)
    unclustered = accuracy_ci(outcomes)
    assert unclustered.ci_low < 0.75 < unclustered.ci_high


def test_cluster_bootstrap_pools_outcomes_not_scene_means():
    # Scene A: 1 speaker, right; scene B: 3 speakers, wrong. Accuracy = 1/4 (pooled),
    # not the 1/2 mean of scene accuracies. Resamples of two scenes: AA -> 1 (p 1/4),
    # AB/BA -> 1/4 (p 1/2), BB -> 0 (p 1/4); with 1000 draws the 2.5% quantile is 0
    # and the 97.5% quantile is 1.
    estimate = accuracy_ci([True, False, False, False], clusters=["A", "B", "B", "B"])
    assert estimate == AccuracyEstimate(4, 1, 0.25, 0.0, 1.0, 2)


def test_cluster_accuracy_ci_from_counts_is_accuracy_ci_by_cluster():
    # Scenes in first-answer order: b (3 answers, 2 right), a (2, 1), c (1, 0); the
    # counts must come in that order, since the resamples draw clusters by position.
    outcomes = [True, False, True, True, False, False]
    scenes = ["b", "a", "b", "a", "b", "c"]
    from_counts = cluster_accuracy_ci([3, 2, 1], [2, 1, 0], n_resamples=300, seed=4)
    assert from_counts == accuracy_ci(outcomes, clusters=scenes, n_resamples=300, seed=4)
    assert (from_counts.n, from_counts.correct, from_counts.units) == (6, 3, 3)
    # Another order is another interval's draws (same point, same counts).
    reordered = cluster_accuracy_ci([2, 3, 1], [1, 2, 0], n_resamples=300, seed=4)
    assert reordered.accuracy == from_counts.accuracy
    assert cluster_accuracy_ci([], []) == AccuracyEstimate(0, 0, None, None, None, 0)
    with pytest.raises(ValueError, match="2 cluster sizes but 1 counts"):
        cluster_accuracy_ci([1, 2], [1])


def _gathered_cluster_interval(cluster_n, cluster_correct, *, n_resamples, seed):
    """The cluster bootstrap written out: draw k clusters per resample, sum what they hold."""
    n, c = np.asarray(cluster_n), np.asarray(cluster_correct)
    draws = np.random.default_rng(seed).integers(0, len(n), size=(n_resamples, len(n)))
    return percentile_interval(c[draws].sum(axis=1) / n[draws].sum(axis=1), 0.95)


@pytest.mark.parametrize(
    ("k", "n_resamples"),
    [
        (7, 1000),  # a multiplicity matrix, kept for the next call with the same k
        (853, 1000),  # a DynToM report's stages
        (1200, 1000),  # past the matrix cap: the gathered sums themselves
    ],
)
def test_cluster_accuracy_ci_is_the_written_out_bootstrap(k, n_resamples):
    rng = np.random.default_rng(k)
    cluster_n = rng.integers(1, 90, size=k)
    cluster_correct = rng.binomial(cluster_n, 0.6)
    expected = _gathered_cluster_interval(
        cluster_n, cluster_correct, n_resamples=n_resamples, seed=3
    )
    for _ in range(2):  # the second call reuses the first call's draws
        estimate = cluster_accuracy_ci(cluster_n, cluster_correct, n_resamples=n_resamples, seed=3)
        assert (estimate.ci_low, estimate.ci_high) == expected
    # Other counts over the same draws: the reused draws are not the last answer's.
    other = rng.binomial(cluster_n, 0.3)
    estimate = cluster_accuracy_ci(cluster_n, other, n_resamples=n_resamples, seed=3)
    assert (estimate.ci_low, estimate.ci_high) == _gathered_cluster_interval(
        cluster_n, other, n_resamples=n_resamples, seed=3
    )


def test_cluster_accuracy_cis_give_each_estimate_its_own_bootstrap():
    """Several estimates at once (a report's runs): those over as many clusters share
    one product with the draws, each interval still the written-out bootstrap's."""
    rng = np.random.default_rng(11)
    sizes = [7, 853, 7, 1200, 853, 1, 0, 853]
    clusters = []
    for k in sizes:
        cluster_n = rng.integers(1, 90, size=k)
        clusters.append((cluster_n, rng.binomial(cluster_n, rng.random())))
    estimates = cluster_accuracy_cis(clusters, n_resamples=1000, seed=3)
    assert len(estimates) == len(sizes)
    for (cluster_n, cluster_correct), estimate in zip(clusters, estimates, strict=True):
        n, correct = int(cluster_n.sum()), int(cluster_correct.sum())
        assert (estimate.n, estimate.correct, estimate.units) == (n, correct, len(cluster_n))
        if len(cluster_n) < 2:  # nothing to resample: no interval (no outcome: no accuracy)
            assert (estimate.ci_low, estimate.ci_high) == (None, None)
            continue
        assert estimate.accuracy == correct / n
        assert (estimate.ci_low, estimate.ci_high) == _gathered_cluster_interval(
            cluster_n, cluster_correct, n_resamples=1000, seed=3
        )
    assert cluster_accuracy_cis([]) == []
    with pytest.raises(ValueError, match="2 cluster sizes but 1 counts"):
        cluster_accuracy_cis([([1], [1]), ([1, 2], [1])])


def _first_seen_by_dict(labels):
    codes = {}
    return [codes.setdefault(label, len(codes)) for label in labels]


@pytest.mark.parametrize(
    "labels",
    [
        [5, 3, 5, 9, 3, 4],
        [-2, 7, -2, 0],
        [10**12, 3, 10**12, 77],  # too sparse for a table: sorted instead
        list(np.random.default_rng(0).integers(100_000, 100_853, size=5000)),
    ],
)
def test_first_seen_codes_number_labels_in_order_of_appearance(labels):
    expected = _first_seen_by_dict(labels)
    for dtype in (np.int64, np.int32, np.float64):
        if dtype is np.int32 and max(abs(x) for x in labels) > 2**31:
            continue
        assert first_seen_codes(np.array(labels, dtype=dtype)).tolist() == expected
    assert first_seen_codes(np.array([], dtype=np.int64)).tolist() == []


def test_accuracy_ci_rejects_mismatched_clusters_and_bad_settings():
    with pytest.raises(ValueError, match="2 outcomes but 1 cluster"):
        accuracy_ci([True, False], clusters=["a"])
    with pytest.raises(ValueError, match="level"):
        accuracy_ci([True], level=1.0)
    with pytest.raises(ValueError, match="n_resamples"):
        accuracy_ci([True], n_resamples=0)


def test_scene_accuracy_needs_every_speaker_right():
    # Scene a: T, T -> right; scene b: F, T -> wrong; scene c: only None -> left out.
    # Scene d: T, None -> right (the missing judgement does not sink it). 2 of 3.
    estimate = scene_accuracy_ci(
        [True, True, False, True, None, None, True, None],
        ["a", "a", "b", "b", "c", "c", "d", "d"],
    )
    assert (estimate.n, estimate.correct, estimate.units) == (3, 2, 3)
    assert estimate.accuracy == pytest.approx(2 / 3)
    assert estimate == scene_accuracy_ci(
        [True, True, False, True, None, None, True, None],
        ["a", "a", "b", "b", "c", "c", "d", "d"],
    )


def test_chance_baseline_is_the_mean_of_one_over_k():
    # (1/1 + 1/2 + 1/4) / 3 = 1.75 / 3 = 0.58333...
    assert chance_baseline([1, 2, 4]) == pytest.approx(1.75 / 3)
    assert chance_baseline([]) is None
    with pytest.raises(ValueError):
        chance_baseline([3, 0])


def test_majority_baseline_names_the_most_frequent_candidate():
    frequency = {"Ann": 5, "Bob": 3, "Cy": 3}
    golds = ["Ann", "Bob", "Cy", "Dee", "Eve"]
    candidates = [
        ["Ann", "Bob"],  # Ann (5) picked, gold Ann -> 1
        ["Cy", "Bob"],  # Cy and Bob tie at 3: the first listed, Cy; gold Bob -> 0
        ["Ann", "Cy"],  # Ann picked, gold Cy -> 0
        ["Dee", "Eve"],  # neither counted: the first listed, Dee; gold Dee -> 1
        ["Dee", "Eve"],  # the same guess, gold Eve -> 0
    ]
    assert majority_baseline(golds, candidates, frequency) == pytest.approx(2 / 5)
    assert [majority_choice(c, frequency) for c in candidates] == ["Ann", "Cy", "Ann", "Dee", "Dee"]
    assert majority_baseline([], [], frequency) is None
    with pytest.raises(ValueError):
        majority_baseline(["Ann"], [], frequency)
    with pytest.raises(ValueError):
        majority_baseline(["Ann"], [[]], frequency)


@pytest.mark.parametrize(
    ("speakers", "level"), [(1, "easy"), (2, "easy"), (3, "hard"), (5, "hard")]
)
def test_speaker_difficulty_splits_at_three(speakers, level):
    assert speaker_difficulty(speakers) == level


def test_speaker_difficulty_rejects_empty_scenes():
    with pytest.raises(ValueError):
        speaker_difficulty(0)


def test_accuracy_by_difficulty_follows_table_5():
    # easy (1-2 speakers): T, T, F -> 2/3; hard (3+): T, F, F -> 1/3.
    result = accuracy_by_difficulty(
        [True, True, False, True, False, False], [1, 2, 2, 3, 4, 5], seed=3
    )
    assert list(result) == ["easy", "hard"]
    assert result["easy"].accuracy == pytest.approx(2 / 3)
    assert result["hard"].accuracy == pytest.approx(1 / 3)
    only_easy = accuracy_by_difficulty([True], [2])
    assert list(only_easy) == ["easy"]


def test_accuracy_by_group_sorts_keys_and_splits_clusters():
    result = accuracy_by_group(
        [True, False, True, True],
        [3, 1, 3, 1],
        clusters=["s1", "s2", "s1", "s3"],
    )
    assert list(result) == [1, 3]
    # group 1: F (s2), T (s3) -> 1/2 over 2 scenes; group 3: T, T (s1) -> 1 over 1 scene
    assert (result[1].n, result[1].correct, result[1].units) == (2, 1, 2)
    assert (result[3].n, result[3].correct, result[3].units) == (2, 2, 1)


# --- generic bootstrap ---------------------------------------------------------------


def mean(values):
    return sum(values) / len(values)


def test_bootstrap_ci_is_seeded_and_brackets_the_mean():
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]  # mean 5.5
    low, high = bootstrap_ci(values, mean, n_resamples=500, seed=1)
    assert (low, high) == bootstrap_ci(values, mean, n_resamples=500, seed=1)
    # Means of 10 integers lie on a 0.1 grid, so two seeds can agree; five cannot all.
    assert len({bootstrap_ci(values, mean, n_resamples=500, seed=s) for s in range(5)}) > 1
    assert low < 5.5 < high
    # se of the mean = sd_pop / sqrt(n) = 2.872 / 3.162 = 0.908; 95% ≈ 5.5 ± 1.78
    assert low == pytest.approx(3.72, abs=0.35)
    assert high == pytest.approx(7.28, abs=0.35)


def test_bootstrap_ci_edge_cases():
    assert bootstrap_ci([], mean) == (None, None)
    assert bootstrap_ci([4, 4, 4], mean) == (4.0, 4.0)
    # A statistic undefined everywhere gives no interval rather than NaNs.
    assert bootstrap_ci([1, 2], lambda v: None, n_resamples=20) == (None, None)


# --- correlation ---------------------------------------------------------------------


def test_pearson_by_hand():
    # x = 1,2,3 (mean 2), y = 2,4,7 (mean 13/3): dx = -1,0,1; dy = -7/3,-1/3,8/3
    # sxy = 7/3 + 8/3 = 5; sxx = 2; syy = (49 + 1 + 64) / 9 = 114/9
    # r = 5 / sqrt(2 * 114/9) = 5 / sqrt(228/9) = 0.993399
    assert pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / math.sqrt(228 / 9))
    # The pair with a None is dropped: same as above.
    assert pearson([1, 2, None, 3], [2, 4, 10, 7]) == pytest.approx(0.993399, abs=1e-6)


def test_pearson_undefined_cases():
    assert pearson([], []) is None
    assert pearson([1], [2]) is None
    assert pearson([1, 2, 3], [5, 5, 5]) is None  # constant side: 0/0
    with pytest.raises(ValueError):
        pearson([1, 2], [1])


def test_average_ranks_share_ties():
    # sorted: 5 (rank 1), 10 (rank 2), 20,20,20 (ranks 3,4,5 -> 4 each)
    assert average_ranks([10, 20, 20, 20, 5]) == [2, 4, 4, 4, 1]


def test_spearman_with_ties_by_hand():
    # ranks x = 1, 2.5, 2.5, 4; ranks y = 1, 3, 2, 4; both mean 2.5
    # dx = -1.5, 0, 0, 1.5; dy = -1.5, .5, -.5, 1.5
    # sxy = 2.25 + 2.25 = 4.5; sxx = 4.5; syy = 2.25+.25+.25+2.25 = 5
    # rho = 4.5 / sqrt(22.5) = sqrt(0.9) = 0.948683
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(math.sqrt(0.9))


def test_spearman_is_rank_based():
    assert spearman([1, 2, 3, 4], [1, 8, 27, 1000]) == 1.0  # monotone, not linear
    assert spearman([1, 2, 3, 4], [9, 7, 3, 1]) == -1.0
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def test_correlation_matrix_uses_the_keys_each_pair_shares():
    series = {
        "ProtoNet": {"comedy": 1, "drama": 2, "horror": 3},
        "ToMPro": {"comedy": 30, "drama": 20, "horror": 10, "war": 99},
        "Human": {"comedy": 5, "war": None},
    }
    names, matrix = correlation_matrix(series)
    assert names == ["ProtoNet", "ToMPro", "Human"]
    # ProtoNet vs ToMPro share comedy/drama/horror, perfectly reversed -> -1.
    assert matrix[0][1] == matrix[1][0] == -1.0
    # Human shares only one key (war is None) with anyone -> undefined.
    assert matrix[0][2] is None and matrix[2][1] is None
    assert matrix[0][0] == 1.0 and matrix[1][1] == 1.0
    assert matrix[2][2] is None
    _, pearson_matrix = correlation_matrix(
        {"a": {1: 1, 2: 2, 3: 3}, "b": {1: 2, 2: 4, 3: 7}}, method="pearson"
    )
    assert pearson_matrix[0][1] == pytest.approx(0.993399, abs=1e-6)
    with pytest.raises(ValueError):
        correlation_matrix(series, method="kendall")


def test_mean_sd_uses_the_sample_sd():
    # DynToM's human row: mean ± sd across annotators. 77, 80, 83: mean 80,
    # sd = sqrt((9 + 0 + 9) / (3 - 1)) = 3.
    assert mean_sd([77.0, 80.0, 83.0]) == (80.0, 3.0)
    assert mean_sd([77.0, None, 83.0]) == (80.0, pytest.approx(math.sqrt(18)))
    assert mean_sd([5]) == (5.0, None)
    assert mean_sd([]) == (None, None)


# --- CharToM-QA ----------------------------------------------------------------------


def test_bonus_point_coverage_is_a_micro_average():
    # (1 + 2) / (2 + 2) = 3/4
    assert bonus_point_coverage([(1, 2), (2, 2)]) == 0.75
    # (1 + 0) / (1 + 3) = 1/4; a mean of per-question coverage would say 1/2.
    assert bonus_point_coverage([(1, 1), (0, 3)]) == 0.25
    assert bonus_point_coverage([]) is None
    assert bonus_point_coverage([(0, 0)]) is None
    with pytest.raises(ValueError):
        bonus_point_coverage([(3, 2)])


def test_penalty_rate_counts_defective_responses():
    assert penalty_rate([True, False]) == 0.5
    assert penalty_rate([False, False, False, True]) == 0.25
    assert penalty_rate([]) is None


def test_bonus_point_coverage_unbounded_and_length_ratio():
    # The published evaluator counts an unreadable reply as 3 points of 2: 5/4.
    assert bonus_point_coverage([(3, 2), (2, 2)], bounded=False) == 1.25
    with pytest.raises(ValueError):
        bonus_point_coverage([(-1, 2)], bounded=False)
    assert length_ratio([30, 10], [20, 20]) == 1.0
    assert length_ratio([5], []) is None


def test_bonus_point_coverage_ci_agrees_with_resampling_the_responses():
    """Counts drawn per distinct judgement give the interval that resampling responses
    gives (the generic bootstrap, 2,000 resamples each), in a fraction of its time."""
    rng = random.Random(3)
    judgements = []
    for _ in range(400):
        total = rng.randint(1, 5)
        judgements.append((rng.randint(0, total), total))
    fast = bonus_point_coverage_ci(judgements, n_resamples=2000, seed=5)
    generic = bootstrap_ci(judgements, bonus_point_coverage, n_resamples=2000, seed=5)
    point = bonus_point_coverage(judgements)
    assert fast[0] < point < fast[1]
    assert fast[0] == pytest.approx(generic[0], abs=0.01)
    assert fast[1] == pytest.approx(generic[1], abs=0.01)
    # The data and the seed decide it: not the order of the responses.
    shuffled = judgements[:]
    rng.shuffle(shuffled)
    assert bonus_point_coverage_ci(shuffled, n_resamples=2000, seed=5) == fast
    assert bonus_point_coverage_ci(judgements, n_resamples=2000, seed=6) != fast


def test_bonus_point_coverage_ci_edges_and_refusals():
    assert bonus_point_coverage_ci([]) == (None, None)
    assert bonus_point_coverage_ci([(0, 0), (0, 0)]) == (None, None)
    assert bonus_point_coverage_ci([(2, 2)] * 10) == (1.0, 1.0)
    with pytest.raises(ValueError, match=r"0\.\.2"):
        bonus_point_coverage_ci([(1, 2), (3, 2)])
    low, high = bonus_point_coverage_ci([(3, 2), (2, 2)], bounded=False)
    assert 1.0 <= low <= high <= 1.5
    with pytest.raises(ValueError, match="n_resamples"):
        bonus_point_coverage_ci([(1, 2)], n_resamples=0)


def test_wilson_interval_matches_hand_computed_values():
    # 0 of 10: [0, z^2/(n+z^2)] = [0, 0.2775]; 5 of 10: 0.5 +- 0.2634 (published tables).
    low, high = metrics.wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = metrics.wilson_interval(5, 10)
    assert (low, high) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    with pytest.raises(ValueError):
        metrics.wilson_interval(3, 0)


def test_accuracy_is_coloured_against_chance_not_a_flat_rule():
    """Issue 16: 11% was green. Against 1/6 (six candidates) 11 of 100 is not clearly
    different from guessing, 110 of 1,000 is below it; 80% of 100 is clearly above."""
    sixth = metrics.chance_baseline([6, 6, 6])
    assert metrics.accuracy_vs_chance(11, 100, sixth) == "near"
    assert metrics.accuracy_vs_chance(110, 1000, sixth) == "below"
    assert metrics.accuracy_vs_chance(80, 100, sixth) == "above"
    # The same 30% is clearly above chance among ten options, not among four.
    assert metrics.accuracy_vs_chance(300, 1000, 0.1) == "above"
    assert metrics.accuracy_vs_chance(3, 10, 0.25) == "near"
    assert metrics.accuracy_vs_chance(5, 10, None) is None
    assert metrics.accuracy_vs_chance(0, 0, 0.25) is None


def test_the_count_forms_give_the_same_intervals_as_the_lists():
    """The CharToM-QA tables count answers with arrays and pass the counts: the same
    data must give the same numbers, bootstrap draws included."""
    outcomes = [True] * 37 + [False] * 21 + [None] * 4
    random.Random(5).shuffle(outcomes)
    assert metrics.accuracy_ci_of_counts(58, 37, seed=9) == accuracy_ci(outcomes, seed=9)
    assert metrics.accuracy_ci_of_counts(0, 0) == accuracy_ci([])
    pairs = [(1, 2), (0, 3), (2, 2), (1, 2), (3, 3), (0, 3), (1, 2)]
    assert metrics.bonus_point_coverage_ci_of_counts(
        [0, 1, 2, 3], [3, 2, 2, 3], [2, 3, 1, 1], seed=4
    ) == bonus_point_coverage_ci(pairs, seed=4)
    assert metrics.bonus_point_coverage_ci_of_counts([], [], []) == (None, None)
    with pytest.raises(ValueError, match="n_resamples"):
        metrics.bonus_point_coverage_ci_of_counts([1], [2], [1], n_resamples=0)


# -- one unit, no interval (issue 49) --------------------------------------------------


def test_no_interval_over_a_single_unit():
    # One outcome, one scene, one item, one rater: every resample is that unit, so the
    # percentile interval would be [x, x]. There is none; the point estimate stays.
    assert accuracy_ci([True]) == AccuracyEstimate(1, 1, 1.0, None, None, 1)
    one_scene = accuracy_ci([True, False, True], clusters=["s1"] * 3)
    assert (one_scene.accuracy, one_scene.ci_low, one_scene.ci_high) == (2 / 3, None, None)
    assert one_scene.units == 1
    assert scene_accuracy_ci([True, True], ["s1", "s1"]).ci_low is None
    assert mean_ci([0.25]) == (0.25, None, None)
    assert bootstrap_ci([3.0], lambda xs: sum(xs) / len(xs)) == (None, None)
    assert agreement_ci([["a", "a"]], percent_agreement) == (None, None)
    assert bonus_point_coverage_ci([(1, 2)]) == (None, None)
    # Two units already give an interval, with the same draws as before.
    two = accuracy_ci([True, False], clusters=["s1", "s2"])
    assert two.ci_low is not None and two.ci_low < two.accuracy < two.ci_high
    assert mean_ci([0.0, 1.0])[1:] != (None, None)
