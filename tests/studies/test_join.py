"""Who may join a study (issue 10, item 6), and how (issue 26, item 11).

Invite links always work (tested with the rater pages). Through ``/s/join/<id>/`` an
account joins only with the rater role and only a study its researcher opened to
rater accounts (``open_join``); before, any logged-in account, an annotator included,
could join any live study. Joining is a POST with the CSRF token: a GET shows the
Join button (or resumes a participation that exists) and writes nothing.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from studies.models import Participant, Study

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]


def _join(client, study: Study):
    return client.post(reverse("rater:join", kwargs={"study_id": study.pk}))


@pytest.fixture
def open_study(live_study) -> Study:
    Study.objects.filter(pk=live_study.pk).update(open_join=True)
    live_study.refresh_from_db()
    return live_study


def test_accounts_without_the_rater_role_cannot_join(client, open_study, annotator, researcher):
    for user in (annotator, researcher):
        client.force_login(user)
        response = _join(client, open_study)
        assert response.status_code == 403
        assert b"only rater accounts can join" in response.content
    assert not Participant.objects.exists()


def test_a_rater_cannot_join_an_invitation_only_study(client, live_study, rater):
    assert live_study.open_join is False  # the default: invite links only
    client.force_login(rater)
    response = _join(client, live_study)
    assert response.status_code == 403 and b"by invitation only" in response.content
    assert not Participant.objects.exists()


def test_a_rater_joins_an_open_study_and_keeps_their_place(client, open_study, rater):
    client.force_login(rater)
    response = _join(client, open_study)
    participant = Participant.objects.get(study=open_study, user=rater)
    assert response.status_code == 302
    assert response.url == reverse("rater:start", kwargs={"token": participant.token})
    # Closing the study to new accounts does not lock out one that already joined.
    Study.objects.filter(pk=open_study.pk).update(open_join=False)
    assert _join(client, open_study).url == response.url


def test_closed_and_imported_studies_take_no_new_accounts(client, open_study, rater):
    client.force_login(rater)
    Study.objects.filter(pk=open_study.pk).update(status=Study.Status.CLOSED)
    response = _join(client, open_study)
    assert response.status_code == 403 and b"takes no new raters" in response.content
    Study.objects.filter(pk=open_study.pk).update(status=Study.Status.LIVE, imported=True)
    assert _join(client, open_study).status_code == 403
    assert not Participant.objects.exists()


def test_the_home_page_offers_only_studies_open_to_rater_accounts(client, live_study, rater):
    client.force_login(rater)
    join = reverse("rater:join", kwargs={"study_id": live_study.pk})
    assert join not in client.get("/").content.decode()
    Study.objects.filter(pk=live_study.pk).update(open_join=True)
    assert join in client.get("/").content.decode()


def test_the_command_sets_who_may_join(friends):
    from django.core.management import call_command

    call_command("create_study", "--work", "friends", "--name", "open", "--open-join", "--live")
    call_command("create_study", "--work", "friends", "--name", "closed")
    assert Study.objects.get(name="open").open_join is True
    assert Study.objects.get(name="closed").open_join is False


def test_a_plain_get_joins_nobody_and_the_join_button_needs_the_csrf_token(open_study, rater):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(rater)
    join = reverse("rater:join", kwargs={"study_id": open_study.pk})
    page = browser.get(join)
    assert page.status_code == 200 and not Participant.objects.exists()
    html = page.content.decode()
    assert f'<form method="post" action="{join}"' in html and "Join the study</button>" in html
    token = page.cookies["csrftoken"].value
    assert browser.post(join).status_code == 403  # no CSRF token: refused
    assert not Participant.objects.exists()
    joined = browser.post(join, {"csrfmiddlewaretoken": token})
    participant = Participant.objects.get(study=open_study, user=rater)
    assert joined.url == reverse("rater:start", kwargs={"token": participant.token})
    # Once joined, the old GET link resumes the participation directly (no write).
    assert browser.get(join).url == joined.url
    assert Participant.objects.count() == 1


def test_a_get_says_why_an_account_cannot_join(client, live_study, rater):
    client.force_login(rater)
    response = client.get(reverse("rater:join", kwargs={"study_id": live_study.pk}))
    assert response.status_code == 403 and b"by invitation only" in response.content


def test_the_public_link_joins_only_on_a_post_with_the_csrf_token(live_study):
    from django.test import Client

    from studies.participation import recruitment

    recruitment.public_link_set(study=live_study, cap=3)
    browser = Client(enforce_csrf_checks=True)  # anonymous, as a platform's participant
    link = reverse("rater:public", args=[live_study.public_token]) + "?PROLIFIC_PID=pp-1"
    page = browser.get(link)
    assert page.status_code == 200 and not Participant.objects.exists()
    assert f'<form method="post" action="{link}"' in page.content.decode()
    assert browser.post(link).status_code == 403  # a cross-site POST: no token
    assert not Participant.objects.exists()
    joined = browser.post(link, {"csrfmiddlewaretoken": page.cookies["csrftoken"].value})
    participant = Participant.objects.get(study=live_study)
    assert participant.platform_ids == {"participant": "pp-1"} and participant.via_public_link
    assert joined.url == reverse("rater:start", kwargs={"token": participant.token})
    assert browser.get(link).url == joined.url  # the old link resumes, writing nothing
