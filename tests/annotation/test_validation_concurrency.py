"""Many annotators (and tabs) take validation slots at once: never over k, never twice.

Same method as tests/studies/test_concurrency.py: real threads, each with its own
database connection, released together behind a barrier. The PostgreSQL test exercises
the row locks of ``studies.assignment.items_assign_with_room``; SQLite serialises write
transactions (``BEGIN IMMEDIATE``), and the same invariants must hold there.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.models import Count

from annotation.dyntom.validation.rubrics import validation_defaults_ensure
from annotation.dyntom.validation.services import validation_batch_create, validation_stage_take
from annotation.models import ValidationAssignment, ValidationBatch, ValidationObject
from benchmarks.models import DynToMStage
from tests.factories import UserFactory
from tests.studies.test_concurrency import run_together

pytestmark = pytest.mark.django_db(transaction=True)

ON_POSTGRES = connection.vendor == "postgresql"
TRIALS = ("trial149", "trial210", "trial263")


def _batch(shared_data: Path, tmp_path: Path, k: int) -> ValidationBatch:
    for trial in TRIALS:
        (tmp_path / trial).symlink_to(shared_data / "dyntom" / trial)
    call_command("import_benchmark", "dyntom", str(tmp_path))
    validation_defaults_ensure()
    return validation_batch_create(
        name="load",
        stages=DynToMStage.objects.filter(work__key__in=TRIALS),
        kinds=["context", "trajectory", "scenario"],
        k=k,
    )


def _take(batch_id: int, user_id: int) -> int | None:
    # Load the rows in the thread, as a request would.
    batch = ValidationBatch.objects.get(pk=batch_id)
    user = get_user_model().objects.get(pk=user_id)
    vstage = validation_stage_take(batch=batch, annotator=user)
    return vstage.pk if vstage else None


def _check(batch: ValidationBatch, k: int) -> Counter:
    pairs = Counter(
        ValidationAssignment.objects.filter(object__batch=batch).values_list(
            "object_id", "annotator_id"
        )
    )
    assert pairs and max(pairs.values()) == 1, "an annotator got an object twice"
    per_object = ValidationObject.objects.filter(batch=batch).annotate(n=Count("assignments"))
    counts = Counter(o.n for o in per_object)
    assert max(counts) <= k, f"an object has more than k={k} annotators: {counts}"
    return counts


def _run(shared_data, tmp_path, *, annotators: int, tabs: int, k: int) -> Counter:
    batch = _batch(shared_data, tmp_path, k)
    users = [UserFactory(username=f"ann{i}", role="annotator") for i in range(annotators)]
    # Every annotator asks from several tabs at once, all released together.
    jobs = [lambda u=u: _take(batch.pk, u.pk) for u in users for _ in range(tabs)]
    _, errors = run_together(jobs)
    assert not errors, errors
    return _check(batch, k)


@pytest.mark.postgres
@pytest.mark.skipif(not ON_POSTGRES, reason="row locks are only meaningful on PostgreSQL")
def test_twenty_annotators_in_two_tabs_each_on_postgres(shared_data, tmp_path):
    # 3 stages x 4 slots = 12 stage-takes are needed; 40 requests race for them.
    counts = _run(shared_data, tmp_path, annotators=20, tabs=2, k=4)
    assert counts == Counter({4: 3 * 7}), "every object is full, none over k"


def test_annotators_at_once_on_sqlite_too(shared_data, tmp_path):
    counts = _run(shared_data, tmp_path, annotators=6, tabs=2, k=3)
    assert counts == Counter({3: 3 * 7})
