"""scripts/bench_allocation.py (``make bench-allocation``) on the real data's structure.

The figures themselves are in docs/benchmarks.md; these tests hold what the bench is
built from (the strata it reads) and that a short run prints its table.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from metrics.allocation import BALANCED, UNIFORM

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_allocation.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_allocation", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    # Registered first: its dataclasses look their module up while being made.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_tombench_has_31_abilities_from_its_files(bench, shared_data):
    data = bench.tombench(shared_data / "tombench")
    assert len(data.sizes) == 31
    assert sum(data.sizes.values()) == 2860
    # The 100 items labelled "... Belief: Second-order beliefs" count under their first.
    assert data.sizes["Belief: Location false beliefs"] == 300
    assert min(data.sizes.values()) == 20 and max(data.sizes.values()) == 560


def test_tvshowguess_strata_and_accuracies_come_from_the_sheet(bench, shared_data):
    data = bench.tvshowguess(shared_data / "tvshowguess")
    # 149 masked speakers of friends.raw (2 sheet rows name a scene it lacks).
    assert data.sizes == {"direct": 38, "indirect": 30, "none": 81}
    # Real guesses right: direct 24 of 24, indirect 19 of 20, none 44 of 45.
    assert data.human == pytest.approx(
        {"direct": 24.5 / 25, "indirect": 19.5 / 21, "none": 44.5 / 46}
    )


def test_the_population_meets_the_stratum_accuracies(bench, shared_data):
    data = bench.tvshowguess(shared_data / "tvshowguess")
    population = bench.Population.of(data)
    keys = population.keys
    assert population.truth_human == pytest.approx([data.human[k] for k in keys], abs=1e-9)
    expected = [data.human[k] - data.model[k] for k in keys]
    assert population.truth_diff == pytest.approx(expected, abs=1e-9)


def test_a_study_spends_its_budget_as_the_design_says(bench, shared_data):
    data = bench.tvshowguess(shared_data / "tvshowguess")
    population = bench.Population.of(data)
    settings = bench.Settings(per_item=3, phase_one=2, in_flight=4, resamples=200)
    study = bench.Study.draw(population, data, settings, seed=1)
    for design in (UNIFORM, BALANCED):
        answers, correct = bench.run_study(design, population, data, settings, study)
        assert answers.sum() == 149 * 3
        assert (correct <= answers).all()
        assert answers.min() >= 2  # phase one
        if design == UNIFORM:
            assert (answers == 3).all()
        else:
            per_item = np.bincount(population.stratum, weights=answers)
            assert per_item.tolist() != np.bincount(population.stratum).dot(3).tolist()


def test_a_short_run_prints_the_table(shared_data):
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--studies",
            "3",
            "--processes",
            "1",
            "--resamples",
            "100",
            "--only",
            "tvshowguess",
        ],
        capture_output=True,
        text=True,
        env={"TOMLAB_SHARED_DATA": str(shared_data), "PATH": "/usr/bin:/bin"},
        check=True,
        timeout=120,
    )
    lines = done.stdout.splitlines()
    assert any(line.startswith("TVShowGuess: 149 items in 3 strata") for line in lines)
    for design in ("uniform", "balanced", "widest", "floor"):
        assert any(line.startswith(f"{design} ") for line in lines), design


def test_the_floor_is_the_designs_estimator_with_endless_answers(bench, shared_data):
    # The same study's items and run: the floor's half-widths sit below uniform's, on
    # human accuracy and on human - model (Newcombe's interval), stratum by stratum.
    data = bench.tvshowguess(shared_data / "tvshowguess")
    population = bench.Population.of(data)
    settings = bench.Settings(per_item=3, phase_one=2, in_flight=4, resamples=200)
    uniform = bench.measure(UNIFORM, population, data, settings, seed=4)
    floor = bench.floor(population, data, settings, seed=4)
    assert (floor.half_width < uniform.half_width).all()
    assert (floor.half_width > 0).all()
