import pytest

from benchmarks.models import Work

pytestmark = pytest.mark.django_db(transaction=True)


def test_researcher_logs_in_and_sees_item_bank(live_server, page, screenshot, researcher):
    Work.objects.create(
        benchmark="dyntom", key="trial_x", title="trial_x: Ana", kind="social_stage"
    )
    page.goto(f"{live_server.url}/")
    assert "/accounts/login/" in page.url
    page.get_by_label("Username").fill("res")
    page.get_by_label("Password").fill("pw-res-123!")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")
    table = page.get_by_role("table")
    assert "DynToM" in table.inner_text()
    row = page.get_by_role("row", name="DynToM")
    assert row.get_by_role("cell").nth(1).inner_text() == "1"
    assert screenshot("home-researcher").stat().st_size > 0


def test_wrong_password_shows_error(live_server, page, screenshot, rater):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("rat")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    assert page.get_by_role("alert").is_visible()
    page.set_viewport_size({"width": 390, "height": 800})
    screenshot("login-error-phone")
