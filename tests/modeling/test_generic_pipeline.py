# ruff: noqa: RUF001
"""The generic multiple-choice pipeline (issue 47, item 4): runs over a mapped benchmark's
items on the one run engine, against the loopback server, in English and Chinese, with
shuffled options; and its settings checked by the services, the run form, the API and
``run_model``."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks.models import Benchmark, MCItem, Work
from modeling.models import Prediction, Run
from modeling.pipelines import get_pipeline
from modeling.pipelines.generic import option_order
from modeling.runs.executor import run_execute
from modeling.runs.outcome import run_status_label
from modeling.runs.prompt_templates import active_template
from modeling.runs.selectors import prediction_rows, run_prediction_summary
from modeling.runs.services import run_create, run_plan
from tests.generic_items import make_generic_benchmark

pytestmark = pytest.mark.django_db

LETTERS = "ABCDEFGH"
OPTION_LINE = re.compile(r"^([A-Z])\. (.*)$", re.MULTILINE)
QUESTION_LINE = re.compile(r"^(?:Question: |问题：)(.*)$", re.MULTILINE)


@pytest.fixture
def mini_tom() -> Work:
    return make_generic_benchmark()


@pytest.fixture
def bilingual() -> Work:
    return make_generic_benchmark(name="Mini ToM bilingual", bilingual=True)


def golds(work: Work, language: str = "en") -> dict[str, set[str]]:
    """Question text -> the gold options' texts (read here: the server thread cannot see
    the test's uncommitted rows)."""
    return {
        item.text(language)["question"]: {item.text(language)["options"][i] for i in item.answers}
        for item in work.mc_items.all()
    }


def responder(work: Work, language: str = "en", *, wrong=(), garbage=(), style="{letter}"):
    """Answers every prompt with the letter its options show the gold at (``style``
    formats it), a wrong letter for the questions in ``wrong`` and prose for those in
    ``garbage`` (questions given by their item ids)."""
    gold = golds(work, language)
    items = {i.item_id: i.text(language)["question"] for i in work.mc_items.all()}
    wrong_q = {items[i] for i in wrong}
    garbage_q = {items[i] for i in garbage}

    def respond(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        question = QUESTION_LINE.search(prompt).group(1)
        shown = OPTION_LINE.findall(prompt)
        if question in garbage_q:
            return "Hard to say; it depends on the person."
        letter = next(letter for letter, text in shown if text in gold[question])
        if question in wrong_q:
            letter = next(other for other, _ in shown if other != letter)
        return style.format(letter=letter)

    return respond


def _run(backend, work: Work, **kwargs) -> Run:
    selection = {"works": [work.key], **kwargs.pop("selection", {})}
    kwargs.setdefault("method", "vanilla")
    return run_create(
        benchmark="generic", backend=backend, selection=selection, enqueue=False, **kwargs
    )


def gold_letter(item: MCItem) -> str:
    return LETTERS[item.answers[0]]


# --- prompts ------------------------------------------------------------------------------


def test_prompt_shows_the_item_with_lettered_options_and_no_gold(mini_tom):
    pipeline = get_pipeline("generic")
    template = active_template("generic-vanilla-en")
    units = pipeline.build_units(
        selection={"works": [mini_tom.key], "language": "en"}, template=template
    )
    items = list(mini_tom.mc_items.order_by("position"))
    assert [u.item_ids for u in units] == [[i.pk] for i in items]
    assert units[0].key == "generic:mt-01"
    prompt = units[0].messages[-1]["content"]
    first = items[0].text("en")
    assert first["context"] in prompt
    assert f"Question: {first['question']}" in prompt
    assert (
        "A. In the red box\nB. In the cupboard under the stairs\nC. In the garden\nD. At the shop"
        in prompt
    )
    assert "(A, B, C or D) and nothing else" in prompt
    # Neither the gold nor the item's categories reach the model.
    assert "False belief" not in prompt and "order" not in prompt
    assert "correct" not in prompt.lower()


def test_defaults_are_versioned_templates_in_english_and_chinese(mini_tom, openai_backend):
    for method in ("vanilla", "cot"):
        for language in ("en", "zh"):
            template = active_template(f"generic-{method}-{language}")
            assert (template.benchmark, template.method, template.version) == (
                "generic",
                method,
                1,
            )
            assert set(template.fields) == {"context", "question", "options", "letters"}
    assert "答案：X" in active_template("generic-cot-zh").user
    assert '"Answer: X"' in active_template("generic-cot-en").user
    # A run picks the template of its language.
    plan = run_plan(
        benchmark="generic",
        method="cot",
        backend=openai_backend,
        selection={"works": [mini_tom.key]},
    )
    assert plan.template.name == "generic-cot-en"
    assert "step by step" in plan.first_messages[-1]["content"]
    assert plan.calls == 12


# --- runs end to end ----------------------------------------------------------------------


def test_a_run_stores_one_scored_prediction_per_item(openai_backend, llm_server, mini_tom):
    llm_server.responder = responder(mini_tom, wrong={"mt-03"}, garbage={"mt-05"})
    run = _run(openai_backend, mini_tom)
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED

    run.refresh_from_db()
    assert (run.done_calls, run.total_calls, llm_server.request_count) == (12, 12, 12)
    assert run.template.name == "generic-vanilla-en"
    assert run.selection == {"works": [mini_tom.key], "language": "en"}
    assert run.params["options"] == {"shuffle": False}
    assert {r["temperature"] for r in llm_server.requests} == {0.0}

    predictions = {
        p.mc_item.item_id: p for p in Prediction.objects.filter(run=run).select_related("mc_item")
    }
    assert len(predictions) == 12
    for item_id, prediction in predictions.items():
        item = prediction.mc_item
        if item_id == "mt-05":
            assert (prediction.parse_status, prediction.correct) == ("unparseable", False)
            assert prediction.parsed_answer == ""
            assert "no option letter" in prediction.details["reason"]
        elif item_id == "mt-03":
            assert (prediction.parse_status, prediction.correct) == ("ok", False)
            assert prediction.parsed_answer != gold_letter(item)
        else:
            assert (prediction.parse_status, prediction.correct) == ("ok", True), item_id
            assert prediction.parsed_answer == gold_letter(item)
        assert prediction.template_version == "generic-vanilla-en v1"
        assert "order" not in prediction.details

    summary = run_prediction_summary(run=run)
    assert (summary.total, summary.correct, summary.by_status["unparseable"]) == (12, 10, 1)
    assert summary.chance == pytest.approx(0.25)
    assert run_status_label(run=run).text == "succeeded with 1 unparseable"

    # The explorer's rows name the item by its id, its set and its gold letter.
    rows = {r["item_key"]: r for r in prediction_rows(run=run)}
    assert rows["mt-01"]["work"] == mini_tom.key
    assert rows["mt-01"]["gold"] == "A" and rows["mt-02"]["gold"] == "B"
    assert rows["mt-01"]["kind"] == "False belief"
    assert (rows["mt-05"]["status"], rows["mt-03"]["status"]) == ("unparseable", "wrong")


def test_garbage_from_the_server_is_counted_unparseable(openai_backend, llm_server, mini_tom):
    llm_server.responder = lambda body: "Well, people are complicated."
    run = _run(openai_backend, mini_tom, method="cot")
    assert run_execute(run_id=run.pk) == Run.Status.FAILED

    predictions = Prediction.objects.filter(run=run)
    assert predictions.count() == 12
    assert set(predictions.values_list("parse_status", "correct")) == {("unparseable", False)}
    summary = run_prediction_summary(run=run)
    assert (summary.correct, summary.by_status["unparseable"], summary.accuracy) == (0, 12, 0)
    run.refresh_from_db()
    assert run_status_label(run=run).text == "failed: no parseable reply"


def test_chain_of_thought_replies_are_read_from_their_last_line(
    openai_backend, llm_server, mini_tom
):
    llm_server.responder = responder(
        mini_tom, style="Option A is tempting, and (B) and C too.\nSo...\nAnswer: {letter}"
    )
    run = _run(openai_backend, mini_tom, method="cot")
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    assert run_prediction_summary(run=run).correct == 12
    details = Prediction.objects.filter(run=run).values_list("details", flat=True)
    assert {d["read"] for d in details} == {"answer"}


def _orders(run: Run) -> dict[str, list[int]]:
    return {
        p.mc_item.item_id: p.details["order"]
        for p in Prediction.objects.filter(run=run).select_related("mc_item")
    }


def test_shuffled_options_map_back_to_the_items_own_letters(openai_backend, llm_server, mini_tom):
    llm_server.responder = responder(mini_tom)
    run = _run(openai_backend, mini_tom, params={"options": {"shuffle": True, "shuffle_seed": 7}})
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    assert run.params["options"] == {"shuffle": True, "shuffle_seed": 7}

    # The gold moved around, and every answer was still read back to the item's own letter.
    shown_at = set()
    for prediction in Prediction.objects.filter(run=run).select_related("mc_item"):
        item = prediction.mc_item
        order = prediction.details["order"]
        assert order == option_order(seed=7, item_id=item.item_id, count=4)
        assert sorted(order) == [0, 1, 2, 3]
        assert (prediction.parsed_answer, prediction.correct) == (gold_letter(item), True)
        assert prediction.details["shown"] == LETTERS[order.index(item.answers[0])]
        shown_at.add(prediction.details["shown"])
    assert len(shown_at) > 2  # the gold was shown in several positions

    # What the model saw: the options in the recorded order.
    first = next(r for r in llm_server.requests if "Noor" in r["messages"][-1]["content"])
    order = _orders(run)["mt-01"]
    options = MCItem.objects.get(work=mini_tom, item_id="mt-01").texts["en"]["options"]
    shown = OPTION_LINE.findall(first["messages"][-1]["content"])
    assert [text for _, text in shown] == [options[i] for i in order]


def test_a_model_always_answering_a_is_scored_by_the_shown_order(
    openai_backend, llm_server, mini_tom
):
    llm_server.responder = lambda body: "A"
    run = _run(openai_backend, mini_tom, params={"options": {"shuffle": True, "shuffle_seed": 3}})
    run_execute(run_id=run.pk)
    for prediction in Prediction.objects.filter(run=run).select_related("mc_item"):
        first_shown = prediction.details["order"][0]
        assert prediction.parsed_answer == LETTERS[first_shown]
        assert prediction.correct == (first_shown in prediction.mc_item.answers)


def test_the_same_seed_shows_the_same_orders_and_another_seed_others(
    openai_backend, llm_server, mini_tom
):
    llm_server.responder = responder(mini_tom)
    first = _run(
        openai_backend, mini_tom, params={"options": {"shuffle": True, "shuffle_seed": 11}}
    )
    run_execute(run_id=first.pk)
    assert llm_server.request_count == 12
    again = _run(
        openai_backend, mini_tom, params={"options": {"shuffle": True, "shuffle_seed": 11}}
    )
    run_execute(run_id=again.pk)
    # The same prompts: every reply came from the cache.
    assert llm_server.request_count == 12
    assert _orders(again) == _orders(first)

    other = _run(
        openai_backend, mini_tom, params={"options": {"shuffle": True, "shuffle_seed": 12}}
    )
    run_execute(run_id=other.pk)
    assert llm_server.request_count > 12
    assert _orders(other) != _orders(first)
    assert any(order != [0, 1, 2, 3] for order in _orders(other).values())
    assert run_prediction_summary(run=other).correct == 12


def test_a_run_in_chinese_uses_the_chinese_text_and_template(openai_backend, llm_server, bilingual):
    llm_server.responder = responder(bilingual, "zh", style="让我们一步一步地想。\n答案：{letter}")
    run = _run(openai_backend, bilingual, method="cot", selection={"language": "zh"})
    assert run.template.name == "generic-cot-zh"
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED

    prompt = llm_server.requests[0]["messages"][-1]["content"]
    assert "问题：（中文）" in prompt and "故事：" in prompt
    assert "A、B、C 或 D" in prompt
    assert "A. （中文）" in prompt
    summary = run_prediction_summary(run=run)
    assert (summary.total, summary.correct) == (12, 12)


def test_a_subset_by_category_values(openai_backend, llm_server, mini_tom):
    llm_server.responder = responder(mini_tom)
    run = _run(
        openai_backend,
        mini_tom,
        selection={"categories": {"ability": ["False belief", "Knowledge and perception"]}},
    )
    run_execute(run_id=run.pk)
    answered = set(Prediction.objects.filter(run=run).values_list("mc_item__item_id", flat=True))
    assert answered == {"mt-01", "mt-02", "mt-03", "mt-10", "mt-11", "mt-12"}
    both = run_plan(
        benchmark="generic",
        method="vanilla",
        backend=openai_backend,
        selection={
            "works": [mini_tom.key],
            "categories": {
                "ability": ["False belief", "Knowledge and perception"],
                "order": "second",
            },
        },
    )
    assert both.calls == 2  # mt-03 and mt-12


# --- settings checked -------------------------------------------------------------------


@pytest.fixture
def empty_set() -> Work:
    return Work.objects.create(
        benchmark=Benchmark.GENERIC,
        key="empty@1",
        title="Empty",
        kind=Work.Kind.ITEM_SET,
        extra={"name": "Empty", "version": "1", "languages": ["en"]},
    )


@pytest.mark.parametrize(
    ("selection", "params", "message"),
    [
        ({"language": "fr"}, {}, "language 'fr': Mini ToM (mini-tom@1) has en"),
        (
            {"categories": {"task": ["x"]}},
            {},
            "has no category field 'task'; it has ability, order",
        ),
        (
            {"categories": {"ability": ["Telepathy"]}},
            {},
            "categories: ability: 'Telepathy' not among",
        ),
        ({"split": "test"}, {}, "selection: split do not apply"),
        ({"works": []}, {}, "works: choose the Other (mapped) item set"),
        ({"works": ["nope@1"]}, {}, "works: no Other (mapped) item set 'nope@1'"),
        ({}, {"options": {"shots": 2}}, "option(s) shots do not apply"),
        ({}, {"options": {"shuffle": "perhaps"}}, "option shuffle: expected true or false"),
        ({}, {"options": {"shuffle_seed": 3}}, "set shuffle=true"),
        ({}, {"options": {"shuffle": True, "shuffle_seed": -1}}, "option shuffle_seed"),
    ],
)
def test_bad_settings_are_refused_naming_them(openai_backend, mini_tom, selection, params, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _run(openai_backend, mini_tom, selection=selection, params=params)
    assert not Run.objects.exists()


def test_an_item_set_without_items_is_refused(openai_backend, empty_set):
    with pytest.raises(ValueError, match=re.escape("works: Empty (empty@1) has no items")):
        _run(openai_backend, empty_set)


# --- the run form, the API and run_model -------------------------------------------------


def generic_form(backend, work: Work, action: str, **overrides) -> dict[str, str]:
    data = {
        "benchmark": "generic",
        "method": "vanilla",
        "backend": str(backend.pk),
        "item_set": str(work.pk),
        "samples": "1",
        "action": action,
    }
    return {**data, **overrides}


@pytest.fixture
def client_researcher(client, researcher):
    client.force_login(researcher)
    return client


def test_the_new_run_page_offers_the_item_sets(client_researcher, openai_backend, mini_tom):
    page = client_researcher.get(reverse("modeling:run-new")).content.decode()
    assert '<option value="generic">Other (mapped)</option>' in page
    assert f'<option value="{mini_tom.pk}">Mini ToM (mini-tom@1)</option>' in page
    assert 'name="shuffle"' in page and 'name="language"' in page


def test_the_form_previews_and_starts_a_shuffled_run(
    client_researcher, openai_backend, llm_server, bilingual, django_capture_on_commit_callbacks
):
    url = reverse("modeling:run-new")
    fields = {
        "language": "zh",
        "categories": "order=second",
        "shuffle": "on",
        "shuffle_seed": "5",
    }
    preview = client_researcher.post(
        url, generic_form(openai_backend, bilingual, "preview", **fields)
    )
    assert preview.status_code == 200
    plan = preview.context["plan"]
    assert (plan.calls, plan.template.name) == (4, "generic-vanilla-zh")
    assert "问题：（中文）" in preview.content.decode()
    assert not Run.objects.exists()

    with django_capture_on_commit_callbacks():
        started = client_researcher.post(
            url, generic_form(openai_backend, bilingual, "start", **fields)
        )
    run = Run.objects.get()
    assert started.status_code == 302
    assert run.selection == {
        "works": [bilingual.key],
        "language": "zh",
        "categories": {"order": ["second"]},
    }
    assert run.params["options"] == {"shuffle": True, "shuffle_seed": 5}
    assert llm_server.request_count == 0


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"language": "fr"}, "language", "language &#x27;fr&#x27;: Mini ToM (mini-tom@1) has en"),
        ({"categories": "ability"}, "categories", "expected FIELD=VALUE"),
        ({"categories": "ability=Telepathy"}, "categories", "not among"),
        ({"item_set": ""}, "item_set", "choose the item set to run"),
        ({"shuffle_seed": "4"}, "shuffle_seed", "tick Shuffle options"),
    ],
)
def test_the_form_shows_each_error_at_its_field(
    client_researcher, openai_backend, mini_tom, overrides, field, message
):
    response = client_researcher.post(
        reverse("modeling:run-new"), generic_form(openai_backend, mini_tom, "start", **overrides)
    )
    assert response.status_code == 200
    assert message in response.content.decode()
    assert field in response.context["form"].errors
    assert not Run.objects.exists()


def test_the_form_refuses_an_empty_item_set(client_researcher, openai_backend, empty_set):
    response = client_researcher.post(
        reverse("modeling:run-new"), generic_form(openai_backend, empty_set, "preview")
    )
    assert "Empty (empty@1) has no items" in response.context["form"].errors["item_set"][0]


def test_the_generic_fields_belong_to_generic_runs(client_researcher, openai_backend, mini_tom):
    response = client_researcher.post(
        reverse("modeling:run-new"),
        {
            **generic_form(openai_backend, mini_tom, "preview"),
            "benchmark": "dyntom",
            "language": "en",
            "shuffle_seed": "0",
        },
    )
    errors = response.context["form"].errors
    for field in ("language", "item_set", "shuffle_seed"):
        assert errors[field] == ["applies to Other (mapped) runs only"]
    assert "shuffle" not in errors and "categories" not in errors


@pytest.fixture
def api(researcher) -> APIClient:
    client = APIClient()
    client.force_login(researcher)
    return client


def test_the_api_creates_a_generic_run(api, openai_backend, bilingual):
    payload = {
        "benchmark": "generic",
        "method": "cot",
        "backend": openai_backend.name,
        "selection": {
            "works": [bilingual.key],
            "language": "zh",
            "categories": {"ability": ["False belief"]},
        },
        "params": {"options": {"shuffle": True, "shuffle_seed": 9}},
    }
    response = api.post(reverse("modeling-run-list"), payload, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["template"]["name"] == "generic-cot-zh"
    assert body["selection"]["language"] == "zh"
    assert body["params"]["options"] == {"shuffle": True, "shuffle_seed": 9}


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        ({"language": "fr"}, "language 'fr': Mini ToM (mini-tom@1) has en"),
        ({"categories": {"ability": ["Telepathy"]}}, "'Telepathy' not among"),
        ({"categories": {"ability": "False belief"}}, None),
    ],
)
def test_the_api_answers_bad_selections_with_a_400_naming_them(
    api, openai_backend, mini_tom, selection, message
):
    payload = {
        "benchmark": "generic",
        "method": "vanilla",
        "backend": openai_backend.name,
        "selection": {"works": [mini_tom.key], **selection},
    }
    response = api.post(reverse("modeling-run-list"), payload, format="json")
    assert response.status_code == 400
    assert "selection" in response.json()
    if message:
        assert message in response.json()["selection"][0]
    assert not Run.objects.exists()


def test_the_api_refuses_an_item_set_without_items(api, openai_backend, empty_set):
    payload = {
        "benchmark": "generic",
        "method": "vanilla",
        "backend": openai_backend.name,
        "selection": {"works": [empty_set.key]},
    }
    response = api.post(reverse("modeling-run-list"), payload, format="json")
    assert response.status_code == 400
    assert response.json() == {"selection": ["works: Empty (empty@1) has no items"]}


def test_the_api_lists_predictions_by_item_id(api, openai_backend, llm_server, mini_tom):
    llm_server.responder = responder(mini_tom)
    run = _run(openai_backend, mini_tom, selection={"limit": 2})
    run_execute(run_id=run.pk)
    response = api.get(reverse("modeling-run-predictions", args=[run.pk]))
    rows = response.json()["results"]
    # In the order the replies came back.
    assert sorted((r["item_key"], r["work_key"], r["correct"]) for r in rows) == [
        ("mt-01", mini_tom.key, True),
        ("mt-02", mini_tom.key, True),
    ]
    assert all(r["mc_item"] for r in rows)


def test_run_model_runs_a_generic_benchmark(openai_backend, llm_server, mini_tom):
    llm_server.responder = responder(mini_tom)
    call_command(
        "run_model",
        "--benchmark",
        "generic",
        "--method",
        "vanilla",
        "--backend",
        openai_backend.name,
        "--items",
        mini_tom.key,
        "--language",
        "en",
        "--category",
        "order=second",
        "--shuffle",
        "--shuffle-seed",
        "3",
    )
    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED
    assert run.selection == {
        "works": [mini_tom.key],
        "language": "en",
        "categories": {"order": ["second"]},
    }
    assert run.params["options"] == {"shuffle": True, "shuffle_seed": 3}
    assert run_prediction_summary(run=run).correct == 4


def test_the_run_pages_show_a_generic_run(client_researcher, openai_backend, llm_server, mini_tom):
    llm_server.responder = responder(mini_tom, garbage={"mt-02"})
    run = _run(
        openai_backend,
        mini_tom,
        selection={"limit": 3},
        params={"options": {"shuffle": True, "shuffle_seed": 2}},
    )
    run_execute(run_id=run.pk)

    detail = client_researcher.get(reverse("modeling:run-detail", args=[run.pk]))
    assert detail.status_code == 200
    page = detail.content.decode()
    assert "succeeded with 1 unparseable" in page
    assert "options.shuffle_seed" in page and "language" in page

    listing = client_researcher.get(
        reverse("modeling:prediction-list", args=[run.pk]), {"status": "unparseable"}
    )
    assert listing.status_code == 200
    assert "mt-02" in listing.content.decode() and "mt-01" not in listing.content.decode()

    prediction = Prediction.objects.get(run=run, mc_item__item_id="mt-01")
    shown = client_researcher.get(
        reverse("modeling:prediction-detail", args=[run.pk, prediction.pk])
    ).content.decode()
    assert "Noor puts her kite" in shown  # the prompt as sent


def test_another_workspaces_item_set_is_neither_offered_nor_run(
    api, client_researcher, openai_backend
):
    from accounts.workspaces import workspace_create
    from common.scoping import scoped_to

    second = workspace_create(name="Second lab")
    with scoped_to(second.pk):
        theirs = make_generic_benchmark(name="Their ToM")
    assert theirs.workspace_id == second.pk

    page = client_researcher.get(reverse("modeling:run-new")).content.decode()
    assert "Their ToM" not in page
    payload = {
        "benchmark": "generic",
        "method": "vanilla",
        "backend": openai_backend.name,
        "selection": {"works": [theirs.key]},
    }
    response = api.post(reverse("modeling-run-list"), payload, format="json")
    assert response.status_code == 400
    assert theirs.key in response.json()["selection"][0]
    assert not Run.objects.exists()
