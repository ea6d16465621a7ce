"""The qualification trial: gold sets, answers saved per item, scoring at the threshold."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.chartom import qualification as quals
from annotation.chartom.spans import spans_from_fragments
from annotation.chartom.workflow import WorkflowError
from annotation.models import (
    QualificationAnswer,
    QualificationAttempt,
    QualificationItem,
    QualificationSet,
)
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def notes(make_construction):
    """The two sample notes (their constructions are not used)."""
    first = make_construction(note=0).note
    second = make_construction(note=1).note
    return first, second


def gold_lines(notes) -> str:
    first, second = notes
    rows = [
        {"note": first.pk, "dimension": "intention", "gold": ["he wants Eugene on his side"]},
        {
            "batch": second.batch_id,
            "position": second.position,
            "dimension": "desire",
            "gold": ["longs to see them"],
        },
    ]
    return "\n".join(json.dumps(r) for r in rows)


@pytest.fixture
def qset(notes, researcher):
    return quals.qualification_set_create(
        name="gold",
        threshold=0.8,
        rows=quals.gold_rows_parse(gold_lines(notes)),
        created_by=researcher,
    )


def answer(attempt, annotator, position: int, fragments: list[str], no_key_note=False):
    item = attempt.qset.items.get(position=position)
    spans = spans_from_fragments(item.note.note_text, fragments)
    return quals.qualification_answer_save(
        attempt_id=attempt.pk,
        annotator=annotator,
        item_id=item.pk,
        spans=spans,
        no_key_note=no_key_note,
    )


def test_gold_rows_become_items(qset, notes):
    items = list(qset.items.order_by("position"))
    assert [i.dimension for i in items] == ["intention", "desire"]
    first = notes[0].note_text
    start, end = items[0].gold_spans[0]
    assert first[start:end] == "he wants Eugene on his side"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 1: not JSON"),
        ('{"note": 999999, "dimension": "belief", "gold": []}', "line 1: note: no reader note"),
        ('{"dimension": "belief", "gold": []}', "give 'note'"),
        ('{"note": NOTE, "dimension": "hope", "gold": []}', "dimension: 'hope' is not one of"),
        (
            '{"note": NOTE, "dimension": "belief", "gold": ["not in it"]}',
            "'not in it' is not in the note",
        ),
        ('{"note": NOTE, "dimension": "belief", "gold": "x"}', "gold: expected a list"),
        ("", "gold: no items given"),
    ],
)
def test_bad_gold_lines_are_refused_by_line_and_field(notes, line, message):
    with pytest.raises(WorkflowError, match=message):
        quals.gold_rows_parse(line.replace("NOTE", str(notes[0].pk)))


def test_qualification_gate(qset, annotator):
    assert not quals.annotator_qualified(annotator)
    QualificationSet.objects.update(is_active=False)
    assert quals.annotator_qualified(annotator)


def test_a_perfect_attempt_qualifies(qset, annotator):
    attempt = quals.attempt_start(annotator=annotator)
    assert quals.attempt_start(annotator=annotator) == attempt  # resumes
    answer(attempt, annotator, 1, ["he wants Eugene on his side"])
    with pytest.raises(WorkflowError, match="items 2: not answered yet"):
        quals.attempt_finish(attempt_id=attempt.pk, annotator=annotator)
    answer(attempt, annotator, 2, ["longs to see them"])
    attempt = quals.attempt_finish(attempt_id=attempt.pk, annotator=annotator)
    assert attempt.passed and attempt.score == 1.0
    assert quals.annotator_qualified(annotator)
    with pytest.raises(WorkflowError, match="already finished"):
        quals.attempt_finish(attempt_id=attempt.pk, annotator=annotator)
    with pytest.raises(WorkflowError, match="already finished"):
        answer(attempt, annotator, 1, ["Vautrin"])


def test_pass_and_fail_exactly_at_the_threshold(qset, annotator):
    # item 1: the gold exactly (F1 1.0); item 2: "longs to see them" is 14 letters,
    # answering "longs" (5) gives P 1, R 5/14, F1 = 10/19.
    attempt = quals.attempt_start(annotator=annotator)
    answer(attempt, annotator, 1, ["he wants Eugene on his side"])
    answer(attempt, annotator, 2, ["longs"])
    score = (1.0 + 10 / 19) / 2
    QualificationSet.objects.filter(pk=qset.pk).update(threshold=score)
    attempt = quals.attempt_finish(attempt_id=attempt.pk, annotator=annotator)
    assert attempt.score == pytest.approx(score) and attempt.passed

    other = UserFactory(username="other", role="annotator")
    QualificationSet.objects.filter(pk=qset.pk).update(threshold=score + 0.001)
    attempt = quals.attempt_start(annotator=other)
    answer(attempt, other, 1, ["he wants Eugene on his side"])
    answer(attempt, other, 2, ["longs"])
    attempt = quals.attempt_finish(attempt_id=attempt.pk, annotator=other)
    assert not attempt.passed
    assert not quals.annotator_qualified(other)
    # Failing allows a new attempt; the failed one stays as it was.
    again = quals.attempt_start(annotator=other)
    assert again.pk != attempt.pk and again.finished_at is None


def test_answers_are_idempotent_and_own(qset, annotator):
    attempt = quals.attempt_start(annotator=annotator)
    _, changed = answer(attempt, annotator, 1, ["he wants Eugene"])
    assert changed
    _, changed = answer(attempt, annotator, 1, ["he wants Eugene"])
    assert not changed
    saved, changed = answer(attempt, annotator, 1, ["he wants Eugene on his side"])
    assert changed and saved.f1 == 1.0
    assert QualificationAnswer.objects.count() == 1
    other = UserFactory(username="other", role="annotator")
    with pytest.raises(WorkflowError, match="no such qualification attempt"):
        answer(attempt, other, 1, ["Vautrin"])
    with pytest.raises(WorkflowError, match="item: not an item of this trial"):
        quals.qualification_answer_save(
            attempt_id=attempt.pk, annotator=annotator, item_id=0, spans=[[0, 7]]
        )


def test_no_key_note_gold_and_answer_agree(notes, annotator):
    first, _ = notes
    qset = quals.qualification_set_create(
        name="empty",
        threshold=1.0,
        rows=quals.gold_rows_parse(
            json.dumps({"note": first.pk, "dimension": "emotion", "gold": []})
        ),
    )
    attempt = quals.attempt_start(annotator=annotator)
    assert attempt.qset == qset
    answer(attempt, annotator, 1, [], no_key_note=True)
    assert quals.attempt_finish(attempt_id=attempt.pk, annotator=annotator).passed


def test_management_command(notes, tmp_path: Path):
    path = tmp_path / "gold.jsonl"
    path.write_text(gold_lines(notes), encoding="utf-8")
    out = StringIO()
    call_command(
        "chartom_qualification", str(path), "--name", "cmd", "--threshold", "0.7", stdout=out
    )
    assert "2 item(s), threshold 0.70" in out.getvalue()
    assert QualificationItem.objects.filter(qset__name="cmd").count() == 2
    path.write_text('{"note": 1, "dimension": "nope", "gold": []}', encoding="utf-8")
    with pytest.raises(CommandError, match="nothing was written"):
        call_command("chartom_qualification", str(path), "--name", "bad")
    assert not QualificationSet.objects.filter(name="bad").exists()


# --- the screens -------------------------------------------------------------------------


def test_trial_through_the_views_with_result_and_retry(qset, client, annotator, notes):
    client.force_login(annotator)
    index = reverse("annotation:chartom-qualification")
    page = client.get(index)
    assert page.status_code == 200 and b"Start the trial" in page.content
    response = client.post(reverse("annotation:chartom-qualification-start"))
    attempt = QualificationAttempt.objects.get(annotator=annotator)
    item_url = reverse(
        "annotation:chartom-qualification-item", kwargs={"attempt_id": attempt.pk, "position": 1}
    )
    assert response.url == item_url
    page = client.get(item_url)
    assert page.status_code == 200 and b'data-testid="note-text"' in page.content
    bad = client.post(item_url, {"spans": "[[0, 9999]]"})
    assert bad.status_code == 422 and b"spans: fragment 1" in bad.content
    first, second = notes
    spans = spans_from_fragments(first.note_text, ["he wants Eugene on his side"])
    response = client.post(item_url, {"spans": json.dumps(spans)})
    assert response.url.endswith("/items/2/")
    spans = spans_from_fragments(second.note_text, ["misses his daughters"])  # not the gold
    response = client.post(response.url, {"spans": json.dumps(spans)})
    result_url = reverse(
        "annotation:chartom-qualification-attempt", kwargs={"attempt_id": attempt.pk}
    )
    assert response.url == result_url
    response = client.post(
        reverse("annotation:chartom-qualification-finish", kwargs={"attempt_id": attempt.pk})
    )
    assert response.url == result_url
    page = client.get(result_url).content.decode()
    assert "Not qualified" in page
    # The same items come back on a retry (the default), so the gold is not shown:
    # only the annotator's own selection is marked, and whether each item was right.
    assert "cmp-missed" not in page and "cmp-extra" not in page
    assert '<span class="cmp-selected">misses his daughters</span>' in page
    assert "✗ Not right yet" in page
    assert "Try again" in page
    # A finished attempt is not changed by a late answer; the item page sends to the result.
    assert client.post(item_url, {"spans": json.dumps([[0, 7]])}).url == result_url
    # The extraction queue refers the annotator to the trial.
    work = client.get(reverse("annotation:chartom-work", kwargs={"kind": "extract"}))
    assert b'data-testid="not-qualified"' in work.content
    client.post(reverse("annotation:chartom-qualification-start"))
    assert QualificationAttempt.objects.filter(annotator=annotator).count() == 2


def test_roles_on_the_trial_pages(qset, client, annotator, rater, researcher):
    attempt = quals.attempt_start(annotator=annotator)
    attempt_url = reverse(
        "annotation:chartom-qualification-attempt", kwargs={"attempt_id": attempt.pk}
    )
    set_url = reverse("annotation:chartom-qualification-set", kwargs={"qset_id": qset.pk})
    item_url = reverse(
        "annotation:chartom-qualification-item", kwargs={"attempt_id": attempt.pk, "position": 1}
    )
    client.force_login(rater)
    assert client.get(reverse("annotation:chartom-qualification")).status_code == 403
    client.force_login(UserFactory(username="nosy", role="annotator"))
    assert client.get(attempt_url).status_code == 404
    assert client.get(item_url).status_code == 404
    assert client.get(set_url).status_code == 403
    assert (
        client.post(reverse("annotation:chartom-qualification"), {"name": "x"}).status_code == 404
    )
    client.force_login(researcher)
    page = client.get(set_url)
    assert page.status_code == 200 and b"ann" in page.content  # every attempt, by annotator
    assert client.get(attempt_url).status_code == 200  # researchers see every attempt
    assert client.get(item_url).status_code == 404  # but do not answer for the annotator


def test_researcher_creates_a_set_on_the_page(client, researcher, notes):
    client.force_login(researcher)
    url = reverse("annotation:chartom-qualification")
    bad = client.post(url, {"name": "page", "threshold": "2", "gold": gold_lines(notes)})
    assert bad.status_code == 400 and b"threshold: a mean F1 between 0 and 1" in bad.content
    bad = client.post(url, {"name": "page", "threshold": "0.9", "gold": "{oops"})
    assert bad.status_code == 400 and b"line 1: not JSON" in bad.content
    assert not QualificationSet.objects.exists()
    response = client.post(url, {"name": "page", "threshold": "0.9", "gold": gold_lines(notes)})
    qset = QualificationSet.objects.get()
    assert response.url == reverse(
        "annotation:chartom-qualification-set", kwargs={"qset_id": qset.pk}
    )
    assert (qset.threshold, qset.items.count(), qset.created_by) == (0.9, 2, researcher)


def test_set_page_queries_do_not_grow_with_attempts(qset, client, researcher):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(researcher)
    url = reverse("annotation:chartom-qualification-set", kwargs={"qset_id": qset.pk})

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        return len(queries)

    quals.attempt_start(annotator=UserFactory(username="first", role="annotator"))
    one = count()
    for n in range(3):
        quals.attempt_start(annotator=UserFactory(username=f"more{n}", role="annotator"))
    assert count() == one


# --- building a gold set item by item ------------------------------------------------------

CAFE = "cafe\u0301"  # e + combining acute accent: two code points, one character
EMOJI_NOTE = f"Vautrin grins 😏 at the {CAFE} crowd: he wants Eugene on his side."


@pytest.fixture
def draft(researcher):
    return quals.qualification_set_create(
        name="draft", threshold=0.8, rows=[], created_by=researcher
    )


def add(draft, researcher, note, dimension: str, fragments: list[str], **kwargs):
    return quals.qualification_item_add(
        qset_id=draft.pk,
        note_id=note.pk,
        dimension=dimension,
        spans=spans_from_fragments(note.note_text, fragments),
        user=researcher,
        **kwargs,
    )


def test_an_empty_set_is_an_inactive_draft_that_blocks_nobody(draft, annotator):
    assert not draft.is_active and not draft.items.exists()
    assert quals.annotator_qualified(annotator)
    with pytest.raises(WorkflowError, match="no qualification trial"):
        quals.attempt_start(annotator=annotator)


def test_items_are_added_in_order_and_removed_with_positions_closing_up(draft, researcher, notes):
    first, second = notes
    one = add(draft, researcher, first, "intention", ["he wants Eugene on his side"])
    two = add(draft, researcher, second, "desire", ["longs to see them"])
    three = quals.qualification_item_add(
        qset_id=draft.pk,
        note_id=str(first.pk),  # as a form sends it
        dimension="emotion",
        spans=[],
        no_key_note=True,
        user=researcher,
    )
    assert [(i.position, i.pk) for i in draft.items.order_by("position")] == [
        (1, one.pk),
        (2, two.pk),
        (3, three.pk),
    ]
    assert first.note_text[slice(*one.gold_spans[0])] == "he wants Eugene on his side"
    assert three.gold_spans == []
    quals.qualification_item_remove(item_id=two.pk, user=researcher)
    assert [(i.position, i.pk) for i in draft.items.order_by("position")] == [
        (1, one.pk),
        (2, three.pk),
    ]
    # The next item goes after the last one, not into a gap.
    four = add(draft, researcher, second, "belief", ["only visit when they need money"])
    assert four.position == 3
    with pytest.raises(WorkflowError, match="item: no gold item"):
        quals.qualification_item_remove(item_id=two.pk, user=researcher)


def test_the_same_note_and_dimension_twice_is_refused_naming_the_note(draft, researcher, notes):
    first, _ = notes
    add(draft, researcher, first, "intention", ["he wants Eugene on his side"])
    for fragments in (["he wants Eugene on his side"], ["Vautrin"]):
        with pytest.raises(WorkflowError, match=r"^note: #1 of 'test batch' is already item 1"):
            add(draft, researcher, first, "intention", fragments)
    assert draft.items.count() == 1
    add(draft, researcher, first, "belief", ["Vautrin"])  # another dimension is another item
    assert draft.items.count() == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"note_id": 999999}, "^note: no reader note 999999"),
        ({"note_id": "abc"}, "^note: choose a reader note"),
        ({"note_id": None}, "^note: choose a reader note"),
        ({"dimension": "hope"}, "^dimension: 'hope' is not one of"),
        ({"spans": [[0, 9999]]}, r"^spans: fragment 1 \[0, 9999\] is outside the note"),
        ({"spans": "0-7"}, "^spans: expected a list"),
        ({"spans": []}, "^spans: select at least one fragment"),
        ({"no_key_note": True}, "^spans: either select fragments or mark"),
    ],
)
def test_bad_gold_items_are_refused_naming_the_field(draft, researcher, notes, change, message):
    arguments = {
        "qset_id": draft.pk,
        "note_id": notes[0].pk,
        "dimension": "intention",
        "spans": [[0, 7]],
        "user": researcher,
        **change,
    }
    with pytest.raises(WorkflowError, match=message):
        quals.qualification_item_add(**arguments)
    assert not draft.items.exists()


def test_unicode_gold_spans_with_an_emoji_and_a_combining_mark(draft, researcher, notes, annotator):
    note = notes[0]
    note.note_text = EMOJI_NOTE
    note.save(update_fields=["note_text"])
    start = EMOJI_NOTE.index("grins")
    end = EMOJI_NOTE.index(CAFE) + len(CAFE)
    # Ending between "e" and its accent cuts the character "é" in two.
    with pytest.raises(WorkflowError, match=r"^spans: fragment 1 .* cuts a character in two"):
        quals.qualification_item_add(
            qset_id=draft.pk,
            note_id=note.pk,
            dimension="emotion",
            spans=[[start, end - 1]],
            user=researcher,
        )
    item = quals.qualification_item_add(
        qset_id=draft.pk,
        note_id=note.pk,
        dimension="emotion",
        spans=[[start - 1, end + 1]],  # the spaces around it are trimmed
        user=researcher,
    )
    assert item.gold_spans == [[start, end]]
    assert EMOJI_NOTE[start:end] == f"grins 😏 at the {CAFE}"
    quals.qualification_set_activate(qset_id=draft.pk, active=True, user=researcher)
    attempt = quals.attempt_start(annotator=annotator)
    answer(attempt, annotator, 1, [f"grins 😏 at the {CAFE}"])
    attempt = quals.attempt_finish(attempt_id=attempt.pk, annotator=annotator)
    assert attempt.score == 1.0 and attempt.passed


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan"), "0.5", True])
def test_threshold_is_a_mean_f1_between_0_and_1(draft, researcher, bad):
    assert quals.qualification_threshold_set(
        qset_id=draft.pk, threshold=0.65, user=researcher
    ).threshold == pytest.approx(0.65)
    with pytest.raises(WorkflowError, match=r"^threshold: a mean F1 between 0 and 1"):
        quals.qualification_threshold_set(qset_id=draft.pk, threshold=bad, user=researcher)
    draft.refresh_from_db()
    assert draft.threshold == pytest.approx(0.65)


def test_only_researchers_edit_gold(draft, researcher, annotator, notes):
    item = add(draft, researcher, notes[0], "intention", ["he wants Eugene on his side"])
    for call in (
        lambda: add(draft, annotator, notes[1], "desire", ["longs to see them"]),
        lambda: quals.qualification_item_remove(item_id=item.pk, user=annotator),
        lambda: quals.qualification_threshold_set(qset_id=draft.pk, threshold=0.1, user=annotator),
        lambda: quals.qualification_set_activate(qset_id=draft.pk, active=True, user=annotator),
    ):
        with pytest.raises(WorkflowError, match="only researchers edit gold sets"):
            call()
    draft.refresh_from_db()
    assert (draft.items.count(), draft.threshold, draft.is_active) == (1, 0.8, False)


def test_activation_needs_items_and_an_active_set_keeps_its_last_item(draft, researcher, notes):
    with pytest.raises(WorkflowError, match=r"^items: add at least one gold item"):
        quals.qualification_set_activate(qset_id=draft.pk, active=True, user=researcher)
    item = add(draft, researcher, notes[0], "intention", ["he wants Eugene on his side"])
    assert quals.qualification_set_activate(
        qset_id=draft.pk, active=True, user=researcher
    ).is_active
    with pytest.raises(WorkflowError, match=r"^item: this is the only item of an active set"):
        quals.qualification_item_remove(item_id=item.pk, user=researcher)
    quals.qualification_set_activate(qset_id=draft.pk, active=False, user=researcher)
    quals.qualification_item_remove(item_id=item.pk, user=researcher)
    assert not draft.items.exists()


def test_gold_is_frozen_once_an_annotator_attempted_the_set(qset, researcher, annotator, notes):
    quals.attempt_start(annotator=annotator)
    item = qset.items.get(position=1)
    for call in (
        lambda: add(qset, researcher, notes[0], "belief", ["Vautrin"]),
        lambda: quals.qualification_item_remove(item_id=item.pk, user=researcher),
        lambda: quals.qualification_threshold_set(qset_id=qset.pk, threshold=0.5, user=researcher),
    ):
        with pytest.raises(WorkflowError, match=r"frozen .*: make a new set instead"):
            call()
    qset.refresh_from_db()
    assert (qset.items.count(), qset.threshold) == (2, 0.8)
    # Retiring the set changes no gold, so it stays allowed.
    assert not quals.qualification_set_activate(
        qset_id=qset.pk, active=False, user=researcher
    ).is_active


# --- the builder's screens --------------------------------------------------------------


def _urls(qset) -> dict[str, str]:
    kwargs = {"qset_id": qset.pk}
    return {
        "set": reverse("annotation:chartom-qualification-set", kwargs=kwargs),
        "builder": reverse("annotation:chartom-qualification-gold-item", kwargs=kwargs),
        "threshold": reverse("annotation:chartom-qualification-threshold", kwargs=kwargs),
        "activate": reverse("annotation:chartom-qualification-activate", kwargs=kwargs),
    }


def _remove_url(item) -> str:
    return reverse(
        "annotation:chartom-qualification-item-remove",
        kwargs={"qset_id": item.qset_id, "item_id": item.pk},
    )


def test_researcher_builds_a_set_on_the_pages(client, researcher, notes):
    first, second = notes
    client.force_login(researcher)
    response = client.post(
        reverse("annotation:chartom-qualification"),
        {"name": "by hand", "threshold": "0.8", "gold": ""},
    )
    qset = QualificationSet.objects.get(name="by hand")
    urls = _urls(qset)
    assert response.url == urls["set"] and not qset.is_active
    page = client.get(urls["set"]).content.decode()
    assert 'data-testid="gold-picker"' in page and 'data-testid="activate"' in page
    assert "test batch · #1 · Vautrin · Vautrin is buttering them up on purpose: he …" in page

    # Step 1: the picker opens the note in the span widget.
    page = client.get(urls["builder"])
    assert page.status_code == 200 and b'data-testid="note-text"' not in page.content
    page = client.get(urls["builder"], {"note": first.pk, "dimension": "intention"})
    assert page.status_code == 200 and b'data-testid="note-text"' in page.content
    assert f'<option value="{first.pk}" selected>'.encode() in page.content
    assert b'<option value="intention" selected>' in page.content
    assert client.get(urls["builder"], {"note": "999999"}).status_code == 422

    # Step 2: the gold spans, as the widget sends them.
    spans = spans_from_fragments(first.note_text, ["he wants Eugene on his side"])
    post = {"note": first.pk, "dimension": "intention", "spans": json.dumps(spans)}
    response = client.post(urls["builder"], post)
    assert response.status_code == 302 and response.url == urls["set"] + "#item-1"
    item = qset.items.get()
    assert (item.note, item.dimension, item.gold_spans) == (first, "intention", spans)
    # Again: refused naming the note, the page keeps the selection.
    again = client.post(urls["builder"], post)
    assert again.status_code == 422
    assert b"note: #1 of &#x27;test batch&#x27; is already item 1" in again.content
    assert f'value="{json.dumps(spans)}"'.encode() in again.content
    assert b'class="tok tok-word is-span"' in again.content
    assert qset.items.count() == 1
    # Without JavaScript: fragments typed into the box.
    response = client.post(
        urls["builder"],
        {"note": second.pk, "dimension": "desire", "fragments": "longs to see them\n"},
    )
    assert response.status_code == 302
    # "Nothing about this dimension".
    response = client.post(
        urls["builder"], {"note": second.pk, "dimension": "belief", "no_key_note": "1"}
    )
    assert response.status_code == 302
    assert list(qset.items.order_by("position").values_list("dimension", "gold_spans")) == [
        ("intention", spans),
        ("desire", spans_from_fragments(second.note_text, ["longs to see them"])),
        ("belief", []),
    ]

    # Threshold: a refusal keeps the input.
    bad = client.post(urls["threshold"], {"threshold": "0,7"})
    assert bad.status_code == 422 and b"threshold: a number between 0 and 1" in bad.content
    assert b'value="0,7"' in bad.content
    bad = client.post(urls["threshold"], {"threshold": "7"})
    assert bad.status_code == 422 and b"threshold: a mean F1 between 0 and 1" in bad.content
    assert client.post(urls["threshold"], {"threshold": "0.7"}).url == urls["set"]

    # Remove item 2: item 3 becomes item 2; a replay changes nothing.
    desire = qset.items.get(position=2)
    assert client.post(_remove_url(desire)).url == urls["set"]
    assert list(qset.items.order_by("position").values_list("position", "dimension")) == [
        (1, "intention"),
        (2, "belief"),
    ]
    replay = client.post(_remove_url(desire))
    assert replay.status_code == 409 and qset.items.count() == 2

    assert client.post(urls["activate"], {"active": "1"}).url == urls["set"]
    qset.refresh_from_db()
    assert qset.is_active and qset.threshold == pytest.approx(0.7)
    assert quals.trial_set() == qset


@pytest.mark.parametrize(
    ("post", "message"),
    [
        ({"dimension": "intention", "spans": "[[0, 7]]"}, b"note: choose a reader note"),
        (
            {"note": "NOTE", "dimension": "hope", "spans": "[[0, 7]]"},
            b"dimension: &#x27;hope&#x27;",
        ),
        ({"note": "NOTE", "dimension": "intention", "spans": "[[0, 9999]]"}, b"spans: fragment 1"),
        ({"note": "NOTE", "dimension": "intention", "spans": "[0"}, b"spans: not a list"),
        ({"note": "NOTE", "dimension": "intention"}, b"spans: select at least one fragment"),
    ],
)
def test_builder_refuses_bad_input_with_422_naming_the_field(
    client, researcher, draft, notes, post, message
):
    client.force_login(researcher)
    post = {key: str(notes[0].pk) if value == "NOTE" else value for key, value in post.items()}
    response = client.post(_urls(draft)["builder"], post)
    assert response.status_code == 422 and message in response.content
    assert not draft.items.exists()


def test_builder_pages_after_an_attempt_say_make_a_new_set(client, qset, researcher, annotator):
    quals.attempt_start(annotator=annotator)
    urls = _urls(qset)
    client.force_login(researcher)
    page = client.get(urls["set"]).content.decode()
    assert 'data-testid="frozen"' in page and "make a new set instead" in page
    assert 'data-testid="gold-picker"' not in page and "Remove" not in page
    page = client.get(urls["builder"]).content.decode()
    assert 'data-testid="frozen"' in page and 'data-testid="gold-form"' not in page
    note = qset.items.get(position=1).note
    refused = [
        client.post(urls["builder"], {"note": note.pk, "dimension": "belief", "spans": "[[0, 7]]"}),
        client.post(_remove_url(qset.items.get(position=1))),
        client.post(urls["threshold"], {"threshold": "0.5"}),
    ]
    for response in refused:
        assert response.status_code == 422
        assert b"make a new set instead" in response.content
    qset.refresh_from_db()
    assert (qset.items.count(), qset.threshold) == (2, 0.8)


def test_only_researchers_reach_the_builder(client, qset, annotator, rater):
    urls = _urls(qset)
    item = qset.items.get(position=1)
    posts = [
        (urls["builder"], {"note": item.note_id, "dimension": "belief", "spans": "[[0, 7]]"}),
        (_remove_url(item), {}),
        (urls["threshold"], {"threshold": "0.1"}),
        (urls["activate"], {"active": "0"}),
    ]
    for user in (annotator, rater):
        client.force_login(user)
        assert client.get(urls["builder"]).status_code == 403
        for url, data in posts:
            assert client.post(url, data).status_code == 403
    client.logout()
    assert client.get(urls["builder"]).status_code == 302  # to the login page
    qset.refresh_from_db()
    assert (qset.items.count(), qset.threshold, qset.is_active) == (2, 0.8, True)
