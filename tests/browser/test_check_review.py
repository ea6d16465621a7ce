"""A review round on CharToM-QA note checks: four annotators disagree on two notes, a
researcher settles both with the keyboard, and the report shows agreement before and
after adjudication and the decisions changed.

Data: ``tests.check_disputes`` (agreement 61.11%, nominal alpha 0.0494 before; 100%
and 1.0 once both disputed notes are settled). The first is settled on its most
frequent label (accurate: not a change), the second, a 2-2 split, on inappropriate
(a change).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.models import Adjudication
from tests.check_disputes import conflicting_note_checks

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path("/tmp/shots/h49b")


def _shot(page, screenshot, name: str) -> None:
    """The suite's screenshot, and a PNG copy at this width for the change's review."""
    path = screenshot(name)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    assert path.exists()


def test_a_reviewer_settles_conflicting_note_checks_and_the_report_counts_it(
    live_server, page, screenshot, researcher, log_in_as, nav
):
    _, _, tasks = conflicting_note_checks()
    page.set_viewport_size({"width": 1280, "height": 800})
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    log_in_as(page)
    page.goto(f"{live_server.url}/reports/chartom-qa/")
    # The page rounds: 61.11% and 0.0494 show as 61.1 and 0.049.
    before = page.locator("#table-check-review").locator("tr", has_text="Note checks").locator("td")
    expect(before.nth(5)).to_have_text("61.1")
    expect(before.nth(6)).to_have_text("0.049")

    nav(page, "Annotation", "Review CharToM-QA checks")
    expect(page.get_by_test_id("queue-summary")).to_contain_text("2 to settle")
    queue = page.get_by_test_id("review-notes")
    expect(queue.locator("tbody tr")).to_have_count(2)
    _shot(page, screenshot, "check-review-queue-1280")
    queue.get_by_role("link").first.click()

    # The four labels side by side, under the annotators' names.
    answers = page.get_by_test_id("answers")
    for name in ("ann0", "ann1", "ann2", "ann3"):
        expect(answers.get_by_role("columnheader", name=name)).to_be_visible()
    expect(page.get_by_test_id("rule-outcome")).to_have_text("accurate")
    page.keyboard.press("1")
    expect(page.get_by_role("radio", name="accurate", exact=True)).to_be_checked()
    page.get_by_label("Reason").fill("Three readers agree and the text bears them out.")
    _shot(page, screenshot, "check-review-task-1280")
    page.keyboard.press("Control+Enter")

    # On to the split note: the key picks, Ctrl+Enter decides from the reason box.
    expect(page.get_by_test_id("rule-outcome")).to_have_text("split")
    page.keyboard.press("3")
    expect(page.get_by_role("radio", name="inappropriate")).to_be_checked()
    page.get_by_label("Reason").fill("He is not scheming here: the note misreads the dinner.")
    page.get_by_label("Reason").press("Control+Enter")
    expect(page.get_by_test_id("queue-summary")).to_contain_text("0 to settle")
    expect(page.get_by_test_id("queue-summary")).to_contain_text("1 note check")
    rows = list(
        Adjudication.objects.order_by("pk").values_list("task_id", "outcome", "rule_outcome")
    )
    assert rows == [(tasks[1].pk, "accurate", "accurate"), (tasks[2].pk, "inappropriate", "split")]

    page.set_viewport_size({"width": 390, "height": 800})
    _shot(page, screenshot, "check-review-queue-390")
    page.get_by_test_id("review-notes").get_by_role("link").last.click()
    expect(page.get_by_test_id("history")).to_contain_text("inappropriate")
    _shot(page, screenshot, "check-review-task-390")

    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{live_server.url}/reports/chartom-qa/")
    after = page.locator("#table-check-review").locator("tr", has_text="Note checks")
    cells = after.locator("td")
    # Check, items, disputed, settled, changed, agreement/alpha before, after.
    expect(cells.nth(4)).to_have_text("1")
    expect(cells.nth(5)).to_have_text("61.1")
    expect(cells.nth(7)).to_have_text("100.0")
    expect(cells.nth(8)).to_have_text("1.000")
    page.locator("#table-check-review").screenshot(path=str(SHOTS / "check-review-report.png"))
    assert violations == []
