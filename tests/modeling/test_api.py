"""The model runs API: contents, filters, create/cancel/resume, predictions, permissions,
query counts, and that a backend's API key never leaves the server.
"""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from modeling.models import Backend, Prediction, PromptTemplate, Run
from modeling.runs import executor, prompt_templates, services
from tests.celery_worker import drain_queue, purge_queues
from tests.factories import DynToMQuestionFactory, DynToMStageFactory
from tests.modeling.conftest import answer_all

pytestmark = pytest.mark.django_db

SECRET = "sk-secret-123"
OPTION_SECRET = "Bearer sk-option-456"


@pytest.fixture
def api(researcher) -> APIClient:
    client = APIClient()
    client.force_login(researcher)
    return client


@pytest.fixture
def backend() -> Backend:
    """A backend holding a key, in the field and in its free-form options."""
    return Backend.objects.create(
        name="paid",
        kind=Backend.Kind.OPENAI,
        base_url="http://127.0.0.1:9/v1",
        default_model="gpt-test",
        api_key=SECRET,
        options={"headers": {"Authorization": OPTION_SECRET}},
    )


def _run(backend: Backend, **kwargs) -> Run:
    kwargs.setdefault("selection", {"limit": 1})
    kwargs.setdefault("method", "vanilla")
    return services.run_create(benchmark="dyntom", backend=backend, enqueue=False, **kwargs)


def _results(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return response.json()["results"]


def _ids(response) -> set[int]:
    return {row["id"] for row in _results(response)}


def _prediction(run: Run, **kwargs) -> Prediction:
    """A prediction on a fresh DynToM question (its own stage and work)."""
    kwargs.setdefault("parse_status", Prediction.ParseStatus.OK)
    kwargs.setdefault("parsed_answer", "a")
    return Prediction.objects.create(run=run, dyntom_question=DynToMQuestionFactory(), **kwargs)


def _all_rows(api: APIClient, url: str) -> list[dict]:
    """Every row of a paginated list, following ``next``."""
    rows: list[dict] = []
    while url:
        response = api.get(url)
        assert response.status_code == 200, response.content
        rows.extend(response.json()["results"])
        url = response.json()["next"]
    return rows


def _queued_run_ids(callbacks) -> list[int]:
    """Run the captured on-commit callbacks and read what they put on the real broker."""
    purge_queues()
    for callback in callbacks:
        callback()
    return [args[0] for task, args in drain_queue() if task == "modeling.run_model"]


URL_LIST = reverse("modeling-run-list")


# --- backends and templates -----------------------------------------------------------


def test_backends_show_settings_and_has_key_but_never_the_key(api, backend):
    keyless = Backend.objects.create(name="local", kind=Backend.Kind.TRANSFORMERS)

    listing = api.get(reverse("modeling-backend-list"))
    detail = api.get(reverse("modeling-backend-detail", args=[backend.pk]))

    rows = {row["name"]: row for row in _results(listing)}
    assert rows["paid"]["has_key"] is True
    assert rows["local"]["has_key"] is False
    assert rows["paid"]["default_model"] == "gpt-test"
    assert detail.json()["id"] == backend.pk
    for body in (rows["paid"], rows[keyless.name], detail.json()):
        assert "api_key" not in body
        assert "options" not in body
    for response in (listing, detail):
        assert SECRET not in response.content.decode()
        assert OPTION_SECRET not in response.content.decode()


def test_prompt_templates_list_detail_and_filters(api, openai_backend):
    prompt_templates.prompt_templates_ensure_defaults()
    vanilla = PromptTemplate.objects.get(name="dyntom-vanilla", version=1)
    revised = prompt_templates.prompt_template_revise(template=vanilla, notes="second try")
    _run(openai_backend, template=revised)
    url = reverse("modeling-prompt-template-list")

    by_name = _results(api.get(url, {"name": "dyntom-vanilla"}))
    cot = _results(api.get(url, {"benchmark": "dyntom", "method": "cot"}))
    detail = api.get(reverse("modeling-prompt-template-detail", args=[revised.pk])).json()

    # v1 is a built-in: it stays active for the other workspaces (issue 46); here v2,
    # this workspace's revision, is the version runs take.
    assert [(t["version"], t["is_active"], t["run_count"]) for t in by_name] == [
        (2, True, 1),
        (1, True, 0),
    ]
    assert prompt_templates.active_template("dyntom-vanilla") == revised
    assert {t["method"] for t in cot} == {"cot"} and cot
    speaker = _results(api.get(url, {"benchmark": "tom-in-amc"}))
    assert speaker and {t["benchmark"] for t in speaker} == {"tom-in-amc"}
    assert detail["user"] == vanilla.user
    assert detail["notes"] == "second try"
    assert detail["fields"] == vanilla.fields


def test_backends_and_templates_are_read_only(api, backend):
    created = api.post(reverse("modeling-backend-list"), {"name": "x", "kind": "openai"})
    deleted = api.delete(reverse("modeling-backend-detail", args=[backend.pk]))
    template = api.post(reverse("modeling-prompt-template-list"), {"name": "x"})

    assert (created.status_code, deleted.status_code, template.status_code) == (405, 405, 405)
    assert Backend.objects.filter(pk=backend.pk).exists()


# --- runs: list, detail, filters ------------------------------------------------------


def test_run_detail_has_progress_usage_budget_template_and_settings(api, backend, researcher):
    run = _run(
        backend,
        selection={"works": ["trial50"]},
        params={"temperature": 0.2, "samples": 2},
        budget_tokens=5000,
        budget_cost=Decimal("1.5"),
        name="nightly",
        created_by=researcher,
    )
    Run.objects.filter(pk=run.pk).update(
        total_calls=10, done_calls=4, error_calls=1, prompt_tokens=300, completion_tokens=40
    )

    body = api.get(reverse("modeling-run-detail", args=[run.pk])).json()

    assert body["name"] == "nightly"
    assert body["status"] == "queued" and body["is_finished"] is False
    assert body["progress"] == {"done": 4, "total": 10, "errors": 1, "percent": 40}
    assert (body["prompt_tokens"], body["completion_tokens"]) == (300, 40)
    assert (body["budget_tokens"], Decimal(body["budget_cost"])) == (5000, Decimal("1.5"))
    assert body["template"] == {"id": run.template.pk, "name": "dyntom-vanilla", "version": 1}
    assert (body["backend"], body["model"]) == ("paid", "gpt-test")
    assert body["params"] == {"temperature": 0.2, "top_p": 0.9, "samples": 2}
    assert body["selection"] == {"works": ["trial50"]}
    assert body["created_by"] == researcher.username


def test_runs_filter_by_benchmark_method_status_and_backend(api, backend, openai_backend):
    vanilla = _run(backend)
    cot = _run(backend, method="cot")
    local = _run(openai_backend)
    Run.objects.filter(pk=cot.pk).update(status=Run.Status.CANCELLED)
    imported = Run.objects.create(
        name="from elsewhere", benchmark="chartom-qa", method="vanilla", model="m", imported=True
    )

    def shown(params: dict[str, str]) -> set[int]:
        return _ids(api.get(URL_LIST, params))

    assert shown({}) == {vanilla.pk, cot.pk, local.pk, imported.pk}
    assert shown({"benchmark": "chartom-qa"}) == {imported.pk}
    assert shown({"method": "cot"}) == {cot.pk}
    assert shown({"status": "cancelled"}) == {cot.pk}
    assert shown({"backend": "local-test"}) == {local.pk}
    assert shown({"backend": "paid", "status": "queued"}) == {vanilla.pk}
    assert shown({"backend": "nobody"}) == set()


def test_unknown_status_filter_is_a_400_naming_it(api):
    response = api.get(URL_LIST, {"status": "exploded"})

    assert response.status_code == 400
    assert "status" in response.json()


# --- runs: create ---------------------------------------------------------------------


def test_researcher_creates_a_run_that_is_queued(
    api, backend, researcher, django_capture_on_commit_callbacks
):
    stage = DynToMStageFactory()
    payload = {
        "benchmark": "dyntom",
        "method": "cot",
        "backend": "paid",
        "model": "gpt-other",
        "selection": {"works": [stage.work.key]},
        "params": {"temperature": 0.0, "max_tokens": 256},
        "budget_tokens": 1000,
    }

    with django_capture_on_commit_callbacks() as callbacks:
        response = api.post(URL_LIST, payload, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get(pk=body["id"])
    assert body["status"] == run.status == Run.Status.QUEUED
    assert (run.method, run.model, run.backend, run.created_by) == (
        "cot",
        "gpt-other",
        backend,
        researcher,
    )
    assert run.selection == {"works": [stage.work.key]}
    assert run.params["temperature"] == 0.0 and run.params["max_tokens"] == 256
    assert body["template"]["name"] == "dyntom-cot"
    assert _queued_run_ids(callbacks) == [run.pk]
    assert SECRET not in response.content.decode()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"benchmark": "mmlu"}, "benchmark"),
        ({"method": "socratic"}, "method"),
        ({"backend": "no-such-backend"}, "backend"),
        ({"selection": {"works": ["no-such-work"]}}, "selection"),
        ({"selection": {"wrks": ["typo"]}}, "selection"),
        ({"params": {"temperature": 9}}, "params"),
        ({"params": {"temprature": 0.5}}, "params"),
        ({"budget_tokens": 0}, "budget_tokens"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_run_input_is_a_400_naming_the_field(api, backend, change, field):
    payload = {"benchmark": "dyntom", "method": "vanilla", "backend": "paid", **change}

    response = api.post(URL_LIST, payload, format="json")

    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not Run.objects.exists()


def test_template_of_another_benchmark_is_refused(api, backend):
    other = PromptTemplate.objects.create(
        name="qa-plain", benchmark="chartom-qa", method="vanilla", user="{question}"
    )
    payload = {"benchmark": "dyntom", "method": "vanilla", "backend": "paid", "template": other.pk}

    response = api.post(URL_LIST, payload, format="json")

    assert response.status_code == 400
    assert "chartom-qa template" in response.json()["template"][0]


def test_service_value_error_is_a_400_with_its_message(api):
    Backend.objects.create(name="bare", kind=Backend.Kind.OPENAI)  # no default model
    payload = {"benchmark": "dyntom", "method": "vanilla", "backend": "bare"}

    response = api.post(URL_LIST, payload, format="json")

    assert response.status_code == 400
    assert "has no default model" in response.json()["non_field_errors"][0]
    assert not Run.objects.exists()


# --- runs: cancel and resume ----------------------------------------------------------


def test_researcher_cancels_and_resumes_a_run(api, backend, django_capture_on_commit_callbacks):
    run = _run(backend)

    cancelled = api.post(reverse("modeling-run-cancel", args=[run.pk]))
    with django_capture_on_commit_callbacks() as callbacks:
        resumed = api.post(reverse("modeling-run-resume", args=[run.pk]))

    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["finished_at"] is not None
    assert resumed.status_code == 200
    assert resumed.json()["status"] == "queued"
    assert resumed.json()["finished_at"] is None
    assert _queued_run_ids(callbacks) == [run.pk]
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_cancel_leaves_a_finished_run_alone(api, backend):
    run = _run(backend)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)

    response = api.post(reverse("modeling-run-cancel", args=[run.pk]))

    assert response.status_code == 200
    assert response.json()["status"] == "succeeded"


def test_resume_of_an_imported_run_is_a_400_with_the_message(api):
    run = Run.objects.create(
        name="old", benchmark="dyntom", method="vanilla", model="m", imported=True
    )

    response = api.post(reverse("modeling-run-resume", args=[run.pk]))

    assert response.status_code == 400
    assert response.json()["non_field_errors"] == ["imported runs have nothing to resume"]


def test_actions_on_a_missing_run_are_404(api):
    for name in ("modeling-run-cancel", "modeling-run-resume"):
        assert api.post(reverse(name, args=[999])).status_code == 404
    assert api.get(reverse("modeling-run-predictions", args=[999])).status_code == 404


# --- predictions ----------------------------------------------------------------------


def test_executed_run_lists_its_predictions_with_question_keys(
    api, openai_backend, llm_server, dyntom_stages
):
    stages = list(dyntom_stages[:2])
    llm_server.responder = answer_all("a")
    created = api.post(
        URL_LIST,
        {
            "benchmark": "dyntom",
            "method": "vanilla",
            "backend": openai_backend.name,
            "selection": {"works": [s.work.key for s in stages]},
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    run_id = created.json()["id"]
    assert created.json()["status"] == "queued"

    assert executor.run_execute(run_id=run_id) == Run.Status.SUCCEEDED

    url = reverse("modeling-run-predictions", args=[run_id])
    rows = _all_rows(api, url)
    expected = {(s.work.key, q.key): q.gold_letter for s in stages for q in s.questions.all()}
    assert len(rows) == len(expected)
    assert {(r["work_key"], r["item_key"]): r["correct"] for r in rows} == {
        key: gold == "a" for key, gold in expected.items()
    }
    first = rows[0]
    assert first["parsed_answer"] == "a" and first["parse_status"] == "ok"
    assert first["template_version"] == "dyntom-vanilla v1"
    assert first["model"] == "test-model"
    assert first["params"]["temperature"] == 0.7
    assert first["prompt_tokens"] > 0 and first["completion_tokens"] > 0
    assert '"a"' in first["raw_output"]
    assert first["latency_ms"] >= 0

    correct = api.get(url, {"correct": "true"}).json()["count"]
    wrong = api.get(url, {"correct": "false"}).json()["count"]
    assert correct == sum(gold == "a" for gold in expected.values())
    assert correct + wrong == len(expected)
    assert api.get(url, {"parse_status": "missing"}).json()["count"] == 0

    detail = api.get(reverse("modeling-run-detail", args=[run_id])).json()
    assert detail["progress"] == {"done": 2, "total": 2, "errors": 0, "percent": 100}
    assert detail["status"] == "succeeded"


def test_predictions_filter_by_parse_status_and_correct_and_stay_in_their_run(api, backend):
    run = _run(backend)
    other_run = _run(backend)
    right = _prediction(run, correct=True)
    wrong = _prediction(run, correct=False)
    unparseable = _prediction(
        run, parse_status=Prediction.ParseStatus.UNPARSEABLE, correct=False, parsed_answer=""
    )
    _prediction(other_run, correct=True)
    url = reverse("modeling-run-predictions", args=[run.pk])

    assert _ids(api.get(url)) == {right.pk, wrong.pk, unparseable.pk}
    assert _ids(api.get(url, {"correct": "true"})) == {right.pk}
    assert _ids(api.get(url, {"parse_status": "unparseable"})) == {unparseable.pk}
    assert _ids(api.get(url, {"parse_status": "ok", "correct": "false"})) == {wrong.pk}
    row = next(r for r in _results(api.get(url)) if r["id"] == right.pk)
    assert row["item_key"] == right.dyntom_question.key
    assert row["work_key"] == right.dyntom_question.stage.work.key
    assert api.get(url, {"parse_status": "nonsense"}).status_code == 400


# --- query counts ---------------------------------------------------------------------


def _build_runs(backend: Backend, researcher, n: int) -> None:
    for _ in range(n):
        _run(backend, created_by=researcher)


@pytest.mark.parametrize("endpoint", ["runs", "predictions", "templates", "backends"])
def test_list_query_count_does_not_grow_with_rows(
    api, backend, researcher, endpoint, django_assert_max_num_queries
):
    run = _run(backend)
    if endpoint == "runs":
        url = URL_LIST

        def build(n: int) -> None:
            _build_runs(backend, researcher, n)

    elif endpoint == "predictions":
        url = reverse("modeling-run-predictions", args=[run.pk])

        def build(n: int) -> None:
            for _ in range(n):
                _prediction(run, correct=True)

    elif endpoint == "templates":
        url = reverse("modeling-prompt-template-list")

        def build(n: int) -> None:
            for i in range(n):
                PromptTemplate.objects.create(
                    name=f"t{i}-{PromptTemplate.objects.count()}",
                    benchmark="dyntom",
                    method="vanilla",
                    user="{questions}",
                )

    else:
        url = reverse("modeling-backend-list")

        def build(n: int) -> None:
            for i in range(n):
                Backend.objects.create(
                    name=f"b{Backend.objects.count()}-{i}", kind="openai", api_key=SECRET
                )

    build(2)
    with CaptureQueriesContext(connection) as few:
        assert api.get(url).status_code == 200
    build(18)
    # session, user, role groups, count, page; and the run itself for its predictions
    with django_assert_max_num_queries(6 if endpoint == "predictions" else 5):
        response = api.get(url)
    assert len(response.json()["results"]) >= 20
    with CaptureQueriesContext(connection) as many:
        api.get(url)
    assert len(many) == len(few)


# --- permissions and the secret -------------------------------------------------------


def _every_request(run: Run, backend: Backend, template: PromptTemplate) -> list[tuple]:
    create = {"benchmark": "dyntom", "method": "vanilla", "backend": backend.name}
    return [
        ("get", reverse("modeling-api-root"), None),
        ("get", reverse("modeling-backend-list"), None),
        ("get", reverse("modeling-backend-detail", args=[backend.pk]), None),
        ("get", reverse("modeling-prompt-template-list"), None),
        ("get", reverse("modeling-prompt-template-detail", args=[template.pk]), None),
        ("get", URL_LIST, None),
        ("get", reverse("modeling-run-detail", args=[run.pk]), None),
        ("get", reverse("modeling-run-predictions", args=[run.pk]), None),
        ("post", URL_LIST, create),
        ("post", reverse("modeling-run-cancel", args=[run.pk]), None),
        ("post", reverse("modeling-run-resume", args=[run.pk]), None),
    ]


@pytest.mark.parametrize("role", ["rater", "annotator", "anonymous"])
def test_non_researchers_get_403_on_every_endpoint_and_change_nothing(request, backend, role):
    client = APIClient()
    if role != "anonymous":
        client.force_login(request.getfixturevalue(role))
    run = _run(backend)
    _prediction(run, correct=True)

    for method, url, data in _every_request(run, backend, run.template):
        response = getattr(client, method)(url, data, format="json")
        # Session auth comes first and sends no WWW-Authenticate challenge, so DRF
        # answers anonymous requests with 403 rather than 401.
        assert response.status_code == 403, (method, url)
        assert SECRET not in response.content.decode()

    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert Run.objects.count() == 1


def test_the_api_key_appears_in_no_response(api, backend):
    run = _run(backend)
    _prediction(run, correct=True)
    responses = [
        getattr(api, method)(url, data, format="json")
        for method, url, data in _every_request(run, backend, run.template)
    ]
    schema = api.get(reverse("api-schema"), {"format": "json"})

    assert [r.status_code for r in responses] == [200] * 8 + [201, 200, 200]
    for response in [*responses, schema]:
        assert SECRET not in response.content.decode()
        assert OPTION_SECRET not in response.content.decode()


def test_schema_lists_the_modeling_paths_and_their_filters(api):
    paths = api.get(reverse("api-schema"), {"format": "json"}).json()["paths"]

    runs = paths[URL_LIST]
    assert {"get", "post"} <= set(runs)
    assert {"benchmark", "method", "status", "backend", "page"} <= {
        p["name"] for p in runs["get"]["parameters"]
    }
    assert "/api/modeling/runs/{id}/cancel/" in paths
    assert "/api/modeling/runs/{id}/resume/" in paths
    predictions = paths["/api/modeling/runs/{run_id}/predictions/"]["get"]
    assert {"parse_status", "correct", "page"} <= {p["name"] for p in predictions["parameters"]}
    templates = paths[reverse("modeling-prompt-template-list")]["get"]
    assert {"benchmark", "method", "name"} <= {p["name"] for p in templates["parameters"]}


def test_api_key_recovery_learns_nothing(api):
    """Swap two backends' keys: no query string may answer differently."""
    alpha = Backend.objects.create(
        name="alpha", kind="openai", default_model="m", api_key="sk-AAAA-secret"
    )
    omega = Backend.objects.create(
        name="omega", kind="openai", default_model="m", api_key="sk-ZZZZ-secret"
    )
    _run(alpha)
    _run(omega)
    probes = [
        (url, {**params, **fmt})
        for url in (reverse("modeling-backend-list"), URL_LIST)
        for params in (
            {"api_key": "sk-AAAA-secret"},
            {"api_key__startswith": "sk-A"},
            {"api_key__gte": "sk-M"},
            {"api_key__regex": "^sk-A"},
            {"backend__api_key__startswith": "sk-A"},
            {"backend": "sk-AAAA-secret"},
            {"ordering": "api_key"},
            {"ordering": "-api_key"},
            {"ordering": "backend__api_key"},
            {"search": "sk-AAAA"},
            {"has_key": "true"},
        )
        for fmt in ({}, {"format": "api"})  # the browsable API renders filter forms too
    ]

    def answers() -> list[tuple[int, str]]:
        out = []
        for url, params in probes:
            response = api.get(url, params)
            body = re.sub(
                r'name="csrfmiddlewaretoken" value="[^"]+"', "", response.content.decode()
            )
            body = re.sub(r'"csrfToken": "[^"]+"', "", body)
            out.append((response.status_code, body))
        return out

    before = answers()
    alpha.set_api_key("sk-ZZZZ-secret")
    omega.set_api_key("sk-AAAA-secret")
    alpha.save(update_fields=["api_key"])
    omega.save(update_fields=["api_key"])
    after = answers()

    for probe, answer, again in zip(probes, before, after, strict=True):
        assert answer == again, probe
        # A query naming the key is refused outright; anything else is ignored.
        names_key = any("api_key" in f"{k}={v}" for k, v in probe[1].items())
        assert answer[0] == (400 if names_key else 200), probe
        assert "fernet:" not in answer[1], probe
        if "format" not in probe[1]:  # the browsable page echoes the query string
            assert "sk-AAAA-secret" not in answer[1] and "sk-ZZZZ-secret" not in answer[1]


def test_a_stored_key_is_decrypted_for_the_llm_client_only(openai_backend, llm_server):
    from modeling.backends import ChatRequest, get_backend

    openai_backend.api_key_env = ""
    openai_backend.set_api_key("sk-stored-789")
    openai_backend.save()
    openai_backend.refresh_from_db()
    llm_server.enqueue("ok")

    reply = get_backend(openai_backend).complete(
        ChatRequest.build([{"role": "user", "content": "hi"}], model="m", params={})
    )

    assert reply.text == "ok"
    assert llm_server.authorizations == ["Bearer sk-stored-789"]
    assert "sk-stored-789" not in openai_backend.api_key


def test_a_key_under_another_secret_key_is_a_clear_config_error(openai_backend, settings):
    from modeling.backends import get_backend
    from modeling.backends.base import BackendConfigError

    openai_backend.api_key_env = ""
    openai_backend.set_api_key("sk-stored-789")
    settings.SECRET_KEY = "x" * 60  # rotated without listing the old one as a fallback

    with pytest.raises(BackendConfigError, match="cannot be decrypted with DJANGO_SECRET_KEY"):
        get_backend(openai_backend)
