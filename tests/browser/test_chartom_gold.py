"""A researcher builds a gold set with the span widget; an annotator's trial matches it.

The researcher creates an empty set (an inactive draft), picks a note holding an
emoji and a combining mark, marks the gold fragment with the keyboard, saves it with
Ctrl+Enter and activates the set. The annotator then selects the same text with the
mouse in the trial and scores 1.00. The builder is photographed, and every page is
checked for Content-Security-Policy complaints.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import QualificationAttempt, QualificationSet

# The construction tests' fixtures (their own sample notes), used here as they are.
from tests.annotation.chartom.conftest import book, make_construction  # noqa: F401
from tests.browser.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

CAFE = "cafe\u0301"  # e + combining acute accent
NOTE = f"Vautrin grins 😏 at the {CAFE} crowd: he wants Eugene on his side."
GOLD = f"grins 😏 at the {CAFE}"


def test_researcher_builds_a_gold_item_and_a_matching_trial_scores_1(
    live_server,
    page,
    screenshot,
    annotator,
    researcher,
    make_construction,  # noqa: F811 (the imported fixture)
):
    note = make_construction(note=0).note
    note.note_text = NOTE
    note.save(update_fields=["note_text"])
    make_construction(note=1)  # a second note to choose from
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    base = live_server.url

    # --- the researcher: an empty set, one gold item marked with the keyboard ---------
    sign_in(page, base, "res", "pw-res-123!")
    page.goto(f"{base}/annotation/chartom/qualification/")
    page.get_by_label("Name").fill("built by hand")
    page.get_by_role("button", name="Create the set").click()
    page.wait_for_url("**/qualification/sets/*/")
    expect(page.get_by_test_id("set-status")).to_contain_text("inactive · 0 items")
    page.locator("#gold-note").select_option(
        label=f"test batch · #1 · Vautrin · {' '.join(NOTE.split()[:8])} …"
    )
    page.locator("#gold-dimension").select_option("emotion")
    page.get_by_test_id("open-note").click()
    page.wait_for_url("**/items/new/?*")
    box = page.get_by_test_id("note-text")
    expect(box).to_be_focused()
    expect(page.get_by_test_id("dimension")).to_have_text("emotion")
    page.keyboard.press("ArrowRight")  # grins
    for _ in range(4):  # … 😏 at the café
        page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("Enter")
    fragments = page.get_by_test_id("span-list").locator("li .frag")
    expect(fragments).to_have_text([GOLD])
    screenshot("chartom-gold-builder")
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/qualification/sets/*/#item-1")
    expect(page.get_by_test_id("gold-item")).to_have_count(1)
    expect(page.get_by_test_id("gold-item").locator(".cmp-both")).to_have_text(GOLD)
    page.get_by_test_id("activate").click()
    expect(page.get_by_test_id("set-status")).to_contain_text("active · 1 item")
    screenshot("chartom-gold-set")
    qset = QualificationSet.objects.get(name="built by hand")
    item = qset.items.get()
    assert [NOTE[s:e] for s, e in item.gold_spans] == [GOLD]
    assert (item.note, item.dimension, qset.is_active) == (note, "emotion", True)
    page.get_by_role("button", name="Log out").click()

    # --- the annotator: the same text with the mouse scores 1.00 ----------------------
    sign_in(page, base, "ann", "pw-ann-123!")
    page.goto(f"{base}/annotation/chartom/qualification/")
    page.get_by_test_id("start").click()
    page.wait_for_url("**/items/1/")
    box = page.get_by_test_id("note-text")
    first = box.locator(".tok", has_text="grins").bounding_box()
    last = box.locator(".tok", has_text=CAFE).bounding_box()
    page.mouse.move(first["x"] + 3, first["y"] + first["height"] / 2)
    page.mouse.down()
    page.mouse.move(last["x"] + last["width"] - 2, last["y"] + last["height"] / 2, steps=5)
    page.mouse.up()
    expect(page.get_by_test_id("span-list").locator("li .frag")).to_have_text([GOLD])
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/attempts/*/")
    page.get_by_test_id("finish").click()
    expect(page.get_by_test_id("result")).to_contain_text("Qualified")
    expect(page.get_by_test_id("score")).to_have_text("1.00")
    attempt = QualificationAttempt.objects.get(annotator=annotator)
    assert attempt.score == 1.0 and attempt.passed
    assert not violations, violations
