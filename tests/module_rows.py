"""Rows the database tests of one module share: built once per module, not once per test.

A module asks for them with a marker, after ``django_db``::

    pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("dyntom_stages")]

The root conftest then opens one transaction when the module's first test starts, builds
the named rows in it (in the order given), and rolls it back when pytest leaves the
module. Each test still runs in its own savepoint inside that transaction (pytest-django's
``db``), so what a test writes is gone before the next one; only the shared rows stay.
This is Django's ``TestCase.setUpTestData`` for function-style tests. The fixtures that
return the rows (``friends``, ``dyntom_stages``…) take them from here when the module
shares them, and build them in the test's own transaction when it does not.

Every database test of a marked module sees the shared rows, whether or not it asks for
them, so a test there must not need an empty table.

Transactional tests (live servers, Celery workers, other processes) need committed rows,
which a transaction left open cannot give them: before such a test runs, the module's
transaction is rolled back and closed, and the module's later tests build their rows
themselves. pytest-django runs every ``db`` test before every transactional one, so
this happens only where a module mixes both and xdist hands a worker the transactional
test first.
"""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.db import transaction


def build_friends(shared_data: Path) -> int:
    """The Friends work from ../shared/data/tvshowguess (scenes, instances, annotations)."""
    from benchmarks.models import Work

    call_command(
        "import_benchmark",
        "tvshowguess",
        str(shared_data / "tvshowguess" / "friends.raw"),
        "--no-progress",
        verbosity=0,
        stdout=StringIO(),
        stderr=StringIO(),
    )
    return Work.objects.get(benchmark="tvshowguess").pk


def build_dyntom_stages(shared_data: Path) -> None:
    """The 24 real DynToM stages from ../shared/data/dyntom (test split)."""
    call_command(
        "import_benchmark",
        "dyntom",
        str(shared_data / "dyntom"),
        "--split",
        "test",
        verbosity=0,
        stdout=StringIO(),
        stderr=StringIO(),
    )


def build_dyntom_runs(shared_data: Path) -> list[int]:
    """Two imported runs over the DynToM stages (``dyntom_stages`` must come first)."""
    from tests.reports.test_views import make_dyntom_run

    return [
        make_dyntom_run("vanilla gpt", wrong_every=3, model="gpt-test").pk,
        make_dyntom_run("cot llama", wrong_every=2, model="llama-test").pk,
    ]


def build_demo(shared_data: Path) -> str:
    """``load_demo``: the demo's works, runs, studies and annotation work; what it printed."""
    out = StringIO()
    call_command("load_demo", stdout=out, stderr=StringIO())
    return out.getvalue()


BUILDERS: dict[str, Callable[[Path], Any]] = {
    "friends": build_friends,
    "dyntom_stages": build_dyntom_stages,
    "dyntom_runs": build_dyntom_runs,
    "demo": build_demo,
}


def register_builder(name: str) -> Callable[[Callable[[Path], Any]], Callable[[Path], Any]]:
    """Add a builder that only one module needs, defined in that module:
    ``@register_builder("validation_scored")`` above ``def build(shared_data): ...``."""

    def register(builder: Callable[[Path], Any]) -> Callable[[Path], Any]:
        if BUILDERS.get(name, builder) is not builder:
            raise ValueError(f"module_rows: a builder named {name!r} exists already")
        BUILDERS[name] = builder
        return builder

    return register


class ModuleRows:
    """One module's transaction and what its builders returned."""

    def __init__(self, blocker) -> None:
        self._blocker = blocker
        self._atomic = None
        self._built: dict[str, Any] = {}

    @property
    def alive(self) -> bool:
        return self._atomic is not None

    def open(self, names: tuple[str, ...], shared_data: Path) -> None:
        unknown = [name for name in names if name not in BUILDERS]
        if unknown:
            raise ValueError(f"module_rows: no builder named {unknown}; known: {sorted(BUILDERS)}")
        with self._blocker.unblock():
            atomic = transaction.atomic()
            # As TestCase marks its class-wide atomics: code under test may open a
            # durable atomic block inside the test's transaction.
            atomic._from_testcase = True
            atomic.__enter__()
            self._atomic = atomic
            for name in names:
                self._built[name] = BUILDERS[name](shared_data)

    def close(self) -> None:
        if self._atomic is None:
            return
        atomic, self._atomic = self._atomic, None
        self._built.clear()
        with self._blocker.unblock():
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)

    def shares(self, name: str) -> bool:
        return self.alive and name in self._built

    def get(self, name: str) -> Any:
        return self._built[name]


class NoModuleRows:
    """What an unmarked module gets: nothing shared, every fixture builds its own."""

    alive = False

    def shares(self, name: str) -> bool:
        return False

    def close(self) -> None:
        pass


def is_transactional(request) -> bool:
    """Whether this test commits (pytest-django's own rule)."""
    marker = request.node.get_closest_marker("django_db")
    if marker and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")):
        return True
    return "transactional_db" in request.fixturenames or "live_server" in request.fixturenames
