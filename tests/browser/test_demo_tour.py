"""A tour of a freshly loaded demo, as the three demo people see it.

The annotator opens one task of every CharToM-QA queue; the researcher opens the
read/not-read design page and a report per benchmark with humans beside the demo
model, and finds disagreements to settle in both reviewer queues; a participant
follows the invite links that load_demo prints for the two multiple-choice studies,
through their first question.
"""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from demo import studies as demo_studies

pytestmark = pytest.mark.django_db(transaction=True)

# Each queue's card on the board, and the screen its Start button opens.
QUEUES = (
    ("note_check", r"/annotation/chartom/checks/notes/\d+/$", "Does the note describe"),
    ("extract", r"/annotation/chartom/extract/\d+/$", "Key note"),
    ("paraphrase_review", r"/annotation/chartom/paraphrase/\d+/$", "description"),
    ("question_choice", r"/annotation/chartom/question/\d+/$", "question"),
    ("bonus_review", r"/annotation/chartom/bonus/\d+/$", "Bonus points"),
    ("distractor_review", r"/annotation/chartom/distractors/\d+/$", "Misleading choices"),
)


@pytest.fixture
def demo(live_server) -> str:
    """load_demo in the live server's database; its output, links in full."""
    out = StringIO()
    call_command("load_demo", "--base-url", live_server.url, stdout=out, stderr=StringIO())
    return out.getvalue()


def printed_links(out: str, study: str) -> dict[str, list[str]]:
    """The links load_demo printed under ``Demo study: <study> (...)``, by label."""
    block = out.split(f"Demo study: {study} (", 1)[1].split("\nDemo ", 1)[0]
    links: dict[str, list[str]] = {}
    for label, url in re.findall(r"^  ([^:]+): (http\S+)$", block, re.MULTILINE):
        links.setdefault(label, []).append(url)
    return links


def test_annotator_opens_one_task_of_every_queue(live_server, demo, page, screenshot, log_in_as):
    log_in_as(page, "annotator", "tomlab-annotator")
    page.goto(f"{live_server.url}/annotation/chartom/")
    for kind, _, _ in (*QUEUES, ("judgement", "", "")):
        expect(page.get_by_test_id(f"open-{kind}")).not_to_have_text("0")
    expect(page.get_by_test_id("qualification-link")).to_be_visible()
    screenshot("demo-tour-01-annotator-board")

    for n, (kind, screen, text) in enumerate(QUEUES, start=2):
        page.goto(f"{live_server.url}/annotation/chartom/")
        page.get_by_test_id(f"card-{kind}").get_by_role("button").click()
        expect(page).to_have_url(re.compile(screen))
        expect(page.locator("main")).to_contain_text(text)
        screenshot(f"demo-tour-{n:02d}-annotator-{kind}")

    # Expert judgement is taken per sample, from the checks page the card opens.
    page.goto(f"{live_server.url}/annotation/chartom/")
    page.get_by_test_id("card-judgement").get_by_role("link").click()
    page.get_by_role("button", name="Score the next answer").click()
    expect(page).to_have_url(re.compile(r"/annotation/chartom/checks/judgement/\d+/$"))
    expect(page.get_by_role("heading", name="How good is this answer?")).to_be_visible()
    screenshot("demo-tour-08-annotator-judgement")

    # The qualification trial the board links: passed, with the attempt's details.
    page.goto(f"{live_server.url}/annotation/chartom/")
    page.get_by_test_id("qualification-link").get_by_role("link").click()
    expect(page.get_by_test_id("qualified")).to_be_visible()
    screenshot("demo-tour-09-annotator-qualification")


def test_researcher_sees_the_design_and_humans_beside_the_model(
    live_server, demo, page, screenshot, log_in_as
):
    log_in_as(page, "researcher", "tomlab-researcher")
    page.goto(f"{live_server.url}/annotation/chartom/")
    expect(page.get_by_test_id("qualification-link")).to_be_visible()
    page.get_by_role("link", name="Demo: CharToM-QA construction").click()
    # The batch's LLM run: the replies recorded for the demo-recorded backend.
    expect(page.locator("main")).to_contain_text("demo-recorded")
    screenshot("demo-tour-09b-researcher-construction-batch")

    (design,) = printed_links(demo, demo_studies.CHARTOM_STUDY)["read/not-read design"]
    page.goto(design)
    rows = page.get_by_test_id("design-rows").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("demo reader A (answers loaded)")
    screenshot("demo-tour-10-researcher-design")

    humans = {
        "tom-in-amc": "Humans: Demo: who is speaking?",
        "chartom-qa": "Humans who had read the book",
        "dyntom": "Human mean (2 participants)",
    }
    for n, (benchmark, human) in enumerate(humans.items(), start=11):
        page.goto(f"{live_server.url}/reports/{benchmark}/")
        main = page.locator("main")
        expect(main).to_contain_text(human)
        expect(main).to_contain_text("Demo: recorded answers")
        screenshot(f"demo-tour-{n}-researcher-report-{benchmark}")


def test_researcher_finds_disagreements_in_both_reviewer_queues(
    live_server, demo, page, screenshot, log_in_as
):
    log_in_as(page, "researcher", "tomlab-researcher")
    page.get_by_test_id("home-review").click()
    batches = page.get_by_test_id("review-batches")
    row = batches.locator("tr", has_text="Demo: DynToM disagreements to settle")
    expect(row.locator("td.num").first).to_have_text("3")
    row.get_by_role("link").click()
    expect(page.get_by_test_id("queue-summary")).to_contain_text("3 to settle · 3 disputed")
    expect(page.get_by_test_id("review-queue")).to_contain_text("scenario 3")
    screenshot("demo-tour-13b-researcher-validation-disputes")

    page.goto(f"{live_server.url}/")
    page.get_by_test_id("home-check-review").click()
    expect(page.get_by_test_id("queue-summary")).to_contain_text("2 to settle · 2 disputed")
    expect(page.get_by_test_id("review-notes").locator("tbody tr")).to_have_count(1)
    expect(page.get_by_test_id("review-answers").locator("tbody tr")).to_have_count(1)
    screenshot("demo-tour-13c-researcher-check-disputes")


def test_participant_follows_the_printed_invite_links(live_server, demo, page, screenshot):
    # The scene study's consent page has the study's consent text.
    scene = printed_links(demo, demo_studies.SCENE_STUDY)["invite link"]
    assert len(scene) == 3
    page.goto(scene[0])
    expect(page.get_by_role("heading", name="Welcome to the study")).to_be_visible()
    expect(page.locator("main")).to_contain_text("Nothing you answer is used for research")
    screenshot("demo-tour-14-scene-consent")

    # CharToM-QA: say which book you read, then the first question in two rounds.
    chartom = printed_links(demo, demo_studies.CHARTOM_STUDY)["invite link"]
    assert len(chartom) == 3
    page.goto(chartom[0])
    expect(page.locator("main")).to_contain_text(demo_studies.CONSENT)
    page.get_by_role("button", name="I agree, start").click()
    expect(page.get_by_role("heading", name="Which of these books have you read?")).to_be_visible()
    page.get_by_label("The Glass Orchard by ToMLab contributors").check()
    screenshot("demo-tour-15-chartom-books")
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_test_id("progress")).to_contain_text("Question 1 /")
    page.locator("input[name=option]").first.check()
    screenshot("demo-tour-16-chartom-first-question")
    page.get_by_role("button", name="Submit answer").click()
    expect(page.get_by_role("button", name="Keep answer")).to_be_visible()
    screenshot("demo-tour-17-chartom-long-window")
    page.get_by_role("button", name="Keep answer").click()
    expect(page.get_by_role("heading", name="Your answer")).to_be_visible()
    # The options are shuffled per participant (random token), so the first may be right.
    expect(page.locator("main")).to_contain_text(re.compile(r"✓ correct|The answer:"))
    screenshot("demo-tour-18-chartom-first-result")

    # DynToM: the story, then its first question.
    dyntom = printed_links(demo, demo_studies.DYNTOM_STUDY)["invite link"]
    assert len(dyntom) == 3
    page.goto(dyntom[0])
    page.get_by_role("button", name="I agree, start").click()
    page.get_by_role("button", name="Start this story").click()
    expect(page.get_by_test_id("story")).to_contain_text("Hana Okafor")
    expect(page.get_by_test_id("progress")).to_have_text("Question 1 / 20")
    page.locator("input[name=option]").first.check()
    screenshot("demo-tour-19-dyntom-first-question")
    page.get_by_role("button", name="Submit answer").click()
    expect(page.get_by_test_id("progress")).to_have_text("Question 2 / 20")
    screenshot("demo-tour-20-dyntom-second-question")
