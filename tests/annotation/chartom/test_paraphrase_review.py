"""Paraphrase review: accept or edit the model's description, with diff and distance."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.urls import reverse

from annotation.chartom import workflow
from annotation.chartom.paraphrase_review import (
    paraphrase_review_submit,
    paraphrase_review_take,
)
from annotation.chartom.workflow import WorkflowError
from annotation.models import FieldChange, Stage, TaskAssignment
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

DESCRIPTION = "Vautrin intends to win Eugene over so that his scheme can go ahead."


def waiting(make_construction, **kwargs):
    construction = make_construction(
        stage=Stage.PARAPHRASE,
        state="running",
        key_spans=[[0, 7]],
        key_note="he wants Eugene on his side",
        description=DESCRIPTION,
        **kwargs,
    )
    with transaction.atomic():
        locked = workflow.construction_lock(construction.pk)
        workflow.construction_advance(locked, Stage.PARAPHRASE_REVIEW)
    construction.refresh_from_db()
    return construction


def test_accepting_keeps_the_text_and_records_who_accepted(make_construction, annotator):
    construction = waiting(make_construction)
    slot = paraphrase_review_take(annotator=annotator)
    paraphrase_review_submit(
        assignment_id=slot.pk, annotator=annotator, text=f"  {DESCRIPTION}\r\n"
    )
    construction.refresh_from_db()
    assert construction.description == DESCRIPTION
    assert construction.stage == Stage.QUESTIONS
    slot.refresh_from_db()
    assert slot.answer["action"] == "accepted"
    assert slot.answer["edit_distance"] == 0 and slot.answer["diff"] == ""
    change = FieldChange.objects.get(construction=construction, field="description")
    assert (change.action, change.changed_by, change.new_value) == (
        "accepted",
        annotator,
        DESCRIPTION,
    )


def test_an_edit_stores_diff_distance_and_the_old_value(make_construction, annotator):
    construction = waiting(make_construction)
    slot = paraphrase_review_take(annotator=annotator)
    edited = "Vautrin intends to win Eugene over so that his criminal scheme can go ahead."
    paraphrase_review_submit(assignment_id=slot.pk, annotator=annotator, text=edited)
    construction.refresh_from_db()
    assert construction.description == edited
    slot.refresh_from_db()
    assert slot.answer["action"] == "edited"
    assert slot.answer["edit_distance"] == len("criminal ")
    assert slot.answer["diff"] == (
        "Vautrin intends to win Eugene over so that his {+criminal +}scheme can go ahead."
    )
    change = FieldChange.objects.get(construction=construction, field="description")
    assert (change.old_value, change.new_value, change.action) == (DESCRIPTION, edited, "edited")
    assert change.changed_by == annotator


def test_empty_text_replay_foreign_and_stale_slots_are_refused(make_construction, annotator):
    construction = waiting(make_construction)
    slot = paraphrase_review_take(annotator=annotator)
    with pytest.raises(WorkflowError, match="text: the description cannot be empty"):
        paraphrase_review_submit(assignment_id=slot.pk, annotator=annotator, text="  \n ")
    other = UserFactory(username="other", role="annotator")
    with pytest.raises(WorkflowError, match="no such task"):
        paraphrase_review_submit(assignment_id=slot.pk, annotator=other, text="Anything.")
    TaskAssignment.objects.filter(pk=slot.pk).update(
        taken_at=slot.taken_at - workflow.task_timeout() - timedelta(seconds=1)
    )
    with pytest.raises(WorkflowError, match="open too long"):
        paraphrase_review_submit(assignment_id=slot.pk, annotator=annotator, text="Anything.")
    slot = paraphrase_review_take(annotator=annotator)  # taken again, fresh clock
    paraphrase_review_submit(assignment_id=slot.pk, annotator=annotator, text="First answer.")
    with pytest.raises(WorkflowError, match="already submitted"):
        paraphrase_review_submit(assignment_id=slot.pk, annotator=annotator, text="Second.")
    construction.refresh_from_db()
    assert construction.description == "First answer."
    assert FieldChange.objects.filter(construction=construction, field="description").count() == 1


def test_screen_accept_button_and_edit(make_construction, client, annotator, rater):
    construction = waiting(make_construction)
    client.force_login(rater)
    assert (
        client.get(
            reverse("annotation:chartom-work", kwargs={"kind": "paraphrase_review"})
        ).status_code
        == 403
    )
    client.force_login(annotator)
    response = client.post(reverse("annotation:chartom-take", kwargs={"kind": "paraphrase_review"}))
    slot = TaskAssignment.objects.get(annotator=annotator)
    screen = reverse("annotation:chartom-paraphrase", kwargs={"assignment_id": slot.pk})
    assert response.url == screen
    page = client.get(screen)
    assert page.status_code == 200
    assert DESCRIPTION.encode() in page.content and b"he wants Eugene on his side" in page.content
    submit = reverse("annotation:chartom-paraphrase-submit", kwargs={"assignment_id": slot.pk})
    bad = client.post(submit, {"text": ""})
    assert bad.status_code == 422 and b"text: the description cannot be empty" in bad.content
    # "Accept" sends the model's text whatever the box holds.
    done = client.post(submit, {"accept": "1", "text": "ignored"})
    assert done.status_code == 302
    construction.refresh_from_db()
    assert construction.description == DESCRIPTION and construction.stage == Stage.QUESTIONS
    replay = client.post(submit, {"text": "Changed my mind."})
    assert replay.status_code == 409 and b"already submitted" in replay.content
    client.force_login(UserFactory(username="nosy", role="annotator"))
    assert client.get(screen).status_code == 404
    assert client.post(submit, {"text": "x"}).status_code == 404


def test_edit_through_the_view_shows_the_diff_after(make_construction, client, annotator):
    construction = waiting(make_construction)
    client.force_login(annotator)
    client.post(reverse("annotation:chartom-take", kwargs={"kind": "paraphrase_review"}))
    slot = TaskAssignment.objects.get(annotator=annotator)
    submit = reverse("annotation:chartom-paraphrase-submit", kwargs={"assignment_id": slot.pk})
    client.post(submit, {"text": DESCRIPTION.replace("win Eugene over", "charm Eugene")})
    construction.refresh_from_db()
    assert "charm Eugene" in construction.description
    page = client.get(reverse("annotation:chartom-paraphrase", kwargs={"assignment_id": slot.pk}))
    assert b"<del>win</del>" in page.content or b"<del>win Eugene over</del>" in page.content
    assert b"Submitted." in page.content
