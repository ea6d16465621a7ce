"""The trained-baseline form starts from splits that hold works here, so its defaults
are never refused by its own check (the demo's film is a test work: train/dev would be)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.models import Benchmark, Work

pytestmark = pytest.mark.django_db


def _work(key: str, split: str, benchmark: str = Benchmark.TOM_IN_AMC) -> Work:
    return Work.objects.create(
        benchmark=benchmark, key=key, title=key, kind=Work.Kind.MOVIE, split=split
    )


def _initial(client) -> dict[str, object]:
    form = client.get(reverse("modeling:baseline-run-new")).context["form"]
    return {name: form[name].value() for name in ("train_split", "select_split", "eval_split")}


def test_only_test_works_make_every_split_default_test(client, researcher):
    _work("film", "test")
    _work("show", "train", Benchmark.TVSHOWGUESS)
    client.force_login(researcher)

    assert _initial(client) == {"train_split": "test", "select_split": "test", "eval_split": "test"}
    page = client.get(reverse("modeling:baseline-run-new")).content.decode()
    assert "test (ToM-in-AMC: 1, TVShowGuess: 0)" in page
    assert "train (ToM-in-AMC: 0, TVShowGuess: 1)" in page


def test_the_papers_splits_stay_the_defaults_where_they_hold_works(client, researcher):
    for key, split in (("a", "train"), ("b", "dev"), ("c", "test")):
        _work(key, split)
    client.force_login(researcher)

    assert _initial(client) == {"train_split": "train", "select_split": "dev", "eval_split": "dev"}
