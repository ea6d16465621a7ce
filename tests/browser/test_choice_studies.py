"""One participant takes a CharToM-QA question in two rounds and a DynToM stage with the
keyboard only; the researcher applies the read/not-read design in the browser and then
sees both answers with their times.

Real data: the two published CharToM-QA items, with their c = 2k windows cut from the
real novels, and a real DynToM stage (its 20 understanding questions).
"""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from benchmarks.models import DynToMStage, QAItem, Work
from studies.choice import services as cs
from studies.models import Assignment, ChoiceAnswer
from studies.participation.services import participant_consent, participants_invite
from studies.services import study_launch

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def chartom_items(shared_data):
    # The published items have no c = 2k window: it is cut from the novels at import.
    call_command(
        "import_benchmark",
        "chartom-qa",
        str(shared_data / "chartom-qa" / "paper_examples.jsonl"),
        "--split",
        "test",
        "--books",
        str(shared_data / "novels"),
        "--no-progress",
    )
    assert QAItem.objects.filter(context_2000__isnull=False).count() == 2
    return list(Work.objects.filter(benchmark="chartom-qa").order_by("key"))


def _ready(page) -> None:
    """Wait until choice.js listens: a digit pressed before it runs is lost."""
    expect(page.locator("form#choice-form[data-keys=ready]")).to_have_count(1)


def _keys(page, *keys: str) -> None:
    for key in keys:
        page.keyboard.press(key)


def test_participant_two_round_question_and_dyntom_stage_by_keyboard(
    live_server, page, screenshot, screenshot_of, log_in_as, researcher, chartom_items, shared_data
):
    books = chartom_items
    study = cs.choice_study_create(
        name="CharToM-QA human study", benchmark="chartom-qa", works=books, seed=3
    ).study
    study_launch(study=study)
    me, other = participants_invite(study=study, labels=["Keyboard reader", "Other reader"])
    participant_consent(participant=other)
    cs.books_declare(participant=other, read_work_ids={books[1].pk})

    page.goto(f"{live_server.url}/s/{me.token}/")
    expect(page.get_by_role("heading", name="Welcome to the study")).to_be_visible()
    page.get_by_role("button", name="I agree, start").focus()
    _keys(page, "Enter")
    expect(page.get_by_role("heading", name="Which of these books have you read?")).to_be_visible()
    page.get_by_label(books[0].title).focus()
    _keys(page, "Space", "Tab", "Tab", "Enter")  # tick the first book, on to Continue
    expect(page.get_by_text("Open this same link again later")).to_be_visible()
    screenshot("choice-1-waiting-for-design")

    # The researcher reviews the design and applies it.
    researcher_page = page.context.browser.new_page()
    log_in_as(researcher_page)
    researcher_page.goto(f"{live_server.url}/studies/{study.pk}/design/")
    expect(researcher_page.get_by_test_id("uncovered")).to_have_text(
        "Every question has a reader and a non-reader."
    )
    rows = researcher_page.get_by_test_id("design-rows").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("Keyboard reader")
    screenshot_of(researcher_page, "choice-2-design")
    researcher_page.get_by_role("button", name="Apply the design").click()
    expect(researcher_page.get_by_text("Design applied")).to_be_visible()

    mine = list(Assignment.objects.filter(participant=me).order_by("position"))
    assert [a.seen for a in sorted(mine, key=lambda a: a.seen)] == [False, True]
    page.goto(f"{live_server.url}/s/{me.token}/")
    for number, assignment in enumerate(mine, start=1):
        item = QAItem.objects.get(pk=assignment.study_item.qa_item_id)
        # A line from the first half of the long window: never in the short one.
        half = item.context_2000[: len(item.context_2000) // 2]
        probe = next(line.strip() for line in half.splitlines() if len(line.strip()) > 50)[:50]
        order = cs.option_order(assignment.option_seed, 4)
        group = page.get_by_role("radiogroup", name=item.question)
        expect(group).to_be_visible()
        expect(page.get_by_test_id("progress")).to_have_text(f"Question {number} / 2")
        expect(page.get_by_test_id("passage")).not_to_contain_text(probe)
        wrong = next(i for i, o in enumerate(order) if o != 0)
        _ready(page)
        _keys(page, str(wrong + 1))
        expect(group.locator("input:checked")).to_have_count(1)
        screenshot(f"choice-3-question-{number}-first")
        _keys(page, "Enter")
        expect(page.get_by_role("button", name="Keep answer")).to_be_visible()
        expect(page.get_by_role("button", name="Change answer")).to_be_visible()
        expect(page.get_by_test_id("passage")).to_contain_text(probe)
        screenshot(f"choice-4-question-{number}-revise")
        _ready(page)
        if number == 1:
            _keys(page, "Enter")  # keep the first answer
        else:
            _keys(page, str(order.index(0) + 1), "Enter")  # change to another option
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()
    picks = ChoiceAnswer.objects.filter(assignment__participant=me).order_by(
        "assignment__position", "round"
    )
    assert [(c.round, c.kept) for c in picks] == [(1, None), (2, True), (1, None), (2, False)]
    assert all(c.ms >= 0 for c in picks) and picks[1].shown_at == picks[0].answered_at

    # The same person in a DynToM study: read a real stage, answer its questions.
    call_command("import_benchmark", "dyntom", str(shared_data / "dyntom" / "trial149"))
    stage = DynToMStage.objects.get()
    dyn = cs.choice_study_create(
        name="DynToM human baseline",
        benchmark="dyntom",
        works=[stage.work],
        stage_fraction=1,
        question_types=["understanding"],
    ).study
    study_launch(study=dyn)
    (again,) = participants_invite(study=dyn, labels=["Keyboard reader"])
    page.goto(f"{live_server.url}/s/{again.token}/")
    page.get_by_role("button", name="I agree, start").focus()
    _keys(page, "Enter")
    page.get_by_role("button", name="Start this story").focus()
    _keys(page, "Enter")
    story = page.get_by_test_id("story")
    expect(story).to_contain_text("Scenario 1")
    expect(story).to_contain_text(stage.main_character)
    questions = cs.dyntom_questions(dyn.study_items.get())
    assert len(questions) == 20
    for n, question in enumerate(questions, start=1):
        expect(page.get_by_test_id("progress")).to_have_text(f"Question {n} / 20")
        group = page.get_by_role("radiogroup", name=question.text)
        expect(group.get_by_role("radio")).to_have_count(len(question.options))
        expect(story).to_be_visible()
        if n == 1:
            screenshot("choice-5-dyntom-stage")
        _ready(page)
        _keys(page, str(cs.dyntom_gold_index(question) + 1) if n % 2 else "1", "Enter")
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()
    screenshot("choice-6-dyntom-done")
    assert ChoiceAnswer.objects.filter(assignment__participant=again).count() == 20

    # The researcher sees both CharToM-QA answers with their times, and the DynToM ones.
    researcher_page.goto(f"{live_server.url}/studies/{study.pk}/responses/")
    table = researcher_page.get_by_test_id("choice-responses")
    mine_rows = table.locator("tbody tr", has_text="Keyboard reader")
    expect(mine_rows).to_have_count(2)
    expect(mine_rows.nth(0)).to_contain_text("kept")
    expect(mine_rows.nth(1)).to_contain_text("changed to:")
    expect(mine_rows.first.get_by_test_id("first-ms")).to_have_text(re.compile(r"^\d+ ms$"))
    expect(mine_rows.first.get_by_test_id("second-ms")).to_have_text(re.compile(r"^\d+ ms$"))
    screenshot_of(researcher_page, "choice-7-researcher-responses")
    researcher_page.goto(f"{live_server.url}/studies/{study.pk}/directness/")
    first_item = researcher_page.locator(".directness-item").first
    first_item.get_by_role("button", name="Indirect").click()
    expect(first_item.get_by_test_id("label")).to_have_text("indirect")  # swapped by htmx
    screenshot_of(researcher_page, "choice-8-directness")
    researcher_page.goto(f"{live_server.url}/studies/{study.pk}/")
    expect(researcher_page.get_by_test_id("answers-done")).to_have_text("2")  # of 4
    screenshot_of(researcher_page, "choice-9-study-page")
    researcher_page.goto(f"{live_server.url}/studies/{dyn.pk}/responses/")
    expect(researcher_page.get_by_test_id("choice-responses").locator("tbody tr")).to_have_count(20)
    researcher_page.close()
