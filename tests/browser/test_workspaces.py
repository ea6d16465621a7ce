"""Issue 46 in the browser: the workspace menu switches what a researcher sees, a
manager adds a member, changes their role and removes them (logged, and the removed
member's session ends), and a new account's one-time password is changed at once."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from accounts.models import Membership
from accounts.services import user_create_with_role
from accounts.workspaces import member_set, workspace_create
from studies.models import Study

pytestmark = pytest.mark.django_db(transaction=True)


def _study(name: str, workspace=None) -> Study:
    return Study.objects.create(name=name, benchmark="dyntom", workspace=workspace)


def test_the_menu_switches_workspace_and_a_manager_runs_the_members(
    page, browser, live_server, researcher, log_in_as, screenshot, screenshot_of
):
    second = workspace_create(name="Second lab", by=researcher)
    _study("Pilot in Default")
    _study("Pilot in Second lab", workspace=second)
    colleague = user_create_with_role(
        username="colleague",
        password="pw-col-123!",
        role="researcher",
        workspace=second,
        workspace_role="researcher",
    )
    log_in_as(page)
    page.goto(f"{live_server.url}/studies/")
    expect(page.get_by_text("Pilot in Default")).to_be_visible()
    expect(page.get_by_text("Pilot in Second lab")).to_have_count(0)

    menu = page.get_by_test_id("workspace-menu")
    expect(menu.locator("summary")).to_contain_text("Default")
    menu.locator("summary").click()
    screenshot("workspace_menu")
    menu.get_by_role("button", name=re.compile("Second lab")).click()
    page.wait_for_url(f"{live_server.url}/")
    expect(page.get_by_test_id("workspace-menu").locator("summary")).to_contain_text("Second lab")
    page.goto(f"{live_server.url}/studies/")
    expect(page.get_by_text("Pilot in Second lab")).to_be_visible()
    expect(page.get_by_text("Pilot in Default")).to_have_count(0)

    # The manager's page: add, change a role, remove; each change is logged.
    user_create_with_role(username="student", password="pw-stu-123!", role="rater")
    page.get_by_test_id("workspace-menu").locator("summary").click()
    page.get_by_test_id("workspace-menu").get_by_role("link", name="Members").click()
    adding = page.get_by_test_id("member-add")
    adding.get_by_label("Username").fill("student")
    adding.get_by_label("Role", exact=True).select_option("viewer")
    adding.get_by_role("button", name="Add").click()
    row = page.locator("tr[data-member=student]")
    expect(row).to_contain_text("viewer")
    page.get_by_label("Role of colleague").select_option("annotator")
    page.locator("tr[data-member=colleague]").get_by_role("button", name="Change role").click()
    expect(page.locator("tr[data-member=colleague]")).to_contain_text("annotator")

    # The colleague is signed in elsewhere; removing them ends that session.
    other = browser.new_context().new_page()
    log_in_as(other, "colleague", "pw-col-123!")
    page.get_by_role("button", name="Remove colleague").click()
    expect(page.locator("tr[data-member=colleague]")).to_have_count(0)
    log = page.get_by_test_id("member-log")
    expect(log).to_contain_text("colleague")
    expect(log).to_contain_text("removed")
    expect(log).to_contain_text("student")
    screenshot("workspace_members")
    other.goto(f"{live_server.url}/studies/")
    expect(other).to_have_url(re.compile(r"/accounts/login/"))
    screenshot_of(other, "workspace_removed_member")
    assert not Membership.objects.filter(user=colleague).exists()


def test_a_new_accounts_one_time_password_is_changed_at_its_first_sign_in(
    page, live_server, researcher, log_in_as, screenshot
):
    _study("Read-only pilot")
    log_in_as(page)
    page.goto(f"{live_server.url}/accounts/users/")
    page.get_by_label("Username").fill("newcomer")
    page.get_by_label("Role").select_option("researcher")
    page.get_by_role("button", name="Add").click()
    password = page.get_by_test_id("new-password").inner_text()
    member_set(
        workspace=Membership.objects.get(user__username="newcomer").workspace,
        user=Membership.objects.get(user__username="newcomer").user,
        role="viewer",
        by=researcher,
    )
    page.get_by_role("button", name="Log out").click()

    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("newcomer")
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/accounts/password/\?first=1"))
    expect(page.get_by_test_id("first-sign-in")).to_be_visible()
    page.goto(f"{live_server.url}/studies/")
    expect(page).to_have_url(re.compile(r"/accounts/password/"))  # not before it is changed
    screenshot("first_sign_in")
    page.get_by_label("Old password").fill(password)
    page.get_by_label("New password", exact=True).fill("a-much-longer-pass-77")
    page.get_by_label("New password confirmation").fill("a-much-longer-pass-77")
    page.get_by_role("button", name="Change my password").click()

    page.goto(f"{live_server.url}/studies/")
    expect(page.get_by_text("Read-only pilot")).to_be_visible()  # a viewer reads
    screenshot("viewer_studies")
