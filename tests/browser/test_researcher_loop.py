"""The researcher's whole loop in the browser, with no shell after ``load_demo`` (issue 29).

A researcher uploads a screenplay this test writes (one cue the parser cannot read, so
the dry run warns about its line), previews and imports it; creates a study on it,
checks leaks, goes live and hands out two invite links that two raters (their own
browsers) follow to the end; adds a backend pointing at the loopback OpenAI-compatible
server from New run and tests its connection; runs zero-shot on the same movie on a
real Celery worker; reads an unparseable reply in the prediction explorer; and opens
the report with the humans beside the run, whose CSV holds both.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from playwright.sync_api import Page, expect

from benchmarks.models import SpeakerInstance, Work
from modeling.models import Prediction, Run
from studies.models import Participant, Study
from tests.browser.conftest import SCREENSHOTS
from tests.celery_worker import purge_queues, start_worker, stop_worker

pytestmark = pytest.mark.django_db(transaction=True)

TITLE = "The Night Signal"
STUDY = "Signal: who speaks?"
BACKEND = "loopback"
# The reply to the scene whose prompt holds this line: prose, not "P0: NAME".
UNREADABLE_SCENE = "Bring back my lantern!"
UNREADABLE_REPLY = "I would rather not guess who anyone is."

# Seven scenes, five characters who speak: the first 3/5 (4 scenes) are history, the
# last three are masked testing scenes (3, 4 and 5 speakers).
SCENES = [
    ("INT. LIGHTHOUSE KITCHEN - NIGHT", "Mara stirs a pot. Jonah drops his wet coat.", [
        ("MARA", "You are late again. The lamp needs oil."),
        ("JONAH", "The boat would not start. I rowed back."),
        ("MARA", "Then eat first, and climb after."),
    ]),
    ("EXT. HARBOUR - DAY", "Ivo and Tess haul a net onto the pier.", [
        ("IVO", "Heavy today. The storm brought them in."),
        ("TESS", "Or it brought something else in."),
        ("IVO", "Stop it. There are no ghosts out there."),
        ("TESS", "Ask Mara what she saw last winter."),
    ]),
    ("INT. LAMP ROOM - NIGHT", "Jonah trims the wick. Mara watches the sea.", [
        ("JONAH", "Did you see the light on the rocks?"),
        ("MARA", "I saw it. Nobody lives on the rocks."),
        ("JONAH", "Then who keeps a lamp out there?"),
    ]),
    ("INT. POST OFFICE - DAY", "Old Bram sorts letters. Tess leans on the counter.", [
        ("BRAM", "A letter for the lighthouse. No stamp."),
        ("TESS", "Give it here. I will take it up."),
        ("BRAM", "Careful with it."),
    ]),
    ("EXT. CLIFF PATH - DUSK", "Tess climbs with the letter. Ivo follows her.", [
        ("IVO", "You should not open it."),
        ("TESS", "It is addressed to nobody."),
        ("IVO", "Then it is for all of us."),
        ("BRAM", UNREADABLE_SCENE),
    ]),
    ("INT. LIGHTHOUSE KITCHEN - NIGHT", "Mara reads the letter aloud. Jonah listens.", [
        ("MARA", "It says the light on the rocks is ours."),
        ("JONAH", "Ours? We never lit it."),
        ("TESS", "Someone did. Every night this week."),
        ("IVO", "Then tomorrow we row out and see."),
    ]),
    ("EXT. THE ROCKS - DAWN", "The four of them pull the boat onto the rocks.", [
        ("JONAH", "There is the lamp. Still warm."),
        ("MARA", "And a second letter under it."),
        ("TESS", "Read it out loud, Mara."),  # a name in dialogue: listed, not held back
        ("BRAM", "Hurry, the tide is turning."),
        ("IVO", "It is signed with all our names."),
    ]),
]  # fmt: skip
# Where a cue stands, but not one the parser reads (lower case, two people): it and its
# speech are kept as action text and reported by line number.
UNREADABLE_CUE = "Mara & Jonah, together"
CANDIDATES = ("Ivo", "Tess", "Mara", "Jonah", "Bram")  # by utterances, as the import ranks them


def write_screenplay(folder: Path) -> tuple[Path, int]:
    """An IMSDb-style script (cues centred, dialogue indented); the unreadable cue's line."""
    lines = [" " * 20 + TITLE.upper(), ""]
    cue_line = 0
    for n, (heading, action, speeches) in enumerate(SCENES):
        lines += [heading, "", action, ""]
        for cue, text in speeches:
            lines += [" " * 25 + cue, " " * 10 + text, ""]
        if n == 2:
            lines += ["They stare at each other.", ""]
            cue_line = len(lines) + 1
            lines += [" " * 25 + UNREADABLE_CUE, " " * 10 + "Not again.", ""]
    path = folder / "night_signal.txt"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path, cue_line


def shot(page: Page, name: str) -> None:
    """A full-page screenshot of any of the test's browsers, kept under var/screenshots."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(
        path=str(SCREENSHOTS / f"researcher-loop-{name}.jpg"), full_page=True, quality=80
    )


def scene_responder(body: dict) -> str:
    """The loopback model: "ready" to the connection test; for a scene, every masked
    speaker is the first candidate, except one scene answered in prose."""
    prompt = body["messages"][-1]["content"]
    if "masked characters" not in prompt:
        return "ready"
    if UNREADABLE_SCENE in prompt:
        return UNREADABLE_REPLY
    codes = re.search(r"Who are the masked characters \(([^)]*)\)", prompt).group(1)
    candidates = prompt.split("Choose from:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    first = candidates[0].strip().lstrip("-•* ").split(" (")[0]
    return "\n".join(f"{code.strip()}: {first}" for code in codes.split(","))


@pytest.fixture
def demo(live_server) -> str:
    """load_demo in the live server's database, as the demo tour does."""
    out = io.StringIO()
    call_command("load_demo", "--base-url", live_server.url, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def log_in(page: Page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")


def import_screenplay(page: Page, script: Path, cue_line: int, nav) -> None:
    """Step 1: upload, read the dry run (counts, the warning, a masked scene), confirm."""
    nav(page, "Data", "Import files")
    expect(page.get_by_role("heading", name="Import files")).to_be_visible()
    page.get_by_label("Format").select_option("screenplay")
    files = page.get_by_label(re.compile(r"^Files"))
    expect(files).to_be_visible()  # the format's fields, swapped in by htmx
    files.set_input_files(str(script))
    shot(page, "01-import-upload")
    page.get_by_role("button", name="Upload and dry run").click()
    page.wait_for_url(re.compile(r"/data/imports/\d+/$"))

    # The dry run: what would be created, the unreadable cue by line, a masked scene.
    expect(page.get_by_test_id("dry-run-note")).to_contain_text("nothing has been written yet")
    report = page.get_by_test_id("import-report")
    expect(report.get_by_test_id("count-Scene")).to_contain_text("7")
    expect(report.get_by_test_id("count-SpeakerInstance")).to_contain_text("12")
    expect(report.get_by_test_id("import-warnings")).to_contain_text(
        f"line {cue_line}: {UNREADABLE_CUE!r}"
    )
    # The first testing scene as raters will see it: P0-P2 masked, the answers beside.
    scene = page.get_by_test_id("preview-scene").filter(has_text="EXT. CLIFF PATH - DUSK")
    expect(scene).to_contain_text("P0 climbs with the letter. P1 follows her.")
    masked = scene.get_by_role("row")
    expect(masked).to_have_count(4)  # the header and three masked speakers
    for row, (code, answer) in enumerate((("P0", "tess"), ("P1", "ivo"), ("P2", "bram")), 1):
        expect(masked.nth(row)).to_contain_text(re.compile(rf"{code}\s*{answer}"))
    assert not Work.objects.filter(title=TITLE).exists()
    shot(page, "01-import-dry-run")

    page.get_by_role("button", name="Confirm import").click()
    expect(page.get_by_test_id("job-status")).to_have_text(re.compile("succeeded", re.I))
    expect(page.get_by_test_id("imported-note")).to_be_visible()
    shot(page, "01-import-done")


def gold_answers(work: Work) -> dict[tuple[str, str], str]:
    """Who each masked speaker is, by (scene heading, code), as the rater's radios name them."""
    return {
        (i.scene.heading, i.code): i.gold_character.name.title()
        for i in SpeakerInstance.objects.filter(scene__work=work).select_related(
            "scene", "gold_character"
        )
    }


def answer_all_scenes(
    page: Page, link: str, label: str, gold: dict[tuple[str, str], str], *, wrong_p0: bool
) -> None:
    """Follow an invite link to the end: every speaker right, or every P0 wrong."""
    page.goto(link)
    expect(page.get_by_role("heading", name="Welcome to the study")).to_be_visible()
    shot(page, f"05-{label}-consent")
    page.get_by_role("button", name="I agree, start").click()
    expect(page.get_by_role("heading", name="Have you seen this movie before?")).to_be_visible()
    page.get_by_role("button", name="No, I have not").click()
    expect(page.get_by_role("heading", name="Read the earlier scenes first")).to_be_visible()
    expect(page.locator("main")).to_contain_text("The lamp needs oil.")  # the history
    shot(page, f"05-{label}-history")
    page.get_by_role("button", name="I have read it").click()
    for number in range(1, 4):
        expect(page.get_by_test_id("progress")).to_have_text(f"Scene {number} / 3")
        heading = page.locator("p.scene-heading").inner_text()
        groups = page.get_by_role("radiogroup")
        codes = [f"P{i}" for i in range(groups.count())]
        for code in codes:
            name = gold[(heading, code)]
            group = page.get_by_role("radiogroup", name=f"Who is {code}?")
            if wrong_p0 and code == "P0":
                name = next(n for n in CANDIDATES if n != name)
            group.get_by_role("radio", name=name, exact=True).check()
        expect(page.get_by_text("✓ Saved")).to_have_count(len(codes))
        if number == 1:
            shot(page, f"05-{label}-scene")
        page.get_by_role("button", name="Submit scene").click()
    expect(page.get_by_role("heading", name="Thank you — you are done")).to_be_visible()
    right = 9 if wrong_p0 else 12
    expect(page.get_by_test_id("score-speakers")).to_contain_text(f"{right} / 12")
    shot(page, f"05-{label}-done")


def test_researcher_loop(live_server, demo, browser, page, llm_server, tmp_path, nav):
    llm_server.responder = scene_responder
    script, cue_line = write_screenplay(tmp_path)
    log_in(page, live_server, "researcher", "tomlab-researcher")

    # 1. Import the screenplay.
    import_screenplay(page, script, cue_line, nav)
    work = Work.objects.get(title=TITLE)
    instances = SpeakerInstance.objects.filter(scene__work=work).count()
    assert instances == 12

    # 2. A study on it, from the import's own link: create, check leaks, go live, invite.
    page.get_by_test_id("imported-note").get_by_role("link", name="New scene study").click()
    page.get_by_label("Study name").fill(STUDY)
    page.get_by_label(f"{TITLE} (ToM-in-AMC, 3 test scenes)").check()
    page.get_by_label("Raters per scene").fill("2")
    shot(page, "02-study-new")
    page.get_by_role("button", name="Create study").click()
    page.wait_for_url(re.compile(r"/studies/\d+/$"))
    study = Study.objects.get(name=STUDY)
    expect(page.get_by_test_id("study-status")).to_have_text(re.compile("draft", re.I))
    expect(page.get_by_text("Study created with 3 scenes.")).to_be_visible()

    page.get_by_role("link", name="Review leaking scenes and aliases").click()
    page.get_by_role("button", name="Run the leak check").click()
    expect(page.get_by_text(re.compile(r"Checked: .* of 3 scenes"))).to_be_visible()
    expect(page.get_by_test_id("leaks-speech")).to_have_text("1")
    expect(page.get_by_test_id("leak-scene")).to_contain_text("Read it out loud, Mara.")
    expect(page.get_by_test_id("leaks-held")).to_have_text("0")
    shot(page, "03-study-leaks")
    page.get_by_role("link", name="Back to the study").click()

    page.get_by_role("button", name="Go live").click()
    expect(page.get_by_test_id("study-status")).to_have_text(re.compile("live", re.I))
    page.get_by_label("Number of links").fill("2")
    page.get_by_role("button", name="Create invite links").click()
    expect(page.get_by_text("2 invite links created.")).to_be_visible()
    links = page.get_by_test_id("invite-url")
    expect(links).to_have_count(2)
    urls = [links.nth(i).inner_text() for i in range(2)]
    shot(page, "04-study-live")

    # Two raters, each in a browser of their own: one right throughout, one wrong on P0.
    gold = gold_answers(work)
    for n, url in enumerate(urls, start=1):
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        try:
            answer_all_scenes(context.new_page(), url, f"rater{n}", gold, wrong_p0=n == 2)
        finally:
            context.close()
    assert Participant.objects.filter(study=study, finished_at__isnull=False).count() == 2
    page.reload()
    expect(page.get_by_test_id("answers-done")).to_have_text("6")
    expect(page.get_by_test_id("count-finished")).to_have_text("2")
    shot(page, "06-study-answered")

    # 3. A backend from New run, tested.
    nav(page, "Models", "New run")
    page.get_by_test_id("add-backend").click()
    page.wait_for_url(re.compile(r"/runs/backends/new/\?next=/runs/new/$"))
    page.get_by_label("Name").fill(BACKEND)
    page.get_by_label("Kind").select_option("openai")
    page.get_by_label("Base URL").fill(llm_server.base_url)
    page.get_by_label("Default model").fill("test-model")
    shot(page, "07-backend-form")
    page.get_by_role("button", name="Save backend").click()
    page.wait_for_url(f"{live_server.url}/runs/new/")
    expect(page.get_by_label("Backend").locator("option", has_text=BACKEND)).to_have_count(1)
    page.get_by_role("link", name="Backends").first.click()
    row = page.get_by_test_id(f"backend-row-{BACKEND}")
    # A real worker from here on: the connection test and the run are its jobs.
    purge_queues()
    worker = start_worker(tmp_path / "worker.log", name="loop")
    try:
        row.get_by_role("button", name="Test connection").click()
        expect(row.get_by_test_id("test-reply")).to_have_text("“ready”", timeout=30_000)
        expect(row.get_by_test_id("test-tokens")).to_contain_text("completion tokens")
        assert llm_server.request_count == 1
        shot(page, "08-backend-tested")
        page.get_by_role("link", name="New run", exact=True).last.click()
        page.wait_for_url(f"{live_server.url}/runs/new/")

        # 4. Zero-shot on the same movie, on the same worker.
        page.get_by_label("Benchmark").select_option("tom-in-amc")
        page.get_by_label("Method").select_option("zero-shot")
        page.get_by_label("Backend").select_option(label=BACKEND)
        page.get_by_label("Works").fill(work.key)  # "The Night Signal": one key, spaces and all
        page.get_by_label("Name", exact=True).fill("Signal zero-shot")
        page.get_by_role("button", name="Preview (dry run)").click()
        expect(page.get_by_test_id("plan-calls")).to_have_text("3")
        shot(page, "09-run-preview")
        page.get_by_role("button", name="Start this run").click()
        page.wait_for_url(re.compile(r"/runs/\d+/$"))
        # The page polls until the worker is done: one scene's three speakers unread.
        status = page.get_by_test_id("run-status")
        expect(status).to_have_text("succeeded with 3 unparseable", timeout=60_000)
    finally:
        stop_worker(worker)
    run = Run.objects.get(name="Signal zero-shot")
    assert Prediction.objects.filter(run=run).exclude(parse_status="ok").count() == 3
    # Ivo, the first candidate, is P3 of the second scene and P4 of the third.
    expect(page.get_by_test_id("accuracy-line")).to_contain_text("2 of 12 correct")
    shot(page, "10-run-finished")

    # 5. The unparseable reply in the prediction explorer.
    page.get_by_test_id("predictions-unparseable").click()
    page.wait_for_url(re.compile(r"/predictions/\?status=unparseable$"))
    rows = page.get_by_test_id("prediction-row")
    expect(rows).to_have_count(3)
    for code in ("P0", "P1", "P2"):
        expect(rows.filter(has_text=f"testing-0000 {code}")).to_contain_text("unparseable")
    shot(page, "11-predictions-unparseable")
    rows.first.get_by_role("link").first.click()
    page.wait_for_url(re.compile(r"/predictions/\d+/$"))
    expect(page.get_by_test_id("raw-reply")).to_have_text(UNREADABLE_REPLY)
    expect(page.get_by_test_id("prompt-message").last).to_contain_text(UNREADABLE_SCENE)
    shot(page, "12-prediction-detail")

    # 6. The report with the study and the run side by side; its CSV.
    nav(page, "Reports", "Reports")
    page.get_by_role("link", name="ToM-in-AMC", exact=True).click()
    selector = page.locator("section.run-selector")
    for box in selector.get_by_role("checkbox").all():
        box.uncheck()
    selector.get_by_role("checkbox", name=re.compile(re.escape(run.name))).check()
    selector.get_by_role("checkbox", name=re.compile(re.escape(STUDY))).check()
    selector.get_by_role("button", name="Show report").click()
    # The humans and the run in one table: 21 of 24 human answers, 2 of 12 predictions.
    table = page.locator("#table-accuracy")
    expect(table.get_by_role("row").filter(has_text=f"Humans: {STUDY}")).to_contain_text("87.5")
    expect(table.get_by_role("row").filter(has_text=run.name)).to_contain_text("16.7")
    shot(page, "13-report")
    with page.expect_download() as info:
        table.get_by_role("link", name="CSV").click()
    download = info.value
    assert download.suggested_filename.endswith(".csv")
    text = Path(download.path()).read_text(encoding="utf-8-sig")
    rows = {row["System"]: row for row in csv.DictReader(io.StringIO(text))}
    human, model = rows[f"Humans: {STUDY}"], rows[f"#{run.pk} {run.name}"]
    assert (human["Method"], human["Answers"], human["Accuracy %"]) == ("study", "24", "87.5")
    assert (model["Method"], model["Instances"], model["Accuracy %"]) == (
        "zero-shot",
        "12",
        "16.67",
    )
