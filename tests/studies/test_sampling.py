"""Choosing a study's scenes: stratified samples are deterministic and fill each stratum."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from studies.scene.sampling import ALL, BY_GENRE, BY_SPEAKERS, SceneRow, sample_scenes, strata


def _rows() -> list[SceneRow]:
    """Three works of two genres (one without any), 1-4 masked speakers per scene."""
    rows = []
    scene_id = 0
    for work, genres, n in [
        ("alien", ("Horror", "Sci-Fi"), 12),
        ("heat", ("Crime",), 7),
        ("x", (), 3),
    ]:
        for position in range(n):
            scene_id += 1
            rows.append(SceneRow(scene_id, work, position, genres, speakers=1 + position % 4))
    return rows


def test_all_keeps_every_scene_in_story_order():
    rows = _rows()
    shuffled = random.Random(1).sample(rows, len(rows))
    sample = sample_scenes(shuffled, by=ALL)
    assert sample.rows == sorted(rows, key=lambda r: (r.work_key, r.position))
    assert sample.counts == {"all": (22, 22)}


def test_stratified_by_genre_takes_the_per_stratum_size_or_the_whole_stratum():
    sample = sample_scenes(_rows(), by=BY_GENRE, per_stratum=5, seed=7)
    # The first listed genre is the stratum; a work without genres is "unknown".
    assert sample.counts == {"crime": (5, 7), "horror": (5, 12), "unknown": (3, 3)}
    by_work = Counter(r.work_key for r in sample.rows)
    assert by_work == {"alien": 5, "heat": 5, "x": 3}
    # Story order within the sample.
    assert sample.rows == sorted(sample.rows, key=lambda r: (r.work_key, r.position))


def test_stratified_by_speakers_counts_each_stratum():
    rows = _rows()
    available = Counter(r.speakers for r in rows)
    sample = sample_scenes(rows, by=BY_SPEAKERS, per_stratum=4, seed=3)
    assert list(sample.counts) == ["1", "2", "3", "4"]  # numeric order
    for speakers, (chosen, total) in sample.counts.items():
        assert total == available[int(speakers)]
        assert chosen == min(4, total)
    assert Counter(r.speakers for r in sample.rows) == {
        int(k): v[0] for k, v in sample.counts.items()
    }


def test_same_seed_same_sample_whatever_the_input_order():
    rows = _rows()
    a = sample_scenes(rows, by=BY_SPEAKERS, per_stratum=2, seed=42)
    b = sample_scenes(list(reversed(rows)), by=BY_SPEAKERS, per_stratum=2, seed=42)
    assert [r.scene_id for r in a.rows] == [r.scene_id for r in b.rows]
    others = {
        tuple(r.scene_id for r in sample_scenes(rows, by=BY_SPEAKERS, per_stratum=2, seed=s).rows)
        for s in range(10)
    }
    assert len(others) > 1  # the seed matters


def test_a_new_stratum_does_not_reshuffle_the_others():
    rows = _rows()
    before = sample_scenes(rows, by=BY_GENRE, per_stratum=3, seed=5)
    extra = [SceneRow(100 + i, "zulu", i, ("Western",), 2) for i in range(4)]
    after = sample_scenes(rows + extra, by=BY_GENRE, per_stratum=3, seed=5)
    assert {r.scene_id for r in before.rows} < {r.scene_id for r in after.rows}


def test_strata_group_rows_and_bad_arguments_are_refused():
    groups = strata(_rows(), by=BY_GENRE)
    assert {k: len(v) for k, v in groups.items()} == {"crime": 7, "horror": 12, "unknown": 3}
    with pytest.raises(ValueError, match="per-stratum"):
        sample_scenes(_rows(), by=BY_GENRE, per_stratum=0)
    with pytest.raises(ValueError, match="unknown stratum"):
        sample_scenes(_rows(), by="decade", per_stratum=2)
