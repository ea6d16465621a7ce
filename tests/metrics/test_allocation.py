"""metrics.allocation: tallies, the next places by design, and the stratified bootstrap.

Expected values are worked out by hand in the comments next to each assertion.
"""

import math
import random

import numpy as np
import pytest

from metrics.allocation import (
    BALANCED,
    DESIGNS,
    UNIFORM,
    WIDEST,
    Z95,
    Tally,
    _comparison_sides,
    _relative_spreads,
    _spreads,
    _variance_parts,
    answers_to_reach,
    next_strata,
    stratified_bootstrap,
    stratified_bootstrap_counts,
    stratified_bootstrap_pair,
    t_quantile,
    tally_of_items,
    tally_update,
    weighted_overall,
)

# --- tallies ------------------------------------------------------------------------------


def _answer_stream(seed: int, items: int, answers: int) -> list[tuple[int, bool]]:
    rng = random.Random(seed)
    return [(rng.randrange(items), rng.random() < 0.7) for _ in range(answers)]


def test_tally_update_one_answer_at_a_time_equals_the_tally_from_scratch():
    models = [0.0, 0.25, 1.0, 0.5, 0.75]
    counts = [[0, 0] for _ in models]
    tally = Tally(items=len(models))
    for item, correct in _answer_stream(seed=3, items=len(models), answers=40):
        before = tuple(counts[item])
        counts[item][0] += 1
        counts[item][1] += correct
        tally = tally_update(tally, before=before, after=tuple(counts[item]), model=models[item])
    rebuilt = tally_of_items([(m, c, x) for (m, c), x in zip(counts, models, strict=True)])
    for name, value in rebuilt.as_dict().items():
        assert getattr(tally, name) == pytest.approx(value, abs=1e-12), name


def test_tally_update_can_take_an_answer_back():
    # An item at 3 answers, 2 correct, loses one correct answer: back to (2, 1).
    start = tally_of_items([(3, 2, None), (1, 1, None)])
    back = tally_update(start, before=(3, 2), after=(2, 1))
    expected = tally_of_items([(2, 1, None), (1, 1, None)])
    for name, value in expected.as_dict().items():
        assert getattr(back, name) == pytest.approx(value, abs=1e-12), name


def test_tally_sums_by_hand_and_round_trip_through_a_dict():
    # Items (m, c): (2, 1) -> p 0.5; (1, 1) -> p 1; (0, 0) unanswered; one of 4 items unseen.
    tally = tally_of_items([(2, 1, 0.0), (1, 1, 1.0), (0, 0, 0.5)], n_items=4)
    assert tally.items == 4
    assert tally.answers == 3
    assert tally.answered == 2
    assert tally.mean_sum == pytest.approx(1.5)
    assert tally.mean_sq == pytest.approx(1.25)
    # Only the item with 2 answers has a within spread: 0.5 * 0.5 * 2 / 1 = 0.5.
    assert tally.within == pytest.approx(0.5)
    assert tally.within_items == 1
    assert tally.model_sum == pytest.approx(1.0)
    assert tally.cross == pytest.approx(1.0)  # 0.5 * 0 + 1 * 1
    assert Tally.from_dict(tally.as_dict()) == tally


# --- estimates ----------------------------------------------------------------------------


def test_the_variance_model_by_hand():
    # Two items, 4 answers each: p = 0.5 and 1.0. Mean 0.75.
    # Within spread: both items have m >= 2, so s_w² = (0.25 * 4/3 + 0) / 2 = 1/6.
    # Observed spread of item means: (0.25² + 0.25²) / 1 = 0.125; minus s_w²/4 = 1/24.
    tally = tally_of_items([(4, 2, None), (4, 4, None)])
    spreads = _spreads(tally, diff=False)
    s_b2 = 0.125 - (1 / 6) / 4
    assert spreads == pytest.approx((0.75, s_b2, 1 / 6))
    assert _variance_parts(tally, spreads, 0) == pytest.approx((s_b2 / 2, (1 / 6) / (2 * 4)))
    # Four more answers (two per item) shrink only the within part.
    assert _variance_parts(tally, spreads, 4) == pytest.approx((s_b2 / 2, (1 / 6) / (2 * 6)))


def test_answers_to_reach():
    # 10 items with 2 answers each, every item p = 0.5: s_w² = 0.25 * 2 = 0.5, the item
    # means' spread is 0 so s_b² = 0. Half-width 0.1: room = (0.1 / Z95)², and
    # Σ m = 0.5 / room answers are needed, 20 of them there already.
    tally = tally_of_items([(2, 1, None)] * 10)
    room = (0.1 / Z95) ** 2
    assert answers_to_reach(tally, 0.1) == math.ceil(0.5 / room) - 20
    # Already narrower than ±100 points: nothing more to do.
    assert answers_to_reach(tally, 1.0) == 0


def test_answers_to_reach_at_100_percent_follows_the_score_interval():
    # 20 items, 2 answers each, all right: no spread to measure, so the variance model
    # asks for nothing; the report's score interval (t over 20 items, n answers) is
    # still q² / 2(n + q²) wide, ±5 points at n = q² / 0.1 - q².
    tally = tally_of_items([(2, 2, None)] * 20)
    q2 = t_quantile(0.975, 19) ** 2
    assert answers_to_reach(tally, 0.05) == math.ceil(q2 / 0.1 - q2) - 40


def test_answers_to_reach_is_none_when_the_items_own_spread_is_wider():
    # 4 items, 10 answers each, p = 0, 1, 0, 1: s_w² = 0, s_b² = 1/3; s_b²/n = 1/12,
    # a floor of Z95 * sqrt(1/12) ≈ 0.57 that no number of raters goes below.
    tally = tally_of_items([(10, 0, None), (10, 10, None)] * 2)
    assert answers_to_reach(tally, 0.5) is None
    assert answers_to_reach(tally, 0.6) == 0


def test_weighted_overall_weights_strata_by_items_not_answers():
    # a: 3 items at 1.0, b: 1 item at 0.0 -> 0.75 whatever the answers were.
    assert weighted_overall({"a": 1.0, "b": 0.0}, {"a": 3, "b": 1}) == pytest.approx(0.75)
    # A stratum with no estimate is left out of the weights.
    assert weighted_overall({"a": 1.0, "b": None}, {"a": 3, "b": 1}) == pytest.approx(1.0)
    assert weighted_overall({"a": None}, {"a": 3}) is None


# --- choosing -----------------------------------------------------------------------------


def test_unknown_design_is_refused():
    with pytest.raises(ValueError, match="unknown allocation design 'neyman'"):
        next_strata("neyman", {"a": Tally(items=2)}, 1)


@pytest.mark.parametrize("design", DESIGNS)
def test_phase_one_serves_the_stratum_furthest_behind_first(design):
    # a: 2 items, 1 answer -> 0.5 per item; b: 4 items, 0 answers -> 0 per item.
    # min_per_item 1: b is furthest behind and gets places until it reaches a's 0.5
    # per item (2 places), then they alternate by load, ties to the sorted key.
    tallies = {"a": tally_of_items([(1, 1, 0.0), (0, 0, 0.0)]), "b": Tally(items=4)}
    assert next_strata(design, tallies, 4, min_per_item=1) == ["b", "b", "a", "b"]


def test_min_per_item_comes_before_the_widest_interval():
    # a: 10 items already at 2 answers, each split 1-1, so its interval is wide
    # (s_w² 0.5 over 10 items x 2 answers: 0.025); b: 20 items with 1 answer each, all
    # right (fallback s_w² 0.25 over 20 x 2 once phase one is done: 0.00625).
    # min_per_item 2 sends b's 20 places first all the same.
    split = tally_of_items([(2, 1, None)] * 10)
    narrow = tally_of_items([(1, 1, None)] * 20)
    chosen = next_strata(BALANCED, {"a": split, "b": narrow}, 22, min_per_item=2)
    assert chosen[:20] == ["b"] * 20
    assert chosen[20:] == ["a", "a"]  # then the wider interval


def test_balanced_sends_places_to_the_wider_interval():
    # Same spread per answer, 10 items against 100, 2 answers each everywhere: the
    # small stratum's interval is the wider one, by sqrt(10).
    small = tally_of_items([(2, 1, None)] * 10)
    large = tally_of_items([(2, 1, None)] * 100)
    assert next_strata(BALANCED, {"large": large, "small": small}, 5) == ["small"] * 5
    # Uniform keeps per-item loads level instead: the large one is not behind, the small
    # one is not either, so ties go to the sorted key and loads alternate.
    assert next_strata(UNIFORM, {"large": large, "small": small}, 2) == ["large", "small"]


def test_a_stratum_whose_answers_agree_so_far_is_not_left_behind():
    # a: 10 items split 1-1, b: 10 items both right. On its own, b's answers show no
    # noise and it would look finished; with the noise pooled over strata (5 / 20 =
    # 0.25 per answer) both are equally wide, so they take turns (ties to "a" first).
    split = tally_of_items([(2, 1, None)] * 10)
    agreed = tally_of_items([(2, 2, None)] * 10)
    assert next_strata(BALANCED, {"a": split, "b": agreed}, 4) == ["a", "b", "a", "b"]


def test_widest_looks_at_the_difference_with_the_model():
    # Both strata have the same human answers (item means 0.5 and 1); in "gap" the model
    # is right where humans split and wrong where they agree (differences -0.5 and 1
    # spread), in "flat" it matches the humans item by item (differences all 0).
    human = [(2, 1, None), (2, 2, None)] * 10
    gap = tally_of_items([(m, c, 1.0 if c == 1 else 0.0) for m, c, _ in human])
    flat = tally_of_items([(m, c, c / m) for m, c, _ in human])
    assert next_strata(WIDEST, {"flat": flat, "gap": gap}, 1) == ["gap"]


def test_widest_predicts_the_reports_interval_of_the_difference():
    # 40 items, 3 answers each, humans 2 or 3 right, the model right on 3 items in 4:
    # the half-width the rule predicts from the tally is the report's (Newcombe's
    # interval from the bootstrap) to within a tenth, and more answers narrow it.
    rows = [(3, 2 + (i % 3 == 0), float(i % 4 != 0)) for i in range(40)]
    tally = tally_of_items(rows)
    spreads = _relative_spreads({"a": tally})["a"]
    side = _comparison_sides({"a": tally})["a"]
    predicted = side.half_width(tally, spreads, 0)
    _, diff = stratified_bootstrap_counts(
        {"a": [(m, c) for m, c, _ in rows]}, model={"a": [x for _, _, x in rows]}
    )
    _, low, high = diff["a"]
    assert predicted == pytest.approx((high - low) / 2, rel=0.1)
    assert side.half_width(tally, spreads, 40) < predicted


def test_answers_to_reach_of_the_difference_follows_the_reports_interval():
    # The study page's "answers to ±X" of human - model is the count at which the
    # predicted Newcombe interval (the one above, the report's) gets there: one fewer
    # answer is still wider.
    rows = [(3, 2 + (i % 3 == 0), float(i % 4 != 0)) for i in range(40)]
    tally = tally_of_items(rows)
    spreads = _relative_spreads({"": tally})[""]
    side = _comparison_sides({"": tally})[""]
    now = side.half_width(tally, spreads, 0)
    target = now - 0.01
    needed = answers_to_reach(tally, target, diff=True)
    assert needed is not None and needed > 0
    assert side.half_width(tally, spreads, needed) <= target
    assert side.half_width(tally, spreads, needed - 1) > target
    assert answers_to_reach(tally, now + 0.001, diff=True) == 0
    # The model's side alone (right on 3 items in 4, 40 items) is wider than ±2
    # points: no number of human answers gets the difference there.
    assert answers_to_reach(tally, 0.02, diff=True) is None


def test_widest_goes_where_the_difference_is_widest_and_answers_narrow_it():
    # The same items in both strata, but "small" has 10 of them and "large" 40: small's
    # interval of human - model is about twice as wide, so it takes the places.
    rows = [(2, 1 + (i % 2), float(i % 4 != 0)) for i in range(40)]
    tallies = {"large": tally_of_items(rows), "small": tally_of_items(rows[:10])}
    assert next_strata(WIDEST, tallies, 6, min_per_item=2) == ["small"] * 6


def test_the_cap_fills_strata_and_stops():
    # 2 items per stratum, cap 2 answers per item: 4 places each at most; a has 3.
    tallies = {"a": tally_of_items([(2, 1, None), (1, 1, None)]), "b": Tally(items=2)}
    chosen = next_strata(BALANCED, tallies, 10, cap_per_item=2)
    assert sorted(chosen) == ["a", "b", "b", "b", "b"]


def test_pending_places_count_as_answers_to_come():
    # Without pending b (0 answers) is behind; with 4 places pending it is level with a.
    tallies = {"a": tally_of_items([(2, 1, None)] * 2), "b": Tally(items=2)}
    assert next_strata(UNIFORM, tallies, 1) == ["b"]
    assert next_strata(UNIFORM, tallies, 1, pending={"b": 4}) == ["a"]


def test_uniform_keeps_items_level():
    # Strata of 3, 5 and 7 items taking 45 places one by one, as participants arriving:
    # every item ends with 3 answers.
    sizes = {"a": 3, "b": 5, "c": 7}
    tallies = {key: Tally(items=n) for key, n in sizes.items()}
    given = dict.fromkeys(sizes, 0)
    for _ in range(45):
        (key,) = next_strata(UNIFORM, tallies, 1)
        given[key] += 1
        tallies[key] = tally_update(tallies[key], before=(given[key] - 1, 0), after=(given[key], 0))
    assert {key: given[key] / sizes[key] for key in sizes} == dict.fromkeys(sizes, 3.0)


def test_the_items_spread_is_shrunk_towards_its_pooled_value():
    # a: 20 items, 10 answered 2 of 2 and 10 answered 0 of 2; b: 20 items, all 2 of 2.
    # No item's answers disagree, so the pooled noise is 0 and the items' spreads are
    # the spreads of their means: a 20 x 0.25 / 19 = 5/19, b 0. Pooled over the strata
    # with their 19 degrees each: 5/38. Each stratum's own counts for 19 items against
    # the pooled value's 100: a (5 + 100 x 5/38) / 119, b (100 x 5/38) / 119. So b,
    # whose items happen to agree, is not taken for a stratum with nothing to learn.
    from metrics.allocation import PRIOR_ITEMS, _shrunk_spreads

    assert PRIOR_ITEMS == 100
    split = tally_of_items([(2, 2, None)] * 10 + [(2, 0, None)] * 10)
    agreed = tally_of_items([(2, 2, None)] * 20)
    spreads = _shrunk_spreads({"a": split, "b": agreed}, diff=False)
    assert spreads["a"] == pytest.approx((0.5, (5 + 100 * 5 / 38) / 119, 0.0))
    assert spreads["b"] == pytest.approx((1.0, (100 * 5 / 38) / 119, 0.0))


def test_next_strata_does_not_depend_on_dict_order():
    tallies = {
        "b": tally_of_items([(2, 1, None)] * 10),
        "a": tally_of_items([(2, 2, None), (2, 0, None)] * 5),
        "c": Tally(items=7),
    }
    backwards = dict(reversed(list(tallies.items())))
    for design in DESIGNS:
        assert next_strata(design, tallies, 30) == next_strata(design, backwards, 30)


# --- the stratified bootstrap ------------------------------------------------------------


def test_two_items_one_answer_each_by_hand():
    # Items 1 and 0, one answer each: the resampled mean is 0, 0.5 or 1 (variance 1/8),
    # so the effective answers are 0.25 / (1/8) = 2, the answers themselves. The score
    # interval of 1 right in 2 with Student's t at 1 degree (12.71) is nearly all of
    # 0..1 (0.5 ± 0.4985, Wilson's formula): two items say next to nothing.
    result = stratified_bootstrap({"a": [[True], [False]]})
    for key in ("a", ""):
        estimate, low, high = result[key]
        assert estimate == 0.5
        assert low == pytest.approx(0.0015, abs=1e-3)
        assert high == pytest.approx(0.9985, abs=1e-3)


def test_estimate_is_the_mean_of_item_means():
    # Item means 3/4 and 0: 0.375, where pooling answers would give 3/5.
    result = stratified_bootstrap({"a": [[True, True, True, False], [False]]})
    assert result["a"][0] == pytest.approx(0.375)


def test_all_correct_still_reaches_below_100():
    # 5 items, 2 answers each, all right: every resample is 100%, which a percentile
    # interval would give as [100, 100]. The score interval takes the 10 answers as a
    # binomial's (no spread to measure a clustering by): lower bound n / (n + t²) with
    # t = 2.776 (4 degrees): 10 / 17.71 = 0.565.
    estimate, low, high = stratified_bootstrap({"a": [[True, True]] * 5})["a"]
    assert (estimate, high) == (1.0, 1.0)
    t = 2.7764451
    assert low == pytest.approx(10 / (10 + t * t), abs=1e-6)
    # And all wrong mirrors it.
    estimate, low, high = stratified_bootstrap({"a": [[False, False]] * 5})["a"]
    assert (estimate, low) == (0.0, 0.0)
    assert high == pytest.approx(t * t / (10 + t * t), abs=1e-6)


def test_overall_weights_strata_by_items_and_skips_unanswered_items():
    # a: 3 items, 2 answered, all correct -> 1.0; b: 1 item, 5 answers, all wrong -> 0.
    # Overall by items: (3 * 1 + 1 * 0) / 4 = 0.75 (by answers it would be 2/7).
    result = stratified_bootstrap({"a": [[True], [True], []], "b": [[False] * 5]})
    assert result["a"][0] == pytest.approx(1.0)
    assert result["b"] == (0.0, None, None)
    assert result[""][0] == pytest.approx(0.75)
    low, high = result[""][1:]
    assert low is not None and high is not None and low <= 0.75 <= high


def test_model_side_gives_the_difference():
    # Item means 1, 0.5 and 0; model accuracies 0, 0.5, 1: differences 1, 0, -1, mean 0.
    strata = {"a": [[True, True], [True, False], [False, False]]}
    result = stratified_bootstrap(strata, model={"a": [0.0, 0.5, 1.0]})
    estimate, low, high = result["a"]
    assert estimate == pytest.approx(0.0)
    assert -1.0 <= low < 0 < high <= 1.0


def test_a_stratum_of_one_item_has_no_interval():
    result = stratified_bootstrap({"one": [[True, False, True]], "none": [[], []]})
    assert result["one"] == (pytest.approx(2 / 3), None, None)
    assert result["none"] == (None, None, None)
    # The overall figure rests on that one item too: no interval either.
    assert result[""] == (pytest.approx(2 / 3), None, None)


def test_one_answer_per_item_is_the_item_bootstrap():
    # With one answer per item there is no answer noise to redraw: the resampled mean
    # varies as the plain item bootstrap's, by var(item means) / k. 120 of 200 items
    # right: var = 0.6 * 0.4 = 0.24, half-width about Z95 * sqrt(0.24 / 200) ≈ 0.068.
    outcomes = [[True]] * 120 + [[False]] * 80
    estimate, low, high = stratified_bootstrap({"a": outcomes}, n_resamples=4000)["a"]
    assert estimate == pytest.approx(0.6)
    assert (high - low) / 2 == pytest.approx(Z95 * math.sqrt(0.24 / 200), rel=0.1)


def test_answer_noise_is_counted_once():
    # 50 items, each 1 of 2 correct: item means do not spread at all, so all the width
    # comes from redrawing answers. A redrawn item mean varies by p(1 - p)/(m - 1) =
    # 0.25, the stratum mean by 0.25 / 50: half-width about Z95 * sqrt(0.005) ≈ 0.139.
    # Naive resampling of items and then answers would double the variance (≈ 0.196).
    result = stratified_bootstrap({"a": [[True, False]] * 50}, n_resamples=4000)
    estimate, low, high = result["a"]
    assert estimate == pytest.approx(0.5)
    assert (high - low) / 2 == pytest.approx(Z95 * math.sqrt(0.25 / 50), rel=0.1)


def test_intervals_cover_the_mean_of_a_simulated_kind_of_item():
    # Items of one kind: true p ~ N(0.7, 0.15) clipped, 3 answers each, 20 items per
    # study. The 95% intervals should hold 0.7 in about 95% of 400 studies (binomial
    # sd ≈ 1.1 points; 0.92 is about three sd below).
    rng = np.random.default_rng(5)
    hits = 0
    for study in range(400):
        p = np.clip(rng.normal(0.7, 0.15, size=20), 0, 1)
        items = [list(rng.random(3) < pi) for pi in p]
        _, low, high = stratified_bootstrap({"a": items}, seed=study, n_resamples=500)["a"]
        hits += low <= 0.7 <= high
    assert hits / 400 >= 0.92


def test_intervals_cover_near_the_ceiling():
    # A kind of item people get about 97% right (log-odds N(3.8, 1)), 30 items, 3
    # answers each: most items' answers all agree, and 28 of these 400 studies have not
    # one wrong answer. The expanded percentile interval of round one held the mean in
    # 370 of them (0.925: it cannot reach below 100% when every draw is 100%); the
    # score interval holds it in 386 (0.965), and the issue asks for 0.94.
    rng = np.random.default_rng(8)
    difficulty = rng.normal(-3.8, 1.0, size=200_000)
    truth = float((1 / (1 + np.exp(difficulty))).mean())
    assert 0.96 < truth < 0.975
    hits = 0
    for study in range(400):
        p = 1 / (1 + np.exp(rng.normal(-3.8, 1.0, size=30)))
        items = [list(rng.random(3) < pi) for pi in p]
        _, low, high = stratified_bootstrap({"a": items}, seed=study, n_resamples=500)["a"]
        hits += low <= truth <= high
    assert hits / 400 >= 0.94


def _noisy_strata(seed: int) -> dict[str, list[list[bool]]]:
    rng = random.Random(seed)
    return {
        key: [[rng.random() < 0.6 for _ in range(rng.randint(1, 4))] for _ in range(n)]
        for key, n in (("x", 6), ("y", 9), ("z", 3))
    }


def test_same_seed_same_answer_and_another_seed_another():
    strata = _noisy_strata(1)
    assert stratified_bootstrap(strata, seed=4) == stratified_bootstrap(strata, seed=4)
    assert stratified_bootstrap(strata, seed=4) != stratified_bootstrap(strata, seed=5)


def test_order_of_strata_items_and_answers_is_irrelevant():
    strata = _noisy_strata(2)
    model = {key: [round(0.1 * i, 1) for i in range(len(items))] for key, items in strata.items()}
    shuffled = random.Random(9)
    reordered: dict[str, list[list[bool]]] = {}
    reordered_model: dict[str, list[float]] = {}
    for key in reversed(list(strata)):
        order = list(range(len(strata[key])))
        shuffled.shuffle(order)
        reordered[key] = [list(reversed(strata[key][i])) for i in order]
        reordered_model[key] = [model[key][i] for i in order]
    assert stratified_bootstrap(strata) == stratified_bootstrap(reordered)
    assert stratified_bootstrap(strata, model=model) == stratified_bootstrap(
        reordered, model=reordered_model
    )


def test_the_pair_is_both_calls_from_the_same_draws():
    strata = _noisy_strata(3)
    model = {key: [0.5] * len(items) for key, items in strata.items()}
    human, diff = stratified_bootstrap_pair(strata, model=model, seed=2)
    assert human == stratified_bootstrap(strata, seed=2)
    assert diff == stratified_bootstrap(strata, model=model, seed=2)
    assert stratified_bootstrap_pair(strata, seed=2) == (human, None)
    # A constant model has no spread over items: its side of the difference's interval
    # is a point, so the difference's interval is the human one shifted by it, and
    # another constant moves it by as much (except where a bound is clipped at -1 or
    # 1); its estimate is the human one - 0.5.
    lower = {key: [0.25] * len(items) for key, items in strata.items()}
    _, moved = stratified_bootstrap_pair(strata, model=lower, seed=2)
    shifted = 0
    for key in ("x", "y", "z", ""):
        assert diff[key][0] == pytest.approx(human[key][0] - 0.5)
        for value, moved_value in zip(diff[key], moved[key], strict=True):
            if -1 < value < 0.75:
                assert moved_value == pytest.approx(value + 0.25)
                shifted += 1
        if human[key][1] is not None:
            assert diff[key][1] == pytest.approx(human[key][1] - 0.5)
    assert shifted >= 8


def test_counts_give_the_same_figures_as_the_answers_they_count():
    strata = _noisy_strata(5)
    model = {key: [i % 2 * 1.0 for i in range(len(items))] for key, items in strata.items()}
    counts = {
        key: [(len(outcomes), sum(outcomes)) for outcomes in items] for key, items in strata.items()
    }
    assert stratified_bootstrap_counts(counts, model=model, seed=3) == (
        stratified_bootstrap_pair(strata, model=model, seed=3)
    )


def test_endless_answers_leave_only_the_items_spread():
    # Items whose shares right are exactly 0.6, 0.7, 0.8 and 0.9, known from a million
    # answers each: the interval of their mean (0.75) narrows to what four items say,
    # and it is narrower than the same items' interval from 3 answers each.
    shares = [0.6, 0.7, 0.8, 0.9]
    endless = {"a": [(1_000_000, round(p * 1_000_000)) for p in shares]}
    estimate, low, high = stratified_bootstrap_counts(endless)[0]["a"]
    assert estimate == pytest.approx(0.75)
    assert low < 0.75 < high
    few = {"a": [(3, 2), (3, 2), (3, 2), (3, 3)]}
    _, few_low, few_high = stratified_bootstrap_counts(few)[0]["a"]
    assert high - low < few_high - few_low


def test_a_stratum_keeps_its_interval_when_another_is_added():
    strata = _noisy_strata(4)
    alone = stratified_bootstrap({"y": strata["y"]}, seed=6)
    together = stratified_bootstrap(strata, seed=6)
    assert together["y"] == alone["y"]


def test_intervals_stay_in_range():
    # Two items, 2 answers each, 1 and 1/2 correct: a redrawn mean can overstep 1.
    result = stratified_bootstrap({"a": [[True, True], [True, False]]})
    _, low, high = result["a"]
    assert 0.0 <= low <= high <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_resamples": 0}, "n_resamples must be at least 1"),
        ({"level": 1.0}, "level must lie strictly between 0 and 1"),
        ({"model": {"a": [0.5]}}, "stratum 'a' has 2 items but 1 model accuracies"),
        ({"model": {"b": [0.5]}}, "no model accuracies for stratum 'a'"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        stratified_bootstrap({"a": [[True], [False]]}, **kwargs)


def test_an_empty_stratum_key_is_refused():
    with pytest.raises(ValueError, match="must not be empty"):
        stratified_bootstrap({"": [[True]]})


@pytest.mark.parametrize(
    ("df", "quantile"),
    # Student's t, 97.5% point, from the printed tables.
    [(1, 12.7062), (2, 4.3027), (5, 2.5706), (19, 2.0930), (120, 1.9799), (5000, 1.9604)],
)
def test_students_t_quantile(df, quantile):
    assert t_quantile(0.975, df) == pytest.approx(quantile, abs=1e-4)
