"""CharToM-QA construction screens driven by the keyboard in Debian's chromium.

1. Key-note extraction on a note holding an emoji and a combining mark: two fragments
   chosen with the arrow keys (Shift to extend, Enter to add), one added and removed
   again with its number key, one selected with the mouse; Ctrl+Enter submits and the
   stored code-point spans slice exactly the intended text.
2. Paraphrase review: E to edit, the live diff, Ctrl+Enter.
3. Question choice: 2 picks the second candidate, E edits it, Ctrl+Enter submits; the
   QuestionChoice record holds the edit, its diff and the time taken.
4. The qualification trial with the keyboard, its result page (the annotator's own
   selection marked, each item right or not; the gold only for the researcher).
Every page is checked for Content-Security-Policy complaints, and photographed.
"""

from __future__ import annotations

import json

import pytest
from django.db import transaction
from playwright.sync_api import expect

from annotation.chartom import qualification as quals
from annotation.chartom import workflow
from annotation.models import (
    Construction,
    FieldChange,
    QualificationAttempt,
    QuestionCandidate,
    QuestionChoice,
    Stage,
)

# The construction tests' fixtures (their own sample notes), used here as they are.
from tests.annotation.chartom.conftest import book, make_construction  # noqa: F401
from tests.browser.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

CAFE = "cafe\u0301"  # e + combining acute accent
NOTE = (
    f"Vautrin grins 😏 at the {CAFE} crowd: he wants Eugene on his side so the scheme goes ahead."
)
CANDIDATES = [
    ("What does Goriot long for while the boarders eat?", True),
    ("What does Goriot wish for as he thinks of his daughters?", True),
    ("What is on the table at dinner?", False),
    ("Why does Goriot smile at nobody in particular?", True),
]


def _advance(construction: Construction, stage: str) -> None:
    with transaction.atomic():
        locked = workflow.construction_lock(construction.pk)
        workflow.construction_advance(locked, stage)


def _log_in(page, base: str) -> None:
    sign_in(page, base, "ann", "pw-ann-123!")


def _csp_watch(page) -> list[str]:
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    return violations


def _press(page, key: str, times: int = 1) -> None:
    for _ in range(times):
        page.keyboard.press(key)


def test_extraction_and_question_choice_with_the_keyboard(
    live_server,
    page,
    screenshot,
    annotator,
    make_construction,  # noqa: F811 (the imported fixture)
):
    extraction = make_construction(stage=Stage.FILTER, state="running", note=0)
    note = extraction.note
    note.note_text = NOTE
    note.save(update_fields=["note_text"])
    _advance(extraction, Stage.EXTRACT)
    review = make_construction(
        stage=Stage.PARAPHRASE,
        state="running",
        note=0,
        dimension="belief",
        key_note="Vautrin grins",
        description="Vautrin believes the crowd admires him.",
    )
    _advance(review, Stage.PARAPHRASE_REVIEW)
    choice = make_construction(
        stage=Stage.QUESTIONS,
        state="running",
        note=1,
        dimension="desire",
        description="Goriot longs to see his daughters again.",
    )
    for position, (text, kept) in enumerate(CANDIDATES):
        QuestionCandidate.objects.create(
            construction=choice,
            position=position,
            text=text,
            kept=kept,
            verdict="appropriate" if kept else "inappropriate",
            verdict_reason="" if kept else "asks about a trivial detail",
        )
    FieldChange.objects.create(
        construction=choice,
        field="candidates",
        model="test-model",
        template="chartom-question v1, chartom-verify v1",
        action="generated",
    )
    _advance(choice, Stage.QUESTION_CHOICE)

    violations = _csp_watch(page)
    base = live_server.url
    _log_in(page, base)

    # --- 1. key-note extraction ---------------------------------------------------
    page.goto(f"{base}/annotation/chartom/work/extract/")
    expect(page.get_by_test_id("progress")).to_contain_text("0 done by you")
    page.get_by_test_id("take").click()
    page.wait_for_url("**/annotation/chartom/extract/*/")
    expect(page.get_by_test_id("dimension")).to_have_text("intention")
    expect(page.get_by_test_id("character")).to_have_text("Vautrin")
    box = page.get_by_test_id("note-text")
    expect(box).to_be_focused()
    # Words: Vautrin grins 😏 at the café crowd : he wants Eugene on his side so the
    # scheme goes ahead .  The caret starts on "Vautrin".
    _press(page, "ArrowRight")  # grins
    _press(page, "Shift+ArrowRight", 4)  # … 😏 at the café
    _press(page, "Enter")
    _press(page, "ArrowRight", 3)  # crowd, ":", he
    _press(page, "Shift+ArrowRight", 5)  # … side
    _press(page, "Enter")
    _press(page, "End")  # the final "."
    _press(page, "Enter")
    spans = page.get_by_test_id("span-list").locator("li .frag")
    expect(spans).to_have_count(3)
    _press(page, "3")  # a mistake: remove fragment 3 again
    expect(spans).to_have_text([f"grins 😏 at the {CAFE}", "he wants Eugene on his side"])
    # One fragment with the mouse: drag from inside "scheme" to inside "ahead".
    first = box.locator(".tok", has_text="scheme").bounding_box()
    last = box.locator(".tok", has_text="ahead").bounding_box()
    page.mouse.move(first["x"] + 3, first["y"] + first["height"] / 2)
    page.mouse.down()
    page.mouse.move(last["x"] + last["width"] - 3, last["y"] + last["height"] / 2, steps=5)
    page.mouse.up()
    expect(spans).to_have_text(
        [f"grins 😏 at the {CAFE}", "he wants Eugene on his side", "scheme goes ahead"]
    )
    screenshot("chartom-extract-keyboard")
    page.keyboard.press("Control+Enter")
    # The queue is empty after it: the queue page says so.
    page.wait_for_url("**/annotation/chartom/work/extract/")
    expect(page.get_by_test_id("empty")).to_be_visible()
    expect(page.get_by_test_id("progress")).to_contain_text("1 done by you")
    screenshot("chartom-work-empty")
    extraction.refresh_from_db()
    intended = [f"grins 😏 at the {CAFE}", "he wants Eugene on his side", "scheme goes ahead"]
    assert [NOTE[s:e] for s, e in extraction.key_spans] == intended
    assert extraction.key_note == " … ".join(intended)
    assert extraction.stage == Stage.PARAPHRASE

    # --- 2. paraphrase review -----------------------------------------------------
    page.goto(f"{base}/annotation/chartom/work/paraphrase_review/")
    page.get_by_test_id("take").click()
    page.wait_for_url("**/annotation/chartom/paraphrase/*/")
    page.keyboard.press("e")
    expect(page.locator("#text")).to_be_focused()
    _press(page, "Backspace", len("admires him."))
    page.keyboard.type("is laughing with him.")
    expect(page.get_by_test_id("diff").locator("ins").last).to_contain_text("laughing")
    screenshot("chartom-paraphrase-keyboard")
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/annotation/chartom/work/paraphrase_review/")
    review.refresh_from_db()
    assert review.description == "Vautrin believes the crowd is laughing with him."

    # --- 3. question choice -------------------------------------------------------
    page.goto(f"{base}/annotation/chartom/work/question_choice/")
    page.get_by_test_id("take").click()
    page.wait_for_url("**/annotation/chartom/question/*/")
    expect(page.get_by_role("radio")).to_have_count(3)
    page.keyboard.press("2")
    second = QuestionCandidate.objects.get(construction=choice, position=1)
    expect(page.get_by_role("radio", name=second.text)).to_be_checked()
    expect(page.locator("#text")).to_have_value(second.text)
    page.keyboard.press("e")
    expect(page.locator("#text")).to_be_focused()
    _press(page, "Backspace")  # the "?"
    page.keyboard.type(" at dinner?")
    expect(page.get_by_test_id("diff").locator("ins").last).to_contain_text("at dinner?")
    screenshot("chartom-question-keyboard")
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/annotation/chartom/work/question_choice/")
    record = QuestionChoice.objects.get(construction=choice)
    final = "What does Goriot wish for as he thinks of his daughters at dinner?"
    assert record.chosen == second and record.final_text == final
    assert record.diff == (
        "What does Goriot wish for as he thinks of his [-daughters?-]{+daughters at dinner?+}"
    )
    assert record.edit_distance == len(" at dinner")
    assert record.seconds > 0 and record.annotator == annotator
    assert record.template_versions["generation"] == "chartom-question v1"
    assert set(record.rejected.values_list("position", flat=True)) == {0, 2, 3}
    assert not violations, violations


def test_qualification_trial_with_the_keyboard(
    live_server,
    page,
    screenshot,
    annotator,
    researcher,
    make_construction,  # noqa: F811 (the imported fixture)
):
    first = make_construction(note=0).note
    second = make_construction(note=1).note
    rows = [
        {"note": first.pk, "dimension": "intention", "gold": ["he wants Eugene on his side"]},
        {"note": second.pk, "dimension": "desire", "gold": ["longs to see them"]},
    ]
    quals.qualification_set_create(
        name="starter set",
        threshold=0.8,
        rows=quals.gold_rows_parse("\n".join(json.dumps(r) for r in rows)),
        created_by=researcher,
    )
    violations = _csp_watch(page)
    base = live_server.url
    _log_in(page, base)
    page.goto(f"{base}/annotation/chartom/work/extract/")
    expect(page.get_by_test_id("not-qualified")).to_be_visible()
    page.get_by_role("link", name="qualification trial").click()
    page.get_by_test_id("start").click()
    page.wait_for_url("**/items/1/")
    # Item 1: "he wants Eugene on his side" — words 8 to 13 of the note.
    _press(page, "ArrowRight", 8)
    _press(page, "Shift+ArrowRight", 5)
    _press(page, "Enter")
    expect(page.get_by_test_id("span-list").locator("li .frag")).to_have_text(
        ["he wants Eugene on his side"]
    )
    screenshot("chartom-qualification-item")
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/items/2/")
    # Item 2: only "misses his daughters" (the gold is "longs to see them").
    _press(page, "ArrowRight", 1)
    _press(page, "Shift+ArrowRight", 2)
    _press(page, "Enter")
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/attempts/*/")
    page.get_by_test_id("finish").click()
    expect(page.get_by_test_id("result")).to_contain_text("Not qualified")
    # A retry is on the same items, so the annotator is not shown the gold they missed:
    # only their own selection is marked, and how much gold it left out.
    expect(page.locator(".ct-compare .cmp-missed")).to_have_count(0)
    expect(page.locator(".ct-compare .cmp-extra")).to_have_count(0)
    expect(
        page.locator(".ct-compare .cmp-selected", has_text="misses his daughters")
    ).to_have_count(1)
    # One item right, one not: a verdict per item, no gold.
    expect(page.get_by_test_id("verdict").filter(has_text="✓ Right")).to_have_count(1)
    expect(page.get_by_test_id("verdict").filter(has_text="Not right yet")).to_have_count(1)
    screenshot("chartom-qualification-result")
    attempt = QualificationAttempt.objects.get(annotator=annotator)
    assert attempt.passed is False and attempt.score == pytest.approx(0.5)

    # The researcher sees every attempt on the set, and opens this one.
    page.get_by_role("button", name="Log out").click()
    sign_in(page, base, "res", "pw-res-123!")
    page.goto(f"{base}/annotation/chartom/qualification/")
    expect(page.get_by_role("heading", name="New gold set")).to_be_visible()
    screenshot("chartom-qualification-researcher")
    page.get_by_role("link", name="starter set").click()
    row = page.get_by_test_id("attempts").locator("tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("ann")
    expect(row).to_contain_text("not qualified")
    screenshot("chartom-qualification-set")
    row.get_by_role("link", name="details").click()
    expect(page.get_by_role("heading", name="ann's attempt on starter set")).to_be_visible()
    # The researcher sees the gold the annotator missed.
    expect(page.locator(".ct-compare .cmp-missed").first).to_have_text("longs to see them")
    screenshot("chartom-qualification-attempt-researcher")
    assert not violations, violations
