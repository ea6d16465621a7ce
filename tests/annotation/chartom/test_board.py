"""The CharToM-QA board: progress figures on a small hand-built batch, roles, the batch
upload (all or nothing), polling, retries, the provenance page and the exports."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.chartom import board
from annotation.chartom.workflow import (
    STEP_TASK_NAME,
    construction_advance,
    construction_lock,
    field_set,
)
from annotation.models import (
    AnnotationTask,
    BookText,
    Construction,
    NoteBatch,
    ReaderNote,
    TaskAssignment,
)
from common.models import QueuedJob
from common.queueing import job_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def other_annotator(db):
    from accounts.services import user_create_with_role

    return user_create_with_role(username="ann2", password="pw-ann2-123!", role="annotator")


@pytest.fixture
def small_batch(make_construction, chartom_backend):
    """Six constructions of two notes, spread over stages and states (counted by hand)."""
    made = {
        # The batch has a backend: its queued step is on its way (the page polls).
        "extract": make_construction(
            stage="extract", state="waiting_human", dimension="intention", backend=chartom_backend
        ),
        "dropped": make_construction(stage="dropped", state="done", dimension="belief"),
        "retry": make_construction(
            stage="bonus", state="needs_retry", dimension="emotion", error="timeout after 5 s"
        ),
        "published": make_construction(stage="published", state="done", dimension="desire"),
        "queued": make_construction(stage="paraphrase", state="queued", note=1),
        "review": make_construction(
            stage="bonus_review", state="waiting_human", note=1, dimension="belief"
        ),
    }
    return made


def slot(
    construction: Construction, kind: str, user, *, seconds: float | None, position: int = 0
) -> TaskAssignment:
    """A task of ``kind`` on ``construction`` and ``user``'s slot on it (submitted if timed)."""
    task = AnnotationTask.objects.create(
        kind=kind,
        batch=construction.note.batch,
        construction=construction,
        position=position,
        closed=seconds is not None,
    )
    now = timezone.now()
    return TaskAssignment.objects.create(
        task=task,
        annotator=user,
        taken_at=now - timedelta(seconds=seconds or 1),
        submitted_at=now if seconds is not None else None,
        seconds=seconds,
    )


# --- progress figures -------------------------------------------------------------------


def test_stage_progress_counts_each_stage_and_state(small_batch) -> None:
    batch = small_batch["extract"].note.batch
    rows = {row.stage: row for row in board.batch_stage_progress(batch)}

    assert [r.stage for r in rows.values()] == list(board.BOARD_STAGES)
    assert rows["extract"].states == {"waiting_human": 1} and rows["extract"].total == 1
    assert rows["dropped"].states == {"done": 1}
    assert rows["bonus"].states == {"needs_retry": 1}
    assert rows["published"].states == {"done": 1}
    assert rows["paraphrase"].states == {"queued": 1}
    assert rows["bonus_review"].states == {"waiting_human": 1}
    assert rows["filter"].total == 0 and rows["filter"].cells == [0] * len(board.STATES)
    assert sum(r.total for r in rows.values()) == 6
    assert board.batch_is_busy(batch)
    assert [c.pk for c in board.batch_needs_retry(batch)] == [small_batch["retry"].pk]


def test_annotator_progress_counts_submitted_open_and_median_seconds(
    small_batch, annotator, other_annotator
) -> None:
    batch = small_batch["extract"].note.batch
    for seconds in (10.0, 30.0, 20.0):
        slot(small_batch["extract"], "extract", annotator, seconds=seconds)
    slot(small_batch["extract"], "extract", annotator, seconds=None)  # still open
    slot(small_batch["review"], "bonus_review", annotator, seconds=40.0)
    slot(small_batch["queued"], "paraphrase_review", other_annotator, seconds=5.0)

    rows = {row.annotator: row for row in board.batch_annotator_progress(batch)}

    assert rows["ann"].kinds["extract"] == {
        "label": "key-note extraction",
        "submitted": 3,
        "open": 1,
        "median_seconds": 20.0,
    }
    assert rows["ann"].kinds["bonus_review"]["median_seconds"] == 40.0
    assert rows["ann"].total == 4
    assert set(rows["ann2"].kinds) == {"paraphrase_review"}
    assert rows["ann2"].kinds["paraphrase_review"]["median_seconds"] == 5.0


def test_annotator_cards_count_open_tasks_with_room_and_own_done(
    small_batch, annotator, other_annotator, settings
) -> None:
    with transaction.atomic():
        construction_advance(construction_lock(small_batch["review"].pk), "bonus_review")
    # Someone else's live slot fills a k=1 task; a timed-out one does not.
    busy = slot(small_batch["extract"], "extract", other_annotator, seconds=None, position=1)
    dead = slot(small_batch["dropped"], "extract", other_annotator, seconds=None, position=2)
    TaskAssignment.objects.filter(pk=dead.pk).update(
        taken_at=timezone.now() - timedelta(seconds=settings.TOMLAB_ANNOTATION_TASK_TIMEOUT_S + 1)
    )
    slot(small_batch["published"], "distractor_review", annotator, seconds=12.0)

    cards = {c.kind: c for c in board.annotator_cards(annotator)}

    assert (cards["bonus_review"].open, cards["bonus_review"].done) == (1, 0)
    assert cards["extract"].open == 1  # the timed-out one only
    assert (cards["distractor_review"].open, cards["distractor_review"].done) == (0, 1)
    assert [c.key for c in cards.values()] == ["1", "2", "3", "4", "5", "6", "7"]
    assert board.annotator_cards(other_annotator)[1].current_id == busy.pk


# --- the board page and roles -----------------------------------------------------------


def test_board_for_annotators_shows_cards_without_batches_or_upload(
    small_batch, client, annotator
) -> None:
    client.force_login(annotator)
    page = client.get(reverse("annotation:chartom"))
    body = page.content.decode()
    assert page.status_code == 200
    assert 'data-testid="card-bonus_review"' in body and 'data-testid="card-judgement"' in body
    assert "New note batch" not in body and "test batch" not in body
    assert reverse("annotation:chartom-bonus-take") in body
    assert reverse("annotation:chartom-take", kwargs={"kind": "extract"}) in body
    assert reverse("annotation:chartom-note-check-take") in body
    assert f'href="{reverse("annotation:chartom-checks")}" data-start-key="7"' in body
    assert 'href="/annotation/chartom/">CharToM-QA construction</a>' in body  # the nav link
    assert client.post(reverse("annotation:chartom"), {"name": "x"}).status_code == 403
    assert NoteBatch.objects.count() == 1


def test_raters_and_strangers_are_kept_out(small_batch, client, rater) -> None:
    construction = small_batch["retry"]
    urls = [
        reverse("annotation:chartom"),
        reverse("annotation:chartom-batch", args=[construction.note.batch_id]),
        reverse("annotation:chartom-construction", args=[construction.pk]),
        reverse(
            "annotation:chartom-batch-export",
            args=[construction.note.batch_id, "constructions", "csv"],
        ),
    ]
    for url in urls:
        assert client.get(url).status_code == 302  # to the login page
    client.force_login(rater)
    for url in urls:
        assert client.get(url).status_code == 403
    assert (
        client.post(reverse("annotation:chartom-retry", args=[construction.pk])).status_code == 403
    )
    assert "CharToM-QA</a>" not in client.get("/").content.decode()


def test_annotators_cannot_open_batches_retry_or_export(small_batch, client, annotator) -> None:
    client.force_login(annotator)
    construction = small_batch["retry"]
    batch_id = construction.note.batch_id
    assert client.get(reverse("annotation:chartom-batch", args=[batch_id])).status_code == 403
    assert (
        client.post(reverse("annotation:chartom-retry", args=[construction.pk])).status_code == 403
    )
    export = reverse("annotation:chartom-batch-export", args=[batch_id, "constructions", "json"])
    assert client.get(export).status_code == 403
    construction.refresh_from_db()
    assert construction.state == "needs_retry"


def test_board_and_batch_page_query_counts(
    small_batch, client, researcher, django_assert_max_num_queries
) -> None:
    client.force_login(researcher)
    with django_assert_max_num_queries(12):
        assert client.get(reverse("annotation:chartom")).status_code == 200
    batch_url = reverse("annotation:chartom-batch", args=[small_batch["retry"].note.batch_id])
    with django_assert_max_num_queries(12):
        assert client.get(batch_url).status_code == 200


# --- the batch page ---------------------------------------------------------------------


def test_batch_page_shows_progress_retry_list_and_run(small_batch, client, researcher) -> None:
    from modeling.models import Run

    batch = small_batch["retry"].note.batch
    batch.run = Run.objects.create(
        name="chartom",
        benchmark="chartom-qa",
        method="construction",
        model="test-model",
        prompt_tokens=1200,
        completion_tokens=300,
        cost="0.004",
    )
    batch.save(update_fields=["run"])
    client.force_login(researcher)
    body = client.get(reverse("annotation:chartom-batch", args=[batch.pk])).content.decode()
    assert "timeout after 5 s" in body
    assert reverse("annotation:chartom-retry", args=[small_batch["retry"].pk]) in body
    assert f'href="/runs/{batch.run.pk}/"' in body and "1500 tokens" in body and "0.004" in body
    assert 'hx-trigger="every 2s"' in body  # an LLM step is queued


def test_batch_progress_polls_until_idle_then_286(small_batch, client, researcher) -> None:
    batch = small_batch["queued"].note.batch
    client.force_login(researcher)
    url = reverse("annotation:chartom-batch", args=[batch.pk])
    busy = client.get(url, headers={"HX-Request": "true"})
    assert busy.status_code == 200 and 'hx-trigger="every 2s"' in busy.content.decode()
    assert "<html" not in busy.content.decode()
    Construction.objects.filter(pk=small_batch["queued"].pk).update(state="needs_retry")
    idle = client.get(url, headers={"HX-Request": "true"})
    assert idle.status_code == 286 and "every 2s" not in idle.content.decode()


def test_retry_queues_the_step_again_and_a_queued_one_is_sent_again(
    small_batch, client, researcher
) -> None:
    construction = small_batch["retry"]
    client.force_login(researcher)
    url = reverse("annotation:chartom-retry", args=[construction.pk])
    done = client.post(url, follow=True)
    construction.refresh_from_db()
    assert (construction.state, construction.error) == ("queued", "")
    assert "queued again" in done.content.decode()
    # Still queued (its message may be lost): sent again; the worker's claim runs it once.
    again = client.post(url, follow=True)
    assert "queued again" in again.content.decode()
    assert QueuedJob.objects.filter(key=job_key(STEP_TASK_NAME, [construction.pk])).count() == 2
    human = reverse("annotation:chartom-retry", args=[small_batch["review"].pk])
    assert "not waiting for a retry" in client.post(human, follow=True).content.decode()
    assert client.post(reverse("annotation:chartom-retry", args=[999999])).status_code == 404


def test_queued_steps_are_offered_a_retry_on_the_batch_page(
    small_batch, client, researcher
) -> None:
    queued = small_batch["queued"]
    batch = queued.note.batch
    client.force_login(researcher)
    page = client.get(reverse("annotation:chartom-batch", args=[batch.pk])).content.decode()
    assert 'data-testid="queued-steps"' in page and "Send all 1 again" in page
    assert reverse("annotation:chartom-retry", args=[queued.pk]) in page
    response = client.post(
        reverse("annotation:chartom-batch-retry", args=[batch.pk]), {"queued": "1"}, follow=True
    )
    assert "1 queued LLM steps sent again." in response.content.decode()
    assert QueuedJob.objects.filter(key=job_key(STEP_TASK_NAME, [queued.pk])).count() == 1
    queued.refresh_from_db()
    assert queued.state == "queued"
    # The failed step is left to "Retry all"; nothing else was sent.
    assert QueuedJob.objects.count() == 1


# --- the construction page --------------------------------------------------------------


def test_construction_page_shows_provenance_with_diffs(
    make_construction, client, researcher, annotator, other_annotator
) -> None:
    construction = make_construction(stage="bonus_review", state="waiting_human")
    with transaction.atomic():
        locked = construction_lock(construction.pk)
        field_set(
            locked,
            "description",
            "Vautrin wants Eugene on his side.",
            model="test-model",
            template="chartom-paraphrase v2",
            action="generated",
        )
        field_set(
            locked,
            "description",
            "Vautrin wants Eugene firmly on his side.",
            user=annotator,
            action="edited",
        )
        locked.save()
    slot(construction, "paraphrase_review", annotator, seconds=9.0)

    client.force_login(researcher)
    body = client.get(
        reverse("annotation:chartom-construction", args=[construction.pk])
    ).content.decode()
    assert "test-model · chartom-paraphrase v2" in body
    assert "<strong>ann</strong>" in body and "edited" in body
    assert "<ins>firmly </ins>" in body
    assert "Not published yet." in body

    worker = Client()
    worker.force_login(annotator)
    url = reverse("annotation:chartom-construction", args=[construction.pk])
    assert worker.get(url).status_code == 200
    stranger = Client()
    stranger.force_login(other_annotator)
    assert stranger.get(url).status_code == 404


# --- exports ----------------------------------------------------------------------------


def test_exports_read_back_with_provenance_and_formula_safe_cells(
    small_batch, client, researcher, annotator
) -> None:
    construction = small_batch["extract"]
    ReaderNote.objects.filter(pk=construction.note_id).update(target_character='=HYPERLINK("x")')
    with transaction.atomic():
        locked = construction_lock(construction.pk)
        field_set(locked, "key_note", "=SUM(A1) wants", user=annotator, action="edited")
        field_set(locked, "key_spans", [[0, 7]], user=annotator, action="edited")
        locked.save()
    batch = construction.note.batch
    client.force_login(researcher)

    def get(table: str, fmt: str):
        response = client.get(
            reverse("annotation:chartom-batch-export", args=[batch.pk, table, fmt])
        )
        assert response.status_code == 200
        assert f"chartom-batch-{batch.pk}-{table}.{fmt}" in response["Content-Disposition"]
        return response.content.decode()

    data = json.loads(get("constructions", "json"))
    assert data["batch"]["id"] == batch.pk and len(data["constructions"]) == 6
    record = next(c for c in data["constructions"] if c["construction_id"] == construction.pk)
    assert record["key_note"] == "=SUM(A1) wants" and record["key_spans"] == [[0, 7]]
    assert [(p["field"], p["changed_by"], p["old_value"]) for p in record["provenance"]] == [
        ("key_note", "ann", ""),
        ("key_spans", "ann", []),
    ]

    table = pd.read_csv(io.StringIO(get("constructions", "csv")), keep_default_na=False)
    assert len(table) == 6
    row = table[table.construction_id == construction.pk].iloc[0]
    assert row.key_note == "'=SUM(A1) wants"  # a spreadsheet shows it as text
    assert row.target_character == '\'=HYPERLINK("x")'
    assert json.loads(row.key_spans) == [[0, 7]] and row.changes == 2
    assert set(table.stage) == {
        "extract",
        "dropped",
        "bonus",
        "published",
        "paraphrase",
        "bonus_review",
    }

    provenance = pd.read_csv(io.StringIO(get("provenance", "csv")), keep_default_na=False)
    assert list(provenance.field) == ["key_note", "key_spans"]
    assert json.loads(provenance.new_value.iloc[1]) == [[0, 7]]
    assert set(provenance.author) == {"ann"}
    assert client.get(f"/annotation/chartom/batches/{batch.pk}/provenance.json").status_code == 404


# --- the upload -------------------------------------------------------------------------


def upload_form(backend, **files) -> dict:
    return {"name": "uploaded", "backend": backend.pk, "model": "", "budget_tokens": "", **files}


def test_upload_with_a_bad_book_names_the_field_and_writes_nothing(
    client, researcher, chartom_backend, tmp_path: Path
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(researcher)
    books_before = BookText.objects.count()
    response = client.post(
        reverse("annotation:chartom"),
        upload_form(
            chartom_backend,
            books=[
                SimpleUploadedFile("good.txt", b"Title: A Good Book\n\nSome text here.\n"),
                SimpleUploadedFile("broken.txt", b"\xff\xfe\x00not utf-8 \xc3"),
            ],
            notes=SimpleUploadedFile("notes.csv", b"book,target_character\n"),
        ),
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "broken.txt: not UTF-8 text" in body and "/tmp" not in body
    assert 'id="id_books_error"' in body
    assert BookText.objects.count() == books_before and NoteBatch.objects.count() == 0


def test_upload_with_a_bad_notes_file_keeps_no_book(client, researcher, chartom_backend) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(researcher)
    response = client.post(
        reverse("annotation:chartom"),
        upload_form(
            chartom_backend,
            books=[SimpleUploadedFile("good.txt", b"Title: A Good Book\n\nSome text here.\n")],
            notes=SimpleUploadedFile("notes.csv", b"book,target_character\nA Good Book,\n"),
        ),
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert 'id="id_notes_error"' in body and "notes.csv" in body
    assert not BookText.objects.exists() and NoteBatch.objects.count() == 0


def test_upload_form_errors_are_by_field(client, researcher) -> None:
    client.force_login(researcher)
    response = client.post(reverse("annotation:chartom"), {"name": "x"})
    assert response.status_code == 400
    body = response.content.decode()
    assert 'id="id_notes_error"' in body and 'id="id_backend_error"' in body
    assert NoteBatch.objects.count() == 0


def test_upload_imports_books_and_notes_and_opens_the_batch(
    client, researcher, chartom_backend, django_capture_on_commit_callbacks
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    book = (
        "\ufeffThe Project Gutenberg eBook of A Quiet House\r\n\r\nTitle: A Quiet House\r\n\r\n"
        "*** START OF THE PROJECT GUTENBERG EBOOK A QUIET HOUSE ***\r\n\r\n"
        "Mary waited by the window all evening. She hoped her brother would come home "
        "before the storm, and she kept the lamp burning for him.\r\n\r\n"
        "*** END OF THE PROJECT GUTENBERG EBOOK A QUIET HOUSE ***\r\n"
    )
    notes = (
        "book,target_character,underlined_text,context,note\n"
        'A Quiet House,Mary,she kept the lamp burning for him,"She hoped her brother would '
        'come home before the storm, and she kept the lamp burning for him.",'
        "Mary is worried and wants her brother safe at home.\n"
    )
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = client.post(
            reverse("annotation:chartom"),
            upload_form(
                chartom_backend,
                books=[SimpleUploadedFile("quiet.txt", book.encode())],
                notes=SimpleUploadedFile("my notes.csv", notes.encode()),
            ),
        )
    batch = NoteBatch.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("annotation:chartom-batch", args=[batch.pk])
    assert (batch.name, batch.model, batch.created_by) == ("uploaded", "test-model", researcher)
    assert BookText.objects.get().title == "A Quiet House"
    note = batch.notes.get()
    assert note.book.title == "A Quiet House" and note.target_character == "Mary"
    assert Construction.objects.filter(note=note, stage="filter", state="queued").count() == 4
    assert len(queued) == 4  # one filter step per dimension, sent on commit
