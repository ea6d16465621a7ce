"""Fixtures shared by the whole suite."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from tests.llm_server import LLMTestServer


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


@pytest.fixture(scope="session")
def llm_server_session() -> Iterator[LLMTestServer]:
    """The loopback OpenAI-compatible server (tests/llm_server.py), one per test session."""
    with LLMTestServer() as server:
        yield server


@pytest.fixture
def llm_server(llm_server_session: LLMTestServer) -> Iterator[LLMTestServer]:
    """The loopback server, reset before each test (script, counts, responder)."""
    llm_server_session.wait_idle()
    llm_server_session.reset()
    llm_server_session.fixed_latency = 0.0
    yield llm_server_session
    llm_server_session.reset()
