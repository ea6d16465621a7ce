"""The Content-Security-Policy in a real browser: the main pages load with no CSP
violation in the console, and htmx still works under it (autosave, the history panel,
live progress polling).

Chromium reports each refused inline script, style attribute, <style> element or eval
as a console error ("Refused to …"); any such message fails the test.
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from modeling.models import Run
from modeling.runs import services as run_services
from studies.models import Study
from studies.participation import services as participation_services
from tests.factories import DynToMQuestionFactory
from tests.modeling import conftest as run_fixtures
from tests.studies import conftest as study_fixtures

pytestmark = pytest.mark.django_db(transaction=True)

friends = study_fixtures.friends
live_study = study_fixtures.live_study
openai_backend = run_fixtures.openai_backend


@pytest.fixture
def violations(page) -> list[str]:
    """Console messages about the policy, from every page this test opens."""
    seen: list[str] = []

    def on_console(message) -> None:
        text = message.text
        if "Content Security Policy" in text or text.startswith("Refused to"):
            seen.append(f"{page.url}: {text}")

    page.on("console", on_console)
    return seen


def _log_in(page, base: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill("res")
    page.get_by_label("Password").fill("pw-res-123!")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/")


def _settle(page) -> None:
    # Not "networkidle": pages that poll every 2 s may never be idle on a busy machine.
    # Violations are reported as the page is parsed and styled, so "load" is enough,
    # plus a moment for htmx to process the page.
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)


def test_rater_pages_work_under_the_policy(
    live_server, page, screenshot, violations, live_study, friends
):
    from tests.studies.test_rater_views import add_history

    add_history(friends)  # earlier scenes: the history step and panel are there
    live_study.study_items.exclude(position__in=(2, 3)).update(held_back=True)
    (participant,) = participation_services.participants_invite(
        study=live_study, labels=["CSP rater"]
    )

    page.goto(f"{live_server.url}/s/{participant.token}/")
    page.get_by_role("button", name="I agree, start").click()
    page.get_by_role("button", name="No, I have not").click()
    page.get_by_role("button", name="I have read it").click()
    expect(page.get_by_test_id("progress")).to_have_text("Scene 1 / 2")
    _settle(page)

    # htmx under the policy: a keyboard choice is saved by an htmx POST ...
    page.keyboard.press("1")
    expect(page.locator("[id^=status-]").first).to_have_text("✓ Saved")
    # ... and the history panel loads its body by htmx when first opened.
    page.get_by_text("Earlier scenes (history)").click()
    expect(page.locator(".history-panel .history-body")).to_contain_text("we need to talk")
    bar = page.locator(".progress-bar").first
    assert bar.evaluate("el => getComputedStyle(el).width") == "0px"  # scene 1 of 2: 0%
    screenshot("csp-rater-scene")

    assert violations == [], "\n".join(violations)


def test_researcher_pages_work_under_the_policy(
    live_server, page, screenshot, violations, live_study, openai_backend
):
    DynToMQuestionFactory()
    run = run_services.run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=openai_backend,
        selection={"limit": 1},
        enqueue=False,
    )
    Run.objects.filter(pk=run.pk).update(total_calls=4, done_calls=1, status=Run.Status.RUNNING)
    base = live_server.url
    _log_in(page, base)

    pages = [
        "/",
        reverse("studies:list"),
        reverse("studies:new"),
        reverse("modeling:run-list"),
        reverse("reports:index"),
        reverse("reports:report", args=["tvshowguess"]),
        reverse("admin:index"),
        reverse("admin:modeling_backend_change", args=[openai_backend.pk]),
        reverse("admin:modeling_run_changelist"),
        "/api/modeling/backends/",
    ]
    for url in pages:
        response = page.goto(f"{base}{url}")
        assert response.status == 200, url
        assert "script-src 'self'" in response.headers["content-security-policy"], url
        _settle(page)

    # Swagger UI from our static files, started by its own script file, not inline.
    page.goto(f"{base}/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("ToMLab API")
    screenshot("csp-api-docs")

    # Live progress: the study page polls itself with htmx every 2 s.
    page.goto(f"{base}{reverse('studies:detail', args=[live_study.pk])}")
    with page.expect_request(lambda r: r.headers.get("hx-request") == "true", timeout=6000):
        pass
    screenshot("csp-study-detail")

    # The run page: the progress bar's width comes from a class, not a style attribute.
    page.goto(f"{base}{reverse('modeling:run-detail', args=[run.pk])}")
    with page.expect_request(lambda r: r.headers.get("hx-request") == "true", timeout=6000):
        pass
    expect(page.get_by_test_id("run-status")).to_be_visible()
    # Both widths in one script run, looked up inside it: the region swaps itself every
    # 2 s, and an element found before a swap measures 0 once detached.
    track, bar = page.wait_for_function(
        """() => {
            const s = document.querySelector('#run-progress');
            const box = c => s && s.querySelector(c);
            const w = c => (box(c) ? box(c).getBoundingClientRect().width : 0);
            return w('.progress') > 0 ? [w('.progress'), w('.progress-bar')] : null;
        }""",
        timeout=6000,
    ).json_value()
    assert abs(bar / track - 0.25) < 0.02  # pct-25: 1 of 4 calls
    screenshot("csp-run-detail")

    assert Study.objects.filter(pk=live_study.pk).exists()
    assert violations == [], "\n".join(violations)
