"""Human studies on a mapped benchmark's items through the pages people use (issue 47,
part 3): the researcher's form, the participant's pages (gold never sent before an
answer is final), practice feedback, exports with the items' categories and option
letters, the API, the responses import and the selector reports read.
"""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks.models import MCItem
from studies.choice import exchange
from studies.choice import services as cs
from studies.choice.generic import GenericSpec
from studies.models import Assignment, ChoiceAnswer, Participant, Study, StudyItem
from studies.participation.ledger import participant_exclusion_override
from studies.participation.services import participants_invite
from studies.services import study_duplicate, study_launch
from tests.page_text import without_csrf

pytestmark = pytest.mark.django_db

ABILITIES = ["False belief", "Hidden emotions", "Discrepant desires"]


@pytest.fixture
def live(mini):
    """Three abilities, one test item each, a practice item and an attention check;
    three participants per item, every participant answers every item."""
    study = cs.choice_study_create(
        name="Mini ToM humans",
        benchmark=cs.GENERIC,
        works=[mini],
        generic=GenericSpec(
            language="en",
            category_field="ability",
            category_values=tuple(ABILITIES),
            per_category=1,
            practice=1,
            attention=1,
        ),
        seed=4,
        overlap=3,
        attention_max_failures=0,
    ).study
    return study_launch(study=study).study


def _start(client, p):
    return client.get(reverse("rater:start", args=[p.token]))


def _answer(client, p, assignment, shown):
    url = reverse("rater:choice-answer", args=[p.token, assignment.pk])
    return client.post(url, {"action": "submit", "option": str(shown)})


def _join(client, study, label):
    (p,) = participants_invite(study=study, labels=[label])
    assert "Welcome to the study" in _start(client, p).content.decode()
    assert client.post(reverse("rater:consent", args=[p.token])).status_code == 302
    return p


def _open(p):
    return (
        Assignment.objects.filter(participant=p, status=Assignment.Status.ASSIGNED)
        .select_related("study_item__mc_item")
        .order_by("position")
        .first()
    )


def _gold_shown(study, assignment) -> int:
    order = cs.generic_order(study, assignment, 4)
    return order.index(assignment.study_item.mc_item.answers[0])


def _answer_all(client, study, p, *, wrong_check=False):
    """Answer every item of ``p`` through the pages: right, except a failed check."""
    while (a := _open(p)) is not None:
        shown = _gold_shown(study, a)
        if wrong_check and a.study_item.role == StudyItem.Role.ATTENTION:
            shown = (shown + 1) % 4
        assert _answer(client, p, a, shown).status_code == 302


def test_the_researcher_makes_a_study_of_three_abilities_on_the_page(client, researcher, mini):
    client.force_login(researcher)
    url = reverse("studies:choice-new")
    page = client.get(url).content.decode()
    assert 'value="generic"' in page and "Mini ToM v1 (12 mapped items; en)" in page
    assert 'name="category_values" value="False belief"' in page and "(3)" in page
    data = {
        "name": "Three abilities",
        "benchmark": "generic",
        "works": [mini.pk],
        "language": "en",
        "category_field": "ability",
        "category_values": ABILITIES,
        "per_category": "2",
        "items_per_participant": "4",
        "option_order": "shuffled",
        "overlap": "2",
        "practice_items": "1",
        "attention_items": "1",
        "attention_instruction": "Please choose {option}.",
        "reveal": "at_end",
        "seed": "9",
    }
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    study = Study.objects.get(name="Three abilities")
    assert study.sampling["strata"] == dict.fromkeys(ABILITIES, 2)
    assert study.sampling["items_per_participant"] == 4 and study.overlap == 2
    detail = client.get(response["Location"]).content.decode()
    assert "ability: Discrepant desires (2), False belief (2), Hidden emotions (2)" in detail
    assert "4 items per participant" in detail or "4 items;" in detail
    assert "1 practice, 1 attention check" in detail

    # A language or a value the benchmark lacks: the form says which, nothing is made.
    for field, value, words in (
        ("language", "fr", "has no &#x27;fr&#x27; texts"),
        ("category_values", ["Irony"], "has no value &#x27;Irony&#x27;"),
    ):
        response = client.post(url, data | {"name": "Refused", field: value})
        assert response.status_code == 422
        assert words in response.content.decode()
    assert not Study.objects.filter(name="Refused").exists()

    # The draft's edit form shows what it was drawn with; saving unchanged keeps the items.
    edit = reverse("studies:edit", args=[study.pk])
    form = client.get(edit).content.decode()
    assert 'value="False belief" checked' in form
    before = list(study.study_items.values_list("mc_item", flat=True))
    assert client.post(edit, data).status_code == 302
    assert list(study.study_items.values_list("mc_item", flat=True)) == before


def test_a_participant_answers_and_the_gold_stays_on_the_server(client, live):
    p = _join(client, live, "Ann")
    offer = _start(client, p).content.decode()
    assert "You will read 3 short stories" in offer and "1 attention check" in offer
    assert "1 practice item" in offer
    take = reverse("rater:choice-batch-take", args=[p.token])
    assert client.post(take).status_code == 302
    assert client.post(take).status_code == 302  # a double click takes nothing more
    assert p.assignments.count() == 5

    practice = _open(p)
    assert practice.study_item.role == StudyItem.Role.PRACTICE
    page = _start(client, p).content.decode()
    assert "Practice item 1 of 1" in page and 'data-letters="on"' in page
    assert all(f'<kbd aria-hidden="true">{k}</kbd>' in page for k in "ABCD")
    practice_url = reverse("rater:choice-result", args=[p.token, practice.pk])
    assert client.get(practice_url).status_code == 404  # not answered: nothing to show
    response = _answer(client, p, practice, (_gold_shown(live, practice) + 1) % 4)
    assert response["Location"] == practice_url  # practice gives feedback
    feedback = client.get(practice_url).content.decode()
    gold_text = practice.study_item.mc_item.texts["en"]["options"][
        practice.study_item.mc_item.answers[0]
    ]
    assert "Practice: your answer" in feedback and gold_text in feedback

    seen = 0
    while (a := _open(p)) is not None:
        item = a.study_item.mc_item
        page = _start(client, p).content.decode()
        seen += 1
        assert f"Item {seen} of 4" in page
        assert item.texts["en"]["question"] in page and item.texts["en"]["context"] in page
        # Nothing on the page depends on the gold: with another answer it is the same.
        gold = item.answers
        MCItem.objects.filter(pk=item.pk).update(answers=[(gold[0] + 1) % 4])
        other = _start(client, p).content.decode()
        MCItem.objects.filter(pk=item.pk).update(answers=gold)
        if a.study_item.role == StudyItem.Role.ATTENTION:
            # A check gives its answer away on purpose, in its instruction only.
            assert "whatever the story says, choose the option" in page
            instruction = re.compile(r'<p class="notice" data-testid="instruction">[^<]*</p>')
            page, other = instruction.sub("", page), instruction.sub("", other)
        assert without_csrf(other) == without_csrf(page)
        shown = _gold_shown(live, a)
        response = _answer(client, p, a, shown)
        assert response.status_code == 302 and response["Location"].endswith(f"/s/{p.token}/")
        # A second submit (double click, back button) is a replay: one answer stays.
        again = _answer(client, p, a, (shown + 1) % 4)
        assert again.status_code == 409 and "your answer stands" in again.content.decode()
        (stored,) = ChoiceAnswer.objects.filter(assignment=a)
        assert stored.correct is True and stored.shown == shown
        if _open(p) is not None:
            # The gold is shown at the end of the study, not after each item.
            result = reverse("rater:choice-result", args=[p.token, a.pk])
            assert client.get(result).status_code == 404
    done = _start(client, p).content.decode()
    assert "You answered <strong>3 of 3</strong>" in done  # practice and check not scored
    p.refresh_from_db()
    assert p.finished_at is not None and p.excluded_at is None


def test_bad_picks_are_refused_and_store_nothing(client, live):
    p = _join(client, live, "Ben")
    client.post(reverse("rater:choice-batch-take", args=[p.token]))
    a = _open(p)
    assert _answer(client, p, a, 9).status_code == 422
    url = reverse("rater:choice-answer", args=[p.token, a.pk])
    assert client.post(url, {"action": "keep"}).status_code == 422
    assert client.post(url, {"option": "x"}).status_code == 422
    (other,) = participants_invite(study=live, labels=["Cy"])
    assert _answer(client, other, a, 0).status_code == 422  # not theirs
    assert not ChoiceAnswer.objects.exists()


def _body(response) -> str:
    return b"".join(response.streaming_content).decode()


def _three_answer(client, live):
    people = [_join(client, live, label) for label in ("Ann", "Ben", "Cy")]
    for p in people:
        client.post(reverse("rater:choice-batch-take", args=[p.token]))
        _answer_all(client, live, p, wrong_check=p.label == "Cy")
    return people


def test_exports_flag_the_excluded_and_carry_categories_and_letters(client, researcher, live):
    _ann, ben, cy = _three_answer(client, live)
    cy.refresh_from_db()
    assert cy.excluded_at is not None  # failed the attention check: the study's rule
    participant_exclusion_override(participant=ben, decision="exclude", reason="spoke French")
    client.force_login(researcher)
    url = reverse("studies:responses-csv", args=[live.pk])
    rows = list(csv.DictReader(io.StringIO(_body(client.get(url)))))
    assert {r["participant"] for r in rows} == {"Ann"}
    text = _body(client.get(url + "?include_excluded=1"))
    header = next(csv.reader(io.StringIO(text)))
    assert header == [
        *exchange.GENERIC_COLUMNS,
        "category_ability",
        "category_order",
        *exchange.GENERIC_TAIL,
    ]
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 3 * 5  # 3 test items, a check and a practice item each
    by = {(r["participant"], r["item_id"]): r for r in rows}
    for (label, item_id), row in by.items():
        item = MCItem.objects.get(work__key="mini-tom@1", item_id=item_id)
        option = int(row["option"])
        assert (
            row["option_letter"] == "ABCD"[option]
            and row["shown_letter"] == "ABCD"[int(row["shown"])]
        )
        assert row["category_ability"] == item.categories["ability"]
        assert row["excluded"] == ("True" if label in ("Ben", "Cy") else "False")
        assert row["correct"] == str(option in item.answers)
        assert int(row["ms"]) >= 0 and row["language"] == "en"
    checks = [r for r in rows if r["role"] == "attention"]
    assert [r["correct"] for r in sorted(checks, key=lambda r: r["participant"])] == [
        "True",
        "True",
        "False",
    ]
    # The API serves the same rows.
    api = APIClient()
    api.force_login(researcher)
    body = api.get(reverse("studies-responses", args=[live.pk]) + "?include_excluded=1").json()
    assert body["count"] == 15 and set(header) <= set(body["results"][0])

    # The responses page lists each pick with its letter.
    page = client.get(reverse("studies:responses", args=[live.pk])).content.decode()
    assert page.count(" ms</td>") == 5 and re.search(r"<td>[ABCD]\. ", page)


def test_exported_answers_import_into_a_copy(client, researcher, live):
    _three_answer(client, live)
    rows = list(exchange.generic_rows_export(live, include_excluded=True))
    copy = study_duplicate(study=live)
    body = io.StringIO()
    writer = csv.DictWriter(body, fieldnames=exchange.generic_columns(live))
    writer.writeheader()
    writer.writerows(rows)
    client.force_login(researcher)
    upload = SimpleUploadedFile("answers.csv", body.getvalue().encode(), "text/csv")
    response = client.post(reverse("studies:choice-import", args=[copy.pk]), {"file": upload})
    assert response.status_code == 302
    imported = ChoiceAnswer.objects.filter(assignment__participant__study=copy)
    assert imported.count() == 15
    assert sorted(imported.values_list("mc_item__item_id", "option", "correct")) == sorted(
        ChoiceAnswer.objects.filter(assignment__participant__study=live).values_list(
            "mc_item__item_id", "option", "correct"
        )
    )


def test_the_api_makes_a_generic_study_and_names_a_bad_field(researcher, mini):
    api = APIClient()
    api.force_login(researcher)
    payload = {
        "name": "Over the API",
        "benchmark": "generic",
        "works": [mini.pk],
        "language": "en",
        "category_field": "ability",
        "category_values": ABILITIES[:2],
        "items_total": 4,
        "overlap": 2,
    }
    response = api.post(reverse("studies-list"), payload, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["created"]["items"] == 4
    study = Study.objects.get(name="Over the API")
    assert study.sampling["strata"] == {"False belief": 2, "Hidden emotions": 2}
    bad = api.post(
        reverse("studies-list"),
        payload | {"name": "Bad", "category_field": "task"},
        format="json",
    )
    assert bad.status_code == 400 and "no category field 'task'" in str(
        bad.json()["category_field"]
    )
    assert not Study.objects.filter(name="Bad").exists()


def test_no_room_left_means_no_work(client, live):
    people = [_join(client, live, f"p{i}") for i in range(4)]
    for p in people[:3]:
        client.post(reverse("rater:choice-batch-take", args=[p.token]))
    page = _start(client, people[3]).content.decode()
    assert "nothing" in page.lower() or "no work" in page.lower()
    people[3].refresh_from_db()
    assert people[3].no_work_reason == Participant.NoWork.ALL_TAKEN
