"""metrics.agreement against textbook examples worked by hand."""

from fractions import Fraction

import numpy as np
import pytest

from metrics import (
    agreement_ci,
    agreement_cis,
    cohen_kappa,
    fleiss_kappa,
    interval_alpha,
    krippendorff_alpha,
    krippendorff_alpha_of_counts,
    ordinal_alpha,
    ordinal_alpha_ci,
    ordinal_alpha_ci_of_counts,
    percent_agreement,
)
from metrics.agreement import _resampled_from_counts

N = None

# Fleiss (1971) as reprinted on Wikipedia ("Fleiss' kappa", worked example): 10 units,
# 14 raters, 5 categories; each row counts the raters per category.
FLEISS_COUNTS = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]
FLEISS_RATINGS = [
    [category for category, count in enumerate(row, start=1) for _ in range(count)]
    for row in FLEISS_COUNTS
]
# P_i = (sum_j n_ij^2 - 14) / (14 * 13); the numerators sum_j n_ij^2 - 14 are
# 182, 46, 56, 80, 60, 84, 44, 32, 52, 52 -> total 688, so P-bar = 688 / 1820 = 0.37802.
# Category totals 20, 28, 39, 21, 32 of 140: P_e = (400+784+1521+441+1024) / 140^2
# = 4170 / 19600 = 0.21276. kappa = (P-bar - P_e) / (1 - P_e) = 0.20993 (Wikipedia: 0.210).
FLEISS_P_BAR = Fraction(688, 1820)
FLEISS_P_E = Fraction(4170, 19600)
FLEISS_KAPPA = float((FLEISS_P_BAR - FLEISS_P_E) / (1 - FLEISS_P_E))

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: four
# coders, twelve units, missing data. Rows here are units, columns coders A..D.
KRIPPENDORFF_UNITS = [
    [1, 1, N, 1],
    [2, 2, 3, 2],
    [3, 3, 3, 3],
    [3, 3, 3, 3],
    [2, 2, 2, 2],
    [1, 2, 3, 4],
    [4, 4, 4, 4],
    [1, 1, 2, 1],
    [2, 2, 2, 2],
    [N, 5, 5, 5],
    [N, N, 1, 1],
    [N, 3, N, N],  # one rating: not pairable, left out
]


def test_percent_agreement_with_two_raters_and_missing_ratings():
    # Units with two ratings: (a,a) agree, (a,b) not, (b,b) agree -> 2/3.
    # (a, None) has one rating and is left out.
    assert percent_agreement([["a", "a"], ["a", "b"], ["b", "b"], ["a", N]]) == pytest.approx(2 / 3)


def test_percent_agreement_counts_agreeing_pairs_per_unit():
    # (a, a, b): ordered agreeing pairs 2 * 1 = 2 of 3 * 2 = 6 -> 1/3; (c, c, c) -> 1.
    # Mean over units: (1/3 + 1) / 2 = 2/3.
    assert percent_agreement([["a", "a", "b"], ["c", "c", "c"]]) == pytest.approx(2 / 3)
    assert percent_agreement([["a", N], [N, N]]) is None
    assert percent_agreement([]) is None


def test_percent_agreement_equals_fleiss_p_bar():
    assert percent_agreement(FLEISS_RATINGS) == pytest.approx(float(FLEISS_P_BAR))


def test_cohen_kappa_textbook_example():
    # Wikipedia "Cohen's kappa": 50 proposals; yes/yes 20, yes/no 5, no/yes 10, no/no 15.
    # p_o = 35/50 = 0.7; A says yes 25/50, B 30/50: p_e = .5*.6 + .5*.4 = 0.5;
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4.
    a = ["y"] * 20 + ["y"] * 5 + ["n"] * 10 + ["n"] * 15
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    # Units only one rater rated are left out: same value.
    assert cohen_kappa([*a, "y", N], [*b, N, "n"]) == pytest.approx(0.4)


def test_cohen_kappa_extremes():
    # Agreeing on every unit over two categories: p_o = 1, p_e = 0.5 -> kappa 1.
    assert cohen_kappa(["x", "y", "x"], ["x", "y", "x"]) == 1.0
    # Always disagreeing: p_o = 0, p_e = .5*.5 + .5*.5 = .5 -> (0 - .5) / .5 = -1.
    assert cohen_kappa(["x", "y"], ["y", "x"]) == -1.0
    # One category only: p_e = 1, kappa is 0/0 -> undefined, while agreement is 100%.
    assert cohen_kappa(["x", "x"], ["x", "x"]) is None
    assert percent_agreement([["x", "x"], ["x", "x"]]) == 1.0
    assert cohen_kappa([N], ["x"]) is None
    with pytest.raises(ValueError):
        cohen_kappa(["x"], ["x", "y"])


def test_fleiss_kappa_published_example():
    assert fleiss_kappa(FLEISS_RATINGS) == pytest.approx(FLEISS_KAPPA)
    assert fleiss_kappa(FLEISS_RATINGS) == pytest.approx(0.20993, abs=1e-5)


def test_fleiss_kappa_with_two_raters_is_scotts_pi():
    # a = x,x,y,y; b = x,y,y,y. P_i = 1,0,1,1 -> P-bar = 3/4. Pooled: x 3, y 5 of 8:
    # P_e = 9/64 + 25/64 = 34/64. kappa = (48/64 - 34/64) / (30/64) = 14/30.
    ratings = [["x", "x"], ["x", "y"], ["y", "y"], ["y", "y"]]
    assert fleiss_kappa(ratings) == pytest.approx(14 / 30)


def test_fleiss_kappa_unequal_rater_counts_name_the_unit():
    with pytest.raises(ValueError, match=r"unit 2 has 2 ratings but unit 0 has 3"):
        fleiss_kappa([["a", "a", "b"], ["a", "b", "b"], ["a", N, "a"]])
    with pytest.raises(ValueError, match="unit 0 has 1 rating"):
        fleiss_kappa([["a"], ["b"]])


def test_fleiss_kappa_edge_cases():
    # Units nobody rated are skipped: same as the example without them.
    assert fleiss_kappa([*FLEISS_RATINGS, [N] * 14]) == pytest.approx(FLEISS_KAPPA)
    assert fleiss_kappa([]) is None
    # All raters chose the same category everywhere: P_e = 1 -> undefined.
    assert fleiss_kappa([["a", "a"], ["a", "a"]]) is None
    # Full agreement over two categories: P-bar = 1, P_e = 1/2 -> kappa 1.
    assert fleiss_kappa([["a", "a", "a"], ["b", "b", "b"]]) == 1.0


def test_krippendorff_alpha_published_four_coder_example():
    # Nominal, by hand: 40 pairable values; value totals n_1..n_5 = 9, 13, 10, 5, 3.
    # Off-diagonal coincidences: unit 2 (2,2,3,2): 6 ordered mismatched pairs / (4-1)
    # = 2; unit 6 (1,2,3,4): 12 / 3 = 4; unit 8 (1,1,2,1): 6 / 3 = 2 -> 8 in all.
    # sum_{c != k} n_c n_k = 40^2 - (81+169+100+25+9) = 1216.
    # alpha = 1 - (40 - 1) * 8 / 1216 = 904 / 1216 = 0.743 (the paper's value).
    assert krippendorff_alpha(KRIPPENDORFF_UNITS) == pytest.approx(904 / 1216)
    # The paper also reports ordinal .815, interval .849, ratio .797.
    assert krippendorff_alpha(KRIPPENDORFF_UNITS, "ordinal") == pytest.approx(0.815, abs=5e-4)
    assert krippendorff_alpha(KRIPPENDORFF_UNITS, "interval") == pytest.approx(0.849, abs=5e-4)
    assert krippendorff_alpha(KRIPPENDORFF_UNITS, "ratio") == pytest.approx(0.797, abs=5e-4)


def test_krippendorff_alpha_nominal_accepts_any_labels():
    labels = {1: "belief", 2: "emotion", 3: "intention", 4: "action", 5: "desire"}
    relabelled = [[labels.get(v) for v in unit] for unit in KRIPPENDORFF_UNITS]
    assert krippendorff_alpha(relabelled) == pytest.approx(904 / 1216)
    with pytest.raises(ValueError, match="numeric"):
        krippendorff_alpha(relabelled, "interval")
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(KRIPPENDORFF_UNITS, "cardinal")


def test_krippendorff_alpha_small_case_by_hand():
    # Same data as the Scott's pi case: 8 values, n_x = 3, n_y = 5; one mismatched
    # unit gives o_xy = o_yx = 1. alpha = 1 - (8 - 1) * 2 / (2 * 3 * 5) = 16/30.
    ratings = [["x", "x"], ["x", "y"], ["y", "y"], ["y", "y"]]
    assert krippendorff_alpha(ratings) == pytest.approx(16 / 30)


def test_krippendorff_alpha_undefined_cases():
    assert krippendorff_alpha([]) is None
    assert krippendorff_alpha([["a", N], [N, "b"]]) is None  # no unit has two ratings
    assert krippendorff_alpha([["a", "a"], ["a", "a"]]) is None  # no variation
    # Variation only among unpairable values: still no expected disagreement.
    assert krippendorff_alpha([["a", "a"], ["b", N]]) is None


def test_agreement_ci_is_seeded_and_contains_the_estimate():
    # 30 units, 3 raters, mostly agreeing.
    ratings = [["a", "a", "a"], ["b", "b", "b"], ["a", "a", "b"], ["c", "c", "c"], ["b", "b", "a"]]
    ratings = ratings * 6
    point = fleiss_kappa(ratings)
    low, high = agreement_ci(ratings, fleiss_kappa, n_resamples=300, seed=5)
    assert (low, high) == agreement_ci(ratings, fleiss_kappa, n_resamples=300, seed=5)
    assert (low, high) != agreement_ci(ratings, fleiss_kappa, n_resamples=300, seed=6)
    assert low < point < high

    alpha_low, alpha_high = agreement_ci(
        KRIPPENDORFF_UNITS, lambda r: krippendorff_alpha(r, "interval"), n_resamples=200
    )
    assert alpha_low < 0.849 < alpha_high <= 1.0


def test_agreement_ci_edge_cases():
    assert agreement_ci([], fleiss_kappa) == (None, None)
    # Every resample of one all-agreeing category is undefined -> no interval.
    assert agreement_ci([["a", "a"]] * 4, fleiss_kappa, n_resamples=50) == (None, None)
    with pytest.raises(ValueError):
        agreement_ci([["a", "a"]], fleiss_kappa, level=0)


@pytest.mark.parametrize("statistic", [percent_agreement, fleiss_kappa, krippendorff_alpha])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agreement_ci_from_counts_equals_the_statistic_on_every_resample(statistic, seed):
    """The three statistics' intervals come from weighted per-unit counts (issue 17: a
    study of 100,000 answers took minutes); they must be the intervals the statistic
    itself gives on every resample (a lambda wrapper takes the resample-by-resample
    path). Ragged units, missing ratings and unpairable units included."""
    import random

    rng = random.Random(seed)
    labels = ["rachel", "ross", "monica", "joey"]
    if statistic is fleiss_kappa:
        units = [[rng.choice(labels[:3]) for _ in range(4)] for _ in range(40)]
    else:
        units = [[rng.choice([*labels, N]) for _ in range(rng.randint(1, 6))] for _ in range(60)]
    fast = agreement_ci(units, statistic, n_resamples=200, seed=seed)
    slow = agreement_ci(units, lambda r: statistic(r), n_resamples=200, seed=seed)
    assert fast[0] is not None
    assert fast == pytest.approx(slow, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("statistic", [ordinal_alpha, interval_alpha])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ordered_alpha_resamples_equal_the_package_on_every_resample(statistic, seed):
    """Ordinal and interval alpha (the validation rubrics' Likert scores) resample from
    weighted per-unit coincidences (issue 31: /reports/validation/ spent 2.5 s in the
    package's 1,000 calls per criterion); the interval must be the one the package
    gives on every resample. Ragged units, missing and lone ratings, a value used only
    by unpairable units, and few units (resamples where alpha is undefined) included."""
    import random

    rng = random.Random(seed)
    units = [
        [rng.choice([1, 2, 3, 4, 5, 5, 4, N]) for _ in range(rng.randint(1, 5))] for _ in range(50)
    ]
    units.append([7])  # a value no pair holds
    fast = agreement_ci(units, statistic, n_resamples=200, seed=seed)
    slow = agreement_ci(units, lambda r: statistic(r), n_resamples=200, seed=seed)
    assert fast[0] is not None
    assert fast == pytest.approx(slow, rel=1e-9, abs=1e-12)
    few = [[4, 4], [4, 5], [5, 5]]  # many resamples hold one value only: undefined
    fast_few = agreement_ci(few, statistic, n_resamples=300, seed=seed)
    assert fast_few == pytest.approx(
        agreement_ci(few, lambda r: statistic(r), n_resamples=300, seed=seed), rel=1e-9
    )
    assert agreement_ci([[3, 3]] * 4, statistic, n_resamples=50) == (None, None)


@pytest.mark.parametrize("seed", [0, 1])
def test_ordinal_alpha_ci_from_kind_counts_agrees_with_resampling_units(seed):
    """The validation report's interval draws how often each kind of unit comes up
    (multinomial) instead of drawing units: the interval resampling the units gives,
    to sampling error (2,000 resamples each), and the same for any order of units."""
    import random

    rng = random.Random(seed)
    units = []
    for _ in range(300):  # four annotators, scores that mostly agree, a few missing
        base = rng.randint(1, 5)
        units.append(
            [min(5, max(1, base + rng.choice([0, 0, 0, 1, -1]))) for _ in range(4)]
            + [N] * rng.randint(0, 1)
        )
    fast = ordinal_alpha_ci(units, n_resamples=2000, seed=seed)
    generic = agreement_ci(units, lambda r: ordinal_alpha(r), n_resamples=2000, seed=seed)
    point = ordinal_alpha(units)
    assert fast[0] < point < fast[1]
    assert fast == pytest.approx(generic, abs=0.02)
    shuffled = units[:]
    rng.shuffle(shuffled)
    assert ordinal_alpha_ci(shuffled, n_resamples=2000, seed=seed) == fast
    assert ordinal_alpha_ci([], n_resamples=10) == (None, None)
    assert ordinal_alpha_ci([[3, 3]] * 4, n_resamples=50) == (None, None)  # one value
    # Labels the array arithmetic does not take go through the generic loop.
    words = [["low", "high"], ["low", "low"]]
    with pytest.raises(ValueError, match="numeric"):
        ordinal_alpha_ci(words, n_resamples=10)


def test_ordinal_alpha_and_interval_from_counts_equal_those_from_ratings():
    """The validation report counts scores in arrays and hands the counts over: alpha
    and its interval must be exactly what the ratings themselves give. Kinds of unit
    are ordered as numpy's row sort orders them, also when their counts are too large
    to be packed into one number."""
    import random

    import numpy as np

    from metrics.agreement import _kinds_of_counts

    rng = random.Random(4)
    units = [[rng.choice([1, 2, 2, 3, 5]) for _ in range(rng.randint(1, 4))] for _ in range(200)]
    domain = np.array(sorted({v for u in units for v in u}))
    counts = np.array([[u.count(v) for v in domain] for u in units])
    assert krippendorff_alpha_of_counts(counts, domain) == ordinal_alpha(units)
    assert krippendorff_alpha_of_counts(counts, domain, "interval") == interval_alpha(units)
    assert ordinal_alpha_ci_of_counts(counts, domain, n_resamples=300, seed=2) == (
        ordinal_alpha_ci(units, n_resamples=300, seed=2)
    )
    for big in (counts, counts * 10**6):
        _, kinds, kind_of = _kinds_of_counts(big, domain)
        expected, expected_of = np.unique(big, axis=0, return_inverse=True)
        assert (kinds == expected).all() and (kind_of == expected_of.reshape(-1)).all()
    assert krippendorff_alpha_of_counts(np.array([[1, 0], [0, 1]]), [1, 2]) is None
    assert ordinal_alpha_ci_of_counts(np.zeros((0, 2)), [1, 2]) == (None, None)
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha_of_counts(counts, domain, "nominal")


def test_agreement_ci_from_counts_keeps_the_undefined_and_refused_cases():
    assert agreement_ci([["a", "a"]] * 4, krippendorff_alpha, n_resamples=50) == (None, None)
    assert agreement_ci([["a"], ["b"]], percent_agreement, n_resamples=50) == (None, None)
    with pytest.raises(ValueError, match="same number of ratings"):
        agreement_ci([["a", "a"], ["a", "b", "b"]], fleiss_kappa, n_resamples=5)


@pytest.mark.parametrize("seed", [0, 1])
def test_nominal_alpha_from_unit_counts_is_the_package_on_the_matrix(seed):
    """Nominal alpha hands the package per-unit category counts (issue 17: filling a
    raters x units matrix cell by cell took 0.1 s per 100,000 answers); the value must
    be exactly what the package computes from that matrix, categories numbered in the
    order they first appear. Ragged units, missing ratings and a lone rating included."""
    import random

    import krippendorff
    import numpy as np

    rng = random.Random(seed)
    labels = ["rachel", "ross", "monica", "joey", "chandler"]
    units = [[rng.choice([*labels, N]) for _ in range(rng.randint(1, 7))] for _ in range(80)]
    codes: dict[str, int] = {}
    matrix = np.full((max(map(len, units)), len(units)), np.nan)
    for j, unit in enumerate(units):
        for i, value in enumerate(unit):
            if value is not None:
                matrix[i, j] = codes.setdefault(value, len(codes))
    expected = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"))
    assert krippendorff_alpha(units) == expected


def test_agreement_cis_are_each_statistics_own_interval():
    # One set of resamples for several statistics: each interval is agreement_ci's,
    # exactly, including one that takes the resample-by-resample path.
    import random

    rng = random.Random(5)
    units = [[rng.choice(["a", "b", "c", N]) for _ in range(rng.randint(2, 6))] for _ in range(50)]
    statistics = [percent_agreement, krippendorff_alpha, lambda r: percent_agreement(r)]
    together = agreement_cis(units, statistics, n_resamples=200, seed=9)
    assert together == [agreement_ci(units, s, n_resamples=200, seed=9) for s in statistics]
    assert together[0][0] is not None
    assert agreement_cis([], statistics) == [(None, None)] * 3


def test_resampled_statistics_do_not_depend_on_how_many_resamples_are_weighed_at_once():
    """A resample's value is computed alone: the first 64 of 1,000 resamples (weighed
    in one chunk of 1,000 rows) are bit for bit those of the same 64 weighed alone, so
    the chunk size, which follows the unit count, cannot move a report's figures."""
    rng = np.random.default_rng(3)
    labels = ["joey", "rachel", "ross", "monica", "chandler", "phoebe"]
    units = [list(rng.choice(labels, size=int(rng.integers(2, 40)))) for _ in range(2000)]
    statistics = [percent_agreement, krippendorff_alpha]
    draws = np.random.default_rng(0).integers(0, len(units), size=(1000, len(units)))
    whole = _resampled_from_counts(units, statistics, draws)
    first = _resampled_from_counts(units, statistics, draws[:64])
    for statistic in statistics:
        assert np.array_equal(whole[statistic][:64], first[statistic], equal_nan=True)
    equal = [list(rng.choice(labels, size=3)) for _ in range(2000)]  # Fleiss: equal sizes
    whole = _resampled_from_counts(equal, [fleiss_kappa], draws)
    first = _resampled_from_counts(equal, [fleiss_kappa], draws[:64])
    assert not np.isnan(first[fleiss_kappa]).any()
    assert np.array_equal(whole[fleiss_kappa][:64], first[fleiss_kappa], equal_nan=True)
