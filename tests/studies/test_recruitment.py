"""Running a study with recruited participants (issue 16) through the pages and services:
platform ids, the public link's cap, CSV invites, refusal, the exit questionnaire,
"withdraw my data", can't tell, confidence, idle release, practice/check roles, the
quality table and its CSV, the preview that stores nothing, closing with a
confirmation, and styled 403 pages."""

from __future__ import annotations

import csv
import io
import logging
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from studies import quality, services
from studies.errors import StudyError
from studies.models import Assignment, Guess, Participant, Study, StudyItem
from studies.participation import recruitment
from studies.participation import services as participation_services
from studies.scene import services as scene_services
from tests.studies.quotas import quotas_set

from .test_rater_views import current, instances, invite, keep_scenes, to_scenes, url

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]


@pytest.fixture
def res_client(client, researcher):
    client.force_login(researcher)
    return client


def test_invite_link_stores_the_platform_ids_once(client, live_study):
    live_study.param_participant = "pid"
    live_study.save(update_fields=["param_participant"])
    participant = invite(live_study)
    client.get(url("start", participant) + "?pid=A1&STUDY_ID=S&SESSION_ID=X&other=1")
    client.get(url("start", participant) + "?pid=B2")  # a later click cannot overwrite them
    participant.refresh_from_db()
    assert participant.platform_ids == {"participant": "A1", "study": "S", "session": "X"}


def test_public_link_caps_places_and_resumes_by_platform_id(client, live_study):
    recruitment.public_link_set(study=live_study, cap=2)
    public = reverse("rater:public", args=[live_study.public_token])
    page = client.get(public + "?PROLIFIC_PID=p1")  # a plain GET joins nobody
    assert page.status_code == 200 and not Participant.objects.filter(study=live_study).exists()
    assert f'action="{public}?PROLIFIC_PID=p1"' in page.content.decode()
    first = client.post(public + "?PROLIFIC_PID=p1")
    again = client.post(public + "?PROLIFIC_PID=p1")
    assert first.status_code == 302 and again.url == first.url
    assert client.get(public + "?PROLIFIC_PID=p1").url == first.url  # a GET resumes
    assert client.post(public).status_code == 302  # no id: a place all the same
    full = client.post(public + "?PROLIFIC_PID=p3")
    assert full.status_code == 403 and b"this study is full" in full.content
    assert client.get(public + "?PROLIFIC_PID=p3").status_code == 403
    assert Participant.objects.filter(study=live_study, via_public_link=True).count() == 2
    recruitment.public_link_set(study=live_study, cap=0)
    assert client.get(public + "?PROLIFIC_PID=p1").status_code == 404
    assert client.get(reverse("rater:public", args=["nope"])).status_code == 404


def test_csv_invites_all_or_nothing(res_client, live_study):
    upload = reverse("studies:invite-csv", args=[live_study.pk])
    good = SimpleUploadedFile("panel.csv", b"email,Label\nx@y,Ann\nz@w,Bob\n")
    res_client.post(upload, {"file": good})
    assert sorted(live_study.participants.values_list("label", flat=True)) == ["Ann", "Bob"]
    bad = SimpleUploadedFile("bad.csv", b"label\nCid\n\n,\n")
    page = res_client.post(upload, {"file": bad}, follow=True).content.decode()
    assert "bad.csv: row 3: the label is empty" in page
    missing = SimpleUploadedFile("cols.csv", b"name\nDan\n")
    page = res_client.post(upload, {"file": missing}, follow=True).content.decode()
    assert "needs a &#x27;label&#x27; column" in page
    assert live_study.participants.count() == 2
    services.study_close(study=live_study)
    res_client.post(upload, {"file": SimpleUploadedFile("late.csv", b"label\nEve\n")})
    res_client.post(reverse("studies:invite", args=[live_study.pk]), {"count": "3"})
    assert live_study.participants.count() == 2  # a closed study takes no invites


def test_refusal_exit_questionnaire_and_withdraw_my_data(client, live_study):
    refuser = invite(live_study, "no")
    client.post(url("refuse", refuser))
    page = client.get(url("start", refuser)).content.decode()
    assert "You chose not to take part" in page
    assert client.post(url("consent", refuser)).status_code in (302, 400)
    refuser.refresh_from_db()
    assert refuser.refused_at is not None

    live_study.exit_questions = recruitment.exit_questions_parse("Age: 18-30 | 31+\nComments")
    live_study.save(update_fields=["exit_questions"])
    keep_scenes(live_study, 1)
    participant = invite(live_study, "yes")
    to_scenes(client, participant)
    assignment = current(participant)
    data = {f"choice-{i.pk}": "0" for i in instances(assignment)}
    client.post(url("scene-submit", participant, assignment_id=assignment.pk), data)
    assert "A few last questions" in client.get(url("start", participant)).content.decode()
    bad = client.post(url("exit", participant), {"q1": "99"})
    assert bad.status_code == 400 and b"choose one of the options" in bad.content
    client.post(url("exit", participant), {"q1": "31+", "q2": "  fine  "})
    participant.refresh_from_db()
    assert participant.exit_answers == {"q1": "31+", "q2": "fine"}
    done = client.get(url("start", participant)).content.decode()
    assert "Withdraw my data" in done

    assert "Delete my answers" in client.get(url("withdraw", participant)).content.decode()
    client.post(url("withdraw", participant))
    participant.refresh_from_db()
    assert participant.data_withdrawn_at is not None and participant.exit_answers == {}
    assert not Assignment.objects.filter(participant=participant).exists()
    assert not Guess.objects.filter(assignment__participant=participant).exists()
    assert "Your data has been withdrawn" in client.get(url("start", participant)).content.decode()


def test_cant_tell_and_confidence(client, live_study):
    live_study.allow_cant_tell = True
    live_study.ask_confidence = True
    live_study.save(update_fields=["allow_cant_tell", "ask_confidence"])
    participant = invite(live_study)
    to_scenes(client, participant)
    assignment = current(participant)
    first, *rest = instances(assignment)
    html = client.get(url("start", participant)).content.decode()
    assert f'name="choice-{first.pk}" value="cant"' in html and "How confident" in html
    data = {f"choice-{first.pk}": "cant", "confidence": "4"}
    data |= {f"choice-{i.pk}": str(i.candidates.index(i.gold_character.name)) for i in rest}
    client.post(url("scene-submit", participant, assignment_id=assignment.pk), data)
    assignment.refresh_from_db()
    assert assignment.status == "submitted" and assignment.confidence == 4
    guess = Guess.objects.get(assignment=assignment, instance=first)
    assert guess.cant_tell and guess.answer == "" and guess.correct is False
    bad = client.post(
        url("confidence", participant, assignment_id=assignment.pk), {"confidence": "9"}
    )
    assert bad.status_code == 400

    live_study.allow_cant_tell = False
    live_study.save(update_fields=["allow_cant_tell"])
    other = current(participant)
    response = client.post(
        url("scene-save", participant, assignment_id=other.pk),
        {f"choice-{instances(other)[0].pk}": "cant"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 422  # not offered: refused like any bad choice


def test_idle_assignments_return_to_the_pool(live_study):
    quotas_set(live_study, overlap=1, min_unseen=0, idle_timeout_minutes=10)
    keep_scenes(live_study, 2)
    gone, fresh = participation_services.participants_invite(study=live_study, labels=["g", "f"])
    for p in (gone, fresh):
        participation_services.participant_consent(participant=p)
    work = live_study.study_works.get()
    scene_services.familiarity_declare(participant=gone, study_work=work, seen=False)
    assert gone.assignments.count() == 2
    # Not idle yet: nothing is freed.
    assert recruitment.assignments_release_idle(study=live_study) == 0
    old = timezone.now() - timedelta(minutes=11)
    Assignment.objects.filter(participant=gone).update(assigned_at=old, last_event_at=old)
    session = scene_services.familiarity_declare(participant=fresh, study_work=work, seen=False)
    assert session.assignments.count() == 2
    gone.refresh_from_db()
    assert gone.released_count == 2 and not gone.assignments.exists()
    # Released once: a second pass finds nothing open to free.
    assert recruitment.assignments_release_idle(study=live_study, now=timezone.now()) == 0


def test_practice_and_checks_are_outside_quotas_and_fixed_once_handed_out(live_study):
    quotas_set(live_study, overlap=1, min_unseen=0)
    items = list(live_study.study_items.order_by("position")[:5])
    live_study.study_items.exclude(pk__in=[i.pk for i in items]).update(held_back=True)
    items[4].held_back = True
    items[4].save(update_fields=["held_back"])
    recruitment.item_roles_set(study=live_study, practice=items[0], attention=[items[4]])
    items[4].refresh_from_db()
    assert items[4].role == "attention" and not items[4].held_back  # a check gives it away
    a, b = participation_services.participants_invite(study=live_study, labels=["a", "b"])
    work = live_study.study_works.get()
    for p in (a, b):
        participation_services.participant_consent(participant=p)
        scene_services.familiarity_declare(participant=p, study_work=work, seen=False)
    roles_a = list(a.assignments.order_by("position").values_list("study_item__role", flat=True))
    assert roles_a[0] == "practice" and roles_a.count("attention") == 1 and len(roles_a) == 5
    assert roles_a[1] == "test"
    # Overlap 1: b gets no test scene, so no practice or check either.
    assert not b.assignments.exists()
    with pytest.raises(StudyError, match="handed out"):
        recruitment.item_roles_set(study=live_study, practice=None, attention=[])


def test_quality_table_agreement_gold_speed_and_csv(res_client, live_study):
    keep_scenes(live_study, 2)
    participants = participation_services.participants_invite(study=live_study, labels=["x", "y"])
    for p, right in zip(participants, (True, False), strict=True):
        participation_services.participant_consent(participant=p)
        scene_services.familiarity_declare(
            participant=p, study_work=live_study.study_works.get(), seen=not right
        )
        for assignment in p.assignments.order_by("position"):
            answers = {
                i.pk: {"choice": i.candidates.index(i.gold_character.name) if right else 0}
                for i in instances(assignment)
            }
            scene_services.scene_submit(participant=p, assignment_id=assignment.pk, answers=answers)
    Assignment.objects.filter(participant=participants[0]).update(total_ms=60000)
    Assignment.objects.filter(participant=participants[1]).update(total_ms=1000)
    rows = {r.participant.label: r for r in quality.study_quality(live_study)}
    assert rows["x"].accuracy == 1.0 and rows["x"].scenes == 2
    assert rows["y"].accuracy < 1.0
    assert rows["x"].agreement == rows["y"].agreement  # pairwise: symmetric with two raters
    assert rows["x"].median_s == 60.0 and rows["y"].median_s == 1.0
    assert rows["y"].too_fast and not rows["x"].too_fast
    page = res_client.get(reverse("studies:detail", args=[live_study.pk])).content.decode()
    assert 'data-testid="rater-quality"' in page and "too fast" in page
    response = res_client.get(reverse("studies:raters-csv", args=[live_study.pk]))
    table = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["participant"] for r in table] == ["x", "y"]
    assert table[1]["too_fast"] == "True" and table[0]["accuracy"] == "1.0"


def test_preview_stores_nothing(res_client, live_study):
    before = (Participant.objects.count(), Assignment.objects.count(), Guess.objects.count())
    preview = reverse("studies:preview", args=[live_study.pk])
    page = res_client.get(preview + "?n=0").content.decode()
    assert "Preview as participant" in page and "hx-disable" in page
    assert f'action="{preview}?n=1"' in page
    assert res_client.post(preview + "?n=1", {"choice-1": "0"}).status_code == 200
    after = (Participant.objects.count(), Assignment.objects.count(), Guess.objects.count())
    assert before == after


def test_preview_starts_at_the_consent_page_and_stores_nothing(res_client, live_study):
    """Issue 16: the preview showed the scene pages only, not what a participant meets first."""
    live_study.consent = "You may stop at any time."
    live_study.save(update_fields=["consent"])
    before = (Participant.objects.count(), Assignment.objects.count(), Guess.objects.count())
    preview = reverse("studies:preview", args=[live_study.pk])
    page = res_client.get(preview).content.decode()
    assert "Welcome to the study" in page and "You may stop at any time." in page
    assert 'data-testid="preview-note"' in page and 'data-testid="estimate"' in page
    # The buttons are links through the preview, never the forms that record consent.
    assert f'href="{preview}?n=0"' in page and f'href="{preview}?step=refused"' in page
    assert (
        "/consent/" not in page
        and "/refuse/" not in page
        and "<form" not in page.split('class="rater"')[1]
    )
    refused = res_client.get(preview + "?step=refused").content.decode()
    assert "You chose not to take part" in refused and f'href="{preview}"' in refused
    scene = res_client.get(preview + "?n=0").content.decode()
    assert "Scene 1 /" in scene or "Practice scene" in scene
    after = (Participant.objects.count(), Assignment.objects.count(), Guess.objects.count())
    assert before == after
    assert not Participant.objects.filter(consented_at__isnull=False, label="preview").exists()


def test_close_needs_a_confirmation(res_client, live_study):
    close = reverse("studies:close", args=[live_study.pk])
    detail = res_client.get(reverse("studies:detail", args=[live_study.pk])).content.decode()
    assert f'href="{close}"' in detail  # a link to the confirmation, not a one-click form
    page = res_client.get(close).content.decode()
    assert "Close the study" in page and "Keep it open" in page
    live_study.refresh_from_db()
    assert live_study.status == Study.Status.LIVE
    res_client.post(close)
    live_study.refresh_from_db()
    assert live_study.status == Study.Status.CLOSED
    detail = res_client.get(reverse("studies:detail", args=[live_study.pk])).content.decode()
    assert "Create invite links" not in detail and "takes no new invites" in detail


def test_researcher_pages_deny_others_with_a_styled_page_and_no_traceback(
    client, rater, live_study, caplog
):
    client.force_login(rater)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        studies = client.get(reverse("studies:detail", args=[live_study.pk]))
        runs = client.get(reverse("modeling:run-list"))
    assert studies.status_code == 403 and runs.status_code == 403
    assert "Studies are for researchers only." in studies.content.decode()
    assert "Model runs are for researchers only." in runs.content.decode()
    assert 'href="/static/css/tomlab.css"' in studies.content.decode()  # styled
    assert all(r.exc_info is None for r in caplog.records)


def test_roles_are_offered_by_the_form_and_refused_once_handed_out(res_client, live_study):
    items = list(live_study.study_items.order_by("position")[:3])
    roles = reverse("studies:roles", args=[live_study.pk])
    res_client.post(roles, {"practice": items[0].pk, "attention": [items[1].pk, items[2].pk]})
    got = dict(StudyItem.objects.filter(pk__in=[i.pk for i in items]).values_list("pk", "role"))
    assert got == {items[0].pk: "practice", items[1].pk: "attention", items[2].pk: "attention"}
    page = res_client.post(
        roles, {"practice": items[0].pk, "attention": [items[0].pk]}, follow=True
    )
    assert "both the practice and a check" in page.content.decode()


def test_a_duplicate_study_name_is_refused(res_client, live_study, friends):
    response = res_client.post(
        reverse("studies:new"),
        {"name": "  friends GUESSING ", "works": [friends.pk], "scenes": "all", "seed": "0"}
        | {"overlap": "2", "min_seen": "0", "min_unseen": "0", "reveal": "at_end", "tags": "x"},
    )
    assert response.status_code == 200
    assert "a study with this name exists already" in response.content.decode()
    assert Study.objects.count() == 1
