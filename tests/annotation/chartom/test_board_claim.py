"""Taking a task is one atomic claim per annotator and kind (issue 26, item 10).

An annotator holds at most one open task of a kind: the "take" button gives back the
open one. Ten simultaneous clicks under load once gave one annotator six extraction
tasks: each request looked for an open task before any of them had made one, then
each claimed a different task. Here 20 takes of one annotator arrive at once, each
through the view in its own thread with its own database connection.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from annotation.chartom import workflow
from annotation.models import Stage, TaskAssignment
from tests.factories import UserFactory
from tests.studies.test_concurrency import run_together

pytestmark = pytest.mark.django_db(transaction=True)

DIMENSIONS = ("belief", "intention", "emotion", "desire")


def waiting_extractions(make_construction) -> int:
    """Eight constructions (two notes, four dimensions) waiting for key-note extraction."""
    for note in (0, 1):
        for dimension in DIMENSIONS:
            construction = make_construction(
                stage=Stage.FILTER, state="running", note=note, dimension=dimension
            )
            with transaction.atomic():
                locked = workflow.construction_lock(construction.pk)
                workflow.construction_advance(locked, Stage.EXTRACT)
    return 2 * len(DIMENSIONS)


def test_twenty_simultaneous_takes_give_one_annotator_one_task(make_construction):
    waiting_extractions(make_construction)
    annotator = UserFactory(username="clicker", role="annotator")
    other = UserFactory(username="other", role="annotator")
    logged_in = Client()
    logged_in.force_login(annotator)
    url = reverse("annotation:chartom-take", kwargs={"kind": "extract"})

    def click() -> str:
        client = Client()
        client.cookies = logged_in.cookies
        response = client.post(url)
        assert response.status_code == 302, response.status_code
        return response["Location"]

    locations, errors = run_together([click] * 20)

    assert not errors, errors[:3]
    held = TaskAssignment.objects.filter(annotator=annotator, submitted_at__isnull=True)
    assert held.count() == 1
    # Every click was sent to that one task's screen.
    screen = reverse("annotation:chartom-extract", kwargs={"assignment_id": held.get().pk})
    assert set(locations) == {screen}
    # The other seven are still free for someone else.
    other_client = Client()
    other_client.force_login(other)
    assert other_client.post(url).status_code == 302
    assert TaskAssignment.objects.filter(annotator=other).count() == 1
