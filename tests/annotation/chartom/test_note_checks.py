"""Note checks (CharToM-QA section 4.1): seeded sampling of filtered notes, the shared
queue with two annotators per note, submits, and the screen through the real views."""

from __future__ import annotations

from collections import Counter

import pytest
from django.urls import reverse

from annotation.chartom import note_checks
from annotation.chartom.workflow import WorkflowError
from annotation.models import (
    AnnotationTask,
    Construction,
    NoteBatch,
    ReaderNote,
    TaskAssignment,
)
from tests.annotation.chartom.conftest import BOOK_TEXT
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def make_notes(book, *, kept: int, dropped: int = 0, name: str = "checks batch") -> NoteBatch:
    """A batch of ``kept`` notes the filter kept (one "yes") and ``dropped`` it did not."""
    batch = NoteBatch.objects.create(name=name)
    for i in range(kept + dropped):
        note = ReaderNote.objects.create(
            batch=batch,
            position=i + 1,
            book=book,
            target_character="Vautrin" if i % 2 else "Father Goriot",
            underlined_text="Vautrin filled the glasses",
            context=BOOK_TEXT,
            note_text=f"Our note {i}: he is keen to be liked and plans ahead.",
            context_0=BOOK_TEXT,
        )
        keep = i < kept
        Construction.objects.create(
            note=note,
            dimension="intention",
            filter_verdict="yes" if keep else "no",
            filter_reason="the note says what he plans" if keep else "nothing about intentions",
        )
        Construction.objects.create(
            note=note, dimension="emotion", filter_verdict="no", filter_reason="no feeling named"
        )
    return batch


def sampled_notes(batch: NoteBatch) -> list[int]:
    return list(
        AnnotationTask.objects.filter(kind="note_check", batch=batch)
        .order_by("position")
        .values_list("note_id", flat=True)
    )


@pytest.fixture
def second_annotator(db):
    return UserFactory(username="ann2", role="annotator")


# --- sampling --------------------------------------------------------------------------


def test_sample_takes_filtered_notes_only_seeded_and_reproducible(book):
    batch = make_notes(book, kept=8, dropped=4)
    assert note_checks.filtered_notes(batch).count() == 8
    assert note_checks.note_check_sample(batch=batch, size=5, seed=7) == 5
    first = sampled_notes(batch)
    kept_ids = set(note_checks.filtered_notes(batch).values_list("pk", flat=True))
    assert set(first) <= kept_ids
    assert all(t.k == 2 for t in AnnotationTask.objects.filter(kind="note_check"))
    # Same call again: nothing duplicated.
    assert note_checks.note_check_sample(batch=batch, size=5, seed=7) == 0
    assert sampled_notes(batch) == first
    # Same seed, larger size: the smaller sample is a prefix of the larger one.
    assert note_checks.note_check_sample(batch=batch, size=7, seed=7) == 2
    assert sampled_notes(batch)[:5] == first
    # Another batch with the same notes' shape and seed draws the same positions.
    other = make_notes(book, kept=8, dropped=4, name="twin")
    note_checks.note_check_sample(batch=other, size=5, seed=7)
    positions = {n.pk: n.position for n in ReaderNote.objects.filter(batch__in=[batch, other])}
    assert [positions[i] for i in sampled_notes(other)] == [positions[i] for i in first]


def test_size_above_the_filtered_notes_takes_them_all(book):
    batch = make_notes(book, kept=3, dropped=2)
    assert note_checks.note_check_sample(batch=batch, size=100, seed=0, k=2) == 3
    assert AnnotationTask.objects.filter(kind="note_check").count() == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": 0}, "size:"),
        ({"size": 3, "k": 0}, "k:"),
        ({"size": 3, "k": 11}, "k:"),
        ({"size": 3, "seed": -1}, "seed:"),
    ],
)
def test_bad_sample_settings_name_the_field_and_write_nothing(book, kwargs, message):
    batch = make_notes(book, kept=3)
    with pytest.raises(WorkflowError, match=message):
        note_checks.note_check_sample(batch=batch, **kwargs)
    assert not AnnotationTask.objects.exists()


def test_a_batch_without_kept_notes_is_refused(book):
    batch = make_notes(book, kept=0, dropped=3)
    with pytest.raises(WorkflowError, match="no note the filter kept"):
        note_checks.note_check_sample(batch=batch, size=3)


# --- taking and submitting -------------------------------------------------------------


def test_two_annotators_share_a_note_and_a_third_waits_for_the_next(
    book, annotator, second_annotator
):
    batch = make_notes(book, kept=2)
    note_checks.note_check_sample(batch=batch, size=2, seed=1, k=2)
    third = UserFactory(username="ann3", role="annotator")
    a = note_checks.note_check_take(annotator=annotator)
    b = note_checks.note_check_take(annotator=second_annotator)
    c = note_checks.note_check_take(annotator=third)
    assert a.task_id == b.task_id  # k = 2: both slots of the first note
    assert c.task_id != a.task_id  # the first note is full
    assert note_checks.note_check_take(annotator=annotator).pk == a.pk  # resumes, no new slot
    note_checks.note_check_submit(assignment_id=a.pk, annotator=annotator, label="accurate")
    note_checks.note_check_submit(
        assignment_id=b.pk, annotator=second_annotator, label="subjective"
    )
    assert AnnotationTask.objects.get(pk=a.task_id).closed
    a.refresh_from_db()
    assert a.answer == {"label": "accurate"} and a.submitted_at is not None
    judgements = note_checks.note_check_judgements()
    assert [(j.annotator_id, j.label) for j in judgements] == [
        (annotator.pk, "accurate"),
        (second_annotator.pk, "subjective"),
    ]


def test_submit_refuses_bad_labels_replays_and_other_peoples_slots(
    book, annotator, second_annotator
):
    batch = make_notes(book, kept=1)
    note_checks.note_check_sample(batch=batch, size=1)
    slot = note_checks.note_check_take(annotator=annotator)
    with pytest.raises(WorkflowError, match="label: must be one of"):
        note_checks.note_check_submit(assignment_id=slot.pk, annotator=annotator, label="great")
    with pytest.raises(WorkflowError, match="no such task in your queue"):
        note_checks.note_check_submit(
            assignment_id=slot.pk, annotator=second_annotator, label="accurate"
        )
    slot.refresh_from_db()
    assert slot.submitted_at is None and slot.answer == {}
    note_checks.note_check_submit(assignment_id=slot.pk, annotator=annotator, label="inappropriate")
    with pytest.raises(WorkflowError, match="already submitted"):
        note_checks.note_check_submit(assignment_id=slot.pk, annotator=annotator, label="accurate")
    slot.refresh_from_db()
    assert slot.answer == {"label": "inappropriate"}


# --- the screens -----------------------------------------------------------------------


@pytest.fixture
def checks_batch(book) -> NoteBatch:
    batch = make_notes(book, kept=3, dropped=1)
    note_checks.note_check_sample(batch=batch, size=3, seed=0, k=2)
    return batch


def test_raters_get_403_and_annotators_cannot_sample(client, rater, annotator, checks_batch):
    client.force_login(rater)
    assert client.get(reverse("annotation:chartom-checks")).status_code == 403
    assert client.post(reverse("annotation:chartom-note-check-take")).status_code == 403
    client.force_login(annotator)
    page = client.get(reverse("annotation:chartom-checks"))
    assert page.status_code == 200 and b"Sample notes to check" not in page.content
    response = client.post(
        reverse("annotation:chartom-note-check-sample"),
        {"notes-batch": checks_batch.pk, "notes-size": 5, "notes-seed": 0, "notes-k": 2},
    )
    assert response.status_code == 403
    assert AnnotationTask.objects.filter(kind="note_check").count() == 3


def test_researcher_samples_through_the_form_and_is_told_when_all_are_taken(
    client, researcher, book
):
    batch = make_notes(book, kept=2)
    client.force_login(researcher)
    url = reverse("annotation:chartom-note-check-sample")
    response = client.post(
        url, {"notes-batch": batch.pk, "notes-size": 10, "notes-seed": 3, "notes-k": 2}, follow=True
    )
    assert response.status_code == 200
    assert b"has only 2 filtered note(s): all are sampled" in response.content
    assert sampled_notes(batch)
    bad = client.post(
        url, {"notes-batch": batch.pk, "notes-size": 0, "notes-seed": 0, "notes-k": 2}
    )
    assert bad.status_code == 400 and b"Size" in bad.content


def test_annotator_checks_notes_with_the_screen(client, annotator, checks_batch):
    client.force_login(annotator)
    response = client.post(reverse("annotation:chartom-note-check-take"))
    slot = TaskAssignment.objects.get(annotator=annotator)
    assert response.url == reverse("annotation:chartom-note-check", args=[slot.pk])
    page = client.get(response.url)
    html = page.content.decode()
    note = slot.task.note
    for text in (note.target_character, note.underlined_text, note.note_text, "The filter"):
        assert text in html
    assert "the note says what he plans" in html  # the LLM's reason for "yes"
    assert 'data-key="1"' in html and 'data-key="3"' in html
    assert 'src="/static/js/chartom_checks.js"' in html
    # Submit with htmx: the client is sent to the next note.
    submit = reverse("annotation:chartom-note-check-submit", args=[slot.pk])
    done = client.post(submit, {"label": "accurate"}, **HX)
    assert done.status_code == 200
    following = TaskAssignment.objects.filter(annotator=annotator).exclude(pk=slot.pk).get()
    assert done["HX-Redirect"] == reverse("annotation:chartom-note-check", args=[following.pk])
    # A replay changes nothing and says so.
    replay = client.post(submit, {"label": "inappropriate"}, follow=True)
    assert b"already submitted (accurate); nothing changed" in replay.content
    slot.refresh_from_db()
    assert slot.answer == {"label": "accurate"}


def test_refused_label_is_422_with_htmx_and_400_without(client, annotator, checks_batch):
    client.force_login(annotator)
    slot = note_checks.note_check_take(annotator=annotator)
    submit = reverse("annotation:chartom-note-check-submit", args=[slot.pk])
    response = client.post(submit, {"label": "brilliant"}, **HX)
    assert response.status_code == 422
    assert b"label: must be one of" in response.content
    assert b"<html" not in response.content  # the status line alone
    page = client.post(submit, {})
    assert page.status_code == 422 and b"Not submitted" in page.content
    slot.refresh_from_db()
    assert slot.submitted_at is None


def test_another_annotators_slot_is_not_found(client, annotator, second_annotator, checks_batch):
    slot = note_checks.note_check_take(annotator=annotator)
    client.force_login(second_annotator)
    assert client.get(reverse("annotation:chartom-note-check", args=[slot.pk])).status_code == 404
    submit = reverse("annotation:chartom-note-check-submit", args=[slot.pk])
    assert client.post(submit, {"label": "accurate"}).status_code == 404
    slot.refresh_from_db()
    assert slot.submitted_at is None


def test_nothing_left_sends_the_annotator_back_with_thanks(client, annotator, book):
    make_notes(book, kept=1)
    client.force_login(annotator)
    response = client.post(reverse("annotation:chartom-note-check-take"), follow=True)
    assert b"No note left for you to check" in response.content


# --- concurrency -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_samplings_and_takes_never_duplicate(book):
    from tests.studies.test_concurrency import run_together

    batch = make_notes(book, kept=3)
    created, errors = run_together(
        [lambda: note_checks.note_check_sample(batch=batch, size=3, seed=5, k=2)] * 3
    )
    assert not errors and sorted(created) == [0, 0, 3]
    assert AnnotationTask.objects.filter(kind="note_check").count() == 3
    people = [UserFactory(username=f"checker{i}", role="annotator") for i in range(7)]
    slots, errors = run_together(
        [lambda user=user: note_checks.note_check_take(annotator=user) for user in people]
    )
    assert not errors
    given = [s for s in slots if s is not None]
    assert len(given) == 6  # 3 notes x k = 2; the seventh finds no room
    per_task = Counter(s.task_id for s in given)
    assert set(per_task.values()) == {2}
    assert TaskAssignment.objects.count() == 6
