"""Fixtures for studies: the real TVShowGuess Friends scenes as a live study."""

from __future__ import annotations

import pytest

from tests.generic_items import make_generic_benchmark
from tests.module_rows import build_friends


@pytest.fixture
def mini():
    """The demo's twelve mapped items (``tests.generic_items``): four abilities of three."""
    return make_generic_benchmark()


@pytest.fixture
def friends(db, shared_data, module_rows):
    """The Friends work from ../shared/data/tvshowguess (scenes, instances, annotations);
    the module's shared rows where it shares them (tests/module_rows.py)."""
    from benchmarks.models import Work

    if module_rows.shares("friends"):
        return Work.objects.get(pk=module_rows.get("friends"))
    return Work.objects.get(pk=build_friends(shared_data))


@pytest.fixture
def live_study(friends, researcher):
    """A live study over the Friends scenes: overlap 2, at least one rater who has not seen it."""
    from studies.services import study_create, study_go_live

    study = study_create(
        name="Friends guessing",
        benchmark="tvshowguess",
        works=[friends],
        overlap=2,
        min_unseen=1,
        created_by=researcher,
        instructions="Guess who speaks.",
    )
    return study_go_live(study=study)
