"""Attention checks the researcher writes on a mapped benchmark's study (issue 49, item 2):
"Select 'Iris' for this question", its options and the option to pick, with no bank item.

They go to every participant like the drawn checks, are never answers to the
benchmark's items, and a wrong pick counts as a failed instructed-response item under
the study's own threshold and reason (the ledger, raters.csv). Through the researcher's
and the participants' pages.
"""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from studies.choice import generic
from studies.choice import services as cs
from studies.choice.generic import GenericSpec
from studies.models import Assignment, ChoiceAnswer, StudyItem
from studies.participation import ledger
from studies.participation.services import participants_invite
from studies.services import study_launch, study_update
from tests.generic_items import make_generic_benchmark

pytestmark = pytest.mark.django_db

IRIS = {
    "add": "1",
    "instructed_question": "Attention check: select 'Iris' for this question.",
    "instructed_options": "Anna\nIris\nMaya",
    "instructed_answer": "Iris",
}


@pytest.fixture
def study():
    """Three test items of Mini ToM, no drawn check, no failed check allowed (a draft)."""
    return cs.choice_study_create(
        name="Mini ToM with a written check",
        benchmark=cs.GENERIC,
        works=[make_generic_benchmark()],
        generic=GenericSpec(language="en", items=3),
        seed=4,
        overlap=3,
        instructed_max_failures=0,
    ).study


def page_url(study) -> str:
    return reverse("studies:instructed", args=[study.pk])


def body(response) -> str:
    raw = b"".join(response.streaming_content) if response.streaming else response.content
    return raw.decode()


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"instructed_answer": "Iriss"}, "instructed_answer", "'Iriss' is not one of the options"),
        ({"instructed_answer": ""}, "instructed_answer", "This field is required."),
        ({"instructed_options": "Iris"}, "instructed_options", "write 2 to 10 options"),
        ({"instructed_options": "Iris\niris\nAnna"}, "instructed_options", "written twice"),
        ({"instructed_question": "  "}, "instructed_question", "This field is required."),
    ],
)
def test_the_form_names_the_field_that_does_not_hold(
    client, researcher, study, change, field, message
):
    client.force_login(researcher)
    response = client.post(page_url(study), IRIS | change)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == [field]
    assert message.casefold() in " ".join(errors[field]).casefold()
    # The error is shown beside its field, and nothing was written.
    assert f'id="id_{field}_error"' in body(response)
    assert not cs.instructed_items_of(study).exists()


def test_the_researcher_writes_and_removes_a_check(client, researcher, study):
    client.force_login(researcher)
    response = client.post(page_url(study), IRIS | {"instructed_answer": " iris "})
    assert response.status_code == 302
    (item,) = cs.instructed_items_of(study)
    assert item.role == StudyItem.Role.ATTENTION and item.mc_item_id is None
    assert item.instructed == {
        "question": "Attention check: select 'Iris' for this question.",
        "options": ["Anna", "Iris", "Maya"],
        "answer": 1,
    }
    listing = client.get(page_url(study))
    assert "Attention check: select &#x27;Iris&#x27; for this question." in body(listing)
    detail = body(client.get(reverse("studies:detail", args=[study.pk])))
    assert "1 instructed-response item you wrote" in detail

    assert client.post(page_url(study), {"remove": str(item.pk)}).status_code == 302
    assert not cs.instructed_items_of(study).exists()
    # Another study's item, or a bank item, is not a written check to remove.
    test_item = StudyItem.objects.filter(study=study, role=StudyItem.Role.TEST).first()
    response = client.post(page_url(study), {"remove": str(test_item.pk)})
    assert response.status_code == 409 and StudyItem.objects.filter(pk=test_item.pk).exists()


def test_only_researchers_see_the_page(client, rater, study):
    client.force_login(rater)
    assert client.get(page_url(study)).status_code in (302, 403)
    assert client.post(page_url(study), IRIS).status_code in (302, 403)
    assert not cs.instructed_items_of(study).exists()


def answer_all(client, study, participant, *, wrong_check: bool) -> list[str]:
    """Every item through the pages: the gold picked, the written check right or wrong.
    Returns the questions the item pages showed."""
    assert client.post(reverse("rater:consent", args=[participant.token])).status_code == 302
    client.post(reverse("rater:choice-batch-take", args=[participant.token]))
    seen = []
    while True:
        page = client.get(reverse("rater:start", args=[participant.token]))
        a = (
            Assignment.objects.filter(participant=participant, status="assigned")
            .select_related("study_item__mc_item")
            .order_by("position")
            .first()
        )
        if a is None:
            break
        assert page.status_code == 200
        seen.append(page.context["question"])
        item = generic.shown_item(a.study_item)
        n = len(generic.generic_options(item, "en"))
        shown = cs.generic_order(study, a, n).index(item.answers[0])
        if wrong_check and a.study_item.instructed:
            shown = (shown + 1) % n
        answer = reverse("rater:choice-answer", args=[participant.token, a.pk])
        assert client.post(answer, {"action": "submit", "option": str(shown)}).status_code == 302
    client.get(reverse("rater:start", args=[participant.token]))
    return seen


def test_a_wrong_pick_excludes_with_the_reason_and_a_right_one_does_not(client, researcher, study):
    client.force_login(researcher)
    assert client.post(page_url(study), IRIS).status_code == 302
    study = study_launch(study=study).study
    client.logout()
    right, wrong = participants_invite(study=study, labels=["right", "wrong"])
    shown = answer_all(client, study, right, wrong_check=False)
    answer_all(client, study, wrong, wrong_check=True)

    # The check came among the three test items, with the researcher's own words.
    assert len(shown) == 4 and shown.index(IRIS["instructed_question"]) in (1, 2, 3)
    right.refresh_from_db()
    wrong.refresh_from_db()
    assert right.finished_at is not None and right.excluded_at is None
    assert wrong.exclusion_reason == "instructed-response items: 1 of 1 failed (allowed 0)"
    (row,) = ledger.study_ledger(study=study, status="excluded")
    assert row.participant == wrong and row.suggested_action == "reject"

    # Never an answer to a benchmark item: the picks stored without one, left out of
    # the answers' export (three test items each, no fourth row).
    picks = ChoiceAnswer.objects.filter(assignment__participant__study=study)
    assert picks.filter(mc_item__isnull=True).count() == 2
    assert picks.filter(mc_item__isnull=True, correct=False).get().assignment.participant == wrong
    client.force_login(researcher)
    exported = body(
        client.get(reverse("studies:responses-csv", args=[study.pk]) + "?include_excluded=1")
    )
    rows = list(csv.DictReader(io.StringIO(exported)))
    assert len(rows) == 6 and IRIS["instructed_question"] not in exported
    # raters.csv and the study page carry the reason.
    raters = {
        r["participant"]: r
        for r in csv.DictReader(
            io.StringIO(body(client.get(reverse("studies:raters-csv", args=[study.pk]))))
        )
    }
    assert raters["wrong"]["exclusion_reason"] == wrong.exclusion_reason
    assert raters["wrong"]["attention_failed"] == "1"
    assert raters["right"]["exclusion_reason"] == "" and raters["right"]["attention_failed"] == "0"
    page = body(client.get(reverse("studies:detail", args=[study.pk])))
    assert "rule: instructed-response items: 1 of 1 failed (allowed 0)" in page
    # The researcher's responses page lists the check's picks among the rest.
    responses = body(client.get(reverse("studies:responses", args=[study.pk])))
    assert "Attention check: select &#x27;Iris&#x27; for this question." in responses


def test_checks_cannot_change_once_a_participant_took_items(client, researcher, study):
    client.force_login(researcher)
    assert client.post(page_url(study), IRIS).status_code == 302
    study = study_launch(study=study).study
    before = study.item_set_hash
    (first,) = participants_invite(study=study, labels=["first"])
    first.consented_at = first.created_at
    first.save(update_fields=["consented_at"])
    given = cs.generic_batch_take(participant=first)
    assert [a.study_item.instructed for a in given].count({}) == 3
    response = client.post(page_url(study), IRIS | {"instructed_answer": "Maya"})
    assert response.status_code == 409
    assert "participants have taken their items" in " ".join(
        response.context["form"].errors["instructed_question"]
    )
    (item,) = cs.instructed_items_of(study)
    assert client.post(page_url(study), {"remove": str(item.pk)}).status_code == 409
    assert cs.instructed_items_of(study).count() == 1
    study.refresh_from_db()
    assert study.item_set_hash == before


def test_a_written_check_moves_the_item_set_hash_and_counts_with_drawn_checks(researcher):
    study = cs.choice_study_create(
        name="Drawn and written",
        benchmark=cs.GENERIC,
        works=[make_generic_benchmark()],
        generic=GenericSpec(language="en", items=3, attention=1),
        seed=4,
        overlap=2,
    ).study
    study = study_launch(study=study).study
    before = study.item_set_hash
    cs.instructed_item_add(study=study, question="Pick Maya.", options="Anna\nMaya", answer="Maya")
    study.refresh_from_db()
    assert study.item_set_hash and study.item_set_hash != before
    (p,) = participants_invite(study=study, labels=["p"])
    p.consented_at = p.created_at
    p.save(update_fields=["consented_at"])
    given = cs.generic_batch_take(participant=p)
    roles = sorted(a.study_item.role for a in given)
    assert roles == ["attention", "attention", "test", "test", "test"]
    # Neither check comes first; the written one is the only item without a bank item.
    assert given[0].study_item.role == StudyItem.Role.TEST
    assert sum(1 for a in given if a.study_item.mc_item_id is None) == 1


@pytest.mark.parametrize("value", ["²", "9" * 5000, "1" + "0" * 30, "a\x00b", "-1", ""])
def test_a_bad_item_number_to_remove_is_a_4xx(client, researcher, study, value):
    client.force_login(researcher)
    response = client.post(page_url(study), {"remove": value})
    assert response.status_code == 409
    assert "not an item number" in body(response) or "no written check" in body(response)


def test_a_redraw_of_the_draft_keeps_the_written_checks(study):
    cs.instructed_item_add(study=study, question="Pick Maya.", options="Anna\nMaya", answer="Maya")
    sample = cs.choice_items_sample(
        benchmark=cs.GENERIC,
        works=[study.study_works.get().work],
        seed=9,
        generic=GenericSpec(language="en", items=4),
    )
    study_update(
        study=study,
        name=study.name,
        instructions="",
        consent="",
        works=[study.study_works.get().work],
        items=sample.items,
        seed=9,
        sampling=sample.sampling,
    )
    (item,) = cs.instructed_items_of(study)
    assert item.instructed["question"] == "Pick Maya." and item.role == StudyItem.Role.ATTENTION
    tests = StudyItem.objects.filter(study=study, role=StudyItem.Role.TEST)
    assert tests.count() == 4 and item.position > max(t.position for t in tests)
