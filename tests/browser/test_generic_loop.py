# ruff: noqa: RUF001
"""Any benchmark's whole loop in the browser, with no shell step (issue 47, "Done when").

A researcher imports a bilingual benchmark this test writes (Chinese first, options as
a list; English second, options as one labelled string) through a field mapping typed
into the import form, reads the dry run and confirms; makes a multiple-choice study of
three of its four abilities in English, every item of them, three participants per
item and one attention check named by id; goes live and hands out three invite links.
Three participants (a browser each) answer every item by mouse or keyboard, each pick
chosen by the option's TEXT (options are shuffled per participant); the third fails
the attention check and is excluded by the study's rule. A backend pointing at the
loopback server runs the generic pipeline over the benchmark in English (shuffled
options) on a real Celery worker. The report's accuracy of the people, of the run and
by ability is then checked against what this test counts by hand from the picks it
made and the replies it gave, without and with the excluded participant.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from benchmarks.models import MCItem, Work
from modeling.models import Prediction, Run
from studies.models import Participant, Study
from tests.browser.conftest import SCREENSHOTS
from tests.celery_worker import purge_queues, start_worker, stop_worker

pytestmark = pytest.mark.django_db(transaction=True)

NAME = "Loop ToM"
VERSION = "1.0"
LABEL = f"{NAME} v{VERSION}"  # how pages name a mapped benchmark
STUDY = "Loop ToM: three abilities"
RUN = "Loop ToM vanilla"
BACKEND = "loopback"
STUDIED = ("False belief", "Hidden emotion", "White lie")
ATTENTION_ITEM = "lt-10"  # of the fourth ability, named as the study's attention check

# id, ability, English story / question / options, Chinese story / question / options,
# the answer's letter. Knowledge-access items have four options, the others three.
ITEMS = [
    ("lt-01", "False belief",
     "Ada hides her apple in the blue bag and goes out. While she is away, Ben moves the "
     "apple to the drawer.", "Where will Ada look for her apple first?",
     ["In the blue bag", "In the drawer", "Under the bed"],
     "阿达把苹果藏在蓝色的包里，然后出去了。她不在的时候，本把苹果挪到了抽屉里。",
     "阿达会先去哪里找她的苹果？", ["在蓝色的包里", "在抽屉里", "在床底下"], "A"),
    ("lt-02", "False belief",
     "Carl leaves his ball in the garage. While he sleeps, his sister takes it to the "
     "garden.", "Where does Carl think his ball is when he wakes up?",
     ["In the garden", "In the garage", "At school"],
     "卡尔把球放在车库里。他睡觉的时候，姐姐把球拿到了花园。",
     "卡尔醒来时认为他的球在哪里？", ["在花园里", "在车库里", "在学校"], "B"),
    ("lt-03", "False belief",
     "A candy tin on the desk is full of pencils. Dana has never opened it.",
     "What will Dana think is in the tin?", ["Pencils", "Nothing", "Candy"],
     "桌上的糖果盒里装满了铅笔。达娜从来没有打开过它。",
     "达娜会认为盒子里装的是什么？", ["铅笔", "什么都没有", "糖果"], "C"),
    ("lt-04", "Hidden emotion",
     "Eli's aunt gives him a sweater he dislikes. He smiles and thanks her.",
     "How does Eli really feel about the sweater?",
     ["Disappointed", "Delighted", "Frightened"],
     "伊莱的姑姑送给他一件他不喜欢的毛衣。他笑着向她道谢。",
     "伊莱对这件毛衣的真实感受是什么？", ["失望", "高兴", "害怕"], "A"),
    ("lt-05", "Hidden emotion",
     "Fay loses the race to her best friend and congratulates her warmly.",
     "What does Fay most likely feel inside?",
     ["Bored", "A little sad", "Angry at the judges"],
     "费伊在赛跑中输给了她最好的朋友，并热情地祝贺了她。",
     "费伊心里最可能是什么感受？", ["无聊", "有点难过", "生裁判的气"], "B"),
    ("lt-06", "Hidden emotion",
     "Gus is shaking before his talk, but he tells the class he feels fine.",
     "How does Gus actually feel before the talk?", ["Sleepy", "Proud", "Nervous"],
     "古斯演讲前浑身发抖，但他告诉全班同学他感觉很好。",
     "古斯演讲前实际上感觉如何？", ["困倦", "自豪", "紧张"], "C"),
    ("lt-07", "White lie",
     "Hana's friend shows her a drawing that is not very good. Hana says it is lovely.",
     "Why does Hana say the drawing is lovely?",
     ["To spare her friend's feelings", "Because she collects drawings",
      "To get the drawing for free"],
     "哈娜的朋友给她看了一幅画得不太好的画。哈娜说这幅画很可爱。",
     "哈娜为什么说这幅画很可爱？",
     ["为了照顾朋友的感受", "因为她收藏画", "为了免费得到这幅画"], "A"),
    ("lt-08", "White lie",
     "Ivan burns the toast, but his grandmother says it tastes perfect.",
     "Why does the grandmother praise the toast?",
     ["She likes burnt toast", "She wants Ivan to feel good", "She did not taste it"],
     "伊万把吐司烤焦了，但奶奶说味道好极了。",
     "奶奶为什么夸奖吐司？", ["她喜欢烤焦的吐司", "她想让伊万高兴", "她没有尝"], "B"),
    ("lt-09", "White lie",
     "Jo forgot her friend's birthday and says the present is still in the post.",
     "Why does Jo mention the post?",
     ["She works at the post office", "She sent it last week", "To hide that she forgot"],
     "乔忘了朋友的生日，却说礼物还在邮寄途中。",
     "乔为什么提到邮寄？", ["她在邮局工作", "她上周寄出了", "为了掩饰她忘了"], "C"),
    ("lt-10", "Knowledge access",
     "Kim looks inside the box. Leo only lifts it to feel how heavy it is.",
     "Who knows what is in the box?", ["Kim", "Leo", "Both of them", "Neither of them"],
     "金看了盒子里面。利奥只是把盒子举起来掂了掂重量。",
     "谁知道盒子里有什么？", ["金", "利奥", "他们两个都知道", "他们两个都不知道"], "A"),
    ("lt-11", "Knowledge access",
     "Mia reads the letter. Ned only hears that a letter has arrived.",
     "Who knows what the letter says?", ["Ned", "Mia", "Both of them", "Neither of them"],
     "米娅读了那封信。内德只听说来了一封信。",
     "谁知道信里写了什么？", ["内德", "米娅", "他们两个都知道", "他们两个都不知道"], "B"),
    ("lt-12", "Knowledge access",
     "Olga is told the secret on the phone while Pia is outside in the rain.",
     "Who can tell what the secret is?", ["Pia", "Both of them", "Olga", "Neither of them"],
     "奥尔加在电话里听到了那个秘密，而皮娅当时在外面淋雨。",
     "谁能说出那个秘密是什么？", ["皮娅", "他们两个都能", "奥尔加", "她们两个都不能"], "C"),
]  # fmt: skip
# The mapping the researcher types: Chinese first (the default language), English second.
MAPPING = {
    "_about": "Loop ToM: Chinese options as a list, English ones as one labelled string",
    "id": "qid",
    "answer": {"field": "key", "as": "letter"},
    "categories": {"ability": "skill"},
    "languages": [
        {"language": "zh", "context": "故事", "question": "问题", "options": "选项"},
        {
            "language": "en",
            "context": "story",
            "question": "question",
            "options": {"field": "choices", "shape": "labelled"},
        },
    ],
}
LETTERS = "ABCD"

# What each participant picks, by item id: the gold unless named here (then the option
# of that index in the item's own order). Participant 3 fails the attention check.
WRONG_PICKS = {
    1: {"lt-02": 0, "lt-07": 2},
    2: {"lt-02": 2, "lt-05": 0},
    3: {"lt-04": 1},
}
# The model: the gold letter, except a wrong option on these items, the option's text
# instead of a letter on one, and prose nothing can be read from on another.
MODEL_WRONG = {"lt-03": 0, "lt-08": 2, "lt-11": 3}
MODEL_BY_TEXT = "lt-05"
MODEL_UNREADABLE = "lt-06"
UNREADABLE_REPLY = "Hard to say from such a short story."


def gold(item: tuple) -> int:
    return LETTERS.index(item[-1])


BY_ID = {item[0]: item for item in ITEMS}
BY_QUESTION = {item[3]: item for item in ITEMS}


def write_benchmark(folder: Path) -> Path:
    """One JSON Lines file in the mapping's shape, plus a field the mapping leaves alone."""
    path = folder / "loop_tom.jsonl"
    lines = []
    for qid, skill, story, question, options, story_zh, question_zh, options_zh, key in ITEMS:
        record = {
            "qid": qid,
            "skill": skill,
            "故事": story_zh,
            "问题": question_zh,
            "选项": options_zh,
            "story": story,
            "question": question,
            "choices": "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options)),
            "key": key,
            "source": "written for this test",
        }
        lines.append(json.dumps(record, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"generic-loop-{name}.jpg"), full_page=True, quality=80)


def shown(fraction: Fraction) -> str:
    """A share as the report's % columns show it: rounded to 2 decimals, printed with 1."""
    return f"{round(100 * float(fraction), 2):.1f}"


def item_mean(outcomes: dict[str, list[bool]]) -> Fraction:
    """Item-level accuracy (reports/tables/generic.py): each item's share of correct
    answers, averaged over the items answered."""
    shares = [Fraction(sum(o), len(o)) for o in outcomes.values() if o]
    return sum(shares, Fraction(0)) / len(shares)


def model_responder(body: dict) -> str:
    """The loopback model, answering from the prompt's question and lettered options."""
    prompt = body["messages"][-1]["content"]
    question = re.search(r"^Question: (.+)$", prompt, re.M).group(1).strip()
    item = BY_QUESTION[question]
    block = prompt.split("Options:\n", 1)[1].split("\n\n", 1)[0]
    letters = dict(re.findall(r"^([A-Z])\. (.+)$", block, re.M))  # letter -> text, as shown
    if item[0] == MODEL_UNREADABLE:
        return UNREADABLE_REPLY
    wanted = item[4][MODEL_WRONG.get(item[0], gold(item))]
    if item[0] == MODEL_BY_TEXT:
        return wanted
    return next(letter for letter, text in letters.items() if text == wanted)


def import_benchmark(page: Page, path: Path, nav) -> None:
    """Step 1: the generic format, the file, the mapping typed in; the dry run; confirm."""
    nav(page, "Data", "Import files")
    expect(page.get_by_role("heading", name="Import files")).to_be_visible()
    page.get_by_label("Format").select_option("generic")
    files = page.get_by_label(re.compile(r"^Files"))
    expect(files).to_be_visible()  # the format's fields, swapped in by htmx
    files.set_input_files(str(path))
    page.get_by_label("Benchmark name").fill(NAME)
    page.get_by_label("Version").fill(VERSION)
    page.get_by_label("Field mapping (JSON)").fill(
        json.dumps(MAPPING, indent=2, ensure_ascii=False)
    )
    shot(page, "01-import-form")
    page.get_by_role("button", name="Upload and dry run").click()
    page.wait_for_url(re.compile(r"/data/imports/\d+/$"))

    expect(page.get_by_test_id("dry-run-note")).to_contain_text("nothing has been written yet")
    report = page.get_by_test_id("import-report")
    expect(report.get_by_test_id("count-MCItem")).to_contain_text("12")
    abilities = page.get_by_test_id("category-ability")
    for ability in (*STUDIED, "Knowledge access"):
        expect(abilities.get_by_role("row").filter(has_text=ability)).to_contain_text("3")
    # The first item as it will be stored: both languages, the English options unlabelled.
    first = page.get_by_test_id("preview-mc-item").first
    expect(first.locator('[lang="zh"]')).to_contain_text("阿达会先去哪里找她的苹果？")
    english = first.locator('[lang="en"]')
    expect(english).to_contain_text("Where will Ada look for her apple first?")
    expect(english.locator("li").first).to_have_text("A In the blue bag (correct)")
    expect(page.get_by_test_id("import-fields")).to_contain_text("source")
    assert not Work.objects.filter(title=NAME).exists()
    shot(page, "02-import-dry-run")

    page.get_by_role("button", name="Confirm import").click()
    expect(page.get_by_test_id("job-status")).to_have_text(re.compile("succeeded", re.I))
    expect(page.get_by_test_id("imported-note")).to_be_visible()
    shot(page, "03-import-done")


def create_study(page: Page) -> list[str]:
    """Step 2: three abilities in English, every item, 3 per item, one attention check by
    id; live; three invite links (returned)."""
    # From the import's own note: a mapped benchmark's next step is a choice study.
    page.get_by_test_id("imported-note").get_by_role(
        "link", name="New multiple-choice study"
    ).click()
    expect(page.get_by_role("heading", name="New multiple-choice study")).to_be_visible()
    page.get_by_label("Study name").fill(STUDY)
    page.get_by_label("Benchmark", exact=True).select_option("generic")
    generic = page.get_by_test_id("generic-settings")
    expect(generic).to_be_visible()
    page.get_by_label(f"{LABEL} (12 mapped items; zh, en)", exact=True).check()
    page.get_by_label("Language (mapped items)").select_option("en")
    page.get_by_label("Sample by (mapped items)").select_option("ability")
    values = generic.get_by_role("group", name=f"{NAME}: ability")
    for ability in STUDIED:
        values.get_by_label(ability).check()
    page.get_by_label("Participants per stage (DynToM) or per item (mapped items)").fill("3")
    page.get_by_label("Attention checks by id").fill(ATTENTION_ITEM)
    shot(page, "04-study-form")
    page.get_by_role("button", name="Create study").click()
    page.wait_for_url(re.compile(r"/studies/\d+/$"))
    expect(page.get_by_test_id("study-status")).to_have_text(re.compile("draft", re.I))
    expect(page.get_by_test_id("generic-strata")).to_have_text(
        "ability: False belief (3), Hidden emotion (3), White lie (3)"
    )
    expect(page.get_by_test_id("generic-items")).to_contain_text(
        "10 items (seed 0): 0 practice, 1 attention check"
    )
    expect(page.get_by_test_id("generic-language")).to_have_text("en")

    page.get_by_role("button", name="Go live").click()
    expect(page.get_by_test_id("study-status")).to_have_text(re.compile("live", re.I))
    page.get_by_label("Number of links").fill("3")
    page.get_by_role("button", name="Create invite links").click()
    expect(page.get_by_text("3 invite links created.")).to_be_visible()
    links = page.get_by_test_id("invite-url")
    expect(links).to_have_count(3)
    shot(page, "05-study-live")
    return [links.nth(i).inner_text() for i in range(3)]


def answer_study(tab: Page, url: str, n: int) -> dict[str, int]:
    """Follow invite ``url`` as participant ``n`` and answer every item; return the
    picks as indices into each item's own options (the gold's order, not the shown)."""
    tab.goto(url)
    expect(tab.get_by_role("heading", name="Welcome to the study")).to_be_visible()
    # What the participant is told: stories and a question each, not a movie's speakers.
    expect(tab.locator("main")).to_contain_text("You will read short stories and answer one")
    expect(tab.locator("main")).not_to_contain_text("P0")
    if n == 1:
        shot(tab, "06-participant-consent")
    tab.get_by_role("button", name="I agree, start").click()
    expect(tab.get_by_test_id("batch-size")).to_contain_text(
        "You will read 9 short stories, one at a time, and answer one multiple-choice "
        "question about each, with 1 attention check among them."
    )
    tab.get_by_role("button", name="Start").click()
    picks: dict[str, int] = {}
    for number in range(1, 11):
        expect(tab.get_by_test_id("progress")).to_have_text(f"Item {number} of 10")
        expect(tab.locator("form#choice-form[data-keys=ready]")).to_have_count(1)
        item = BY_QUESTION[tab.locator("#question-text").inner_text().strip()]
        qid, options = item[0], item[4]
        expect(tab.get_by_test_id("passage")).to_contain_text(item[2])  # the English story
        choices = tab.locator("label.choice")
        expect(choices).to_have_count(len(options))
        # The screen's order: "A. text" per option (shuffled for each participant).
        texts = choices.locator("span").all_inner_texts()
        screen = [re.sub(r"^[A-Z]\.\s*", "", t.strip()) for t in texts]
        assert sorted(screen) == sorted(options), (qid, screen)
        if qid == ATTENTION_ITEM:
            right = options[gold(item)]
            expect(tab.get_by_test_id("instruction")).to_contain_text(f"“{right}”")
            target = right if n != 3 else next(o for o in options if o != right)
        else:
            target = options[WRONG_PICKS[n].get(qid, gold(item))]
        at = screen.index(target)
        if n == 2:  # the keyboard: the option's letter, then Enter
            tab.keyboard.press(LETTERS[at].lower())
            expect(tab.locator("input[name=option]").nth(at)).to_be_checked()
            if number == 1:
                shot(tab, "07-participant-item-keyboard")
            tab.keyboard.press("Enter")
        else:  # the mouse
            choices.nth(at).click()
            expect(tab.locator("input[name=option]").nth(at)).to_be_checked()
            if qid == ATTENTION_ITEM:
                shot(tab, f"07-participant{n}-attention-check")
            tab.get_by_role("button", name="Submit answer").click()
        picks[qid] = options.index(target)
    expect(tab.get_by_role("heading", name="Thank you — you are done")).to_be_visible()
    right = sum(picks[q] == gold(BY_ID[q]) for q in picks if q != ATTENTION_ITEM)
    expect(tab.get_by_test_id("score")).to_contain_text(f"You answered {right} of 9 correctly")
    shot(tab, f"08-participant{n}-done")
    return picks


def start_run(page: Page, work: Work, llm_server, live_server) -> None:
    """Step 4: a backend at the loopback server from New run, then the generic run."""
    # No backend yet: the run form says so and links to the backend form.
    page.get_by_test_id("no-backend").get_by_role("link", name="Add a backend").click()
    page.wait_for_url(re.compile(r"/runs/backends/new/\?next=/runs/new/$"))
    page.get_by_label("Name").fill(BACKEND)
    page.get_by_label("Kind").select_option("openai")
    page.get_by_label("Base URL").fill(llm_server.base_url)
    page.get_by_label("Default model").fill("test-model")
    page.get_by_role("button", name="Save backend").click()
    page.wait_for_url(f"{live_server.url}/runs/new/")

    page.get_by_label("Benchmark").select_option("generic")
    expect(page.get_by_test_id("generic-fields")).to_be_visible()
    page.get_by_label("Method").select_option("vanilla")
    page.get_by_label("Backend").select_option(label=BACKEND)
    page.get_by_label("Item set (Other (mapped))").select_option(label=f"{NAME} ({work.key})")
    page.get_by_label("Language (Other (mapped))").fill("en")
    page.get_by_label("Shuffle options (Other (mapped))").check()
    page.get_by_label("Name", exact=True).fill(RUN)
    page.get_by_role("button", name="Preview (dry run)").click()
    expect(page.get_by_test_id("plan-calls")).to_have_text("12")
    expect(page.locator("pre.prompt").last).to_contain_text("Options:\nA. ")
    shot(page, "10-run-preview")
    page.get_by_role("button", name="Start this run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))


def test_generic_loop(live_server, browser, page, llm_server, tmp_path, nav, log_in_as, researcher):
    """The whole loop of issue 47 in one test, as its "Done when" asks: each step reads
    what the one before wrote (the imported items, the study's picks, the run), so the
    steps cannot be split into tests of their own without a shell or ORM shortcut."""
    llm_server.responder = model_responder
    log_in_as(page)

    # 1. The import, with the mapping typed into the form.
    import_benchmark(page, write_benchmark(tmp_path), nav)
    work = Work.objects.get(title=NAME)
    assert work.key == "loop-tom@1.0" and work.extra["languages"] == ["zh", "en"]
    assert MCItem.objects.filter(work=work).count() == 12

    # 2. The study, live, with three invite links.
    urls = create_study(page)
    study = Study.objects.get(name=STUDY)

    # 3. Three participants, each in a browser of their own; the third fails the check.
    picks: dict[int, dict[str, int]] = {}
    for n, url in enumerate(urls, start=1):
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        try:
            picks[n] = answer_study(context.new_page(), url, n)
        finally:
            context.close()
    excluded = Participant.objects.get(study=study, token=urls[2].rstrip("/").rsplit("/", 1)[-1])
    page.reload()
    expect(page.get_by_test_id("count-excluded")).to_have_text("1")
    expect(page.get_by_test_id("count-finished")).to_have_text("2")
    # Test items only, of the two who count: the excluded participant's 9 answers are
    # left out of the progress, as out of the report (issue 49: places reopen).
    expect(page.get_by_test_id("answers-done")).to_have_text("18")
    badge = page.get_by_role("row").filter(has_text=str(excluded)).locator("[data-status]")
    expect(badge).to_have_attribute("data-status", "excluded")
    expect(badge).to_have_attribute(
        "title", "rule: instructed-response items: 1 of 1 failed (allowed 0)"
    )
    shot(page, "09-study-answered")

    # 4. A backend and the run, on a real worker.
    nav(page, "Models", "New run")
    purge_queues()
    worker = start_worker(tmp_path / "worker.log", name="generic-loop")
    try:
        start_run(page, work, llm_server, live_server)
        expect(page.get_by_test_id("run-status")).to_have_text(
            "succeeded with 1 unparseable", timeout=60_000
        )
    finally:
        stop_worker(worker)
    run = Run.objects.get(name=RUN)
    statuses = dict(
        Prediction.objects.filter(run=run).values_list("mc_item__item_id", "parse_status")
    )
    assert len(statuses) == 12 and statuses[MODEL_BY_TEXT] == "ok"  # the text was read
    assert {q for q, status in statuses.items() if status != "ok"} == {MODEL_UNREADABLE}
    model_right = {qid: qid not in MODEL_WRONG and qid != MODEL_UNREADABLE for qid in BY_ID}
    expect(page.get_by_test_id("accuracy-line")).to_contain_text(
        f"{sum(model_right.values())} of 12 correct"
    )
    shot(page, "11-run-finished")

    # 5. The report, against accuracy counted here.
    tests = [qid for qid in BY_ID if BY_ID[qid][1] in STUDIED]

    def humans(participants) -> dict[str, list[bool]]:
        return {q: [picks[n][q] == gold(BY_ID[q]) for n in participants] for q in tests}

    kept, everyone = humans((1, 2)), humans((1, 2, 3))
    model = {q: [right] for q, right in model_right.items()}
    nav(page, "Reports", "Reports")
    page.get_by_test_id("generic-benchmark").get_by_role("link", name=LABEL).click()
    page.wait_for_url(re.compile(rf"/reports/generic/\?work={work.pk}$"))
    expect(page.get_by_role("heading", name=f"{LABEL} report")).to_be_visible()
    human_label = f"Humans: {STUDY} (#{study.pk})"
    run_label = f"#{run.pk} {RUN}"

    def check_report(people: dict[str, list[bool]], participants: int) -> None:
        accuracy = page.locator("#table-accuracy")
        row = accuracy.get_by_role("row").filter(has_text=human_label)
        # System, Kind, Participants, Items, Answers, Accuracy %, CI, Chance %
        expect(row.locator("td").nth(2)).to_have_text(str(participants))
        expect(row.locator("td").nth(3)).to_have_text("9")
        expect(row.locator("td").nth(4)).to_have_text(str(9 * participants))
        expect(row.locator("td").nth(5)).to_have_text(shown(item_mean(people)))
        run_row = accuracy.get_by_role("row").filter(has_text=run_label)
        expect(run_row.locator("td").nth(3)).to_have_text("12")
        expect(run_row.locator("td").nth(5)).to_have_text(shown(item_mean(model)))
        # By ability: Items, Chance %, then per system n, %, CI.
        by_ability = page.locator("#table-by-ability")
        for ability in STUDIED:
            cells = by_ability.get_by_role("row").filter(has_text=ability).locator("td")
            mine = [q for q in BY_ID if BY_ID[q][1] == ability]
            expect(cells.nth(1)).to_have_text("3")
            expect(cells.nth(3)).to_have_text("3")
            expect(cells.nth(4)).to_have_text(shown(item_mean({q: people[q] for q in mine})))
            expect(cells.nth(7)).to_have_text(shown(item_mean({q: model[q] for q in mine})))

    check_report(kept, participants=2)
    shot(page, "12-report")

    # The "include excluded" switch counts the third participant's picks.
    page.get_by_role("switch", name=re.compile(r"Include excluded participants \(1\)")).check()
    page.get_by_role("button", name="Show report").click()
    page.wait_for_url(re.compile(r"include_excluded=1"))
    check_report(everyone, participants=3)
    assert shown(item_mean(kept)) != shown(item_mean(everyone))  # the switch mattered
    shot(page, "13-report-with-excluded")
