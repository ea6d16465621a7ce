"""Roles: the groups, their permissions, the create_user command and the home page."""

from __future__ import annotations

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import CommandError, call_command
from django.urls import reverse

from accounts.roles import ANNOTATOR, RATER, RESEARCHER, has_role
from accounts.services import roles_ensure
from tests.factories import DEFAULT_PASSWORD, DynToMQuestionFactory, UserFactory, WorkFactory

pytestmark = pytest.mark.django_db


def test_roles_ensure_creates_the_three_groups():
    Group.objects.all().delete()

    groups = roles_ensure()
    roles_ensure()  # a second run must not duplicate anything

    assert set(groups) == {RESEARCHER, ANNOTATOR, RATER}
    assert sorted(Group.objects.values_list("name", flat=True)) == sorted(groups)


def test_researchers_get_every_benchmarks_permission_and_others_none():
    groups = roles_ensure()
    benchmark_perms = set(
        Permission.objects.filter(content_type__app_label="benchmarks").values_list(
            "codename", flat=True
        )
    )
    researcher_perms = set(
        groups[RESEARCHER]
        .permissions.filter(content_type__app_label="benchmarks")
        .values_list("codename", flat=True)
    )

    assert {"view_work", "change_scene", "delete_dyntomquestion"} <= benchmark_perms
    assert researcher_perms == benchmark_perms
    assert not groups[RATER].permissions.exists()
    assert not groups[ANNOTATOR].permissions.exists()


def test_user_factory_role_gives_group_and_staff_flag():
    researcher = UserFactory(role=RESEARCHER)
    rater = UserFactory(role=RATER)

    assert researcher.is_staff
    assert researcher.has_perm("benchmarks.view_speakerinstance")
    assert has_role(researcher, RESEARCHER)
    assert not rater.is_staff
    assert not rater.has_perm("benchmarks.view_speakerinstance")
    assert has_role(rater, RATER)
    assert not has_role(rater, RESEARCHER)


def test_create_user_command_creates_a_user_in_the_role():
    call_command("create_user", "alice", role=ANNOTATOR, password="s3cret-pass!")

    user = get_user_model().objects.get(username="alice")
    assert list(user.groups.values_list("name", flat=True)) == [ANNOTATOR]
    assert not user.is_staff
    assert authenticate(username="alice", password="s3cret-pass!") == user


def test_create_user_command_makes_researchers_staff():
    call_command("create_user", "rita", role=RESEARCHER, password="s3cret-pass!")

    assert get_user_model().objects.get(username="rita").is_staff


def test_create_user_command_rejects_an_unknown_role():
    with pytest.raises(CommandError, match="invalid choice: 'admin'"):
        call_command("create_user", "mallory", role="admin", password="s3cret-pass!")

    assert not get_user_model().objects.filter(username="mallory").exists()


def test_home_sends_anonymous_users_to_login(client):
    response = client.get(reverse("home"))

    assert response.status_code == 302
    assert response.url == f"{reverse('login')}?next=/"


def test_home_renders_for_a_rater_without_the_item_bank(client):
    client.force_login(UserFactory(role=RATER))

    response = client.get(reverse("home"))

    assert response.status_code == 200
    assert response.context["roles"] == [RATER]
    assert "Item bank" not in response.content.decode()


def test_home_offers_an_annotator_both_kinds_of_annotation_and_a_rater_neither(client):
    client.force_login(UserFactory(role=ANNOTATOR))
    html = client.get(reverse("home")).content.decode()

    assert f'href="{reverse("annotation:validation")}" data-testid="home-validation"' in html
    assert f'href="{reverse("annotation:chartom")}" data-testid="home-chartom"' in html
    client.force_login(UserFactory(role=RATER))
    assert "home-chartom" not in client.get(reverse("home")).content.decode()


def test_home_shows_researchers_the_item_bank_counts(client):
    WorkFactory.create_batch(2)
    DynToMQuestionFactory.create_batch(3)
    user = UserFactory(role=RESEARCHER)
    assert client.login(username=user.username, password=DEFAULT_PASSWORD)

    response = client.get(reverse("home"))

    assert response.status_code == 200
    html = response.content.decode()
    assert "<h2>Item bank</h2>" in html
    rows = {row["benchmark"]: row for row in response.context["counts"]}
    assert rows["ToM-in-AMC"]["works"] == 2
    assert rows["DynToM"]["works"] == 3
    assert rows["DynToM"]["questions"] == 3
    assert "<td>DynToM</td><td>3</td><td>0</td><td>0</td><td>0</td><td>3</td>" in html


@pytest.mark.parametrize(
    ("role", "sees_validation"), [(ANNOTATOR, True), (RESEARCHER, True), (RATER, False)]
)
def test_the_validation_queue_is_linked_for_annotators_and_researchers_only(
    client, role, sees_validation
):
    user = UserFactory(role=role)  # an annotator or a researcher: a member of Default
    client.force_login(user)

    page = client.get(reverse("home")).content.decode()

    link = f'href="{reverse("annotation:validation")}"'
    assert (page.count(link) >= 2) is sees_validation  # navigation and home page
    assert (link in page) is sees_validation
