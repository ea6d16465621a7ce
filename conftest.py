"""Fixtures shared by the whole suite."""

from pathlib import Path

import pytest
from django.conf import settings


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data in ../shared/data (CI has it there); tests never copy it into the repo."""
    path = Path(settings.TOMLAB_SHARED_DATA)
    if not path.is_dir():
        pytest.fail(f"shared data not found at {path}; set TOMLAB_SHARED_DATA")
    return path


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty cache: throttle counters (every test client comes
    from 127.0.0.1) and cached reports must not carry over from another test."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def researcher(db):
    from accounts.services import user_create_with_role

    return user_create_with_role(username="res", password="pw-res-123!", role="researcher")


@pytest.fixture
def rater(db):
    from accounts.services import user_create_with_role

    return user_create_with_role(username="rat", password="pw-rat-123!", role="rater")


@pytest.fixture
def annotator(db):
    from accounts.services import user_create_with_role

    return user_create_with_role(username="ann", password="pw-ann-123!", role="annotator")
