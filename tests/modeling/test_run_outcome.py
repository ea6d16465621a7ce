"""Honest run statuses (issue 25): a run whose answers could not be read fails, one with
some unreadable answers says how many, everywhere the status is shown; and the run
page's calls panel follows the run while it is open.

Runs are made by the engine against the loopback server (tests/llm_server.py), over
the real DynToM stages, Big Fish and the CharToM-QA paper examples.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from modeling.models import Prediction, Run, RunCall
from modeling.runs.executor import run_execute
from modeling.runs.outcome import run_status_label
from modeling.runs.selectors import run_list
from modeling.runs.services import run_create
from reports.tables import build_report

from .conftest import answer_all
from .test_chartom_qa_pipeline import chartom_items, examples
from .test_import_predictions import dyntom_line, run_import, trial149, write_jsonl
from .test_speaker_guess_pipeline import big_fish

__all__ = ["big_fish", "chartom_items", "examples", "trial149"]  # fixtures used below

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("dyntom_stages")]

HX = {"HX-Request": "true"}
# Markup and an ampersand, to see the reply escaped, and long enough to be cut.
PROSE = "<b>Perhaps the giant</b> & his friends, or nobody at all. " * 60


@pytest.fixture
def client_researcher(client, researcher):
    client.force_login(researcher)
    return client


def _execute(backend, benchmark: str, method: str, selection: dict) -> Run:
    run = run_create(
        benchmark=benchmark, method=method, backend=backend, selection=selection, enqueue=False
    )
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _api_run(client, run: Run) -> dict:
    response = client.get(f"/api/modeling/runs/{run.pk}/")
    assert response.status_code == 200, response.content
    return response.json()


# --- no parseable reply: failed, whatever the pipeline ---------------------------------


def test_speaker_guessing_with_no_parseable_reply_fails_and_shows_the_first_reply(
    openai_backend, llm_server, big_fish, client_researcher
):
    llm_server.responder = lambda body: PROSE
    run = _execute(openai_backend, "tom-in-amc", "zero-shot", {"scene_limit": 6})

    predictions = Prediction.objects.filter(run=run)
    assert predictions.count() >= 6 and not predictions.filter(parse_status="ok").exists()
    assert (run.status, run.done_calls, run.error_calls) == (Run.Status.FAILED, 6, 0)
    assert run.error == (
        f"no parseable reply: none of the {predictions.count()} answers could be read; "
        "the first reply is shown on the run page"
    )

    page = client_researcher.get(reverse("modeling:run-detail", args=[run.pk])).content.decode()
    assert 'class="badge badge-failed" data-testid="run-status">failed: no parseable reply<' in page
    # Escaped, and cut at 2,000 characters with the length said.
    assert "&lt;b&gt;Perhaps the giant&lt;/b&gt; &amp; his friends" in page
    assert "<b>Perhaps the giant</b>" not in page
    assert f"(its first 2,000 of {len(PROSE)} characters)" in page
    shown = page.split('<pre class="prompt">', 1)[1].split("</pre>", 1)[0]
    assert shown.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") == PROSE[:2000]
    # Every call is done: resuming would ask nothing and end the same way.
    assert "Resume run" not in page

    listed = client_researcher.get(reverse("modeling:run-list")).content.decode()
    assert "failed: no parseable reply</span>" in listed
    assert _api_run(client_researcher, run)["status_display"] == "failed: no parseable reply"


def test_dyntom_with_no_parseable_reply_fails(openai_backend, llm_server, dyntom_stages):
    llm_server.responder = lambda body: "Scenario one is about trust. No idea otherwise."
    run = _execute(openai_backend, "dyntom", "vanilla", {"limit": 2})

    assert run.status == Run.Status.FAILED
    assert run.error.startswith("no parseable reply: none of the")
    # DynToM keeps the reply once, on the call; the page still finds it.
    assert run_status_label(run=run).no_parseable_reply


def test_chartom_qa_with_no_parseable_reply_fails(openai_backend, llm_server, chartom_items):
    llm_server.responder = lambda body: "Hard to say; all of them, in a way."
    run = _execute(openai_backend, "chartom-qa", "multichoice", {})

    assert Prediction.objects.filter(run=run).exclude(parse_status="ok").count() == 2
    assert (run.status, run.error_calls) == (Run.Status.FAILED, 0)
    assert run.error.startswith("no parseable reply")


def test_failed_calls_still_say_so_rather_than_no_parseable_reply(
    openai_backend, llm_server, dyntom_stages
):
    openai_backend.max_concurrency = 1
    openai_backend.save()
    llm_server.responder = lambda body: "No idea."
    llm_server.enqueue(status=400)
    run = _execute(openai_backend, "dyntom", "vanilla", {"limit": 2})

    # A resume retries the failed call, so that is what the run must say.
    assert run.status == Run.Status.FAILED
    assert run.error == "1 call(s) failed; resume the run to retry them"
    assert run_status_label(run=run).text == "failed"


# --- some unparseable: succeeded, with the count, in the warning colour ----------------


def test_some_unparseable_replies_succeed_with_the_count_everywhere(
    openai_backend, llm_server, dyntom_stages, client_researcher, django_assert_max_num_queries
):
    unreadable = dyntom_stages.first().characters_information

    def responder(body: dict) -> str:
        if unreadable in body["messages"][-1]["content"]:
            return "I would rather not guess."
        return answer_all("a")(body)

    llm_server.responder = responder
    run = _execute(openai_backend, "dyntom", "vanilla", {"limit": 2})

    missed = Prediction.objects.filter(run=run).exclude(parse_status="ok").count()
    assert missed == dyntom_stages.first().questions.count() > 0
    assert (run.status, run.error) == (Run.Status.SUCCEEDED, "")
    label = run_status_label(run=run)
    assert (label.text, label.tone, label.unparseable) == (
        f"succeeded with {missed} unparseable",
        "warning",
        missed,
    )

    badge = (
        f'class="badge badge-warning" data-testid="run-status">succeeded with {missed} unparseable<'
    )
    detail = client_researcher.get(reverse("modeling:run-detail", args=[run.pk]))
    assert badge in detail.content.decode()
    assert 'data-testid="first-reply"' not in detail.content.decode()
    # The list counts for every run of the page in the one query that lists them.
    with django_assert_max_num_queries(8):
        listed = client_researcher.get(reverse("modeling:run-list"))
    assert badge in listed.content.decode()

    data = _api_run(client_researcher, run)
    assert (data["status"], data["status_display"], data["unparseable"]) == (
        "succeeded",
        f"succeeded with {missed} unparseable",
        missed,
    )
    admin = client_researcher.get(reverse("admin:modeling_run_changelist")).content.decode()
    assert f"succeeded with {missed} unparseable" in admin

    # Still a succeeded run to the reports, with its unparseable answers counted there.
    report = build_report("dyntom")
    runs = next(t for t in report.tables if t.key == "runs")
    row = dict(zip(runs.columns, next(r for r in runs.rows if r[0] == run.pk), strict=True))
    assert row["Status"] == "succeeded" and row["Unparseable"] == missed


def test_a_run_all_of_whose_answers_parse_is_plainly_succeeded(
    openai_backend, llm_server, dyntom_stages
):
    llm_server.responder = answer_all("a")
    run = _execute(openai_backend, "dyntom", "vanilla", {"limit": 2})

    listed = run_list().get(pk=run.pk)
    assert listed.unparseable == 0
    label = run_status_label(run=listed)
    assert (run.status, label.text, label.tone) == ("succeeded", "succeeded", "succeeded")


# --- imported predictions follow the same rule ------------------------------------------


def test_imported_predictions_none_readable_import_as_a_failed_run(trial149, tmp_path: Path):
    q = trial149
    unreadable = [dyntom_line(question, answer="no idea") for question in q[:3]]
    run_import(write_jsonl(tmp_path / "none.jsonl", unreadable), "--name", "vllm")

    run = Run.objects.get()
    assert (run.imported, run.status) == (True, Run.Status.FAILED)
    assert run.error.startswith("no parseable reply: none of the 3 answers")

    # The same file with one readable answer added: imported again, it succeeds.
    readable = [*unreadable, dyntom_line(q[3], answer=q[3].gold_letter)]
    run_import(write_jsonl(tmp_path / "some.jsonl", readable), "--name", "vllm")
    run.refresh_from_db()
    assert (run.status, run.error) == (Run.Status.SUCCEEDED, "")
    assert run_status_label(run=run).text == "succeeded with 3 unparseable"


# --- the calls panel follows the run -----------------------------------------------------


def test_polling_brings_the_calls_panel_and_stops_with_the_calls_shown(
    openai_backend, llm_server, dyntom_stages, client_researcher
):
    llm_server.responder = answer_all("a")
    run = run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=openai_backend,
        selection={"limit": 2},
        enqueue=False,
    )
    url = reverse("modeling:run-detail", args=[run.pk])

    queued = client_researcher.get(url, headers=HX)
    assert queued.status_code == 200
    progress, calls = queued.content.decode().split('<section class="card" id="run-calls"', 1)
    assert progress.lstrip().startswith('<section id="run-progress"')
    assert 'hx-trigger="every 2s"' in progress
    # The calls panel is swapped by id, out of band, and never polls itself.
    assert calls.startswith(' aria-labelledby="calls-title" hx-swap-oob="true">')
    assert "No calls yet" in calls and "hx-trigger" not in calls

    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED

    finished = client_researcher.get(url, headers=HX)
    assert finished.status_code == 286  # htmx swaps it in and stops polling
    content = finished.content.decode()
    assert "hx-trigger" not in content
    assert 'hx-swap-oob="true"' in content and "No calls yet" not in content
    for unit_key in RunCall.objects.filter(run=run).values_list("unit_key", flat=True):
        assert f"<td>{unit_key}</td>" in content

    # The full page has the panel in place, without the out-of-band marker.
    page = client_researcher.get(url).content.decode()
    assert '<section class="card" id="run-calls" aria-labelledby="calls-title">' in page


def test_polling_keeps_the_calls_page_being_read(openai_backend, client_researcher):
    run = run_create(
        benchmark="dyntom", method="vanilla", backend=openai_backend, selection={}, enqueue=False
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, total_calls=60)
    RunCall.objects.bulk_create(RunCall(run=run, unit_key=f"dyntom:unit{i:02}") for i in range(60))
    url = reverse("modeling:run-detail", args=[run.pk])

    page = client_researcher.get(url, {"calls_page": 2}).content.decode()
    assert f'hx-get="{url}?calls_page=2"' in page

    polled = client_researcher.get(url, {"calls_page": 2}, headers=HX).content.decode()
    assert f'hx-get="{url}?calls_page=2"' in polled
    assert "Page 2 of 2" in polled and "<td>dyntom:unit59</td>" in polled
    assert "<td>dyntom:unit00</td>" not in polled


def test_trained_runs_poll_without_a_calls_panel(client_researcher):
    run = Run.objects.create(
        name="protonet", kind=Run.Kind.TRAINED, benchmark="tom-in-amc", method="protonet"
    )
    polled = client_researcher.get(reverse("modeling:run-detail", args=[run.pk]), headers=HX)
    assert polled.status_code == 200
    assert "run-calls" not in polled.content.decode()
