"""CharToM-QA board in a real browser: a bonus point review done with the keyboard only
(merge two points, split one at the caret, reorder, edit, submit), a distractor review
that publishes the item, and the researcher's board, batch and provenance pages.

Every page is checked for Content-Security-Policy reports (scripts are static files).
"""

from __future__ import annotations

import pytest
from django.db import transaction
from playwright.sync_api import expect

from annotation.chartom.workflow import construction_advance, construction_lock
from annotation.models import Construction, Stage, TaskAssignment
from benchmarks.models import QAItem
from tests.annotation.chartom import conftest as chartom_fixtures
from tests.browser.conftest import sign_in

# The construction tests' fixtures (their conftest is not above this folder).
book = chartom_fixtures.book
make_construction = chartom_fixtures.make_construction

pytestmark = pytest.mark.django_db(transaction=True)

POINTS = [
    "Vautrin wants to please his neighbours.",
    "He pours for them first",
    "so that they feel flattered.",
    "He needs Eugene on his side and his scheme to go ahead.",
]
CHOICES = [
    "He wants everyone at the table to see how generous he is.",
    "He wants to show that he is in charge of the dinner.",
    "He wants to find out whether the wine is good before drinking it.",
]


def _advance(construction: Construction, stage: str) -> Construction:
    with transaction.atomic():
        return construction_advance(construction_lock(construction.pk), stage)


def _csp_watch(page) -> list[str]:
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    return violations


def _selected_text(page) -> str:
    return page.locator("#point-list li.selected textarea").input_value()


def test_bonus_review_by_keyboard(live_server, page, screenshot, annotator, make_construction):
    construction = make_construction(
        stage="bonus",
        state="running",
        question="Why does Vautrin pour for his neighbours before himself?",
        description="Vautrin flatters his neighbours because he needs Eugene on his side "
        "and his scheme to go ahead.",
        bonus_points=list(POINTS),
    )
    _advance(construction, Stage.BONUS_REVIEW)
    violations = _csp_watch(page)
    base = live_server.url
    sign_in(page, base, "ann", "pw-ann-123!")

    page.goto(f"{base}/annotation/chartom/")
    expect(page.get_by_test_id("open-bonus_review")).to_have_text("1")
    screenshot("chartom-board-annotator")
    page.keyboard.press("5")  # the bonus review card
    page.wait_for_url("**/annotation/chartom/bonus/*/")
    expect(page.locator("#point-list li")).to_have_count(4)
    expect(page.locator("#points-text")).to_be_hidden()  # the editor replaced the textarea
    expect(page.locator("#point-list li.selected")).to_be_focused()

    # Merge points 2 and 3.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("m")
    expect(page.locator("#point-list li")).to_have_count(3)
    assert _selected_text(page) == "He pours for them first so that they feel flattered."

    # Split point 3 after "He needs Eugene on his side": edit, put the caret, leave, S.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("e")
    page.keyboard.press("Control+Home")
    for _ in range(len("He needs Eugene on his side")):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("Escape")
    page.keyboard.press("s")
    expect(page.locator("#point-list li")).to_have_count(4)
    assert _selected_text(page) == "and his scheme to go ahead."

    # Reorder: the first point moves down one place.
    for _ in range(3):
        page.keyboard.press("ArrowUp")
    page.keyboard.press("Alt+ArrowDown")
    assert _selected_text(page) == POINTS[0]

    # Edit the last point.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.keyboard.press("Control+a")
    page.keyboard.type("His scheme must go ahead.")
    page.keyboard.press("Escape")
    screenshot("chartom-bonus-review")

    slot = TaskAssignment.objects.get(annotator=annotator, task__kind="bonus_review")
    page.keyboard.press("Control+Enter")
    page.wait_for_url(f"{base}/annotation/chartom/")
    expect(page.get_by_text("Bonus points saved")).to_be_visible()

    final = [
        "He pours for them first so that they feel flattered.",
        POINTS[0],
        "He needs Eugene on his side",
        "His scheme must go ahead.",
    ]
    construction.refresh_from_db()
    assert construction.bonus_points == final
    assert (construction.stage, construction.state) == ("distractors", "queued")
    slot.refresh_from_db()
    ops = slot.answer["operations"]
    assert [op["op"] for op in ops] == ["merge", "split", "move", "edit"]
    assert ops[0]["index"] == 1 and ops[1] == {"op": "split", "index": 2, "at": 27}
    assert (ops[2]["from"], ops[2]["to"]) == (0, 1)
    assert ops[3]["after"] == "His scheme must go ahead." and slot.answer["action"] == "edited"
    assert not violations, violations


def test_distractor_review_publishes_and_researcher_pages(
    live_server, page, screenshot, annotator, researcher, make_construction
):
    construction = make_construction(
        stage="distractors",
        state="running",
        question="Why does Vautrin pour for his neighbours before himself?",
        description="Vautrin flatters his neighbours so that his scheme goes ahead.",
        bonus_points=["Vautrin wants to please them.", "He needs his plan to go ahead."],
        misleadings=["The answer reads the gesture as plain good manners."],
        distractors=list(CHOICES),
    )
    _advance(construction, Stage.DISTRACTOR_REVIEW)
    # A second construction stuck on a failed step, for the batch page's retry list.
    make_construction(
        stage="bonus", state="needs_retry", dimension="belief", error="unparseable reply"
    )
    violations = _csp_watch(page)
    base = live_server.url
    sign_in(page, base, "ann", "pw-ann-123!")
    page.goto(f"{base}/annotation/chartom/")
    page.keyboard.press("6")
    page.wait_for_url("**/annotation/chartom/distractors/*/")
    expect(page.locator("#choice-1")).to_be_focused()
    page.keyboard.press("Escape")
    page.keyboard.press("2")
    expect(page.locator("#choice-2")).to_be_focused()
    page.keyboard.press("Control+a")
    page.keyboard.type("He is testing whether Goriot will notice the wine.")
    screenshot("chartom-distractor-review")
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/done/")
    construction.refresh_from_db()
    item = QAItem.objects.get(pk=construction.qa_item_id)
    assert item.misleading_choices[1] == "He is testing whether Goriot will notice the wine."
    expect(
        page.get_by_role("heading", name=f"Published as CharToM-QA item #{item.pk}")
    ).to_be_visible()
    expect(page.locator("#next-task")).to_be_focused()
    screenshot("chartom-distractor-published")
    page.keyboard.press("Enter")  # next task: none left, back to the board
    page.wait_for_url(f"{base}/annotation/chartom/")
    expect(page.get_by_text("Nothing is waiting for you")).to_be_visible()
    page.get_by_role("button", name="Log out").click()

    sign_in(page, base, "res", "pw-res-123!")
    page.goto(f"{base}/annotation/chartom/")
    expect(page.get_by_role("group", name="New note batch")).to_be_visible()
    screenshot("chartom-board-researcher")
    page.get_by_role("link", name="test batch").click()
    expect(page.get_by_test_id("needs-retry")).to_contain_text("unparseable reply")
    row = page.locator('tr[data-stage="published"]')
    expect(row.locator("td").last).to_have_text("1")
    screenshot("chartom-batch")
    page.get_by_role("button", name="Retry").click()
    expect(page.get_by_text("queued again")).to_be_visible()
    page.goto(f"{base}/annotation/chartom/constructions/{construction.pk}/")
    expect(page.get_by_test_id("published")).to_contain_text(item.question)
    expect(page.locator("#field-distractors")).to_contain_text("ann")
    expect(page.locator("#field-distractors ins").first).to_be_visible()
    screenshot("chartom-construction")
    assert not violations, violations


def test_bonus_review_with_the_mouse_down_to_an_empty_list_and_back(
    live_server, page, annotator, make_construction
):
    construction = make_construction(
        stage="bonus",
        state="running",
        question="Why does Vautrin pour for his neighbours before himself?",
        description="He needs Eugene on his side.",
        bonus_points=POINTS[:2],
    )
    _advance(construction, Stage.BONUS_REVIEW)
    violations = _csp_watch(page)
    base = live_server.url
    sign_in(page, base, "ann", "pw-ann-123!")
    page.goto(f"{base}/annotation/chartom/")
    page.locator('[data-start-key="5"]').click()
    page.wait_for_url("**/annotation/chartom/bonus/*/")
    for _ in range(2):
        page.locator("#point-list li").first.get_by_role("button", name="Delete").click()
    expect(page.locator("#point-list li")).to_have_count(0)
    expect(page.locator("#editor-status")).to_contain_text("No point left")
    expect(page.locator("#add-point")).to_be_focused()
    page.locator("#add-point").click()
    page.keyboard.type("Vautrin needs Eugene on his side.")
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(f"{base}/annotation/chartom/")
    construction.refresh_from_db()
    assert construction.bonus_points == ["Vautrin needs Eugene on his side."]
    slot = TaskAssignment.objects.get(annotator=annotator, task__kind="bonus_review")
    assert [op["op"] for op in slot.answer["operations"]] == ["delete", "delete", "add", "edit"]
    assert not violations, violations
