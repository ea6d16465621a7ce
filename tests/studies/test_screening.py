"""Screening against absolute floors (issue 49, part 2): a cohort that is fast as a
whole escapes the cohort rule, so a reading floor in words a minute (by the server's
clock, whatever the browser says) and instructed-response items with a threshold of
their own feed the exclusion rule, with their reasons in the ledger and the exports.

Scene studies through the rater pages on the real Friends scenes; a mapped benchmark's
study through its pages. Times are made by moving the stored server timestamps back,
never by waiting.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.db.models import F
from django.urls import reverse

from benchmarks.models import Scene
from studies.choice import services as cs
from studies.choice.generic import GenericSpec
from studies.models import Assignment, HistoryView, Participant, StudyItem, WorkSession
from studies.participation import ledger, screening
from studies.participation.services import participants_invite
from studies.services import study_launch
from tests.generic_items import make_generic_benchmark

from .test_rater_views import full_form, invite, keep_scenes, to_scenes, url

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]

HISTORY_SCENES = 63
# Each history scene: a 1-word heading and a line of 203 words, 204 words in all.
LINE = " ".join(["word"] * 203)


@pytest.fixture
def long_history(friends):
    """63 history scenes (12,852 words) before the Friends test scenes."""
    Scene.objects.bulk_create(
        Scene(
            work=friends,
            source_id=f"history-{n}",
            position=2000 + n,
            part=Scene.Part.TRAINING,
            heading="Earlier.",
            lines=[{"type": "scene", "title": "NULL", "text": LINE}],
        )
        for n in range(HISTORY_SCENES)
    )
    return HISTORY_SCENES * 204


@pytest.fixture
def floored(live_study, long_history):
    """Two test scenes, the history above, and a 600 wpm floor."""
    keep_scenes(live_study, 2)
    live_study.floor_wpm = 600
    live_study.save(update_fields=["floor_wpm"])
    return live_study


def read_history(client, participant, *, seconds: float = 0) -> WorkSession:
    """Consent, "seen it?", the history page served, then "I have read it" after
    ``seconds`` by the server's clock (its page view moved back that far)."""
    assert client.post(url("consent", participant)).status_code == 302
    study_work = participant.study.study_works.get()
    client.post(url("familiarity", participant, study_work_id=study_work.pk), {"seen": "no"})
    assert "I have read it" in client.get(url("start", participant)).content.decode()
    session = WorkSession.objects.get(participant=participant)
    HistoryView.objects.filter(session=session).update(
        opened_at=F("opened_at") - timedelta(seconds=seconds)
    )
    assert client.post(url("history-confirm", participant, session_id=session.pk)).status_code
    return session


def answer_scenes(client, participant, *, seconds: float = 0) -> None:
    """Each scene page served, then answered ``seconds`` later by the server's clock."""
    while True:
        page = client.get(url("start", participant)).content.decode()
        assignment = (
            Assignment.objects.filter(participant=participant, status="assigned")
            .order_by("session__started_at", "position")
            .first()
        )
        if assignment is None:
            break
        assert "Who is" in page
        Assignment.objects.filter(pk=assignment.pk).update(
            first_shown_at=F("first_shown_at") - timedelta(seconds=seconds),
            last_event_at=F("last_event_at") - timedelta(seconds=seconds),
        )
        response = client.post(
            url("scene-submit", participant, assignment_id=assignment.pk), full_form(assignment)
        )
        assert response.status_code == 302
    client.get(url("start", participant))


def csv_rows(client, name: str, study) -> list[dict[str, str]]:
    response = client.get(reverse(f"studies:{name}", args=[study.pk]))
    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return list(csv.DictReader(io.StringIO(body.decode())))


def test_a_scripted_reader_is_excluded_by_the_floor_and_a_normal_reader_is_not(
    client, researcher, floored, long_history
):
    scripted, normal = invite(floored, "scripted"), invite(floored, "normal")
    read_history(client, scripted)  # "I have read it" the moment the page loads
    scripted.refresh_from_db()
    # Decided at "I have read it": the history alone is under the floor.
    assert scripted.excluded_at is not None
    assert scripted.exclusion_reason.startswith(
        f"reading floor: read 63 history scenes ({long_history:,} words) in 0 s: "
        "under the 600 wpm floor (1,286 s)"
    )
    answer_scenes(client, scripted)
    # 22 minutes for the history (12,852 words at 600 wpm: 21.4 min), 2 minutes a scene.
    read_history(client, normal, seconds=22 * 60)
    answer_scenes(client, normal, seconds=120)
    scripted.refresh_from_db()
    normal.refresh_from_db()
    assert scripted.finished_at is not None and normal.finished_at is not None
    assert normal.excluded_at is None and normal.exclusion_reason == ""
    reason = scripted.exclusion_reason
    assert scripted.exclusion_source == Participant.ExclusionSource.RULE
    assert reason.startswith("reading floor: read 63 history scenes and 2 scenes (")
    assert ": under the 600 wpm floor (" in reason
    assert reason.endswith("3 of 3 pages under the floor (allowed 50%)")

    # The ledger on the study page, and the exports.
    client.force_login(researcher)
    page = client.get(reverse("studies:detail", args=[floored.pk])).content.decode()
    assert f"rule: {reason}" in page
    assert "pages read faster than 600 words a minute" in page
    for name in ("raters-csv", "platform-ids-csv"):
        rows = {r["participant"]: r for r in csv_rows(client, name, floored)}
        assert rows["scripted"]["exclusion_reason"] == reason
        assert rows["scripted"]["status"] == "excluded"
        assert rows["normal"]["exclusion_reason"] == "" and rows["normal"]["status"] == "finished"
    assert rows["scripted"]["suggested_action"] == "return"  # not a failed check: no rejection
    answers = csv_rows(client, "responses-csv", floored)
    assert answers and {r["participant"] for r in answers} == {"normal"}


def test_a_history_confirmed_without_its_page_served_took_no_time(client, floored):
    """A script that posts "I have read it" without loading the page gains nothing."""
    participant = invite(floored, "no page")
    to_scenes(client, participant)  # posts the confirmation; the reader is never served
    participant.refresh_from_db()
    assert participant.excluded_at is not None
    assert " in 0 s: under the 600 wpm floor" in participant.exclusion_reason


def test_the_floor_is_off_unless_set(client, live_study, long_history):
    keep_scenes(live_study, 2)
    assert live_study.floor_wpm == 0
    scripted = invite(live_study, "scripted")
    read_history(client, scripted)
    answer_scenes(client, scripted)
    scripted.refresh_from_db()
    assert scripted.finished_at is not None and scripted.excluded_at is None


def test_setting_the_floor_on_the_running_form_applies_it(client, researcher, live_study):
    """Saved on the study page's settings, the rule runs again over who has answered."""
    keep_scenes(live_study, 2)
    scripted = invite(live_study, "scripted")
    to_scenes(client, scripted)
    answer_scenes(client, scripted)
    scripted.refresh_from_db()
    assert scripted.excluded_at is None
    client.force_login(researcher)
    form = client.get(reverse("studies:detail", args=[live_study.pk])).context["running_form"]
    assert "floor_wpm" in form.fields and "instructed_max_failures" not in form.fields
    data = {k: v for k, v in form.initial.items() if v is not None and v is not False}
    data |= {"public_cap": 0, "floor_wpm": 600, "floor_max_share": 0.5}
    response = client.post(reverse("studies:running", args=[live_study.pk]), data)
    assert response.status_code == 302
    live_study.refresh_from_db()
    assert (live_study.floor_wpm, live_study.floor_max_share) == (600, 0.5)
    scripted.refresh_from_db()
    assert scripted.excluded_at is not None
    assert scripted.exclusion_reason.startswith("reading floor: read 2 scenes (")
    # A share out of range is refused, naming the field; nothing is saved.
    data |= {"floor_max_share": 2}
    client.post(reverse("studies:running", args=[live_study.pk]), data)
    live_study.refresh_from_db()
    assert live_study.floor_max_share == 0.5


def test_a_few_pages_under_the_floor_are_allowed_up_to_the_share():
    """Pages and the whole part: one quick page of four is not enough, three are."""
    pace = screening.ReadingPace(pages=4, under=1, items=4, words=1000, ms=200_000)
    assert screening.floor_reason(pace, wpm=600, max_share=0.5, noun="item") == ""
    pace.under = 3
    assert screening.floor_reason(pace, wpm=600, max_share=0.5, noun="item") == (
        "reading floor: read 4 items (1,000 words) in 200 s (the 600 wpm floor: 100 s); "
        "3 of 4 pages under the floor (allowed 50%)"
    )
    # Each page just above the floor but the whole part under it cannot happen, and a
    # whole part under it with a generous share still excludes.
    pace = screening.ReadingPace(pages=4, under=2, items=4, words=1000, ms=90_000)
    assert ": under the 600 wpm floor (100 s)" in screening.floor_reason(
        pace, wpm=600, max_share=0.9, noun="item"
    )


# -- a mapped benchmark: instructed-response items and the floor per item -----------------


@pytest.fixture
def generic_study():
    """Three test items and two instructed-response checks, everyone answers all."""
    study = cs.choice_study_create(
        name="Mini ToM humans",
        benchmark=cs.GENERIC,
        works=[make_generic_benchmark()],
        generic=GenericSpec(language="en", items=3, attention=2),
        seed=4,
        overlap=3,
        instructed_max_failures=1,
    ).study
    return study_launch(study=study).study


def answer_items(client, study, participant, *, wrong_checks: int = 0, seconds: float = 0):
    """Every item through the pages: the gold picked, except the first ``wrong_checks``
    checks; each answered ``seconds`` after its page was served, by the server's clock."""
    client.post(reverse("rater:choice-batch-take", args=[participant.token]))
    wrong = wrong_checks
    while True:
        client.get(reverse("rater:start", args=[participant.token]))
        a = (
            Assignment.objects.filter(participant=participant, status="assigned")
            .select_related("study_item__mc_item")
            .order_by("position")
            .first()
        )
        if a is None:
            break
        Assignment.objects.filter(pk=a.pk).update(
            first_shown_at=F("first_shown_at") - timedelta(seconds=seconds)
        )
        shown = cs.generic_order(study, a, 4).index(a.study_item.mc_item.answers[0])
        if wrong and a.study_item.role == StudyItem.Role.ATTENTION:
            shown, wrong = (shown + 1) % 4, wrong - 1
        answer = reverse("rater:choice-answer", args=[participant.token, a.pk])
        assert client.post(answer, {"action": "submit", "option": str(shown)}).status_code == 302
    client.get(reverse("rater:start", args=[participant.token]))


def test_instructed_response_items_exclude_above_their_own_threshold(
    client, researcher, generic_study
):
    one, two = participants_invite(study=generic_study, labels=["one wrong", "two wrong"])
    for p, wrong in ((one, 1), (two, 2)):
        client.post(reverse("rater:consent", args=[p.token]))
        answer_items(client, generic_study, p, wrong_checks=wrong, seconds=60)
    one.refresh_from_db()
    two.refresh_from_db()
    assert one.excluded_at is None  # one failed check is allowed
    assert two.exclusion_reason == "instructed-response items: 2 of 2 failed (allowed 1)"
    (row,) = ledger.study_ledger(study=generic_study, status="excluded")
    assert row.participant == two and row.suggested_action == "reject"

    client.force_login(researcher)
    page = client.get(reverse("studies:detail", args=[generic_study.pk]))
    form = page.context["running_form"]
    assert "instructed_max_failures" in form.fields and "attention_max_failures" not in form.fields
    assert "rule: instructed-response items: 2 of 2 failed (allowed 1)" in page.content.decode()
    rows = {r["participant"]: r for r in csv_rows(client, "raters-csv", generic_study)}
    assert rows["two wrong"]["exclusion_reason"] == two.exclusion_reason
    assert rows["one wrong"]["exclusion_reason"] == ""


def test_items_answered_as_soon_as_shown_are_under_the_floor(client, generic_study):
    generic_study.floor_wpm = 600
    generic_study.save(update_fields=["floor_wpm"])
    quick, careful = participants_invite(study=generic_study, labels=["quick", "careful"])
    for p, seconds in ((quick, 0), (careful, 60)):
        client.post(reverse("rater:consent", args=[p.token]))
        answer_items(client, generic_study, p, seconds=seconds)
    quick.refresh_from_db()
    careful.refresh_from_db()
    assert careful.finished_at is not None and careful.excluded_at is None
    assert quick.excluded_at is not None
    assert quick.exclusion_reason.startswith("reading floor: read 3 items (")
    assert quick.exclusion_reason.endswith("3 of 3 pages under the floor (allowed 50%)")
