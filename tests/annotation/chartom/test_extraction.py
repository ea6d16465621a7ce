"""Key-note extraction: the qualification gate, spans with Unicode, replays, the screen."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.urls import reverse

from annotation.chartom import workflow
from annotation.chartom.extraction import extraction_submit, extraction_take
from annotation.chartom.workflow import WorkflowError
from annotation.models import (
    FieldChange,
    QualificationAttempt,
    QualificationSet,
    Stage,
    TaskAssignment,
)
from tests.factories import UserFactory
from tests.studies.test_concurrency import run_together

pytestmark = pytest.mark.django_db
ON_POSTGRES = connection.vendor == "postgresql"

CAFE = "cafe\u0301"
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"


def waiting(make_construction, **kwargs):
    """A construction whose extraction task is open."""
    construction = make_construction(stage=Stage.FILTER, state="running", **kwargs)
    with transaction.atomic():
        locked = workflow.construction_lock(construction.pk)
        workflow.construction_advance(locked, Stage.EXTRACT)
    construction.refresh_from_db()
    return construction


def span_of(text: str, fragment: str) -> list[int]:
    start = text.index(fragment)
    return [start, start + len(fragment)]


def test_extraction_stores_spans_and_key_note_with_the_annotator(make_construction, annotator):
    construction = waiting(make_construction)
    slot = extraction_take(annotator=annotator)
    assert slot.task.construction_id == construction.pk
    text = construction.note.note_text
    spans = [
        span_of(text, "so that the scheme he has in mind goes ahead"),
        span_of(text, "he wants Eugene on his side"),
    ]
    extraction_submit(assignment_id=slot.pk, annotator=annotator, spans=spans)
    construction.refresh_from_db()
    assert construction.stage == Stage.PARAPHRASE
    assert construction.key_note == (
        "he wants Eugene on his side so that the scheme he has in mind goes ahead"
    )  # separated by a space only: one fragment
    change = FieldChange.objects.get(construction=construction, field="key_note")
    assert change.changed_by == annotator and change.action == "extracted"
    slot.refresh_from_db()
    assert slot.submitted_at is not None and slot.answer["key_note"] == construction.key_note


def test_unicode_note_offsets_slice_the_right_text(make_construction, annotator):
    construction = waiting(make_construction)
    note = construction.note
    note.note_text = f"At the {CAFE} {FAMILY} Vautrin grins 😏 — he plots."
    note.save()
    slot = extraction_take(annotator=annotator)
    text = note.note_text
    spans = [span_of(text, f"{CAFE} {FAMILY}"), span_of(text, "he plots")]
    extraction_submit(assignment_id=slot.pk, annotator=annotator, spans=spans)
    construction.refresh_from_db()
    assert construction.key_spans == spans
    assert [text[s:e] for s, e in construction.key_spans] == [f"{CAFE} {FAMILY}", "he plots"]
    assert construction.key_note == f"{CAFE} {FAMILY} … he plots"


def test_a_split_character_is_refused_and_nothing_is_written(make_construction, annotator):
    construction = waiting(make_construction)
    note = construction.note
    note.note_text = f"At the {CAFE} Vautrin grins."
    note.save()
    slot = extraction_take(annotator=annotator)
    cut = note.note_text.index(CAFE) + 4  # between e and its accent
    with pytest.raises(WorkflowError, match=r"spans: fragment 1 .* cuts a character"):
        extraction_submit(assignment_id=slot.pk, annotator=annotator, spans=[[0, cut]])
    construction.refresh_from_db()
    slot.refresh_from_db()
    assert construction.key_spans == [] and construction.stage == Stage.EXTRACT
    assert slot.submitted_at is None
    assert not FieldChange.objects.filter(construction=construction, field="key_spans").exists()


def test_no_key_note_drops_the_construction(make_construction, annotator):
    construction = waiting(make_construction)
    slot = extraction_take(annotator=annotator)
    with pytest.raises(WorkflowError, match="not both"):
        extraction_submit(
            assignment_id=slot.pk, annotator=annotator, spans=[[0, 7]], no_key_note=True
        )
    extraction_submit(assignment_id=slot.pk, annotator=annotator, spans=[], no_key_note=True)
    construction.refresh_from_db()
    assert (construction.stage, construction.state) == (Stage.DROPPED, "done")


def test_replay_and_foreign_slot_are_refused(make_construction, annotator):
    construction = waiting(make_construction)
    other = UserFactory(username="other", role="annotator")
    slot = extraction_take(annotator=annotator)
    spans = [span_of(construction.note.note_text, "buttering them up")]
    with pytest.raises(WorkflowError, match="no such task in your queue"):
        extraction_submit(assignment_id=slot.pk, annotator=other, spans=spans)
    extraction_submit(assignment_id=slot.pk, annotator=annotator, spans=spans)
    changes = FieldChange.objects.filter(construction=construction).count()
    with pytest.raises(WorkflowError, match="already submitted"):
        extraction_submit(assignment_id=slot.pk, annotator=annotator, spans=[[0, 7]])
    construction.refresh_from_db()
    assert construction.key_note == "buttering them up"
    assert FieldChange.objects.filter(construction=construction).count() == changes


def test_a_timed_out_slot_is_refused(make_construction, annotator):
    construction = waiting(make_construction)
    slot = extraction_take(annotator=annotator)
    TaskAssignment.objects.filter(pk=slot.pk).update(
        taken_at=slot.taken_at - workflow.task_timeout() - timedelta(seconds=1)
    )
    with pytest.raises(WorkflowError, match="open too long"):
        extraction_submit(
            assignment_id=slot.pk,
            annotator=annotator,
            spans=[span_of(construction.note.note_text, "buttering them up")],
        )


def test_extraction_waits_for_qualification(make_construction, annotator):
    waiting(make_construction)
    qset = QualificationSet.objects.create(name="gold", threshold=0.8)
    with pytest.raises(WorkflowError, match="qualification trial"):
        extraction_take(annotator=annotator)
    QualificationAttempt.objects.create(qset=qset, annotator=annotator, score=0.9, passed=True)
    assert extraction_take(annotator=annotator) is not None


def test_two_annotators_never_get_the_same_task(make_construction):
    first = waiting(make_construction, note=0)
    second = waiting(make_construction, note=1)
    a = UserFactory(username="a1", role="annotator")
    b = UserFactory(username="b1", role="annotator")
    slot_a = extraction_take(annotator=a)
    slot_b = extraction_take(annotator=b)
    assert {slot_a.task.construction_id, slot_b.task.construction_id} == {first.pk, second.pk}
    assert extraction_take(annotator=UserFactory(username="c1", role="annotator")) is None
    assert extraction_take(annotator=a).pk == slot_a.pk  # a reload resumes


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not ON_POSTGRES, reason="row locks need PostgreSQL")
def test_annotators_racing_for_extractions_on_postgres(make_construction):
    for n in range(2):
        waiting(make_construction, note=n)
    users = [UserFactory(username=f"x{i}", role="annotator") for i in range(6)]
    results, errors = run_together([lambda u=u: extraction_take(annotator=u) for u in users])
    assert not errors
    taken = [r.task_id for r in results if r is not None]
    assert len(taken) == 2 and len(set(taken)) == 2


# --- the screen -------------------------------------------------------------------------


def test_screen_shows_the_note_and_submits_through_the_view(make_construction, client, annotator):
    construction = waiting(make_construction)
    client.force_login(annotator)
    work = reverse("annotation:chartom-work", kwargs={"kind": "extract"})
    page = client.get(work)
    assert page.status_code == 200 and b"1</strong> left" in page.content
    response = client.post(reverse("annotation:chartom-take", kwargs={"kind": "extract"}))
    slot = TaskAssignment.objects.get(annotator=annotator)
    screen = reverse("annotation:chartom-extract", kwargs={"assignment_id": slot.pk})
    assert response.url == screen
    page = client.get(screen)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Vautrin filled the glasses" in html and "Intentions" not in html
    assert 'data-s="0" data-e="7"' in html  # "Vautrin"
    submit = reverse("annotation:chartom-extract-submit", kwargs={"assignment_id": slot.pk})
    bad = client.post(submit, {"spans": json.dumps([[0, 999]])})
    assert bad.status_code == 422 and b"spans: fragment 1" in bad.content
    spans = [span_of(construction.note.note_text, "buttering them up")]
    done = client.post(submit, {"spans": json.dumps(spans)})
    assert done.status_code == 302
    assert done.url == work  # the queue is empty now
    construction.refresh_from_db()
    assert construction.key_note == "buttering them up"
    replay = client.post(submit, {"spans": json.dumps([[0, 7]])})
    assert replay.status_code == 409 and b"already submitted" in replay.content
    construction.refresh_from_db()
    assert construction.key_note == "buttering them up"


def test_without_javascript_fragments_are_typed(make_construction, client, annotator):
    construction = waiting(make_construction)
    client.force_login(annotator)
    client.post(reverse("annotation:chartom-take", kwargs={"kind": "extract"}))
    slot = TaskAssignment.objects.get(annotator=annotator)
    submit = reverse("annotation:chartom-extract-submit", kwargs={"assignment_id": slot.pk})
    client.post(submit, {"fragments": "buttering them up\nhe wants Eugene on his side"})
    construction.refresh_from_db()
    assert construction.key_note == "buttering them up … he wants Eugene on his side"


def test_next_task_opens_after_a_submit(make_construction, client, annotator):
    first = waiting(make_construction, note=0)
    waiting(make_construction, note=1)
    client.force_login(annotator)
    client.post(reverse("annotation:chartom-take", kwargs={"kind": "extract"}))
    slot = TaskAssignment.objects.get(annotator=annotator, task__construction=first)
    submit = reverse("annotation:chartom-extract-submit", kwargs={"assignment_id": slot.pk})
    response = client.post(
        submit, {"spans": json.dumps([span_of(first.note.note_text, "buttering them up")])}
    )
    following = TaskAssignment.objects.get(annotator=annotator, submitted_at__isnull=True)
    assert response.url == reverse(
        "annotation:chartom-extract", kwargs={"assignment_id": following.pk}
    )


def test_roles_and_foreign_slots(make_construction, client, annotator, rater):
    waiting(make_construction)
    slot = extraction_take(annotator=annotator)
    screen = reverse("annotation:chartom-extract", kwargs={"assignment_id": slot.pk})
    submit = reverse("annotation:chartom-extract-submit", kwargs={"assignment_id": slot.pk})
    assert client.get(screen).status_code == 302  # to the log-in page
    client.force_login(rater)
    assert client.get(screen).status_code == 403
    assert (
        client.get(reverse("annotation:chartom-work", kwargs={"kind": "extract"})).status_code
        == 403
    )
    client.force_login(UserFactory(username="someone", role="annotator"))
    assert client.get(screen).status_code == 404
    assert client.post(submit, {"spans": "[[0, 7]]"}).status_code == 404
    assert (
        client.get(reverse("annotation:chartom-work", kwargs={"kind": "nope"})).status_code == 404
    )
    # Another kind's screen does not open this slot either.
    paraphrase = reverse("annotation:chartom-paraphrase", kwargs={"assignment_id": slot.pk})
    client.force_login(annotator)
    assert client.get(paraphrase).status_code == 404


def test_unqualified_annotator_is_sent_to_the_trial(make_construction, client, annotator):
    waiting(make_construction)
    QualificationSet.objects.create(name="gold", threshold=0.8)
    client.force_login(annotator)
    page = client.get(reverse("annotation:chartom-work", kwargs={"kind": "extract"}))
    assert b'data-testid="not-qualified"' in page.content
    response = client.post(
        reverse("annotation:chartom-take", kwargs={"kind": "extract"}), follow=True
    )
    assert b"Pass the qualification trial" in response.content
    assert not TaskAssignment.objects.exists()


def test_a_stale_slot_on_the_screen_says_it_went_back(make_construction, client, annotator):
    construction = waiting(make_construction)
    slot = extraction_take(annotator=annotator)
    TaskAssignment.objects.filter(pk=slot.pk).update(
        taken_at=slot.taken_at - workflow.task_timeout() - timedelta(seconds=1)
    )
    client.force_login(annotator)
    page = client.get(reverse("annotation:chartom-extract", kwargs={"assignment_id": slot.pk}))
    assert page.status_code == 200 and b"went back to the queue" in page.content
    assert b'data-testid="submit"' not in page.content
    submit = reverse("annotation:chartom-extract-submit", kwargs={"assignment_id": slot.pk})
    spans = [span_of(construction.note.note_text, "buttering them up")]
    refused = client.post(submit, {"spans": json.dumps(spans)})
    assert refused.status_code == 422 and b"open too long" in refused.content
    construction.refresh_from_db()
    assert construction.key_note == "" and construction.stage == Stage.EXTRACT
    # Taking again resumes the same task with a fresh clock.
    response = client.post(reverse("annotation:chartom-take", kwargs={"kind": "extract"}))
    again = TaskAssignment.objects.get(annotator=annotator)
    assert response.url.endswith(f"/extract/{again.pk}/")
