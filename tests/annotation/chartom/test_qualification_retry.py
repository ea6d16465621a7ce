"""The trial cannot be passed by memorising its feedback (issue 26, item 9).

A failed attempt used to show the gold text it missed, and the retry was on the same
items: copying the feedback scored 1.0. The researcher now chooses, per set: the same
items again with feedback that never shows the gold text (the default), or other gold
items on each attempt, with the gold shown. Every attempt is kept, with its items,
on the set's page. All through the pages, as the annotator and the researcher use them.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from annotation.models import QualificationAttempt, QualificationSet
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

# (note index, dimension, gold fragment): four items over the two sample notes.
GOLD = [
    (0, "intention", "he wants Eugene on his side"),
    (0, "desire", "so that the scheme he has in mind goes ahead"),
    (1, "desire", "longs to see them"),
    (1, "emotion", "misses his daughters terribly"),
]
INDEX = "annotation:chartom-qualification"


@pytest.fixture
def notes(make_construction):
    return make_construction(note=0).note, make_construction(note=1).note


def gold_lines(notes) -> str:
    return "\n".join(
        json.dumps({"note": notes[n].pk, "dimension": d, "gold": [g]}) for n, d, g in GOLD
    )


def create_set(client, researcher, notes, **fields) -> QualificationSet:
    client.force_login(researcher)
    data = {"name": "gold", "threshold": "0.8", "gold": gold_lines(notes), **fields}
    response = client.post(reverse(INDEX), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    return QualificationSet.objects.get()


def item_url(attempt, position: int) -> str:
    return reverse(
        "annotation:chartom-qualification-item",
        kwargs={"attempt_id": attempt.pk, "position": position},
    )


def fail_an_attempt(client) -> QualificationAttempt:
    """Start (or resume) the trial and answer every item with the note's first word."""
    start = client.post(reverse("annotation:chartom-qualification-start"))
    attempt = QualificationAttempt.objects.filter(finished_at__isnull=True).latest("pk")
    assert start.url == item_url(attempt, attempt.items.order_by("position")[0].position)
    for item in attempt.items.order_by("position"):
        first_word = item.note.note_text.split()[0]
        spans = [[0, len(first_word)]]
        response = client.post(item_url(attempt, item.position), {"spans": json.dumps(spans)})
        assert response.status_code == 302
    finish = reverse("annotation:chartom-qualification-finish", kwargs={"attempt_id": attempt.pk})
    client.post(finish)
    attempt.refresh_from_db()
    assert attempt.passed is False
    return attempt


def result_page(client, attempt) -> str:
    url = reverse("annotation:chartom-qualification-attempt", kwargs={"attempt_id": attempt.pk})
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_same_items_again_and_the_feedback_never_shows_the_gold(
    client, researcher, annotator, notes
):
    qset = create_set(client, researcher, notes)
    assert qset.retry_mode == "hide_gold"  # the default
    client.force_login(annotator)

    first = fail_an_attempt(client)
    page = result_page(client, first)

    assert "Not qualified" in page
    # No gold text is marked anywhere, not even "selected, in the gold": their own
    # selection, one mark, and per item whether it reached the threshold.
    assert "cmp-missed" not in page and "cmp-both" not in page and "cmp-extra" not in page
    assert '<span class="cmp-selected">Vautrin</span>' in page
    assert "of the gold not selected" not in page
    assert "✗ Not right yet" in page
    assert 'data-testid="gold-hidden"' in page
    # The retry is on the same items, and the first attempt is kept as it was.
    second = fail_an_attempt(client)
    assert second.pk != first.pk
    assert set(second.items.values_list("pk", flat=True)) == set(
        qset.items.values_list("pk", flat=True)
    )
    first.refresh_from_db()
    assert first.finished_at is not None and first.score is not None
    # The researcher sees the gold of the same attempt, and both attempts on the set.
    client.force_login(researcher)
    assert '<span class="cmp-missed">he wants Eugene on his side</span>' in result_page(
        client, first
    )
    set_page = client.get(reverse("annotation:chartom-qualification-set", args=[qset.pk]))
    assert set_page.content.decode().count("not qualified") == 2
    assert "retries: same items again; feedback without the gold text" in set_page.content.decode()


def test_other_items_each_attempt_with_the_gold_shown(client, researcher, annotator, notes):
    qset = create_set(client, researcher, notes, retry_mode="new_items", items_per_attempt="2")
    assert (qset.retry_mode, qset.items_per_attempt, qset.is_active) == ("new_items", 2, True)
    client.force_login(annotator)
    trial = client.get(reverse(INDEX)).content.decode()
    assert "Label 2 gold items" in trial and "Another try draws other items." in trial

    first = fail_an_attempt(client)
    page = result_page(client, first)
    first_items = set(first.items.values_list("pk", flat=True))
    assert len(first_items) == 2
    assert "cmp-missed" in page  # the gold is shown: these items will not come back

    second = fail_an_attempt(client)
    second_items = set(second.items.values_list("pk", flat=True))
    assert len(second_items) == 2 and not first_items & second_items
    # An item of the set outside the attempt is not the attempt's to open.
    other = first.items.order_by("position")[0]
    client.post(reverse("annotation:chartom-qualification-start"))  # refused: nothing new
    assert not QualificationAttempt.objects.filter(finished_at__isnull=True).exists()
    refused = client.get(reverse(INDEX)).content.decode()
    assert "You have had every gold item of the trial" in refused
    assert client.get(item_url(second, other.position)).status_code == 302  # finished
    # Both attempts are kept, each with its items, on the researcher's page.
    client.force_login(researcher)
    set_page = client.get(reverse("annotation:chartom-qualification-set", args=[qset.pk]))
    html = set_page.content.decode()
    assert html.count('data-testid="attempt-items"') == 2
    for attempt in (first, second):
        positions = ", ".join(
            str(p) for p in attempt.items.order_by("position").values_list("position", flat=True)
        )
        assert f'<td data-testid="attempt-items">{positions}</td>' in html


def test_an_open_attempt_answers_only_its_own_items(client, researcher, annotator, notes):
    qset = create_set(client, researcher, notes, retry_mode="new_items", items_per_attempt="1")
    client.force_login(annotator)
    client.post(reverse("annotation:chartom-qualification-start"))
    attempt = QualificationAttempt.objects.get()
    mine = attempt.items.get()
    other = qset.items.exclude(pk=mine.pk).first()

    assert client.get(item_url(attempt, mine.position)).status_code == 200
    assert client.get(item_url(attempt, other.position)).status_code == 404
    assert client.post(item_url(attempt, other.position), {"spans": "[[0, 7]]"}).status_code == 404
    assert not attempt.answers.exists()


def test_the_retry_setting_is_edited_on_the_set_page_until_the_first_attempt(
    client, researcher, annotator, notes
):
    qset = create_set(client, researcher, notes)
    url = reverse("annotation:chartom-qualification-retry", args=[qset.pk])
    page = reverse("annotation:chartom-qualification-set", args=[qset.pk])
    assert 'data-testid="retry-form"' in client.get(page).content.decode()

    missing = client.post(url, {"retry_mode": "new_items", "items_per_attempt": ""})
    too_many = client.post(url, {"retry_mode": "new_items", "items_per_attempt": "5"})
    odd = client.post(url, {"retry_mode": "new_items", "items_per_attempt": "²"})
    unknown = client.post(url, {"retry_mode": "show_everything"})
    assert [r.status_code for r in (missing, too_many, odd, unknown)] == [422] * 4
    assert "items_per_attempt: with other items on each attempt" in missing.content.decode()
    assert "5 is more than the active set&#x27;s 4 gold items" in too_many.content.decode()
    assert "retry_mode: &#x27;show_everything&#x27; is not one of" in unknown.content.decode()
    assert (
        client.post(url, {"retry_mode": "new_items", "items_per_attempt": "2"}).status_code == 302
    )
    qset.refresh_from_db()
    assert (qset.retry_mode, qset.items_per_attempt) == ("new_items", 2)

    client.force_login(annotator)
    client.post(reverse("annotation:chartom-qualification-start"))
    client.force_login(researcher)
    frozen = client.post(url, {"retry_mode": "hide_gold"})
    assert frozen.status_code == 422 and "retry setting are frozen" in frozen.content.decode()
    assert 'data-testid="retry-form"' not in client.get(page).content.decode()
    qset.refresh_from_db()
    assert qset.retry_mode == "new_items"
    # Annotators never reach the setting.
    client.force_login(UserFactory(username="ann-x", role="annotator"))
    assert client.post(url, {"retry_mode": "hide_gold"}).status_code == 403


def test_a_draft_drawing_more_items_than_it_has_is_not_activated(client, researcher, notes):
    client.force_login(researcher)
    response = client.post(
        reverse(INDEX),
        {"name": "draft", "threshold": "0.8", "retry_mode": "new_items", "items_per_attempt": "3"},
    )
    draft = QualificationSet.objects.get()
    assert response.status_code == 302 and not draft.is_active
    activate = reverse("annotation:chartom-qualification-activate", args=[draft.pk])
    builder = reverse("annotation:chartom-qualification-gold-item", args=[draft.pk])
    client.post(builder, {"note": notes[0].pk, "dimension": "belief", "spans": "[[0, 7]]"})

    refused = client.post(activate, {"active": "1"})

    assert refused.status_code == 422
    assert "an attempt draws 3 gold items and the set has 1" in refused.content.decode()
    draft.refresh_from_db()
    assert not draft.is_active


def test_selecting_the_whole_note_reveals_nothing_of_the_gold(client, researcher, annotator, notes):
    """Issue 45, finding 9: selecting every note whole on the first attempt, the "selected,
    in the gold" marks showed exactly the gold spans, and the next attempt scored 1.0."""
    create_set(client, researcher, notes)
    client.force_login(annotator)
    client.post(reverse("annotation:chartom-qualification-start"))
    attempt = QualificationAttempt.objects.filter(finished_at__isnull=True).latest("pk")
    for item in attempt.items.order_by("position"):
        whole = [[0, len(item.note.note_text)]]
        client.post(item_url(attempt, item.position), {"spans": json.dumps(whole)})
    client.post(
        reverse("annotation:chartom-qualification-finish", kwargs={"attempt_id": attempt.pk})
    )

    page = result_page(client, attempt)

    for item in attempt.items.order_by("position"):
        # The whole note is one selection: nothing inside it is told apart.
        assert f'<span class="cmp-selected">{item.note.note_text}</span>' in page
    for _note, _dimension, fragment in GOLD:
        assert f">{fragment}<" not in page
    assert "cmp-both" not in page and "cmp-missed" not in page and "cmp-extra" not in page
