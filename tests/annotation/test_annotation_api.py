"""Issue 49 item 6: the annotation API. DynToM validation batches (objects with their
slots, decisions), DynToM generation jobs (stages) and CharToM-QA construction batches
(tasks with answers, the page's exports), read-only, for researchers of the workspace.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.utils import timezone

from accounts.services import user_create_with_role
from accounts.workspaces import workspace_create
from annotation.chartom import exports_board
from annotation.models import (
    AcceptedSet,
    AnnotationTask,
    BookText,
    Construction,
    DecisionRule,
    FieldChange,
    GeneratedStage,
    GenerationJob,
    NoteBatch,
    ReaderNote,
    Rubric,
    TaskAssignment,
    TaskKind,
    ValidationAssignment,
    ValidationBatch,
    ValidationDecision,
    ValidationObject,
    ValidationScore,
    ValidationStage,
)
from modeling.models import Backend
from tests.factories import generation_job

pytestmark = pytest.mark.django_db

API = "/api/annotation"


@pytest.fixture
def rows(researcher, annotator):
    """One of each, in the Default workspace, made straight in the database."""
    backend = Backend.objects.create(name="gen", kind=Backend.Kind.OPENAI, default_model="m")
    job = generation_job(
        backend,
        status=GenerationJob.Status.SUCCEEDED,
        progress_done=4,
        progress_total=4,
    )
    stage = GeneratedStage.objects.create(
        job=job,
        index=1,
        status=GeneratedStage.Status.DISCARDED,
        scenario_count=4,
        location="a library",
        decided_by=researcher,
        decided_at=timezone.now(),
        decision_reason="the dialogue repeats itself",
    )
    batch = ValidationBatch.objects.create(name="round 1", k=2, kinds=["scenario"])
    vstage = ValidationStage.objects.create(
        batch=batch, position=1, generated=stage, label="job 1 stage 1"
    )
    obj = ValidationObject.objects.create(
        batch=batch, vstage=vstage, kind="scenario", ref="1", position=1, label="scenario 1", k=2
    )
    rubric = Rubric.objects.create(
        kind="scenario", version=1, criteria=[{"key": "consistency", "scale": "likert5"}]
    )
    slot = ValidationAssignment.objects.create(
        object=obj, vstage=vstage, annotator=annotator, rubric=rubric, submitted_at=timezone.now()
    )
    ValidationScore.objects.create(assignment=slot, criterion="consistency", value=3)
    rule = DecisionRule.objects.create(kind="scenario", version=2, spec={})
    ValidationDecision.objects.create(
        object=obj,
        outcome="discard",
        reason="mean consistency 3.0 < 4.0",
        rule=rule,
        submitted=1,
        override_outcome="keep",
        override_reason="the annotator misread it",
        overridden_by=researcher,
        overridden_at=timezone.now(),
    )
    AcceptedSet.objects.create(batch=batch, version=1, object_ids=[obj.pk], stage_ids=[vstage.pk])

    book = BookText.objects.create(title="A book", text="He left. She stayed.", sha256="0" * 64)
    notes = NoteBatch.objects.create(name="notes 1", model="m")
    note = ReaderNote.objects.create(
        batch=notes,
        position=1,
        book=book,
        target_character="She",
        underlined_text="She stayed.",
        context="He left. She stayed.",
        note_text="=She wants to stay, because of him.",
    )
    construction = Construction.objects.create(
        note=note,
        dimension="desire",
        stage="extract",
        state=Construction.State.WAITING_HUMAN,
        filter_verdict="yes",
    )
    FieldChange.objects.create(
        construction=construction, field="filter_verdict", new_value="yes", model="m"
    )
    task = AnnotationTask.objects.create(
        kind=TaskKind.EXTRACT, batch=notes, construction=construction, k=1, position=1
    )
    TaskAssignment.objects.create(
        task=task,
        annotator=annotator,
        taken_at=timezone.now(),
        submitted_at=timezone.now(),
        seconds=12.5,
        answer={"spans": [[1, 5]]},
    )
    return {"job": job, "batch": batch, "object": obj, "notes": notes, "task": task}


@pytest.fixture
def api(client, researcher):
    client.force_login(researcher)
    return client


def test_validation_batches_objects_and_decisions(api, rows, django_assert_max_num_queries):
    batch = rows["batch"]
    listed = api.get(f"{API}/validation-batches/").json()
    assert listed["count"] == 1
    assert listed["results"][0] | {"created_at": None} == {
        "id": batch.pk,
        "name": "round 1",
        "k": 2,
        "kinds": ["scenario"],
        "stage_count": 1,
        "object_count": 1,
        "decided_count": 1,
        "created_by": None,
        "created_at": None,
    }
    detail = api.get(f"{API}/validation-batches/{batch.pk}/").json()
    assert detail["progress"] == [{"annotator": "ann", "submitted": 1, "assigned": 1}]
    assert detail["accepted_sets"][0]["version"] == 1

    with django_assert_max_num_queries(12):
        objects = api.get(f"{API}/validation-batches/{batch.pk}/objects/").json()
    (obj,) = objects["results"]
    assert (obj["stage"], obj["kind"], obj["ref"], obj["k"]) == (
        "job 1 stage 1",
        "scenario",
        "1",
        2,
    )
    (slot,) = obj["slots"]
    assert slot["annotator"] == "ann" and slot["scores"] == {"consistency": 3}
    assert slot["rubric_version"] == 1 and slot["submitted_at"]
    assert obj["decision"]["effective_outcome"] == "keep"

    (decision,) = api.get(f"{API}/validation-batches/{batch.pk}/decisions/").json()["results"]
    assert decision["object"] == rows["object"].pk
    assert (decision["outcome"], decision["reason"], decision["rule_version"]) == (
        "discard",
        "mean consistency 3.0 < 4.0",
        2,
    )
    assert (decision["override_outcome"], decision["overridden_by"]) == ("keep", "res")
    assert decision["effective_outcome"] == "keep"


def test_generation_jobs_and_stages(api, rows):
    job = rows["job"]
    (listed,) = api.get(f"{API}/generation-jobs/").json()["results"]
    assert listed["id"] == job.pk and listed["backend"] == "gen"
    # The pages' label: none of the stages is usable.
    assert listed["status_display"] == "succeeded: 0 of 1 stage usable"
    assert (listed["stage_total"], listed["usable_stages"]) == (1, 0)
    assert api.get(f"{API}/generation-jobs/{job.pk}/").json()["id"] == job.pk
    (stage,) = api.get(f"{API}/generation-jobs/{job.pk}/stages/").json()["results"]
    assert (stage["index"], stage["status"], stage["decided_by"]) == (1, "discarded", "res")
    assert stage["decision_reason"] == "the dialogue repeats itself"


def test_chartom_batches_tasks_and_exports(api, rows):
    notes = rows["notes"]
    (listed,) = api.get(f"{API}/chartom-batches/").json()["results"]
    assert listed["id"] == notes.pk
    assert (listed["note_count"], listed["construction_count"], listed["published_count"]) == (
        1,
        1,
        0,
    )
    detail = api.get(f"{API}/chartom-batches/{notes.pk}/").json()
    extract = next(row for row in detail["stages"] if row["stage"] == "extract")
    assert extract["total"] == 1 and extract["states"] == {"waiting_human": 1}

    (task,) = api.get(f"{API}/chartom-batches/{notes.pk}/tasks/").json()["results"]
    assert (task["kind"], task["construction"], task["closed"]) == (
        "extract",
        rows["task"].construction_id,
        False,
    )
    (slot,) = task["assignments"]
    assert slot["annotator"] == "ann" and slot["answer"] == {"spans": [[1, 5]]}

    # The page's three files, byte for byte.
    for name, expected, kind in (
        (
            "constructions.json",
            json.dumps(exports_board.batch_export_json(notes), ensure_ascii=False, indent=1),
            "application/json",
        ),
        ("constructions.csv", exports_board.constructions_csv(notes), "text/csv"),
        ("provenance.csv", exports_board.provenance_csv(notes), "text/csv"),
    ):
        response = api.get(f"{API}/chartom-batches/{notes.pk}/exports/{name}", HTTP_ACCEPT=kind)
        assert response.status_code == 200, name
        assert response["Content-Type"].startswith(kind)
        assert f'filename="chartom-batch-{notes.pk}-{name}"' in response["Content-Disposition"]
        assert response.content.decode() == expected
    rows_out = list(csv.DictReader(io.StringIO(exports_board.provenance_csv(notes))))
    assert rows_out and rows_out[0]["field"] == "filter_verdict"

    missing = api.get(f"{API}/chartom-batches/{notes.pk}/exports/provenance.json")
    assert missing.status_code == 404
    assert "no export provenance.json; choose" in missing.json()["detail"]


ENDPOINTS = (
    "validation-batches/",
    "validation-batches/{batch}/",
    "validation-batches/{batch}/objects/",
    "validation-batches/{batch}/decisions/",
    "generation-jobs/",
    "generation-jobs/{job}/",
    "generation-jobs/{job}/stages/",
    "chartom-batches/",
    "chartom-batches/{notes}/",
    "chartom-batches/{notes}/tasks/",
    "chartom-batches/{notes}/exports/constructions.csv",
)


def _urls(rows) -> list[str]:
    ids = {"batch": rows["batch"].pk, "job": rows["job"].pk, "notes": rows["notes"].pk}
    return [f"{API}/{path.format(**ids)}" for path in ENDPOINTS]


@pytest.mark.parametrize("role", ["rater", "annotator"])
def test_raters_and_annotators_get_403(client, rows, role, request):
    client.force_login(request.getfixturevalue(role))
    for url in _urls(rows):
        assert client.get(url).status_code == 403, url


def test_another_workspace_finds_nothing(client, rows):
    other = workspace_create(name="Other lab")
    outsider = user_create_with_role(
        username="outsider", password="pw-out-123!", role="researcher", workspace=other
    )
    client.force_login(outsider)
    for url in _urls(rows):
        response = client.get(url)
        if url.endswith(("-batches/", "-jobs/")):
            assert response.status_code == 200 and response.json()["count"] == 0, url
        else:
            assert response.status_code == 404, url


def test_writes_are_not_allowed(api, rows):
    batch = rows["batch"]
    assert api.post(f"{API}/validation-batches/", {}).status_code == 405
    assert api.delete(f"{API}/validation-batches/{batch.pk}/").status_code == 405
