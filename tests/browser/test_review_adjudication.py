"""An adjudication round: four annotators disagree on a DynToM validation object, a
researcher reviews it in the browser with the keyboard, and the validation report shows
agreement before and after adjudication and the decisions changed.

Data: ``tests.validation_disputes``. trial149's trajectory: rationality 5, 5, 2, 5
(spread 3, the rules keep it). The reviewer settles it on 3 (and 5 elsewhere): the rules
on the settled scores discard it. Rationality's ordinal alpha is 0.1 before and 1.0
after (hand-computed in tests/annotation/test_validation_review.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.models import Adjudication, ValidationDecision
from tests.validation_disputes import disputed_batch

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reviewer_settles_a_disagreement_and_the_report_counts_it(
    live_server, page, screenshot, researcher, log_in_as, nav, shared_data: Path, tmp_path: Path
):
    batch, _ = disputed_batch(shared_data, tmp_path)
    log_in_as(page)
    # The report before: nothing adjudicated yet.
    nav(page, "Reports", "Validation agreement")
    agreement = page.locator("#table-agreement-review")
    row = agreement.locator("tr", has_text="rationality")
    expect(row.locator("td").nth(-2)).to_have_text("0.100")
    expect(row.locator("td").last).to_have_text("0.100")
    screenshot("review-0-report-before")

    nav(page, "Annotation", "Review disagreements")
    expect(page.get_by_role("heading", name="Review disagreements")).to_be_visible()
    page.get_by_role("link", name=batch.name).click()
    expect(page.get_by_test_id("queue-summary")).to_contain_text("2 to settle")
    queue = page.get_by_test_id("review-queue")
    expect(queue.locator("tbody tr")).to_have_count(2)
    screenshot("review-1-queue")
    queue.locator("tr", has_text="mental-state trajectory").get_by_role("link").click()

    # The four answers side by side; the disputed criterion flagged.
    answers = page.get_by_test_id("answers")
    for name in ("ann0", "ann1", "ann2", "ann3"):
        expect(answers.get_by_role("columnheader", name=name)).to_be_visible()
    disputed_row = answers.locator("tr.disputed")
    expect(disputed_row).to_have_count(1)
    expect(disputed_row).to_contain_text("Rationality")
    expect(disputed_row).to_contain_text("3 ⚑")
    expect(page.get_by_test_id("alone")).to_contain_text("discard")

    # Decide with the keyboard: arrows move within a radio group, Tab to the next.
    page.get_by_label("the rules decide from my settled scores").focus()
    page.keyboard.press("Space")
    for criterion, value in (("coherence", "5"), ("rationality", "3"), ("authenticity", "5")):
        group = page.get_by_role("group", name=f"Settled {criterion} (optional)")
        group.get_by_role("radio", name=f"{value} ·").focus()
        page.keyboard.press("Space")
        expect(group.get_by_role("radio", name=f"{value} ·")).to_be_checked()
    page.get_by_label("Reason").focus()
    page.keyboard.type("Scenario 3's change of mind has no cause in the story.")
    screenshot("review-2-deciding")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    # On to the next object to settle: the split profiles and relationship.
    expect(page.get_by_role("heading", name="trial149: ")).to_contain_text("profiles")
    row = Adjudication.objects.get()
    assert (row.outcome, row.rule_outcome, row.reviewer_id) == ("discard", "keep", researcher.pk)
    decision = ValidationDecision.objects.get(object=row.object)
    assert (decision.outcome, decision.effective_outcome) == ("keep", "discard")

    # The report after: alpha 0.1 -> 1.0 on rationality, one decision changed.
    nav(page, "Reports", "Validation agreement")
    agreement = page.locator("#table-agreement-review")
    row = agreement.locator("tr", has_text="rationality")
    expect(row.locator("td").nth(-2)).to_have_text("0.100")
    expect(row.locator("td").last).to_have_text("1.000")
    expect(page.get_by_text("Decisions changed").first).to_be_visible()
    review_table = page.locator("#table-review")
    expect(review_table.locator("tr", has_text="mental-state trajectory")).to_contain_text("1")
    screenshot("review-3-report-after")
