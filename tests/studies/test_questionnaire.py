"""The exit questionnaire builder (issue 49, item 3): the one-line-per-question syntax
and its tags (each type, old questionnaires read the same, errors naming the line), the
researcher's editor page (text kept on error, preview, versions), the server's checks of
the participant's answers (required, ranges, lengths, conditions; answers kept on
error), and the exports: one column per item, and a codebook with the question text."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from studies.models import StudyTextVersion
from studies.participation import questionnaire, recruitment
from studies.participation.questionnaire import QuestionnaireSyntaxError

from .test_exports import _agree, _answer_scene, _api, _files
from .test_rater_views import invite, keep_scenes, to_scenes, url

EVERY_TYPE = """\
* How old are you? [number 18-99]
Do you watch TV series?: Yes | No
Devices you watch on [multi]: Phone | Tablet | Laptop
How often do you guess who speaks? [likert 1=Never,3=Sometimes,5=Always]
How much do you agree? [grid 1=Disagree,5=Agree]: The scenes were clear | The task was fun
Hours of TV a day [number 0-24 decimal]
Any comments? [text 40]
* Which series do you watch most? [if q2=Yes]: Friends | The Office | Another
"""


# -- the syntax ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "Age band: 18-24 | 25+",
            {"type": "choice", "required": False, "choices": ["18-24", "25+"]},
        ),
        ("Comments", {"type": "text", "max_length": 500}),
        ("* Comments [text 80]", {"type": "text", "required": True, "max_length": 80}),
        ("Devices [multi]: Phone | Laptop", {"type": "multi", "choices": ["Phone", "Laptop"]}),
        ("Pick [single]: A | B", {"type": "choice", "choices": ["A", "B"]}),
        (
            "Often? [likert 1=Never,3=Sometimes,5=Always]",
            {
                "type": "likert",
                "scale": [
                    {"value": "1", "label": "Never"},
                    {"value": "2", "label": ""},
                    {"value": "3", "label": "Sometimes"},
                    {"value": "4", "label": ""},
                    {"value": "5", "label": "Always"},
                ],
            },
        ),
        (
            "Rate [likert 0-3]",
            {"type": "likert", "scale": [{"value": str(n), "label": ""} for n in range(4)]},
        ),
        (
            "Agree? [grid 1-3, 1=No, 3=Yes]: Clear | Fun",
            {
                "type": "grid",
                "statements": ["Clear", "Fun"],
                "scale": [
                    {"value": "1", "label": "No"},
                    {"value": "2", "label": ""},
                    {"value": "3", "label": "Yes"},
                ],
            },
        ),
        ("Age [number 18-99]", {"type": "number", "min": "18", "max": "99", "decimal": False}),
        (
            "Hours [number 0-24 decimal]",
            {"type": "number", "min": "0", "max": "24", "decimal": True},
        ),
        (
            "Hours [number 0.5 to 7.5]",
            {"type": "number", "min": "0.5", "max": "7.5", "decimal": True},
        ),
        ("Anything [number]", {"type": "number", "min": None, "max": None, "decimal": False}),
        # A bracket that is no tag stays in the wording, as it did before tags.
        ("Height [cm] [number 100-250]", {"label": "Height [cm]", "type": "number"}),
        ("Time: 9:00 | 10:00", {"label": "Time", "choices": ["9:00", "10:00"]}),
    ],
)
def test_each_line_makes_its_item(line, expected):
    (item,) = questionnaire.parse(line)
    assert item["key"] == "q1"
    assert {k: item[k] for k in expected} == expected


def test_every_type_reads_back_the_same_and_conditions_name_earlier_answers():
    items = questionnaire.parse(EVERY_TYPE)
    assert [q["type"] for q in items] == [
        "number", "choice", "multi", "likert", "grid", "number", "text", "choice",
    ]  # fmt: skip
    assert items[7]["show_if"] == {"key": "q2", "value": "Yes"} and items[7]["required"]
    assert questionnaire.parse(questionnaire.text(items)) == items
    # A Likert point by its label; a [multi] by one of its options.
    more = questionnaire.parse(
        EVERY_TYPE + "Why always? [if q4=Always]\nWhy a phone? [if q3=Phone]"
    )
    assert [q["show_if"] for q in more[-2:]] == [
        {"key": "q4", "value": "5"},
        {"key": "q3", "value": "Phone"},
    ]


def test_questionnaires_saved_before_tags_read_the_same():
    old = [
        {"key": "q1", "label": "Age", "choices": ["18-30", "31+"]},
        {"key": "q2", "label": "Comments", "choices": []},
    ]
    assert questionnaire.text(old) == "Age: 18-30 | 31+\nComments"
    assert questionnaire.items(questionnaire.parse("Age: 18-30 | 31+\nComments")) == (
        questionnaire.items(old)
    )
    drawn = questionnaire.form_items(old)
    assert [(q["type"], q.get("max_length")) for q in drawn] == [("choice", None), ("text", 500)]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "Age: a | b\n\nDevices [multy]: x | y",
            "line 3: unknown tag [multy]; did you mean [multi]?",
        ),
        ("Devices [multi]", "line 1: [multi] needs its choices after a colon"),
        ("Often? [likert]", "line 1: [likert …] needs its points"),
        (
            "Often? [likert 1=Never,5=Always]: a | b",
            "line 1: a Likert item takes nothing after the colon",
        ),
        ("Often? [likert 1-20]", "line 1: a scale has 2 to 11 points"),
        ("Often? [likert 1-5, 7=Always]", "line 1: point 7 is outside 1-5"),
        ("Agree? [grid 1-5]", "line 1: [grid …] needs its statements after a colon"),
        ("Age [number 99-18]", "line 1: the range 99-18 runs backwards"),
        ("Age [number old]", "line 1: 'old' is not a range"),
        ("Notes [text 0]", "line 1: [text 0]: the limit is a number of characters, 1 to 5000"),
        ("Age [number] [text]", "line 1: one type a question"),
        ("Which? [if q1=Yes]: A | B", "line 1: [if q1=Yes]: q1 is not an earlier question"),
        (
            "TV?: Yes | No\nWhich? [if q1=Maybe]",
            "line 2: [if q1=Maybe]: q1 has no answer 'Maybe' (it has Yes, No)",
        ),
        ("Age [number 1-9]\nWhy? [if q1=3]", "line 2: [if q1=3]: q1 is a number"),
        ("Which? [if TV is on]", "line 1: [if TV is on]: write [if q2=Yes]"),
        ("[multi]: a | b", "line 1: the question has no text"),
        ("Pick: a | A", "line 1: the choice 'A' is given twice"),
    ],
)
def test_errors_name_the_line(text, problem):
    with pytest.raises(QuestionnaireSyntaxError) as refused:
        questionnaire.parse(text)
    assert refused.value.problems[0].startswith(problem), refused.value.problems


def test_every_faulty_line_is_named_and_later_keys_keep_their_place():
    with pytest.raises(QuestionnaireSyntaxError) as refused:
        questionnaire.parse("Age [number x]\nTV?: Yes | No\nDevices [multi]\nWhich? [if q2=Yes]")
    # Line 4 reads q2 although line 1 (q1) is faulty: the numbering holds.
    assert [p.split(":")[0] for p in refused.value.problems] == ["line 1", "line 3"]


# -- the researcher's editor --------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.module_rows("friends")
def test_editor_keeps_the_text_on_error_previews_and_saves_versions(client, researcher, live_study):
    client.force_login(researcher)
    page = reverse("studies:exit-questions", args=[live_study.pk])
    detail = client.get(reverse("studies:detail", args=[live_study.pk])).content.decode()
    assert f'href="{page}"' in detail and "Exit questionnaire: none" in detail

    typo = "Age [number 18-99]\n\nDevices [multy]: Phone | Laptop"
    refused = client.post(page, {"text": typo})
    html = refused.content.decode()
    assert refused.status_code == 400
    assert "line 3: unknown tag [multy]; did you mean [multi]?" in html
    assert "Devices [multy]: Phone | Laptop</textarea>" in html  # as typed
    live_study.refresh_from_db()
    assert live_study.exit_questions == [] and live_study.exit_questions_version == 1

    preview = client.post(page, {"text": EVERY_TYPE, "preview": "1"})
    html = preview.content.decode()
    assert preview.status_code == 200 and "Preview (not saved)" in html
    assert 'name="q5_2"' in html and 'data-show-if="q2"' in html
    live_study.refresh_from_db()
    assert live_study.exit_questions == []

    saved = client.post(page, {"text": EVERY_TYPE}, follow=True)
    assert "Exit questionnaire saved as version 2." in saved.content.decode()
    again = client.post(page, {"text": EVERY_TYPE}, follow=True)
    assert "Nothing changed." in again.content.decode()
    live_study.refresh_from_db()
    assert live_study.exit_questions == questionnaire.parse(EVERY_TYPE)
    assert live_study.exit_questions_version == 2
    versions = StudyTextVersion.objects.filter(study=live_study, kind="exit_questions")
    assert [(v.version, len(v.content)) for v in versions] == [(1, 0), (2, 8)]
    # The box shows the saved questionnaire as it would be typed.
    assert questionnaire.text(live_study.exit_questions) in client.get(page).content.decode()


@pytest.mark.django_db
@pytest.mark.module_rows("friends")
def test_editor_is_for_researchers(client, live_study):
    page = reverse("studies:exit-questions", args=[live_study.pk])
    assert client.get(page).status_code in (302, 403)
    assert client.post(page, {"text": "Age"}).status_code in (302, 403)
    live_study.refresh_from_db()
    assert live_study.exit_questions == []


# -- the participant's answers ------------------------------------------------------------


@pytest.fixture
def questionnaire_study(live_study):
    recruitment.exit_questions_save(study=live_study, questions=questionnaire.parse(EVERY_TYPE))
    return live_study


def _send(client, participant, data: dict):
    return client.post(url("exit", participant), data)


@pytest.mark.django_db
@pytest.mark.module_rows("friends")
def test_required_ranges_lengths_and_unknown_options_are_refused_with_answers_kept(
    client, questionnaire_study
):
    participant = invite(questionnaire_study)
    refused = _send(
        client,
        participant,
        {
            "q1": "17",
            "q2": "Yes",
            "q3": ["Phone", "Radio"],
            "q4": "4",
            "q5_1": "5",
            "q6": "2,5",
            "q7": "x" * 41,
        },
    )
    html = refused.content.decode()
    assert refused.status_code == 400
    errors = refused.context["errors"]
    assert errors == {
        "q1": "enter a whole number from 18 to 99",
        "q3": "choose among the options",
        "q7": "at most 40 characters (this is 41)",
        "q8": "choose an answer",  # required, and shown: q2 is Yes
    }
    # Each error by its question, and what was sent is still there.
    assert 'id="error-q1">Enter a whole number from 18 to 99.</p>' in html
    assert 'name="q1" value="17"' in html
    assert 'name="q2" value="Yes" checked' in html
    assert 'name="q3" value="Phone" checked' in html
    assert 'name="q5_1" value="5" checked' in html
    assert 'name="q6" value="2,5"' in html
    assert "x" * 41 + "</textarea>" in html
    assert "Skip</button>" not in html  # required questions: no skipping
    # "Skip" sends nothing, and is no way round a required question.
    skipped = _send(client, participant, {"q1": "40", "skip": "1"})
    assert skipped.context["errors"] == {"q1": "enter a number"}
    participant.refresh_from_db()
    assert participant.exit_done_at is None and participant.exit_answers == {}


@pytest.mark.django_db
@pytest.mark.module_rows("friends")
def test_hidden_questions_are_not_required_and_their_answers_are_dropped(
    client, questionnaire_study
):
    participant = invite(questionnaire_study)
    data = {"q1": "40", "q2": "No", "q8": "Friends", "q5_2": "2", "q6": "1,50"}
    assert _send(client, participant, data).status_code == 302
    participant.refresh_from_db()
    # q8 waits for q2=Yes: not required, and its answer is not kept.
    assert participant.exit_answers == {"q1": "40", "q2": "No", "q5": {"2": "2"}, "q6": "1.5"}
    # Sent once: a second send changes nothing.
    _send(client, participant, {"q1": "50", "q2": "No"})
    participant.refresh_from_db()
    assert participant.exit_answers["q1"] == "40"


@pytest.mark.django_db
@pytest.mark.module_rows("friends")
def test_a_required_grid_needs_every_statement(client, live_study):
    recruitment.exit_questions_save(
        study=live_study,
        questions=questionnaire.parse("* Agree? [grid 1-5]: Clear | Fun\nAge [number 0-120]"),
    )
    participant = invite(live_study)
    refused = _send(client, participant, {"q1_1": "3", "q2": "121"})
    assert refused.context["errors"] == {
        "q1": "rate every statement",
        "q2": "enter a whole number from 0 to 120",
    }
    refused = _send(client, participant, {"q1_1": "3", "q1_2": "9"})
    assert refused.context["errors"] == {"q1": "choose one of the points for each statement"}
    assert _send(client, participant, {"q1_1": "3", "q1_2": "5"}).status_code == 302


# -- exports ------------------------------------------------------------------------------


def _finish(client, study, label: str, answers: dict) -> object:
    participant = invite(study, label)
    to_scenes(client, participant)
    _answer_scene(client, participant)
    assert "A few last questions" in client.get(url("start", participant)).content.decode()
    assert client.post(url("exit", participant), answers).status_code == 302
    participant.refresh_from_db()
    return participant


@pytest.mark.django_db
@pytest.mark.module_rows("friends")
def test_exports_have_a_column_per_item_and_a_codebook(client, researcher, questionnaire_study):
    keep_scenes(questionnaire_study, 1)
    ann = _finish(
        client,
        questionnaire_study,
        "Ann",
        {
            "q1": "34",
            "q2": "Yes",
            "q3": ["Laptop", "Phone"],
            "q4": "5",
            "q5_1": "4",
            "q5_2": "2",
            "q6": "2.5",
            "q7": "Fun, mostly",
            "q8": "The Office",
        },
    )
    ben = _finish(client, questionnaire_study, "Ben", {"q1": "61", "q2": "No", "q8": "Friends"})
    client.force_login(researcher)

    table, rows = _files(client, questionnaire_study, "exit-wide")
    columns = table[0]
    items = ["q1", "q2", "q3_1", "q3_2", "q3_3", "q4", "q5_1", "q5_2", "q6", "q7", "q8"]
    assert columns[-len(items) :] == items
    _agree(table, rows, _api(client, questionnaire_study, "exit-wide"), columns)
    by_id = {r["participant_id"]: {k: r[k] for k in items} for r in rows}
    assert by_id[ann.pk] == {
        "q1": "34",
        "q2": "Yes",
        "q3_1": "1",  # Phone
        "q3_2": "0",  # Tablet
        "q3_3": "1",  # Laptop
        "q4": "5",
        "q5_1": "4",
        "q5_2": "2",
        "q6": "2.5",
        "q7": "Fun, mostly",
        "q8": "The Office",
    }
    # Ben saw no q8 (q2 is No) and left the rest: empty, not 0.
    assert by_id[ben.pk] == dict.fromkeys(items, "") | {"q1": "61", "q2": "No"}

    table, codebook = _files(client, questionnaire_study, "exit-codebook")
    _agree(table, codebook, _api(client, questionnaire_study, "exit-codebook"), table[0])
    described = {r["column"] for r in codebook}
    assert set(columns) <= described  # every column of the wide file is in the codebook
    by_column = {r["column"]: r for r in codebook if r["version"] == 2}
    assert by_column["q1"] | {"column": "q1"} == {
        "column": "q1",
        "version": 2,
        "key": "q1",
        "type": "number",
        "question": "How old are you?",
        "part": "",
        "values": "a whole number from 18 to 99",
        "required": True,
        "shown_if": "",
    }
    assert (by_column["q3_2"]["question"], by_column["q3_2"]["part"]) == (
        "Devices you watch on",
        "Tablet",
    )
    assert by_column["q3_2"]["values"] == "1 ticked, 0 not"
    assert by_column["q5_2"]["part"] == "The task was fun"
    assert by_column["q5_2"]["values"] == "1=Disagree, 2, 3, 4, 5=Agree"
    assert by_column["q4"]["values"] == "1=Never, 2, 3=Sometimes, 4, 5=Always"
    assert by_column["q8"]["shown_if"] == "q2=Yes"

    # The long file: a row a question, a grid's statements apart, ticks joined.
    _table, long_rows = _files(client, questionnaire_study, "exit")
    ann_long = {r["key"]: r["answer"] for r in long_rows if r["participant_id"] == ann.pk}
    assert ann_long["q3"] == "Phone | Laptop" and ann_long["q5_2"] == "2"
    question = next(r["question"] for r in long_rows if r["key"] == "q5_1")
    assert question == "How much do you agree?: The scenes were clear"


@pytest.mark.django_db
@pytest.mark.module_rows("friends")
def test_responses_page_links_the_wide_export_and_the_codebook(client, researcher, live_study):
    client.force_login(researcher)
    html = client.get(reverse("studies:responses", args=[live_study.pk])).content.decode()
    assert reverse("studies:exit-wide-csv", args=[live_study.pk]) in html
    assert reverse("studies:exit-codebook-csv", args=[live_study.pk]) in html
    codebook = client.get(reverse("studies:exit-codebook-csv", args=[live_study.pk]))
    header = next(csv.reader(io.StringIO(codebook.getvalue().decode())))
    assert header == [
        "column",
        "version",
        "key",
        "type",
        "question",
        "part",
        "values",
        "required",
        "shown_if",
    ]


@pytest.mark.django_db
@pytest.mark.module_rows("friends")
def test_the_wide_export_and_codebook_are_for_researchers_only(
    client, rater, researcher, live_study
):
    pk = live_study.pk
    urls = [
        *(
            reverse(f"studies:{n}-{f}", args=[pk])
            for n in ("exit-wide", "exit-codebook")
            for f in ("csv", "json")
        ),
        reverse("studies-exit-wide", args=[pk]),
        reverse("studies-exit-codebook", args=[pk]),
        reverse("studies:exit-questions", args=[pk]),
    ]
    client.force_login(rater)
    assert [client.get(u).status_code for u in urls] == [403] * len(urls)
    client.force_login(researcher)
    assert [client.get(u).status_code for u in urls] == [200] * len(urls)
    schema = client.get("/api/schema/").content.decode()
    assert "/api/studies/{study_id}/exit-wide/" in schema
    assert "ExitCodebookRow" in schema
