"""The prediction explorer and run comparison (issue 29): a DynToM run against the
stand-in server, some of whose replies cannot be read, explored by status, opened row by
row, exported, and compared with a second run."""

from __future__ import annotations

import csv
import io
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from modeling.models import Prediction, Run
from modeling.runs import executor, selectors, services
from tests.modeling.conftest import answer_all, gold_responder

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("dyntom_stages")]

GARBAGE = "I would rather not pick a letter today."


@pytest.fixture
def client_researcher(client, researcher):
    client.force_login(researcher)
    return client


def _run(backend, llm_server, responder, *, limit: int = 3, temperature: float = 0.0) -> Run:
    """A finished run; another temperature keeps it from reusing cached replies."""
    llm_server.responder = responder
    run = services.run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=backend,
        selection={"limit": limit},
        params={"temperature": temperature},
        enqueue=False,
    )
    executor.run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def garbled_responder(stages, garbled_stage):
    """Gold letters, but a wrong letter for two questions of the first stage and prose
    (nothing to parse) for the whole of ``garbled_stage``. Precomputed here: the server
    thread cannot see a test's uncommitted rows."""
    golds = {
        stage.characters_information: {q.key: q.gold_letter for q in stage.questions.all()}
        for stage in stages
    }
    first = stages[0].characters_information
    wrong = set(list(golds[first])[:2])

    def responder(request_json: dict) -> str:
        prompt = request_json["messages"][-1]["content"]
        if garbled_stage.characters_information in prompt:
            return GARBAGE
        info, gold = next((i, g) for i, g in golds.items() if i in prompt)
        return json.dumps(
            {
                k: ("b" if letter == "a" else "a") if info == first and k in wrong else letter
                for k, letter in gold.items()
            }
        )

    return responder


@pytest.fixture
def garbled_run(openai_backend, llm_server, dyntom_stages) -> Run:
    stages = list(dyntom_stages[:3])
    return _run(openai_backend, llm_server, garbled_responder(stages, stages[2]))


def _url(run: Run, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return reverse("modeling:prediction-list", args=[run.pk]) + (f"?{query}" if query else "")


def test_unparseable_filter_lists_exactly_the_garbled_stage(
    client_researcher, garbled_run, dyntom_stages
):
    garbled_stage = list(dyntom_stages[:3])[2]
    expected = set(
        Prediction.objects.filter(run=garbled_run, dyntom_question__stage=garbled_stage)
        .exclude(parse_status=Prediction.ParseStatus.OK)
        .values_list("pk", flat=True)
    )
    assert expected, "the garbled stage must leave unparseable predictions"
    assert garbled_run.status == Run.Status.SUCCEEDED

    rows = list(selectors.prediction_rows(run=garbled_run, status="unparseable"))
    assert {r["id"] for r in rows} == expected
    assert {r["work"] for r in rows} == {garbled_stage.work.key}

    counts = selectors.prediction_status_counts(run=garbled_run)
    assert counts["unparseable"] == len(expected)
    assert counts["wrong"] == 2
    assert counts["error"] == 0
    assert sum(counts.values()) == Prediction.objects.filter(run=garbled_run).count()

    page = client_researcher.get(_url(garbled_run, status="unparseable"))
    assert page.status_code == 200
    content = page.content.decode()
    assert content.count('data-testid="prediction-row"') == min(len(expected), 50)
    assert f'unparseable</a> <span class="muted">({len(expected)})' in content

    wrong = client_researcher.get(_url(garbled_run, status="wrong")).content.decode()
    assert wrong.count('data-testid="prediction-row"') == 2


def test_work_and_type_filters_narrow_the_rows(garbled_run, dyntom_stages):
    work = dyntom_stages[0].work.key
    rows = list(selectors.prediction_rows(run=garbled_run, work=work))
    assert rows and {r["work"] for r in rows} == {work}
    kind = rows[0]["kind"]
    typed = list(selectors.prediction_rows(run=garbled_run, work=work, kind=kind))
    assert typed and len(typed) < len(rows)
    assert {r["kind"] for r in typed} == {kind}


def test_unknown_status_is_an_error_naming_the_field(client_researcher, garbled_run):
    response = client_researcher.get(_url(garbled_run, status="bogus"))
    assert response.status_code == 200
    assert "status: choose one of correct, wrong, unparseable, error" in response.content.decode()


def test_run_page_links_each_count_to_the_filtered_explorer(client_researcher, garbled_run):
    counts = selectors.prediction_status_counts(run=garbled_run)
    content = client_researcher.get(
        reverse("modeling:run-detail", args=[garbled_run.pk])
    ).content.decode()
    link = reverse("modeling:prediction-list", args=[garbled_run.pk])
    assert (
        f'<a href="{link}?status=unparseable" data-testid="predictions-unparseable">'
        f"{counts['unparseable']} unparseable</a>"
    ) in content
    assert f"{counts['wrong']} wrong</a>" in content


def test_detail_shows_prompt_raw_reply_parse_and_gold(client_researcher, garbled_run):
    prediction = (
        Prediction.objects.filter(run=garbled_run)
        .exclude(parse_status=Prediction.ParseStatus.OK)
        .select_related("dyntom_question")
        .first()
    )
    url = reverse("modeling:prediction-detail", args=[garbled_run.pk, prediction.pk])
    content = client_researcher.get(url).content.decode()
    assert GARBAGE in content
    # The stage text the call sent, as sent.
    stage = prediction.dyntom_question.stage
    assert 'data-testid="prompt-message"' in content
    assert stage.main_character in content
    assert prediction.dyntom_question.key in content
    assert f'data-testid="gold">{prediction.dyntom_question.gold_letter}<' in content
    assert "unparseable" in content


def test_detail_of_another_runs_prediction_is_404(
    client_researcher, garbled_run, openai_backend, llm_server, dyntom_stages
):
    other = _run(openai_backend, llm_server, answer_all("a"), limit=1)
    foreign = Prediction.objects.filter(run=other).first()
    url = reverse("modeling:prediction-detail", args=[garbled_run.pk, foreign.pk])
    assert client_researcher.get(url).status_code == 404


def test_csv_and_jsonl_rows_equal_the_page_rows(client_researcher, garbled_run):
    rows = list(selectors.prediction_rows(run=garbled_run, status="unparseable"))
    as_text = [{k: "" if v is None else str(v) for k, v in r.items()} for r in rows]

    response = client_researcher.get(_url(garbled_run, status="unparseable", format="csv"))
    assert response["Content-Type"] == "text/csv"
    body = b"".join(response.streaming_content).decode()
    assert list(csv.DictReader(io.StringIO(body))) == as_text

    response = client_researcher.get(_url(garbled_run, status="unparseable", format="jsonl"))
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert [json.loads(line) for line in lines] == rows

    page = client_researcher.get(_url(garbled_run, status="unparseable")).content.decode()
    for row in rows[:50]:
        assert reverse("modeling:prediction-detail", args=[garbled_run.pk, row["id"]]) in page


def test_csv_export_is_formula_safe(client_researcher, garbled_run):
    Prediction.objects.filter(run=garbled_run).update(parsed_answer="=HYPERLINK(1)")
    body = b"".join(client_researcher.get(_url(garbled_run, format="csv")).streaming_content)
    assert b",=HYPERLINK" not in body
    assert b"'=HYPERLINK(1)" in body


def test_page_query_count_does_not_grow_with_rows(
    client_researcher, openai_backend, llm_server, dyntom_stages
):
    small = _run(openai_backend, llm_server, answer_all("a"), limit=1)
    large = _run(openai_backend, llm_server, answer_all("a"), limit=3)
    assert (
        Prediction.objects.filter(run=large).count() > Prediction.objects.filter(run=small).count()
    )
    counted = []
    for run in (small, large):
        with CaptureQueriesContext(connection) as queries:
            assert client_researcher.get(_url(run)).status_code == 200
        counted.append(len(queries))
    assert counted[0] == counted[1]


def test_compare_two_runs_shows_the_items_where_they_differ(
    client_researcher, garbled_run, openai_backend, llm_server, dyntom_stages
):
    other = _run(
        openai_backend, llm_server, gold_responder(list(dyntom_stages[:3])), temperature=0.5
    )
    a = {p.dyntom_question_id: p for p in Prediction.objects.filter(run=garbled_run)}
    b = {p.dyntom_question_id: p for p in Prediction.objects.filter(run=other)}
    assert set(a) == set(b)
    differ = {
        a[q].pk
        for q in a
        if (a[q].parsed_answer, a[q].correct) != (b[q].parsed_answer, b[q].correct)
    }
    both_right = sum(1 for q in a if a[q].correct and b[q].correct)
    only_b = sum(1 for q in a if not a[q].correct and b[q].correct)
    assert differ and only_b == len(differ)

    url = reverse("modeling:run-compare") + f"?a={garbled_run.pk}&b={other.pk}&differ=1"
    response = client_researcher.get(url)
    assert response.status_code == 200
    content = response.content.decode()
    assert f'data-testid="count-both_right">{both_right}<' in content
    assert f'data-testid="count-only_b">{only_b}<' in content
    assert 'data-testid="count-only_a">0<' in content
    assert content.count('data-testid="compare-row"') == min(len(differ), 50)

    comparison = selectors.run_compare(a=garbled_run, b=other, only_differ=True)
    assert {r["a_id"] for r in comparison.rows} == differ
    everything = selectors.run_compare(a=garbled_run, b=other)
    assert len(everything.rows) == len(a)
    assert everything.unmatched == 0

    body = b"".join(client_researcher.get(url + "&format=csv").streaming_content).decode()
    exported = list(csv.DictReader(io.StringIO(body)))
    assert len(exported) == len(differ)
    assert {r["item_key"] for r in exported} == {r["item_key"] for r in comparison.rows}

    # An item only one run answered is counted apart, not compared.
    Prediction.objects.filter(pk=b[next(iter(b))].pk).delete()
    assert selectors.run_compare(a=garbled_run, b=other).unmatched == 1


def test_compare_runs_of_different_benchmarks_is_a_clear_error(
    client_researcher, garbled_run, openai_backend
):
    other = Run.objects.create(name="qa", benchmark="chartom-qa", method="vanilla", model="m")
    url = reverse("modeling:run-compare") + f"?a={garbled_run.pk}&b={other.pk}"
    response = client_researcher.get(url)
    assert response.status_code == 400
    assert "compare runs of the same benchmark" in response.content.decode()
    missing = client_researcher.get(reverse("modeling:run-compare") + "?a=x&b=1")
    assert "a: give the id of an existing run" in missing.content.decode()


@pytest.mark.parametrize("role", ["rater", "annotator"])
def test_raters_and_annotators_get_403(request, client, garbled_run, role):
    client.force_login(request.getfixturevalue(role))
    prediction = Prediction.objects.filter(run=garbled_run).first()
    key = prediction.dyntom_question.key
    for url in (
        _url(garbled_run),
        _url(garbled_run, format="csv"),
        reverse("modeling:prediction-detail", args=[garbled_run.pk, prediction.pk]),
        reverse("modeling:run-compare") + f"?a={garbled_run.pk}&b={garbled_run.pk}",
    ):
        response = client.get(url)
        assert response.status_code == 403, url
        # Nothing of the run's rows leaks into the refusal.
        assert GARBAGE.encode() not in response.content
        assert key.encode() not in response.content


def test_rows_of_chartom_and_speaker_runs_carry_their_work_dimension_and_gold(shared_data):
    from benchmarks.models import QAItem, SpeakerInstance

    for benchmark, source in (
        ("chartom-qa", shared_data / "chartom-qa" / "paper_examples.jsonl"),
        ("tvshowguess", shared_data / "tvshowguess" / "friends.raw"),
    ):
        call_command(
            "import_benchmark", benchmark, str(source), "--split", "test", "--no-progress",
            stdout=StringIO(), stderr=StringIO(),
        )  # fmt: skip
    item = QAItem.objects.select_related("work").first()
    instance = SpeakerInstance.objects.select_related("scene__work", "gold_character").first()
    qa_run = Run.objects.create(name="qa", benchmark="chartom-qa", method="vanilla", model="m")
    speaker_run = Run.objects.create(name="sp", benchmark="tvshowguess", method="m", model="m")
    Prediction.objects.create(run=qa_run, qa_item=item, parse_status="ok", correct=True)
    Prediction.objects.create(
        run=speaker_run, speaker_instance=instance, parse_status="refused", correct=False
    )

    [qa_row] = selectors.prediction_rows(run=qa_run, kind=item.dimension)
    assert (qa_row["item_key"], qa_row["work"], qa_row["gold"], qa_row["status"]) == (
        item.natural_key,
        item.work.key,
        item.answer,
        "correct",
    )
    [speaker_row] = selectors.prediction_rows(run=speaker_run, status="unparseable")
    assert speaker_row["item_key"] == f"{instance.scene.source_id} {instance.code}"
    assert speaker_row["work"] == instance.scene.work.key
    assert speaker_row["gold"] == instance.gold_character.name
    assert selectors.prediction_filter_choices(run=qa_run) == {
        "works": [item.work.key],
        "kinds": [item.dimension],
    }
