"""Fixtures shared by the whole suite."""

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from tests.llm_server import LLMTestServer
from tests.module_rows import ModuleRows, NoModuleRows, is_transactional

# The module transactions open in this process: at most one, as pytest runs one module
# at a time (tests/module_rows.py).
_OPEN_MODULE_ROWS: list[ModuleRows] = []


def pytest_configure(config) -> None:
    """Fewer cyclic garbage collections in each test process.

    A test process holds a large heap (Django, the app, torch and transformers) and
    allocates quickly; at Python's default thresholds (700, 10, 10) it collected about
    8,000 times in 268 tests, 6-7 % of its CPU. What is alive after start-up is frozen
    out of the collector's walks and generation 0 waits for 50,000 allocations: about
    300 collections, 5-8 % less CPU (docs/testing.md, "Garbage collection"). Cycles are
    still collected; the processes the suite starts keep Python's defaults."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data in ../shared/data (CI has it there); tests never copy it into the repo."""
    path = Path(settings.TOMLAB_SHARED_DATA)
    if not path.is_dir():
        pytest.fail(f"shared data not found at {path}; set TOMLAB_SHARED_DATA")
    return path


@pytest.fixture(scope="module", autouse=True)
def _module_rows(request) -> Iterator[ModuleRows | NoModuleRows]:
    """The rows a module shares (``pytest.mark.module_rows``), built once for its tests."""
    marker = request.node.get_closest_marker("module_rows")
    if marker is None:
        yield NoModuleRows()
        return
    request.getfixturevalue("django_db_setup")
    rows = ModuleRows(request.getfixturevalue("django_db_blocker"))
    _OPEN_MODULE_ROWS.append(rows)
    try:
        rows.open(marker.args, request.getfixturevalue("shared_data"))
        yield rows
    finally:
        rows.close()
        _OPEN_MODULE_ROWS.remove(rows)


@pytest.fixture(autouse=True)
def _no_module_transaction_under_a_committing_test(request) -> None:
    """A transactional test must commit: a module transaction left open would hold its
    rows back from the live server, the worker and the other processes, so it ends here."""
    if _OPEN_MODULE_ROWS and is_transactional(request):
        for rows in _OPEN_MODULE_ROWS:
            rows.close()


@pytest.fixture
def module_rows(_module_rows: ModuleRows | NoModuleRows) -> ModuleRows | NoModuleRows:
    """This module's shared rows: ``module_rows.shares(name)`` then ``.get(name)``."""
    return _module_rows


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
