"""The run pages through the Django test client: what researchers see and may do, and
that raters, annotators and anonymous visitors get nothing."""

from __future__ import annotations

import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from modeling.models import PromptTemplate, Run
from modeling.runs import executor, prompt_templates, services
from tests.modeling.conftest import gold_responder
from tests.module_rows import build_friends

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("dyntom_stages")]

HX = {"HX-Request": "true"}


@pytest.fixture
def client_researcher(client, researcher):
    client.force_login(researcher)
    return client


@pytest.fixture
def templates(db) -> PromptTemplate:
    """The default templates; returns dyntom-vanilla v1."""
    prompt_templates.prompt_templates_ensure_defaults()
    return PromptTemplate.objects.get(name="dyntom-vanilla", version=1)


def make_run(backend, **kwargs) -> Run:
    """A queued DynToM run over two works, not sent to any worker."""
    return services.run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=backend,
        selection={"limit": 2},
        enqueue=False,
        **kwargs,
    )


def run_form(backend, action: str, **overrides) -> dict[str, str]:
    data = {
        "benchmark": "dyntom",
        "method": "vanilla",
        "backend": str(backend.pk),
        "limit": "2",
        "samples": "1",
        "action": action,
    }
    return {**data, **overrides}


# --- Run list and new run ---------------------------------------------------------------


def test_run_list_shows_runs(client_researcher, openai_backend):
    run = make_run(openai_backend, name="first try")
    response = client_researcher.get(reverse("modeling:run-list"))
    assert response.status_code == 200
    content = response.content.decode()
    assert "first try" in content
    assert reverse("modeling:run-detail", args=[run.pk]) in content
    assert "badge badge-queued" in content


def test_run_list_empty(client_researcher):
    response = client_researcher.get(reverse("modeling:run-list"))
    assert response.status_code == 200
    assert "No runs yet" in response.content.decode()


def test_run_list_query_count_is_bounded(
    client_researcher, openai_backend, templates, django_assert_max_num_queries
):
    for i in range(8):
        make_run(openai_backend, name=f"run {i}", template=templates)
    # Session, user, roles, page count, runs with backend and template: no query per row.
    with django_assert_max_num_queries(5):
        response = client_researcher.get(reverse("modeling:run-list"))
    assert response.content.decode().count("badge-queued") == 8


def test_new_run_form(client_researcher, openai_backend):
    response = client_researcher.get(reverse("modeling:run-new"))
    assert response.status_code == 200
    content = response.content.decode()
    assert '<label for="id_backend">Backend</label>' in content
    assert "local-test" in content
    assert 'value="preview"' in content


def test_preview_shows_first_prompt_and_saves_nothing(
    client_researcher, openai_backend, dyntom_stages, llm_server
):
    response = client_researcher.post(
        reverse("modeling:run-new"), run_form(openai_backend, "preview")
    )
    assert response.status_code == 200
    plan = response.context["plan"]
    assert plan.calls == 2
    content = response.content.decode()
    assert 'data-testid="plan-calls">2<' in content
    assert "Read the story below" in content
    assert "[type_" in content  # the first stage's questions, with their keys
    assert Run.objects.count() == 0
    assert llm_server.request_count == 0


def test_preview_with_unknown_work_is_a_form_error(client_researcher, openai_backend):
    response = client_researcher.post(
        reverse("modeling:run-new"), run_form(openai_backend, "preview", works="nosuchwork")
    )
    assert response.status_code == 200
    assert "unknown dyntom work key(s): nosuchwork" in response.content.decode()
    assert 'role="alert"' in response.content.decode()


def test_start_creates_queued_run_and_redirects(
    client_researcher,
    researcher,
    openai_backend,
    dyntom_stages,
    llm_server,
    django_capture_on_commit_callbacks,
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_researcher.post(
            reverse("modeling:run-new"), run_form(openai_backend, "start", name="my run")
        )
    run = Run.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("modeling:run-detail", args=[run.pk])
    assert (run.status, run.name, run.created_by) == (Run.Status.QUEUED, "my run", researcher)
    assert run.selection == {"limit": 2}
    assert len(callbacks) == 1  # the task is sent once the run row is committed
    assert llm_server.request_count == 0


# --- Run detail ---------------------------------------------------------------------------


def test_detail_of_queued_run_polls(client_researcher, openai_backend):
    run = make_run(openai_backend)
    url = reverse("modeling:run-detail", args=[run.pk])

    full = client_researcher.get(url)
    assert full.status_code == 200
    assert "<html" in full.content.decode()
    assert 'hx-trigger="every 2s"' in full.content.decode()

    # Parameters read as a table of dotted keys, not a Python dict.
    assert 'data-testid="run-params"' in full.content.decode()
    assert "{&#x27;" not in full.content.decode()

    partial = client_researcher.get(url, headers=HX)
    assert partial.status_code == 200
    content = partial.content.decode()
    assert "<html" not in content
    assert content.lstrip().startswith('<section id="run-progress"')
    assert 'hx-trigger="every 2s"' in content


def test_detail_of_finished_run_stops_polling(
    client_researcher, openai_backend, dyntom_stages, llm_server
):
    llm_server.responder = gold_responder(dyntom_stages)
    run = make_run(openai_backend)
    assert executor.run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    url = reverse("modeling:run-detail", args=[run.pk])

    full = client_researcher.get(url)
    assert full.status_code == 200
    content = full.content.decode()
    assert "badge-succeeded" in content
    assert 'data-testid="accuracy">100%<' in content
    assert "dyntom:" in content  # the calls table lists the units

    partial = client_researcher.get(url, headers=HX)
    assert partial.status_code == 286
    content = partial.content.decode()
    assert "<html" not in content
    assert "badge-succeeded" in content
    assert 'data-testid="accuracy">100%<' in content
    assert "hx-trigger" not in content


def test_run_accuracy_is_coloured_against_the_items_chance(
    client_researcher, openai_backend, dyntom_stages, llm_server
):
    """Issue 16: a flat rule coloured 11% green; the colour now says where the accuracy
    stands against guessing among each question's options (mean of 1/#options)."""
    from modeling.models import Prediction
    from modeling.runs.selectors import run_prediction_summary

    llm_server.responder = gold_responder(dyntom_stages)
    run = make_run(openai_backend)
    assert executor.run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    predictions = Prediction.objects.filter(run=run).select_related("dyntom_question")
    options = [len(p.dyntom_question.options) for p in predictions]
    chance = sum(1 / k for k in options) / len(options)
    summary = run_prediction_summary(run=run)
    assert summary.chance == pytest.approx(chance)
    url = reverse("modeling:run-detail", args=[run.pk])

    content = client_researcher.get(url).content.decode()
    assert 'class="accuracy vs-chance-above"' in content
    assert f"clearly above chance ({round(100 * chance)}%)" in content

    # Every answer wrong: below chance, in the warning colour and in words.
    predictions.update(correct=False)
    content = client_researcher.get(url).content.decode()
    assert 'class="accuracy vs-chance-below"' in content and "below chance" in content
    # About as many right as guessing gives: neutral, neither green nor the warning.
    ids = sorted(predictions.values_list("pk", flat=True))
    Prediction.objects.filter(pk__in=ids[: round(chance * len(ids))]).update(correct=True)
    content = client_researcher.get(url).content.decode()
    assert 'class="accuracy vs-chance-near"' in content
    assert "not clearly different from chance" in content


def test_detail_unknown_run_is_404(client_researcher):
    assert client_researcher.get(reverse("modeling:run-detail", args=[999])).status_code == 404


def test_cancel_then_resume(client_researcher, openai_backend, django_capture_on_commit_callbacks):
    run = make_run(openai_backend)
    detail = reverse("modeling:run-detail", args=[run.pk])

    response = client_researcher.post(reverse("modeling:run-cancel", args=[run.pk]))
    assert response.status_code == 302
    assert response.url == detail
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert "Resume run" in client_researcher.get(detail).content.decode()

    with django_capture_on_commit_callbacks() as callbacks:
        response = client_researcher.post(reverse("modeling:run-resume", args=[run.pk]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert len(callbacks) == 1


def test_cancel_with_htmx_returns_progress_region(client_researcher, openai_backend):
    run = make_run(openai_backend)
    response = client_researcher.post(reverse("modeling:run-cancel", args=[run.pk]), headers=HX)
    assert response.status_code == 200
    content = response.content.decode()
    assert content.lstrip().startswith('<section id="run-progress"')
    assert "badge-cancelled" in content


def test_resume_of_imported_run_shows_error(client_researcher, openai_backend):
    run = make_run(openai_backend)
    Run.objects.filter(pk=run.pk).update(imported=True, status=Run.Status.FAILED)
    response = client_researcher.post(reverse("modeling:run-resume", args=[run.pk]), follow=True)
    assert "imported runs have nothing to resume" in response.content.decode()
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED


def _held(run: Run, *, host: str, pid: int) -> None:
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        lease_expires_at=timezone.now() + timedelta(seconds=60),
        lease_holder_host=host,
        lease_holder_pid=pid,
    )


def test_resume_of_a_run_live_elsewhere_is_refused_in_the_progress_region(
    client_researcher, openai_backend, django_capture_on_commit_callbacks
):
    run = make_run(openai_backend)
    _held(run, host="gpu-node-7", pid=4242)
    detail = client_researcher.get(reverse("modeling:run-detail", args=[run.pk])).content.decode()
    assert "Resume run" in detail  # a running run can be taken over if its holder is gone

    url = reverse("modeling:run-resume", args=[run.pk])
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_researcher.post(url, headers=HX)
    assert response.status_code == 200
    content = response.content.decode()
    assert content.lstrip().startswith('<section id="run-progress"')
    assert 'data-testid="action-error"' in content
    assert f"run {run.pk} is held by process 4242 on host gpu-node-7" in content
    assert "retry after" in content
    assert callbacks == []  # nothing queued
    run.refresh_from_db()
    assert (run.status, run.lease_holder_pid) == (Run.Status.RUNNING, 4242)

    # Without htmx: back to the page, with the same line as a message.
    response = client_researcher.post(url, follow=True)
    assert "is held by process 4242 on host gpu-node-7" in response.content.decode()


def test_resume_takes_over_a_run_whose_process_here_is_gone(
    client_researcher, openai_backend, django_capture_on_commit_callbacks
):
    run = make_run(openai_backend)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _held(run, host=socket.gethostname(), pid=dead.pid)
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_researcher.post(reverse("modeling:run-resume", args=[run.pk]), headers=HX)
    assert response.status_code == 200
    assert 'data-testid="action-error"' not in response.content.decode()
    run.refresh_from_db()
    assert (run.status, run.lease_holder_pid, run.lease_expires_at) == (
        Run.Status.QUEUED,
        None,
        None,
    )
    assert len(callbacks) == 1  # queued for a worker at once, not after the lease


def test_seed_from_the_form_is_stored_with_the_run(
    client_researcher, openai_backend, dyntom_stages, django_capture_on_commit_callbacks
):
    page = client_researcher.get(reverse("modeling:run-new")).content.decode()
    assert 'name="seed"' in page
    with django_capture_on_commit_callbacks():
        client_researcher.post(
            reverse("modeling:run-new"), run_form(openai_backend, "start", seed="7", samples="3")
        )
    run = Run.objects.get()
    assert (run.params["seed"], run.params["samples"]) == (7, 3)
    response = client_researcher.post(
        reverse("modeling:run-new"), run_form(openai_backend, "preview", seed="-1")
    )
    assert "greater than or equal to 0" in response.content.decode()


# --- Prompt templates ---------------------------------------------------------------------


def test_template_list_groups_versions_with_run_counts(
    client_researcher, openai_backend, templates
):
    make_run(openai_backend, template=templates)
    prompt_templates.prompt_template_revise(template=templates, notes="shorter")
    response = client_researcher.get(reverse("modeling:template-list"))
    assert response.status_code == 200
    content = response.content.decode()
    assert "dyntom-vanilla" in content and "dyntom-cot" in content
    assert "2 versions" in content
    rows = {t.pk: t.run_count for t in response.context["templates"]}
    assert rows[templates.pk] == 1


def test_template_detail(client_researcher, templates):
    response = client_researcher.get(reverse("modeling:template-detail", args=[templates.pk]))
    assert response.status_code == 200
    content = response.content.decode()
    assert "Read the story below" in content
    assert "<code>{characters_information}</code>" in content
    assert templates.output_format.replace('"', "&quot;") in content
    assert reverse("modeling:template-revise", args=[templates.pk]) in content
    assert '<label for="id_user">User</label>' in content
    assert "Save as version 2" in content


def test_revise_creates_version_2_and_keeps_version_1(client_researcher, openai_backend, templates):
    run = make_run(openai_backend, template=templates)
    text = "Answer briefly.\n{characters_information}\n{story}\n{questions}"
    response = client_researcher.post(
        reverse("modeling:template-revise", args=[templates.pk]),
        {"system": "You are careful.", "user": text, "notes": "shorter"},
    )
    v2 = PromptTemplate.objects.get(name="dyntom-vanilla", version=2)
    assert response.status_code == 302
    assert response.url == reverse("modeling:template-detail", args=[v2.pk])
    assert (v2.user, v2.system, v2.notes, v2.is_active) == (
        text,
        "You are careful.",
        "shorter",
        True,
    )
    templates.refresh_from_db()
    assert templates.user.startswith("Read the story below")
    # The built-in v1 stays active for the other workspaces; this one runs v2 (issue 46).
    assert templates.workspace_id is None and v2.workspace.slug == "default"
    assert prompt_templates.active_template("dyntom-vanilla") == v2
    run.refresh_from_db()
    assert run.template_id == templates.pk

    page = client_researcher.get(response.url).content.decode()
    assert "Saved dyntom-vanilla v2." in page
    assert reverse("modeling:template-detail", args=[templates.pk]) in page  # link to v1


def test_revise_with_unknown_field_is_a_form_error(client_researcher, templates):
    response = client_researcher.post(
        reverse("modeling:template-revise", args=[templates.pk]),
        {"system": "", "user": "Story: {story}\nMood: {mood}", "notes": ""},
    )
    assert response.status_code == 200
    assert "{mood}" in response.context["form"].errors["user"][0]
    content = response.content.decode()
    assert "unknown field(s) {mood}" in content
    assert 'role="alert"' in content
    assert PromptTemplate.objects.filter(name="dyntom-vanilla").count() == 1


# --- Who may see the pages ----------------------------------------------------------------


@pytest.fixture
def pages(openai_backend, templates) -> list[tuple[str, str]]:
    run = make_run(openai_backend)
    return [
        ("get", reverse("modeling:run-list")),
        ("get", reverse("modeling:run-new")),
        ("post", reverse("modeling:run-new")),
        ("get", reverse("modeling:run-detail", args=[run.pk])),
        ("post", reverse("modeling:run-cancel", args=[run.pk])),
        ("post", reverse("modeling:run-resume", args=[run.pk])),
        ("get", reverse("modeling:template-list")),
        ("get", reverse("modeling:template-detail", args=[templates.pk])),
        ("post", reverse("modeling:template-revise", args=[templates.pk])),
    ]


@pytest.mark.parametrize("role", ["rater", "annotator"])
def test_other_roles_get_403_everywhere(request, client, pages, role):
    client.force_login(request.getfixturevalue(role))
    for method, url in pages:
        assert getattr(client, method)(url).status_code == 403, (method, url)
        assert getattr(client, method)(url, headers=HX).status_code == 403, (method, url)
    assert Run.objects.get().status == Run.Status.QUEUED
    assert PromptTemplate.objects.filter(name="dyntom-vanilla").count() == 1


def test_anonymous_is_sent_to_login(client, pages):
    for method, url in pages:
        response = getattr(client, method)(url)
        assert response.status_code == 302, (method, url)
        assert response.url.startswith(f"{reverse('login')}?next="), (method, url)


def test_mental_states_page_is_for_researchers(client, researcher, rater, openai_backend):
    from benchmarks.models import Character, Work
    from modeling.models import MentalStateRecord

    work = Work.objects.create(benchmark="tvshowguess", key="show", title="Show", kind="tv_show")
    character = Character.objects.create(work=work, name="rachel", is_main=True)
    run = Run.objects.create(
        name="tompro", benchmark="tvshowguess", method="tompro", model="m", backend=openai_backend
    )
    MentalStateRecord.objects.create(
        run=run, character=character, source="memory", personality="warm <b>and</b> funny"
    )
    url = reverse("modeling:run-mental-states", args=[run.pk])
    client.force_login(rater)
    assert client.get(url).status_code == 403
    client.force_login(researcher)
    page = client.get(url).content.decode()
    assert "warm &lt;b&gt;and&lt;/b&gt; funny" in page and "rachel" in page
    detail = client.get(reverse("modeling:run-detail", args=[run.pk])).content.decode()
    assert url in detail


def test_new_run_form_passes_method_options(client_researcher, openai_backend, shared_data):

    build_friends(shared_data)
    data = {
        "benchmark": "tvshowguess",
        "method": "icl",
        "backend": openai_backend.pk,
        "scene_limit": 2,
        "options": "shots=20\nperturb_names=true",
        "action": "start",
    }
    response = client_researcher.post(reverse("modeling:run-new"), data)
    assert response.status_code == 302
    run = Run.objects.get()
    assert run.params["options"] == {"perturb_names": True, "perturb_seed": 0, "shots": 20}
    assert run.selection == {"scene_limit": 2}
    # An option the method does not take is refused with the option's name.
    data["options"] = "dimensions=emotions"
    response = client_researcher.post(reverse("modeling:run-new"), data)
    assert "dimensions" in response.content.decode() and Run.objects.count() == 1
