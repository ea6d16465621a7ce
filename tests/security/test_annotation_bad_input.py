"""Odd input on the CharToM-QA construction screens is a 4xx with a message, never a
500 (issue 26, item 7).

Each case was a 500 on the old code: ``json.loads`` raising ``RecursionError`` on spans
nested thousands deep and ``ValueError`` past Python's 4,300-digit limit for integers
(neither is a ``JSONDecodeError``); a NUL byte, which PostgreSQL refuses in a text or
JSON column (SQLite stored it, so the tests ask for the refusal on both); ``int()`` on
a "digit" that ``str.isdigit()`` accepts ("²"). A message quotes a value's first 200
characters at most.
"""

from __future__ import annotations

import json
import re

import pytest
from django.db import transaction
from django.urls import reverse

from annotation.chartom import qualification as quals
from annotation.chartom import workflow
from annotation.models import (
    Construction,
    QualificationSet,
    QuestionCandidate,
    Stage,
    TaskAssignment,
)
from tests.annotation.chartom.conftest import book, make_construction  # noqa: F401 - fixtures
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "9" * 5000
LONG = "9" * 4000  # under Python's limit: parsed, then refused as out of the note
NUL = "Vautrin means\x00to win Eugene over."


def longest_digit_run(html: str) -> int:
    """The longest run of digits in the page outside the form fields, which give back
    what was typed (a message quotes at most 200 characters of it)."""
    html = re.sub(r"<textarea[^>]*>.*?</textarea>", "", html, flags=re.S)
    html = re.sub(r'value="[^"]*"', "", html)
    return max((len(run) for run in re.findall(r"[0-9]+", html)), default=0)


def at_stage(make_construction, stage: str, **fields) -> Construction:  # noqa: F811
    construction = make_construction(stage=Stage.FILTER, state="running", **fields)
    with transaction.atomic():
        workflow.construction_advance(workflow.construction_lock(construction.pk), stage)
    construction.refresh_from_db()
    return construction


def take(client, kind: str) -> int:
    response = client.post(reverse("annotation:chartom-take", kwargs={"kind": kind}))
    assert response.status_code == 302, response.content[:300]
    return TaskAssignment.objects.filter(task__kind=kind).latest("pk").pk


@pytest.fixture
def ann_client(client, annotator):
    client.force_login(annotator)
    return client


# --- key-note extraction spans ----------------------------------------------------------


@pytest.mark.parametrize(
    ("spans", "message"),
    [
        (DEEP, "spans: not a list of [start, end] pairs"),
        (f"[[0, {HUGE}]]", "spans: not a list of [start, end] pairs"),
        (f"[[0, {LONG}]]", "spans: fragment 1"),
        (f"[[{LONG}, {LONG}1]]", "spans: fragment 1"),
        ("[[0, 7]" + ", [0, 7]" * 5000 + "]", "spans: "),
        ('[[0, "7\\u0000"]]', "spans: fragment 1 is not a pair of whole numbers"),
        ("[[0, 1e999]]", "spans: fragment 1 is not a pair of whole numbers"),
        ("[[0, NaN]]", "spans: fragment 1 is not a pair of whole numbers"),
    ],
    ids=[
        "deep",
        "5000-digits",
        "4000-digits",
        "4000-digit-start",
        "5001-pairs",
        "nul",
        "inf",
        "nan",
    ],
)
def test_odd_extraction_spans_are_422_with_a_short_message(
    make_construction,  # noqa: F811
    ann_client,
    spans,
    message,
):
    construction = at_stage(make_construction, Stage.EXTRACT)
    slot = take(ann_client, "extract")
    url = reverse("annotation:chartom-extract-submit", kwargs={"assignment_id": slot})

    response = ann_client.post(url, {"spans": spans})

    html = response.content.decode()
    assert response.status_code == 422
    assert message in html
    assert longest_digit_run(html) <= 200
    construction.refresh_from_db()
    assert construction.stage == Stage.EXTRACT and construction.key_spans == []


def test_typed_fragments_with_a_nul_or_thousands_of_characters_are_422(
    make_construction,  # noqa: F811
    ann_client,
):
    at_stage(make_construction, Stage.EXTRACT)
    slot = take(ann_client, "extract")
    url = reverse("annotation:chartom-extract-submit", kwargs={"assignment_id": slot})

    nul = ann_client.post(url, {"fragments": "Vautrin\x00"})
    long = ann_client.post(url, {"fragments": "x" * 5000})

    assert nul.status_code == 422 and "is not in the note text" in nul.content.decode()
    assert long.status_code == 422 and "x" * 201 not in long.content.decode()


# --- paraphrase review, question choice -------------------------------------------------


def test_a_nul_in_an_edited_paraphrase_is_422_and_nothing_is_stored(
    make_construction,  # noqa: F811
    ann_client,
):
    construction = at_stage(
        make_construction,
        Stage.PARAPHRASE_REVIEW,
        key_note="he wants Eugene on his side",
        description="Vautrin intends to win Eugene over.",
    )
    slot = take(ann_client, "paraphrase_review")
    url = reverse("annotation:chartom-paraphrase-submit", kwargs={"assignment_id": slot})

    response = ann_client.post(url, {"text": NUL})

    assert response.status_code == 422
    assert "text: contains a NUL character" in response.content.decode()
    construction.refresh_from_db()
    assert construction.description == "Vautrin intends to win Eugene over."
    assert construction.stage == Stage.PARAPHRASE_REVIEW


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"candidate": "²"}, "candidate: "),
        ({"candidate": HUGE}, "candidate: "),
        ({"candidate": "9" * 19}, "candidate: "),
        ({"candidate": "FIRST", "text": NUL}, "text: contains a NUL character"),
    ],
    ids=["superscript", "5000-digits", "19-digits", "nul-text"],
)
def test_odd_question_choices_are_422(make_construction, ann_client, data, message):  # noqa: F811
    construction = at_stage(
        make_construction,
        Stage.QUESTION_CHOICE,
        description="Vautrin intends to win Eugene over.",
    )
    first = QuestionCandidate.objects.create(
        construction=construction, position=0, text="Why does Vautrin pour?", kept=True
    )
    slot = take(ann_client, "question_choice")
    url = reverse("annotation:chartom-question-submit", kwargs={"assignment_id": slot})
    data = {k: str(first.pk) if v == "FIRST" else v for k, v in data.items()}

    response = ann_client.post(url, data)

    html = response.content.decode()
    assert response.status_code == 422 and message in html
    assert longest_digit_run(html) <= 200
    construction.refresh_from_db()
    assert construction.stage == Stage.QUESTION_CHOICE


# --- bonus points and distractors (the board's review screens) ---------------------------


def test_odd_bonus_points_are_422(make_construction, ann_client):  # noqa: F811
    at_stage(
        make_construction,
        Stage.BONUS_REVIEW,
        question="Why does Vautrin pour?",
        description="Vautrin flatters Eugene.",
        bonus_points=["He wants Eugene on his side."],
    )
    response = ann_client.post(reverse("annotation:chartom-bonus-take"))
    slot = int(response["Location"].rstrip("/").split("/")[-1])
    url = reverse("annotation:chartom-bonus-submit", args=[slot])

    deep = ann_client.post(url, {"points_json": DEEP})
    huge = ann_client.post(url, {"points_json": f"[{HUGE}]"})
    nul_json = ann_client.post(url, {"points_json": json.dumps(["He wants\u0000more."])})
    nul_text = ann_client.post(url, {"points_text": "He wants\x00more."})
    nul_log = ann_client.post(
        url,
        {
            "points_json": json.dumps(["He wants more."]),
            "operations_json": json.dumps([{"op": "edit", "text": "\u0000"}]),
        },
    )

    assert [r.status_code for r in (deep, huge, nul_json, nul_text, nul_log)] == [422] * 5
    assert "bonus_points: not valid JSON" in deep.content.decode()
    assert "bonus_points: not valid JSON" in huge.content.decode()
    assert "bonus_points: contains a NUL character" in nul_json.content.decode()
    assert "bonus_points: contains a NUL character" in nul_text.content.decode()
    assert "operations: contains a NUL character" in nul_log.content.decode()


def test_a_nul_in_a_distractor_is_422(make_construction, ann_client):  # noqa: F811
    at_stage(
        make_construction,
        Stage.DISTRACTOR_REVIEW,
        question="Why does Vautrin pour?",
        description="Vautrin flatters Eugene.",
        bonus_points=["He wants Eugene on his side."],
        distractors=["He is generous.", "He is in charge.", "He tests the wine."],
    )
    response = ann_client.post(reverse("annotation:chartom-distractor-take"))
    slot = int(response["Location"].rstrip("/").split("/")[-1])

    response = ann_client.post(
        reverse("annotation:chartom-distractor-submit", args=[slot]),
        {"choice_1": "He is\x00generous.", "choice_2": "He is in charge.", "choice_3": "Wine."},
    )

    assert response.status_code == 422
    assert "distractors: contains a NUL character" in response.content.decode()


# --- the qualification trial and its gold sets -------------------------------------------


@pytest.fixture
def trial(make_construction, researcher):  # noqa: F811
    note = make_construction(note=0).note
    line = json.dumps({"note": note.pk, "dimension": "intention", "gold": ["he wants Eugene"]})
    return quals.qualification_set_create(
        name="gold", threshold=0.8, rows=quals.gold_rows_parse(line), created_by=researcher
    )


@pytest.mark.parametrize(
    "spans", [DEEP, f"[[0, {HUGE}]]", f"[[0, {LONG}]]"], ids=["deep", "5000-digits", "4000-digits"]
)
def test_odd_trial_answers_are_422(trial, ann_client, spans):
    ann_client.post(reverse("annotation:chartom-qualification-start"))
    attempt = trial.attempts.get()
    url = reverse(
        "annotation:chartom-qualification-item", kwargs={"attempt_id": attempt.pk, "position": 1}
    )

    response = ann_client.post(url, {"spans": spans})

    assert response.status_code == 422 and "spans: " in response.content.decode()
    assert longest_digit_run(response.content.decode()) <= 200
    assert not attempt.answers.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "gold\x00", "threshold": "0.8"}, "name: contains a NUL character"),
        ({"name": "g", "threshold": "0.8", "gold": DEEP}, "line 1: not JSON"),
        ({"name": "g", "threshold": "0.8", "gold": f'{{"note": {HUGE}}}'}, "line 1: not JSON"),
        ({"name": "g", "threshold": "0.8", "gold": f'{{"note": {LONG}}}'}, "line 1: note: "),
        ({"name": "g", "threshold": "0.8", "gold": '{"note": [1]}'}, "line 1: note: "),
        ({"name": "g", "threshold": "1" * 5000}, "threshold: "),
        ({"name": "g", "threshold": "nan"}, "threshold: "),
    ],
    ids=["nul-name", "deep", "5000-digits", "4000-digits", "list-note", "long-threshold", "nan"],
)
def test_odd_gold_sets_are_refused_with_400(client, researcher, make_construction, data, message):  # noqa: F811
    make_construction(note=0)
    client.force_login(researcher)

    response = client.post(reverse("annotation:chartom-qualification"), data)

    html = response.content.decode()
    assert response.status_code == 400 and message in html
    assert longest_digit_run(html) <= 200
    assert not QualificationSet.objects.exists()


@pytest.mark.parametrize(
    "note", ["²", HUGE, "9" * 19], ids=["superscript", "5000-digits", "19-digits"]
)
def test_odd_gold_item_notes_are_422(client, researcher, make_construction, note):  # noqa: F811
    make_construction(note=0)
    draft = quals.qualification_set_create(name="draft", threshold=0.8, rows=[])
    client.force_login(researcher)
    url = reverse("annotation:chartom-qualification-gold-item", kwargs={"qset_id": draft.pk})

    shown = client.get(url, {"note": note, "dimension": "intention"})
    posted = client.post(url, {"note": note, "dimension": "intention", "spans": "[[0, 7]]"})

    assert shown.status_code == 422 and posted.status_code == 422
    assert "note: " in posted.content.decode()
    assert longest_digit_run(posted.content.decode()) <= 200
    assert not draft.items.exists()


# --- starting a batch -------------------------------------------------------------------


@pytest.mark.parametrize(
    "budget", ["²", HUGE, "9" * 19], ids=["superscript", "5000-digits", "19-digits"]
)
def test_odd_budgets_are_refused_with_a_message(client, make_construction, budget):  # noqa: F811
    from modeling.models import Backend

    batch = make_construction().note.batch
    backend = Backend.objects.create(name="b", kind=Backend.Kind.OPENAI, base_url="http://x")
    client.force_login(UserFactory(username="r2", role="researcher"))

    response = client.post(
        reverse("annotation:chartom-batch-start", args=[batch.pk]),
        {"backend": backend.pk, "budget_tokens": budget},
        follow=True,
    )

    assert response.status_code == 200
    assert "budget_tokens: " in response.content.decode()
    batch.refresh_from_db()
    assert batch.backend is None
