"""Researchers add annotators, researchers and raters in the app (issue 16)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from accounts.roles import has_role

pytestmark = pytest.mark.django_db


def test_researcher_adds_an_annotator_who_can_log_in(client, researcher):
    client.force_login(researcher)
    page = client.get(reverse("users"))
    assert page.status_code == 200 and "res" in page.content.decode()
    response = client.post(reverse("users"), {"username": "ann", "role": "annotator"})
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    html = response.content.decode()
    password = html.split('data-testid="new-password">')[1].split("<")[0]
    user = get_user_model().objects.get(username="ann")
    assert has_role(user, "annotator") and not user.is_staff
    client.logout()
    assert client.login(username="ann", password=password)
    # A taken name is refused, whatever its case; nothing is reset.
    client.logout()
    client.force_login(researcher)
    again = client.post(reverse("users"), {"username": "ANN", "role": "researcher"})
    assert "this username is taken" in again.content.decode()
    user.refresh_from_db()
    assert has_role(user, "annotator") and user.check_password(password)


def test_others_cannot_manage_users(client, rater):
    client.force_login(rater)
    response = client.post(reverse("users"), {"username": "x", "role": "researcher"})
    assert response.status_code == 403
    assert "Managing users is for researchers only." in response.content.decode()
    assert not get_user_model().objects.filter(username="x").exists()
