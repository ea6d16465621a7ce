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
    assert '<span class="cmp-missed">longs to see them</span>' in page
    assert '<span class="cmp-extra">misses his daughters</span>' in page
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
