"""Fixtures for studies: the real TVShowGuess Friends scenes as a live study."""

from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.fixture
def friends(db, shared_data):
    """The Friends work from ../shared/data/tvshowguess (scenes, instances, annotations)."""
    call_command(
        "import_benchmark", "tvshowguess", str(shared_data / "tvshowguess" / "friends.raw")
    )
    from benchmarks.models import Work

    return Work.objects.get(benchmark="tvshowguess")


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
