"""studies 0003/0004 turn scene rows into generic study items without losing any row.

The migrations run forward only, on an empty database of the suite's engine made for
this test: migrating the suite's own database back from the latest state and forward
again re-rendered every later migration's models twice (44 s of a worker).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import IntegrityError, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone

BEFORE = [
    ("studies", "0002_study_open_join"),
    ("benchmarks", "0003_speaker_annotation_guess_qualifiers"),
]
AFTER = [("studies", "0004_choice_studies")]
ALIAS = "migration_test"


@pytest.fixture
def empty_database(tmp_path: Path, django_db_blocker) -> Iterator[str]:
    """A connection alias to a new, empty database of the suite's engine."""
    default = connections.settings["default"]
    settings = copy.deepcopy(default)
    server = None
    if default["ENGINE"].endswith("sqlite3"):
        settings["NAME"] = str(tmp_path / "migrations.sqlite3")
    else:
        import psycopg

        # Named after this process, so two suites on one server never share it.
        settings["NAME"] = f"tomlab_migrations_{os.getpid()}"
        server = "postgresql://{USER}@{HOST}:{PORT}/postgres".format(**default)
        with psycopg.connect(server, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {settings['NAME']} WITH (FORCE)")
            c.execute(f"CREATE DATABASE {settings['NAME']}")
    connections.settings[ALIAS] = settings
    try:
        with django_db_blocker.unblock():
            yield ALIAS
    finally:
        connections[ALIAS].close()
        del connections[ALIAS]
        del connections.settings[ALIAS]
        if server is not None:
            with psycopg.connect(server, autocommit=True) as c:
                c.execute(f"DROP DATABASE IF EXISTS {settings['NAME']} WITH (FORCE)")


def _executor(connection) -> MigrationExecutor:
    """An executor over the full history: the squashed migrations a new database takes
    would hide the steps this test migrates to (their ``replaces``)."""
    executor = MigrationExecutor(connection)
    executor.loader = MigrationLoader(connection, replace_migrations=False)
    return executor


def _migrate(alias: str, targets):
    connection = connections[alias]
    _executor(connection).migrate(targets)
    return _executor(connection).loader.project_state(targets).apps


def test_scene_study_rows_survive_the_generalisation(empty_database):
    db = empty_database
    old = _migrate(db, BEFORE)

    def rows(app: str, model: str):
        return old.get_model(app, model).objects.using(db)

    work = rows("benchmarks", "Work").create(
        benchmark="tvshowguess", key="friends", title="Friends"
    )
    scene = rows("benchmarks", "Scene").create(
        work=work, source_id="01x01 1", position=0, part="testing"
    )
    ross = rows("benchmarks", "Character").create(work=work, name="Ross")
    instance = rows("benchmarks", "SpeakerInstance").create(
        scene=scene, code="P0", gold_character=ross
    )
    study = rows("studies", "Study").create(name="Old", benchmark="tvshowguess")
    sw = rows("studies", "StudyWork").create(study=study, work=work)
    ss = rows("studies", "StudyScene").create(
        study=study, study_work=sw, scene=scene, held_back=False
    )
    p = rows("studies", "Participant").create(study=study, token="t" * 43)
    session = rows("studies", "WorkSession").create(participant=p, study_work=sw, seen=True, seed=7)
    sa = rows("studies", "SceneAssignment").create(
        participant=p,
        session=session,
        study_scene=ss,
        position=0,
        seen=True,
        status="submitted",
        total_ms=1234,
        submitted_at=timezone.now(),
    )
    rows("studies", "Guess").create(assignment=sa, instance=instance, answer="Ross", correct=True)
    rows("studies", "HistoryView").create(session=session, where="panel", scene_assignment=sa)

    new = _migrate(db, AFTER)

    def now(model: str):
        return new.get_model("studies", model).objects.using(db)

    item = now("StudyItem").get()
    assert (item.pk, item.scene_id, item.qa_item_id, item.stage_id) == (ss.pk, scene.pk, None, None)
    a = now("Assignment").get()
    assert (a.pk, a.study_item_id, a.status, a.total_ms) == (sa.pk, ss.pk, "submitted", 1234)
    guess = now("Guess").get()
    assert (guess.assignment_id, guess.answer, guess.correct) == (sa.pk, "Ross", True)
    assert now("HistoryView").get().assignment_id == sa.pk
    # The quota's last line of defence is back under its new name.
    with pytest.raises(IntegrityError), transaction.atomic(using=db):
        now("Assignment").create(
            participant_id=p.pk, session_id=session.pk, study_item_id=ss.pk, position=1, seen=True
        )
