"""Note checks and expert judgement with the keyboard only, then the report's tables.

An annotator checks two notes (keys 1 and 3: each submits and opens the next note),
then scores two model answers (7 with a comment typed around digits that must not
change the score, Ctrl+Enter; p, Ctrl+Enter). A researcher then sees the note-check
shares and Table 7 at /reports/chartom-qa/. No page breaks the Content-Security-Policy.
"""

from __future__ import annotations

import hashlib

import pytest
from playwright.sync_api import expect

from annotation.chartom.judgement import judgement_sample_create
from annotation.chartom.note_checks import note_check_sample
from annotation.models import BookText, Construction, NoteBatch, ReaderNote, TaskAssignment
from benchmarks.models import Benchmark, Work
from modeling.models import Prediction, Run
from tests.browser.conftest import SCREENSHOTS, sign_in
from tests.factories import QAItemFactory, WorkFactory

pytestmark = pytest.mark.django_db(transaction=True)

PLOT = (
    "Vautrin filled the glasses of his two neighbours first, then poured a few careful "
    "drops into his own and watched them drink."
)


@pytest.fixture
def work_to_do(db):
    book = BookText.objects.create(
        title="Father Goriot", text=PLOT, sha256=hashlib.sha256(PLOT.encode()).hexdigest()
    )
    batch = NoteBatch.objects.create(name="browser batch")
    for i, (character, note) in enumerate(
        [
            ("Vautrin", "He is buttering them up on purpose: he wants Eugene on his side."),
            ("Eugene", "Eugene feels uneasy and suspects the wine is a trap."),
        ]
    ):
        reader_note = ReaderNote.objects.create(
            batch=batch,
            position=i + 1,
            book=book,
            target_character=character,
            underlined_text="Vautrin filled the glasses of his two neighbours first",
            context=PLOT,
            note_text=note,
            context_0=PLOT,
        )
        Construction.objects.create(
            note=reader_note,
            dimension="intention",
            filter_verdict="yes",
            filter_reason="the note names what he is after",
        )
        Construction.objects.create(
            note=reader_note, dimension="belief", filter_verdict="no", filter_reason="no belief"
        )
    note_check_sample(batch=batch, size=2, seed=0, k=1)
    work = WorkFactory(benchmark=Benchmark.CHARTOM_QA, kind=Work.Kind.BOOK, key="goriot")
    run = Run.objects.create(
        name="gpt-hidden", benchmark="chartom-qa", method="generative", model="m", imported=True
    )
    for i in range(2):
        Prediction.objects.create(
            run=run,
            qa_item=QAItemFactory(
                work=work,
                question=f"Why does Vautrin fill his neighbours' glasses first ({i})?",
                answer="He wants to win Eugene over so that his scheme goes ahead.",
                context_0=PLOT,
                context_1000=PLOT + " A longer window of the dinner scene.",
            ),
            parse_status="ok",
            raw_output="He is being polite to his neighbours because he likes them.",
            details={
                "task": "generative",
                "bonus_points_total": 2,
                "bonus_points_included": [0] if i else [],
                "defects": ["misses the scheme"],
                "rouge_l": 0.2 + 0.1 * i,
            },
        )
    return judgement_sample_create(name="browser sample", run_ids=[run.pk], size=2, k=1)


def test_checks_with_the_keyboard_then_the_report(
    live_server, page, screenshot, annotator, researcher, work_to_do
):
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    base = live_server.url
    sign_in(page, base, "ann", "pw-ann-123!")
    page.goto(f"{base}/annotation/chartom/checks/")
    page.get_by_role("button", name="Check the next note").click()
    page.wait_for_url("**/checks/notes/*/")
    expect(page.get_by_test_id("verdicts")).to_contain_text("the note names what he is after")
    first_url = page.url
    screenshot("chartom-note-check")
    page.keyboard.press("1")
    page.wait_for_url(lambda url: url != first_url and "/checks/notes/" in url)
    expect(page.get_by_test_id("note-text")).to_be_visible()
    page.keyboard.press("3")
    page.wait_for_url("**/annotation/chartom/checks/")
    expect(page.get_by_text("No note left for you to check")).to_be_visible()
    labels = list(
        TaskAssignment.objects.filter(annotator=annotator, task__kind="note_check")
        .order_by("submitted_at")
        .values_list("answer", flat=True)
    )
    assert labels == [{"label": "accurate"}, {"label": "inappropriate"}]

    page.get_by_role("button", name="Score the next answer").click()
    page.wait_for_url("**/checks/judgement/*/")
    expect(page.get_by_test_id("answer")).to_contain_text("polite to his neighbours")
    page.keyboard.press("7")
    expect(page.locator("input[name=score][value='0.7']")).to_be_checked()
    page.locator("#comment").fill("")
    page.locator("#comment").type("misses 2 points")  # digits in the box are text
    expect(page.locator("input[name=score][value='0.7']")).to_be_checked()
    screenshot("chartom-judgement")
    first_url = page.url
    page.keyboard.press("Control+Enter")
    page.wait_for_url(lambda url: url != first_url and "/checks/judgement/" in url)
    page.keyboard.press("p")
    expect(page.locator("input[name=score][value='1.0']")).to_be_checked()
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/annotation/chartom/checks/")
    scores = list(
        TaskAssignment.objects.filter(annotator=annotator, task__kind="judgement")
        .order_by("submitted_at")
        .values_list("answer", flat=True)
    )
    assert scores == [{"score": 0.7, "comment": "misses 2 points"}, {"score": 1.0, "comment": ""}]

    page.context.clear_cookies()
    sign_in(page, base, "res", "pw-res-123!")
    page.goto(f"{base}/annotation/chartom/checks/")
    expect(page.get_by_role("heading", name="Sample notes to check")).to_be_visible()
    screenshot("chartom-checks-researcher")
    page.goto(f"{base}/reports/chartom-qa/")
    expect(page.locator("#table-note-checks")).to_contain_text("Paper, section 4.1 (reference)")
    expect(page.locator("#table-table-7")).to_contain_text("Human Correlation (Pearson r)")
    screenshot("chartom-report")
    page.locator("#table-note-checks").screenshot(
        path=str(SCREENSHOTS / "chartom-report-note-checks.jpg")
    )
    page.locator("#table-table-7").screenshot(path=str(SCREENSHOTS / "chartom-report-table-7.jpg"))
    assert violations == []
