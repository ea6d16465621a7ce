"""The model runs admin: the API key stays write-only, engine rows are read-only,
run actions go through the services, and changelists cost a fixed number of queries.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from modeling.models import Backend, CachedResponse, Prediction, PromptTemplate, Run, RunCall
from modeling.runs import services
from tests.factories import DynToMQuestionFactory
from tests.page_text import without_csrf

pytestmark = pytest.mark.django_db

SECRET = "sk-secret-123"
_counter = iter(range(10**6))


def _admin_url(model: type[Model], view: str, *args: object) -> str:
    return reverse(f"admin:modeling_{model._meta.model_name}_{view}", args=args)


def _backend(**kwargs) -> Backend:
    n = next(_counter)
    kwargs.setdefault("name", f"backend-{n}")
    kwargs.setdefault("kind", Backend.Kind.OPENAI)
    kwargs.setdefault("default_model", "gpt-test")
    kwargs.setdefault("api_key", SECRET)
    return Backend.objects.create(**kwargs)


def _run(backend: Backend | None = None, **kwargs) -> Run:
    kwargs.setdefault("method", "vanilla")
    return services.run_create(
        benchmark="dyntom",
        backend=backend or _backend(),
        selection={"limit": 1},
        enqueue=False,
        **kwargs,
    )


def _call(run: Run | None = None) -> RunCall:
    return RunCall.objects.create(
        run=run or _run(), unit_key=f"dyntom:work-{next(_counter)}", status=RunCall.Status.DONE
    )


def _prediction(run: Run | None = None, **kwargs) -> Prediction:
    kwargs.setdefault("parse_status", Prediction.ParseStatus.OK)
    return Prediction.objects.create(
        run=run or _run(), dyntom_question=DynToMQuestionFactory(), **kwargs
    )


def _template() -> PromptTemplate:
    return PromptTemplate.objects.create(
        name=f"tpl-{next(_counter)}", benchmark="dyntom", method="vanilla", user="{questions}"
    )


def _cached() -> CachedResponse:
    return CachedResponse.objects.create(
        key=f"{next(_counter):064d}", backend_name="b", model="m", request={}, text="{}"
    )


# Each builder makes its own related rows, so a changelist column that follows a
# foreign key without list_select_related costs one query per row.
BUILDERS: dict[type[Model], Callable[[], Model]] = {
    Backend: _backend,
    PromptTemplate: _template,
    CachedResponse: _cached,
    Run: _run,
    RunCall: _call,
    Prediction: _prediction,
}


def _reader(model, researcher, admin_user):
    """Who reads ``model`` in the admin: the reply cache is every workspace's, so the
    operator's (issue 46); the rest, a researcher of the workspace."""
    return admin_user if model is CachedResponse else researcher


def test_the_reply_cache_is_the_operators_alone(client, researcher):
    cached = _cached()
    client.force_login(researcher)

    assert client.get(_admin_url(CachedResponse, "changelist")).status_code == 403
    assert client.get(_admin_url(CachedResponse, "change", cached.pk)).status_code == 403


def test_every_modeling_model_is_registered():
    registered = {m for m in admin.site._registry if m._meta.app_label == "modeling"}

    assert registered == set(BUILDERS)


@pytest.mark.parametrize("model", list(BUILDERS), ids=lambda m: m.__name__)
def test_researcher_opens_changelist_and_change_page(client, researcher, admin_user, model):
    obj = BUILDERS[model]()
    client.force_login(_reader(model, researcher, admin_user))

    changelist = client.get(_admin_url(model, "changelist"))
    change = client.get(_admin_url(model, "change", obj.pk))

    assert changelist.status_code == 200
    assert obj in changelist.context["cl"].result_list
    assert change.status_code == 200
    assert change.context["original"] == obj


@pytest.mark.parametrize("model", list(BUILDERS), ids=lambda m: m.__name__)
def test_changelist_query_count_does_not_grow_with_rows(
    client, researcher, admin_user, model, django_assert_max_num_queries
):
    client.force_login(_reader(model, researcher, admin_user))
    url = _admin_url(model, "changelist")
    for _ in range(2):
        BUILDERS[model]()
    with CaptureQueriesContext(connection) as few:
        assert client.get(url).status_code == 200

    for _ in range(18):
        BUILDERS[model]()
    with django_assert_max_num_queries(len(few)):
        response = client.get(url)

    assert response.context["cl"].result_count == model.objects.count() >= 20


# --- the API key ----------------------------------------------------------------------


def _backend_form(backend: Backend, **changes: str) -> dict[str, str]:
    data = {
        "name": backend.name,
        "kind": backend.kind,
        "default_model": backend.default_model,
        "base_url": backend.base_url,
        "model_path": backend.model_path,
        "api_key_env": backend.api_key_env,
        "new_api_key": "",
        "max_concurrency": str(backend.max_concurrency),
        "max_retries": str(backend.max_retries),
        "timeout_s": str(backend.timeout_s),
        "price_input_per_1k": str(backend.price_input_per_1k),
        "price_output_per_1k": str(backend.price_output_per_1k),
        "options": "{}",
        "_save": "Save",
    }
    data.update(changes)
    return data


def _stored_column(backend: Backend) -> str:
    """What the database itself holds, read past the ORM."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM modeling_backend WHERE id = %s", [backend.pk])
        return cursor.fetchone()[0]


def test_api_key_is_absent_from_changelist_change_page_and_history(client, researcher):
    backend = _backend(name="paid", created_by=researcher)
    _backend(name="keyless", api_key="")
    client.force_login(researcher)

    changelist = client.get(_admin_url(Backend, "changelist"))
    change = client.get(_admin_url(Backend, "change", backend.pk))
    client.post(
        _admin_url(Backend, "change", backend.pk), _backend_form(backend, new_api_key="sk-2")
    )
    history = client.get(_admin_url(Backend, "history", backend.pk))

    for response in (changelist, change, history):
        assert response.status_code == 200
        assert SECRET not in response.content.decode()
        assert "sk-2" not in response.content.decode()
        assert "fernet:" not in response.content.decode()  # nor its ciphertext
    assert not any("sk-2" in entry.change_message for entry in LogEntry.objects.all())
    html = change.content.decode()
    assert 'type="password" name="new_api_key"' in html
    assert 'name="new_api_key" value=' not in html
    # has_key: one row with a key, one without
    assert html.count("icon-yes.svg") >= 1
    assert changelist.content.decode().count('alt="True"') == 1
    assert changelist.content.decode().count('alt="False"') == 1


def test_blank_key_keeps_the_stored_one_and_a_new_one_replaces_it(client, researcher):
    backend = _backend(name="paid", created_by=researcher)
    client.force_login(researcher)
    url = _admin_url(Backend, "change", backend.pk)

    kept = client.post(url, _backend_form(backend, default_model="gpt-5"))
    backend.refresh_from_db()
    assert kept.status_code == 302
    assert (backend.get_api_key(), backend.default_model) == (SECRET, "gpt-5")

    client.post(url, _backend_form(backend, new_api_key="sk-new-456"))
    backend.refresh_from_db()
    assert backend.get_api_key() == "sk-new-456"

    client.post(url, _backend_form(backend, clear_api_key="on"))
    backend.refresh_from_db()
    assert (backend.api_key, backend.get_api_key(), backend.has_api_key) == ("", "", False)


def test_researcher_adds_a_backend_with_a_key(client, researcher):
    template = Backend(
        name="new-one", kind=Backend.Kind.OPENAI, base_url="http://127.0.0.1:8001/v1"
    )
    client.force_login(researcher)

    response = client.post(_admin_url(Backend, "add"), _backend_form(template, new_api_key=SECRET))

    assert response.status_code == 302, response.context["adminform"].form.errors
    backend = Backend.objects.get(name="new-one")
    assert backend.get_api_key() == SECRET
    assert backend.base_url == "http://127.0.0.1:8001/v1"


def test_the_database_column_holds_ciphertext_only(client, researcher):
    created = _backend(name="created")  # through the ORM, plaintext assigned
    client.force_login(researcher)
    client.post(
        _admin_url(Backend, "add"),
        _backend_form(Backend(name="typed", kind="openai"), new_api_key=SECRET),
    )
    typed = Backend.objects.get(name="typed")
    updated = _backend(name="updated", api_key="")
    Backend.objects.filter(pk=updated.pk).update(api_key=SECRET)  # even past save()

    for backend in (created, typed, updated):
        stored = _stored_column(backend)
        assert stored.startswith("fernet:"), stored
        assert SECRET not in stored
        backend.refresh_from_db()
        assert backend.get_api_key() == SECRET
    # Fresh randomness per encryption: equal keys do not even give equal ciphertexts.
    assert len({_stored_column(b) for b in (created, typed, updated)}) == 3


def test_api_key_env_must_be_a_variable_name_not_a_key(client, researcher):
    backend = _backend(name="paid", api_key="", created_by=researcher)
    client.force_login(researcher)

    response = client.post(
        _admin_url(Backend, "change", backend.pk), _backend_form(backend, api_key_env=SECRET)
    )

    assert response.status_code == 200
    assert "api_key_env" in response.context["adminform"].form.errors
    backend.refresh_from_db()
    assert backend.api_key_env == ""


def test_backend_search_does_not_match_the_key(client, researcher):
    _backend(name="paid")
    client.force_login(researcher)

    by_key = client.get(_admin_url(Backend, "changelist"), {"q": SECRET})
    by_name = client.get(_admin_url(Backend, "changelist"), {"q": "paid"})

    assert by_key.context["cl"].result_count == 0
    assert by_name.context["cl"].result_count == 1


# Every way a changelist query string could probe the key: the lookups the attack
# used (startswith, gte: a binary search recovered a whole key in 225 requests), the
# rest of the comparison and pattern lookups, the same through a relation, the
# ciphertext prefix, search and every sortable column.
_KEY_PROBES = [
    {"api_key__startswith": "sk-A"},
    {"api_key__startswith": "sk-Z"},
    {"api_key__istartswith": "SK-A"},
    {"api_key__gte": "sk-M"},
    {"api_key__lt": "sk-M"},
    {"api_key__gt": ""},
    {"api_key__regex": "^sk-A"},
    {"api_key__iregex": "^SK-Z"},
    {"api_key__contains": "AAA"},
    {"api_key__exact": "sk-AAAA-secret"},
    {"api_key": "sk-AAAA-secret"},
    {"api_key__in": "sk-AAAA-secret,sk-ZZZZ-secret"},
    {"api_key__startswith": "fernet:"},
    {"api_key__isnull": "False"},
    {"api_key__length__gt": "5"},
    {"runs__backend__api_key__startswith": "sk-A"},
    {"q": "sk-AAAA"},
    {"q": "AAAA"},
]


def _admin_answers(client, url: str, params: dict[str, str]) -> tuple[int, str]:
    response = client.get(url, params)
    body = response.content.decode() if response.status_code == 200 else ""
    # The only per-request part of a changelist page.
    return response.status_code, without_csrf(body)


@pytest.mark.parametrize(
    "model", [Backend, Run, RunCall, Prediction], ids=["backend", "run", "call", "prediction"]
)
def test_admin_key_recovery_learns_nothing(client, researcher, model):
    """Swap two backends' keys: no probe may answer differently, so none tells the key."""
    alpha = _backend(name="alpha", api_key="sk-AAAA-secret")
    omega = _backend(name="omega", api_key="sk-ZZZZ-secret")
    _call(_run(alpha))
    _call(_run(omega))
    _prediction(_run(alpha))
    _prediction(_run(omega))
    client.force_login(researcher)
    url = _admin_url(model, "changelist")
    probes = [
        *_KEY_PROBES,
        *({"o": str(i)} for i in range(12)),
        *({"o": f"-{i}"} for i in range(12)),
        *({"o": f"{i}.1"} for i in range(12)),
        *({"backend__api_key__startswith": p} for p in ("sk-A", "sk-Z")),
        *({"run__backend__api_key__gte": p} for p in ("sk-A", "sk-Z")),
    ]

    before = [_admin_answers(client, url, probe) for probe in probes]
    alpha.set_api_key("sk-ZZZZ-secret")
    omega.set_api_key("sk-AAAA-secret")
    alpha.save(update_fields=["api_key"])
    omega.save(update_fields=["api_key"])
    after = [_admin_answers(client, url, probe) for probe in probes]

    for probe, (status, body), again in zip(probes, before, after, strict=True):
        assert (status, body) == again, probe
        assert "sk-AAAA-secret" not in body and "sk-ZZZZ-secret" not in body, probe
    # Every lookup on the key is refused outright (400), whatever the value.
    for probe, (status, _) in zip(probes, before, strict=True):
        if any("api_key" in name for name in probe):
            assert status == 400, probe


def test_options_are_shown_redacted_and_kept_when_the_mask_comes_back(client, researcher):
    options = {
        "headers": {"Authorization": "Bearer sk-opt-1", "X-Api-Key": "sk-opt-2"},
        "extra": [{"access_token": "sk-opt-3"}, {"note": "Basic c2stb3B0LTQ="}],
        "client_secret": "sk-opt-5",
        "max_new_tokens": 64,
        "device": "cpu",
    }
    backend = _backend(name="opts", options=options, created_by=researcher)
    client.force_login(researcher)
    url = _admin_url(Backend, "change", backend.pk)

    page = client.get(url).content.decode()
    shown = json.loads(client.get(url).context["adminform"].form["options"].value())
    client.post(url, _backend_form(backend, options=json.dumps({**shown, "device": "cuda"})))
    backend.refresh_from_db()

    for n in range(1, 6):
        assert f"sk-opt-{n}" not in page
    assert "c2stb3B0LTQ=" not in page
    assert shown["headers"] == {"Authorization": "********", "X-Api-Key": "********"}
    assert (shown["max_new_tokens"], shown["device"]) == (64, "cpu")  # not secrets
    # Secrets kept (stored encrypted), the edit saved.
    assert backend.get_options() == {**options, "device": "cuda"}


# --- templates and engine rows --------------------------------------------------------


def test_saved_template_texts_are_frozen_but_activity_and_notes_editable(client, researcher):
    template = _template()
    client.force_login(researcher)
    url = _admin_url(PromptTemplate, "change", template.pk)

    page = client.get(url)
    form = page.context["adminform"].form
    client.post(url, {"notes": "retired", "user": "{hacked}", "_save": "Save"})
    template.refresh_from_db()

    assert set(form.fields) == {"notes", "is_active"}
    assert (template.notes, template.is_active, template.user) == ("retired", False, "{questions}")


@pytest.mark.parametrize("model", [CachedResponse, Run, RunCall, Prediction], ids=str)
def test_engine_rows_cannot_be_added_or_edited(client, researcher, admin_user, model):
    obj = BUILDERS[model]()
    client.force_login(_reader(model, researcher, admin_user))

    add = client.get(_admin_url(model, "add"))
    change = client.get(_admin_url(model, "change", obj.pk))
    post = client.post(_admin_url(model, "change", obj.pk), {"_save": "Save"})

    assert add.status_code == 403
    assert change.status_code == 200
    assert change.context["has_change_permission"] is False
    assert post.status_code == 403


def test_run_changelist_shows_progress_and_filters(client, researcher):
    paid = _backend(name="paid")
    cot = _run(paid, method="cot")
    Run.objects.filter(pk=cot.pk).update(total_calls=10, done_calls=3, status="running")
    vanilla = _run(_backend(name="other"))
    client.force_login(researcher)
    url = _admin_url(Run, "changelist")

    def shown(params: dict[str, str]) -> set[int]:
        response = client.get(url, params)
        assert response.status_code == 200, params  # an unknown lookup would redirect
        return {r.pk for r in response.context["cl"].result_list}

    assert '<td class="field-progress">3/10</td>' in client.get(url).content.decode()
    assert shown({"status__exact": "running"}) == {cot.pk}
    assert shown({"method__exact": "vanilla"}) == {vanilla.pk}
    assert shown({"benchmark__exact": "dyntom"}) == {cot.pk, vanilla.pk}
    assert shown({"backend__id__exact": str(paid.pk)}) == {cot.pk}


def test_run_page_links_to_its_calls_and_predictions(client, researcher):
    run = _run()
    call = _call(run)
    _call()  # another run's
    client.force_login(researcher)

    page = client.get(_admin_url(Run, "change", run.pk)).content.decode()
    calls_url = f"{_admin_url(RunCall, 'changelist')}?run__id__exact={run.pk}"
    calls = client.get(calls_url)

    assert f'href="{calls_url}"' in page
    assert f'href="{_admin_url(Prediction, "changelist")}?run__id__exact={run.pk}"' in page
    assert list(calls.context["cl"].result_list) == [call]


def test_prediction_changelist_shows_item_keys_and_filters(client, researcher):
    run = _run()
    right = _prediction(run, correct=True, parsed_answer="a")
    wrong = _prediction(
        run, correct=False, parse_status=Prediction.ParseStatus.UNPARSEABLE, parsed_answer=""
    )
    other = _prediction(correct=True)
    client.force_login(researcher)
    url = _admin_url(Prediction, "changelist")

    def shown(params: dict[str, str]) -> set[int]:
        response = client.get(url, params)
        assert response.status_code == 200, params
        return {p.pk for p in response.context["cl"].result_list}

    assert right.dyntom_question.key in client.get(url).content.decode()
    assert shown({"parse_status__exact": "unparseable"}) == {wrong.pk}
    assert shown({"correct__exact": "1"}) == {right.pk, other.pk}
    assert shown({"run__id__exact": str(run.pk)}) == {right.pk, wrong.pk}
    assert shown({"q": right.dyntom_question.key}) == {right.pk}


# --- run actions and access -----------------------------------------------------------


def test_cancel_and_resume_actions_use_the_services(
    client, researcher, django_capture_on_commit_callbacks
):
    runs = SimpleNamespace(first=_run(), second=_run(), done=_run())
    Run.objects.filter(pk=runs.done.pk).update(status=Run.Status.SUCCEEDED)
    client.force_login(researcher)
    url = _admin_url(Run, "changelist")
    selected = [runs.first.pk, runs.done.pk]

    client.post(url, {"action": "cancel_runs", "_selected_action": selected})
    statuses = dict(Run.objects.values_list("pk", "status"))
    assert statuses == {
        runs.first.pk: "cancelled",
        runs.second.pk: "queued",
        runs.done.pk: "succeeded",
    }

    with django_capture_on_commit_callbacks() as callbacks:
        client.post(url, {"action": "resume_runs", "_selected_action": [runs.first.pk]})
    runs.first.refresh_from_db()
    assert runs.first.status == Run.Status.QUEUED
    assert len(callbacks) == 1


def test_rater_and_annotator_are_sent_to_admin_login(client, rater, annotator):
    backend = _backend()
    login = reverse("admin:login")
    for user in (rater, annotator):
        client.force_login(user)
        for url in (
            _admin_url(Backend, "changelist"),
            _admin_url(Backend, "change", backend.pk),
            _admin_url(Run, "changelist"),
        ):
            response = client.get(url)
            assert response.status_code == 302
            assert response.url.startswith(login)
            assert SECRET not in response.content.decode()
