"""Secrets inside ``Backend.options`` (issue 26, item 2).

The probe recovered a header's key through the admin with
``?options__headers__Authorization__startswith=Bearer%20sk-O`` (a prefix oracle, 753
requests), and ``options__icontains`` / ``options__has_key`` answered too: the guard
only checked paths through ``api_key``. Now no changelist or API query may reach
``options`` or ``api_key``, and secret option values are stored encrypted, shown
masked, and decrypted only for the client that sends them.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.urls import reverse
from rest_framework.test import APIClient

from modeling.backends import ChatRequest, get_backend
from modeling.models import Backend, Run, RunCall
from modeling.runs.services import run_create
from tests.factories import DynToMQuestionFactory
from tests.migration_steps import migration_editor
from tests.page_text import without_csrf

pytestmark = pytest.mark.django_db

ALPHA = "Bearer sk-OAAA-option-secret"
OMEGA = "Bearer sk-OZZZ-option-secret"

# The probe's lookups, and the rest of the ways a JSON column can be asked about.
OPTION_PROBES = [
    {"options__headers__Authorization__startswith": "Bearer sk-OA"},
    {"options__headers__Authorization__startswith": "Bearer sk-OZ"},
    {"options__headers__Authorization__gte": "Bearer sk-OM"},
    {"options__headers__Authorization": ALPHA},
    {"options__headers__Authorization__regex": "^Bearer sk-OA"},
    {"options__icontains": "sk-OA"},
    {"options__contains": '{"headers": {"Authorization": "Bearer sk-OAAA-option-secret"}}'},
    {"options__has_key": "headers"},
    {"options__headers__has_key": "Authorization"},
    {"options__headers__isnull": "False"},
    {"options__isnull": "False"},
    {"options": "{}"},
]


def _backend(name: str, authorization: str, **kwargs) -> Backend:
    return Backend.objects.create(
        name=name,
        kind=Backend.Kind.OPENAI,
        default_model="m",
        options={"headers": {"Authorization": authorization}, "device": "cpu"},
        **kwargs,
    )


def _swap(alpha: Backend, omega: Backend) -> None:
    alpha.options = {"headers": {"Authorization": OMEGA}, "device": "cpu"}
    omega.options = {"headers": {"Authorization": ALPHA}, "device": "cpu"}
    alpha.save(update_fields=["options"])
    omega.save(update_fields=["options"])


def _body(response) -> str:
    return without_csrf(response.content)


@pytest.fixture
def pair(db):
    alpha = _backend("alpha", ALPHA)
    omega = _backend("omega", OMEGA)
    for backend in (alpha, omega):
        DynToMQuestionFactory()
        run = run_create(
            benchmark="dyntom",
            method="vanilla",
            backend=backend,
            selection={"limit": 1},
            enqueue=False,
        )
        RunCall.objects.create(run=run, unit_key=f"dyntom:{backend.name}")
    return alpha, omega


def test_admin_refuses_every_lookup_on_options_and_learns_nothing(client, researcher, pair):
    """On the backend changelist, and through relations from the run and call lists."""
    client.force_login(researcher)
    backends = reverse("admin:modeling_backend_changelist")
    probes = [
        *((backends, probe) for probe in OPTION_PROBES),
        *((backends, {"q": q}) for q in ("sk-OA", "OAAA")),
        *((backends, {"o": f"{i}.-{i}"}) for i in range(12)),
        *(
            (reverse(f"admin:modeling_{model._meta.model_name}_changelist"), {prefix + k: v})
            for model, prefix in ((Run, "backend__"), (RunCall, "run__backend__"))
            for probe in OPTION_PROBES[:6]
            for k, v in probe.items()
        ),
    ]

    def answers() -> list[tuple[int, str]]:
        return [(r.status_code, _body(r)) for r in (client.get(u, p) for u, p in probes)]

    before = answers()
    _swap(*pair)
    after = answers()

    for probe, answer, again in zip(probes, before, after, strict=True):
        assert answer == again, probe
        assert "sk-OAAA" not in answer[1] and "sk-OZZZ" not in answer[1], probe
        if any("options" in name for name in probe[1]):
            assert answer[0] == 400, probe  # refused outright, whatever the value
        else:
            assert answer[0] == 200, probe


def test_api_refuses_filters_and_ordering_on_secret_columns(researcher, pair):
    api = APIClient()
    api.force_login(researcher)
    urls = [reverse("modeling-backend-list"), reverse("modeling-run-list")]
    probes = [
        *OPTION_PROBES,
        *({f"backend__{k}": v for k, v in probe.items()} for probe in OPTION_PROBES[:3]),
        {"ordering": "options"},
        {"ordering": "-options__headers__Authorization"},
        {"ordering": "name,backend__options"},
        {"ordering": "api_key"},
        {"api_key__startswith": "sk-"},
    ]

    def answers() -> list[tuple[int, str]]:
        return [(r.status_code, _body(r)) for r in (api.get(u, p) for u in urls for p in probes)]

    before = answers()
    _swap(*pair)
    after = answers()

    assert before == after
    for (status, body), probe in zip(before, probes * 2, strict=True):
        assert status == 400, probe
        assert "API keys and backend options cannot be queried." in body
        assert "sk-OAAA" not in body and "sk-OZZZ" not in body


def _options_column(backend: Backend) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT options FROM modeling_backend WHERE id = %s", [backend.pk])
        value = cursor.fetchone()[0]
    return value if isinstance(value, str) else repr(value)


def test_secret_option_values_are_stored_encrypted_shown_masked_and_sent_in_plaintext(
    client, researcher, llm_server
):
    options = {
        "headers": {"Authorization": "Bearer sk-header-111", "X-Trace": "visible"},
        "client_secret": "cs-222",
        "nested": [{"refresh_token": "rt-333"}, {"note": "Basic dXNlcjpwYXNzNDQ0"}],
        "max_new_tokens": 64,
    }
    backend = Backend.objects.create(
        name="opts",
        kind=Backend.Kind.OPENAI,
        base_url=llm_server.base_url,
        default_model="m",
        options=options,
    )
    updated = Backend.objects.create(name="upd", kind=Backend.Kind.OPENAI)
    Backend.objects.filter(pk=updated.pk).update(options=options)  # even past save()

    for row in (backend, updated):
        stored = _options_column(row)
        for secret in ("sk-header-111", "cs-222", "rt-333", "dXNlcjpwYXNzNDQ0"):
            assert secret not in stored
        assert "fernet:" in stored and "visible" in stored and "64" in stored
        row.refresh_from_db()
        assert row.get_options() == options
    llm_server.enqueue("ok")
    llm = get_backend(backend)
    request = ChatRequest.build([{"role": "user", "content": "hi"}], model="m", params={})
    assert llm.complete(request).text == "ok"
    llm.close()
    # The header from the options, decrypted for the request only.
    assert llm_server.authorizations == ["Bearer sk-header-111"]
    # Shown masked, ciphertext included; the API leaves options out.
    client.force_login(researcher)
    page = client.get(reverse("admin:modeling_backend_change", args=[backend.pk]))
    api = APIClient()
    api.force_login(researcher)
    detail = api.get(reverse("modeling-backend-detail", args=[backend.pk]))
    for body in (page.content.decode(), detail.content.decode()):
        assert "sk-header-111" not in body and "cs-222" not in body and "fernet:" not in body
    assert page.content.decode().count("********") == 4
    assert "options" not in detail.json()


def test_ciphertext_cannot_be_typed_into_options(client, researcher):
    backend = _backend("mine", ALPHA, created_by=researcher)
    stolen = backend.options["headers"]["Authorization"]  # ciphertext, as if leaked
    client.force_login(researcher)
    form = {
        "name": "mine",
        "kind": "openai",
        "default_model": "m",
        "base_url": "",
        "model_path": "",
        "api_key_env": "",
        "new_api_key": "",
        "max_concurrency": "4",
        "max_retries": "5",
        "timeout_s": "120",
        "price_input_per_1k": "0",
        "price_output_per_1k": "0",
        "options": json.dumps({"headers": {"X-Other": stolen}}),
        "_save": "Save",
    }

    response = client.post(reverse("admin:modeling_backend_change", args=[backend.pk]), form)

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["options"] == [
        "Values starting with “fernet:” cannot be entered."
    ]


def test_the_migration_encrypts_stored_options_and_masks_echoed_errors(llm_server):
    import importlib

    from django.apps import apps

    key = "lab-key-stored-before-the-fix-0001"
    backend = Backend.objects.create(name="old", kind="openai", default_model="m", api_key=key)
    plain = {"headers": {"Authorization": "Bearer hdr-plain-0002"}, "device": "cpu"}
    cast = "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"
    with connection.cursor() as cursor:  # what 0006 left: options in the clear
        cursor.execute(
            f"UPDATE modeling_backend SET options = {cast} WHERE id = %s",
            [json.dumps(plain), backend.pk],
        )
    DynToMQuestionFactory()
    run = run_create(
        benchmark="dyntom", method="vanilla", backend=backend, selection={"limit": 1}, enqueue=False
    )
    echoed = f"HTTP 401: Incorrect API key provided: {key}; header Bearer hdr-plain-0002"
    call = RunCall.objects.create(run=run, unit_key="dyntom:old", error=echoed)
    Run.objects.filter(pk=run.pk).update(error=f"BackendError: {echoed}")
    migration = importlib.import_module("modeling.migrations.0007_backend_creator_secret_options")

    migration.encrypt_options_and_mask_errors(apps, migration_editor())

    assert "hdr-plain-0002" not in _options_column(backend)
    backend.refresh_from_db()
    assert backend.get_options() == plain
    call.refresh_from_db()
    run.refresh_from_db()
    for text in (call.error, run.error):
        assert key not in text and "hdr-plain-0002" not in text
        assert "Incorrect API key provided: [redacted]" in text
