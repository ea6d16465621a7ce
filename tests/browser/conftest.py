"""Playwright driving Debian's chromium (never `playwright install`)."""

import os
from pathlib import Path

import pytest
from django.conf import settings

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    # With no GPU the compositor draws in software either way; in the browser process it
    # spares a process and its IPC: about 4 % less chromium CPU in three alternating
    # pairs of six and eight browser tests (docs/benchmarks.md, issue 44).
    "--in-process-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
# In the checkout, not the run's temporary data folder: they are kept to be looked at.
SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
SCREENSHOT_QUALITY = 80

# Playwright's sync API runs an event loop in this thread; Django then refuses ORM
# calls from the test body unless told the loop is not serving requests here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} missing: apt-get install -y chromium")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def screenshot(page):
    """Save a full-page screenshot under var/screenshots/NAME.jpg and return its path.

    JPEG at quality 80: chromium encodes it in about 60 % of a PNG's time (145 full-page
    shots a run), and it reads as well when looked at."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = SCREENSHOTS / f"{name}.jpg"
        page.screenshot(path=str(path), full_page=True, quality=SCREENSHOT_QUALITY)
        return path

    return take


def sign_in(page, base_url: str, username: str, password: str) -> None:
    """Sign ``page`` in as ``username`` and open the home page.

    The log-in form is driven where it is the subject (test_login.py, a first sign-in in
    test_workspaces.py, the pages under the CSP, the researcher's whole loop). Elsewhere
    the session is made on the server as the form's POST makes it (``force_login`` sends
    the same ``user_logged_in`` signal) and handed to the browser as its cookie: the
    form's page, its POST and their static files are spared, about 0.5 s of chromium and
    server CPU a log-in and a hundred log-ins a run (docs/testing.md)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.get(username=username)
    assert user.check_password(password), f"the password given for {username!r} is not theirs"
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": base_url}]
    )
    page.goto(f"{base_url}/")
    page.wait_for_url(f"{base_url}/")  # not sent on to a password change or the login


@pytest.fixture
def log_in_as(live_server):
    """Sign ``page`` in (the researcher fixture's user by default): ``sign_in``."""

    def log_in(page, username: str = "res", password: str = "pw-res-123!") -> None:
        sign_in(page, live_server.url, username, password)

    return log_in


@pytest.fixture
def screenshot_of():
    """Like ``screenshot``, for a second page of the test (another person's browser)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(other_page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.jpg"
        other_page.screenshot(path=str(path), full_page=True, quality=SCREENSHOT_QUALITY)
        return path

    return take


@pytest.fixture
def nav():
    """Follow a link of the navigation: open its menu (``group``), then click ``link``."""

    def follow(page, group: str, link: str) -> None:
        menus = page.get_by_role("navigation", name="Main")
        menus.locator("summary", has_text=group).click()
        menus.get_by_role("link", name=link, exact=True).click()

    return follow
