"""The rater's reads through common.compiled_queries give what the querysets give.

``rater_open_assignment`` and ``rater_assignment`` run querysets compiled once per
connection (issue 17: compiling cost more CPU than the rest of the scene page). Here
the compiled path is compared, object by object and field by field, with the same
queryset run by Django, on the database the suite runs on (SQLite converts datetimes
and JSON itself, PostgreSQL does not: both paths must agree on each).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import Model
from django.db.transaction import TransactionManagementError
from django.test import Client
from django.utils import timezone

from common.compiled_queries import CompiledQuery, update_where
from studies.models import Assignment, StudyWork
from studies.scene import services as scene_services
from tests.studies.test_rater_views import current, invite, to_scenes, url


def _graph(obj: Model, path: str = "") -> dict[str, object]:
    """Every loaded field of ``obj`` and of the related objects loaded with it."""
    values = {f"{path}{name}": value for name, value in vars(obj).items() if name != "_state"}
    for name, related in obj._state.fields_cache.items():
        values |= _graph(related, f"{path}{name}.")
    return values


@pytest.fixture
def at_scene(live_study):
    participant = invite(live_study)
    client = Client()
    to_scenes(client, participant)
    client.get(url("start", participant))  # starts the scene's clock: datetimes to convert
    # A perturbed-looking name map, so a JSON column has something in it.
    StudyWork.objects.filter(study=live_study).update(name_map={"Ross": "Dale", "Rachel": "Mia"})
    return participant, current(participant)


@pytest.mark.django_db
def test_open_assignment_is_what_the_queryset_gives(at_scene):
    participant, _ = at_scene
    by_token = scene_services.rater_open_assignment(token=participant.token)
    by_participant = scene_services.rater_open_assignment(participant=participant)
    (expected,) = scene_services._open_scene_assignments(participant__token=participant.token)

    assert _graph(by_token) == _graph(expected)
    assert _graph(by_participant) == _graph(expected)
    graph = _graph(by_token)
    # The fields that need a converter on one database or the other came through typed.
    assert graph["session.study_work.name_map"] == {"Ross": "Dale", "Rachel": "Mia"}
    assert graph["first_shown_at"] is not None and graph["first_shown_at"] <= timezone.now()
    assert graph["session_total"] == expected.session.assignments.count() > 1
    assert {"participant", "session", "study_item"} <= set(by_token._state.fields_cache)


@pytest.mark.django_db
def test_other_values_other_rows(at_scene, live_study):
    participant, assignment = at_scene
    other = invite(live_study, "other rater")
    to_scenes(Client(), other)
    mine = scene_services.rater_open_assignment(token=participant.token)
    theirs = scene_services.rater_open_assignment(token=other.token)
    assert mine.pk == assignment.pk and mine.participant_id == participant.pk
    assert theirs.participant_id == other.pk and theirs.pk != mine.pk
    assert scene_services.rater_open_assignment(token="no-such-token") is None

    Assignment.objects.filter(participant=participant).update(status="submitted")
    assert scene_services.rater_open_assignment(token=participant.token) is None
    assert scene_services.rater_open_assignment(token=other.token).pk == theirs.pk


@pytest.mark.django_db(transaction=True)
def test_rater_assignment_with_and_without_lock(at_scene, live_study):
    participant, assignment = at_scene
    expected = scene_services._rater_assignments(lock=False, pk=assignment.pk).get()
    plain = scene_services.rater_assignment(assignment_id=assignment.pk, token=participant.token)
    assert _graph(plain) == _graph(expected)
    with transaction.atomic():
        locked = scene_services.rater_assignment(
            assignment_id=assignment.pk, participant=participant, lock=True
        )
    assert _graph(locked) == _graph(expected)

    stranger = invite(live_study, "stranger")
    with pytest.raises(scene_services.AssignmentNotFound):
        scene_services.rater_assignment(assignment_id=assignment.pk, token=stranger.token)
    with pytest.raises(scene_services.AssignmentNotFound):
        scene_services.rater_assignment(assignment_id=assignment.pk, participant=stranger)
    if connection.features.has_select_for_update:
        with pytest.raises(TransactionManagementError):
            scene_services.rater_assignment(
                assignment_id=assignment.pk, participant=participant, lock=True
            )


@pytest.mark.django_db
def test_a_slot_the_query_does_not_use_is_refused(live_study):
    query = CompiledQuery(lambda token: Assignment.objects.all()[:1], token=str)
    with pytest.raises(ValueError, match="token"):
        query.first(token="x")


@pytest.mark.django_db
def test_update_where_writes_and_matches_what_the_orm_does(at_scene):
    """The rater's per-scene UPDATEs skip the queryset: the values written (a datetime,
    JSON, a choice) read back as the ORM wrote them, and the compare-and-set matches
    the stored datetime exactly (SQLite compares its own text form of it)."""
    _, assignment = at_scene
    seen = Assignment.objects.get(pk=assignment.pk).last_event_at
    later = seen + timedelta(seconds=3)
    version = {"names": "original", "seed": 7}

    assert (
        update_where(Assignment, {"last_event_at": later}, pk=assignment.pk, last_event_at=seen)
        == 1
    )
    # The compare-and-set misses once another event moved the clock.
    assert update_where(Assignment, {"active_ms": 9}, pk=assignment.pk, last_event_at=seen) == 0
    assert Assignment.objects.filter(pk=assignment.pk, last_event_at=later).exists()
    assert (
        update_where(
            Assignment,
            {"version": version, "status": Assignment.Status.SUBMITTED, "submitted_at": later},
            pk=assignment.pk,
            status=Assignment.Status.ASSIGNED,
            submitted_at=None,
        )
        == 1
    )
    assert update_where(Assignment, {"active_ms": 9}, pk=assignment.pk, submitted_at=None) == 0
    row = Assignment.objects.get(pk=assignment.pk)
    assert (row.version, row.status, row.submitted_at, row.active_ms) == (
        version,
        "submitted",
        later,
        assignment.active_ms,
    )
    assert Assignment.objects.filter(submitted_at__gte=later, version__seed=7).count() == 1


@pytest.mark.django_db
def test_the_answer_paths_statements_are_prepared_on_postgresql(at_scene):
    """The scene page's read and its clock's UPDATE are bound on the server, so
    PostgreSQL prepares them (issue 31: half of its CPU per scene was parsing and
    planning them again); Django's own queries stay unprepared."""
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's")
    participant, _ = at_scene
    client = Client()
    for _ in range(8):
        assert client.get(url("start", participant)).status_code == 200
    list(Assignment.objects.filter(participant=participant))
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any(s.startswith('SELECT "studies_assignment"."id"') and "$1" in s for s in prepared)
    assert any(s.startswith('UPDATE "studies_assignment" SET "active_ms" = $1') for s in prepared)
    assert not any("studies_assignment" in s and 'participant_id" = $1' in s for s in prepared)
