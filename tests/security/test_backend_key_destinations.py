"""Where a backend's key may be sent (issue 26, item 1).

The probe: a researcher changed only ``base_url`` of another researcher's backend and
its stored key went to their host; ``api_key_env=DJANGO_SECRET_KEY`` made the worker
send the server's own secret as a bearer token. Now a key belongs to the server it
was entered for, only a backend's creator (or an explicit grant) may edit it, the key
variables and hosts are the operator's to allow, and the worker checks again.
"""

from __future__ import annotations

import json
import secrets

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.urls import reverse

from accounts.services import user_create_with_role
from modeling.backends import ChatRequest, get_backend
from modeling.models import Backend, Run
from modeling.runs.executor import run_execute
from modeling.runs.services import run_create
from tests.factories import DynToMQuestionFactory

pytestmark = pytest.mark.django_db

KEY = "sk-stored-" + secrets.token_urlsafe(16)
OPTION_SECRET = "opt-" + secrets.token_urlsafe(16)


def _change_url(backend: Backend) -> str:
    return reverse("admin:modeling_backend_change", args=[backend.pk])


def _form(backend: Backend, **changes: str) -> dict[str, str]:
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
        # As the page shows them: secret values masked.
        "options": json.dumps(backend.redacted_options()),
        "_save": "Save",
    }
    data.update(changes)
    return data


@pytest.fixture
def other_researcher(db):
    return user_create_with_role(username="res2", password="pw-res2-123!", role="researcher")


@pytest.fixture
def owned(researcher, llm_server) -> Backend:
    """The first researcher's backend: a stored key and a secret header, on the fake server."""
    backend = Backend.objects.create(
        name="owned",
        kind=Backend.Kind.OPENAI,
        base_url=llm_server.base_url,
        default_model="test-model",
        api_key=KEY,
        options={"headers": {"X-Api-Key": OPTION_SECRET}, "note": "lab server"},
        max_retries=0,
        timeout_s=5.0,
        created_by=researcher,
    )
    backend.refresh_from_db()
    return backend


def _call(backend: Backend) -> str:
    request = ChatRequest.build([{"role": "user", "content": "hi"}], model="m", params={})
    client = get_backend(backend)
    try:
        return client.complete(request).text
    finally:
        client.close()


def _dyntom_run(backend: Backend) -> Run:
    DynToMQuestionFactory()
    return run_create(
        benchmark="dyntom", method="vanilla", backend=backend, selection={"limit": 1}, enqueue=False
    )


# --- editing someone else's backend --------------------------------------------------


def test_another_researcher_cannot_repoint_a_backend_and_sees_it_read_only(
    client, owned, other_researcher, llm_server
):
    client.force_login(other_researcher)

    page = client.get(_change_url(owned))
    moved = client.post(_change_url(owned), _form(owned, base_url="http://attacker.test/v1"))

    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="new_api_key"' not in html and 'name="base_url"' not in html  # read-only
    assert "********" in html and OPTION_SECRET not in html and KEY not in html
    assert moved.status_code == 403
    owned.refresh_from_db()
    assert owned.base_url == llm_server.base_url
    assert owned.get_api_key() == KEY


def test_an_explicit_grant_or_a_superuser_may_edit_any_backend(client, owned, other_researcher):
    other_researcher.user_permissions.add(
        Permission.objects.get(content_type__app_label="modeling", codename="change_backend")
    )
    client.force_login(other_researcher)
    granted = client.post(_change_url(owned), _form(owned, default_model="gpt-granted"))

    boss = user_create_with_role(username="boss", password="pw-boss-123!", role="researcher")
    boss.is_superuser = True
    boss.save()
    client.force_login(boss)
    by_superuser = client.post(_change_url(owned), _form(owned, default_model="gpt-boss"))

    assert (granted.status_code, by_superuser.status_code) == (302, 302)
    owned.refresh_from_db()
    assert owned.default_model == "gpt-boss"
    assert owned.get_api_key() == KEY  # same server: the key stays


def test_a_new_backend_records_its_creator(client, researcher):
    client.force_login(researcher)
    template = Backend(name="mine", kind=Backend.Kind.OPENAI, base_url="http://127.0.0.1:8001/v1")

    response = client.post(reverse("admin:modeling_backend_add"), _form(template, options="{}"))

    assert response.status_code == 302
    assert Backend.objects.get(name="mine").created_by == researcher


# --- moving a backend to another server ---------------------------------------------


def test_moving_a_backend_to_another_host_drops_its_key_and_secret_options(
    client, researcher, owned, llm_server
):
    # The same fake server under another host name: what reaches it is what a
    # researcher's own host would get after the move.
    moved_url = llm_server.base_url.replace("127.0.0.1", "localhost")
    client.force_login(researcher)

    response = client.post(_change_url(owned), _form(owned, base_url=moved_url), follow=True)

    assert response.status_code == 200
    notice = " ".join(str(m) for m in response.context["messages"])
    assert "the stored API key and 1 secret option value(s) of owned were removed" in notice
    owned.refresh_from_db()
    assert owned.base_url == moved_url
    assert (owned.api_key, owned.has_api_key) == ("", False)
    assert owned.get_options() == {"headers": {}, "note": "lab server"}
    llm_server.enqueue("ok")
    assert _call(owned) == "ok"
    assert llm_server.authorizations == ["Bearer no-key"]  # not the stored key


@pytest.mark.parametrize(
    "change",
    [
        lambda url: url.replace("http://", "https://"),  # another scheme
        lambda url: url.rsplit(":", 1)[0] + ":1/v1",  # another port
    ],
    ids=["scheme", "port"],
)
def test_another_scheme_or_port_is_another_server_too(client, researcher, owned, change):
    client.force_login(researcher)

    client.post(_change_url(owned), _form(owned, base_url=change(owned.base_url)))

    owned.refresh_from_db()
    assert owned.api_key == ""


def test_the_same_server_keeps_its_key_and_a_key_typed_with_the_move_is_kept(
    client, researcher, owned, llm_server
):
    client.force_login(researcher)
    same_server = llm_server.base_url.replace("/v1", "/v1/")
    client.post(_change_url(owned), _form(owned, base_url=same_server))
    owned.refresh_from_db()
    assert owned.get_api_key() == KEY

    moved = llm_server.base_url.replace("127.0.0.1", "localhost")
    client.post(_change_url(owned), _form(owned, base_url=moved, new_api_key="sk-for-the-new-one"))
    owned.refresh_from_db()
    assert owned.get_api_key() == "sk-for-the-new-one"


def test_a_move_by_any_other_write_drops_the_key_too(owned):
    """Not only the admin form: the rule is the model's (the CLI, a shell, a future API)."""
    owned.base_url = "http://elsewhere.test/v1"
    owned.save(update_fields=["base_url"])

    owned.refresh_from_db()
    assert owned.api_key == ""
    assert owned.get_options()["headers"] == {}


# --- api_key_env: only variables the operator allows ---------------------------------


@pytest.mark.parametrize(
    "name",
    ["DJANGO_SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL", "TOMLAB_DATA_DIR"],
)
def test_the_servers_own_settings_cannot_be_a_backends_key(client, researcher, owned, name):
    client.force_login(researcher)

    response = client.post(_change_url(owned), _form(owned, api_key_env=name))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["api_key_env"]
    assert errors == [
        f"{name} holds one of the server's own settings, not an API key; put the key in a "
        "variable of its own (e.g. TOMLAB_KEY_<NAME>)."
    ]
    owned.refresh_from_db()
    assert owned.api_key_env == ""


def test_only_listed_variables_may_hold_a_key(client, researcher, owned, settings):
    client.force_login(researcher)

    refused = client.post(_change_url(owned), _form(owned, api_key_env="AWS_SECRET_ACCESS_KEY"))
    allowed = [
        client.post(_change_url(owned), _form(owned, api_key_env=name)).status_code
        for name in ("OPENAI_API_KEY", "TOMLAB_KEY_LAB")
    ]
    settings.TOMLAB_BACKEND_KEY_ENVS = ["LAB_KEY", "DJANGO_*"]  # listed or not, refused
    listed = client.post(_change_url(owned), _form(owned, api_key_env="LAB_KEY"))
    django = client.post(_change_url(owned), _form(owned, api_key_env="DJANGO_SECRET_KEY"))

    assert refused.context["adminform"].form.errors["api_key_env"] == [
        "AWS_SECRET_ACCESS_KEY is not a variable backends may read; allowed: OPENAI_API_KEY, "
        "TOMLAB_KEY_* (the server's TOMLAB_BACKEND_KEY_ENVS)."
    ]
    assert allowed == [302, 302]
    assert listed.status_code == 302
    assert "api_key_env" in django.context["adminform"].form.errors


def test_the_worker_refuses_a_settings_variable_saved_before_the_rule(
    owned, llm_server, monkeypatch
):
    monkeypatch.setenv("DJANGO_SECRET_KEY", "the-servers-own-secret-key-0123456789")
    # As a row saved before this check existed (or written past the form) holds it.
    Backend.objects.filter(pk=owned.pk).update(api_key_env="DJANGO_SECRET_KEY")
    run = _dyntom_run(Backend.objects.get(pk=owned.pk))

    assert run_execute(run_id=run.pk) == Run.Status.FAILED

    run.refresh_from_db()
    assert "api_key_env: DJANGO_SECRET_KEY holds one of the server's own settings" in run.error
    assert llm_server.request_count == 0  # nothing was sent anywhere


def test_create_backend_refuses_a_settings_variable():
    with pytest.raises(CommandError, match="--api-key-env: DATABASE_URL holds one of the server"):
        call_command("create_backend", "db", "--kind", "openai", "--api-key-env", "DATABASE_URL")
    assert not Backend.objects.filter(name="db").exists()


# --- TOMLAB_BACKEND_HOSTS: the hosts backends may call -------------------------------


def test_a_host_outside_the_allowlist_is_refused_at_save(client, researcher, owned, settings):
    settings.TOMLAB_BACKEND_HOSTS = ["api.openai.com", "llm.lab.example:8443"]
    client.force_login(researcher)

    refused = [
        client.post(_change_url(owned), _form(owned, base_url=url))
        for url in ("http://attacker.test/v1", "https://llm.lab.example:9999/v1")
    ]
    allowed = client.post(
        _change_url(owned), _form(owned, base_url="https://llm.lab.example:8443/v1")
    )
    owned.refresh_from_db()  # the page as it is now: the move dropped the secret header
    default = client.post(_change_url(owned), _form(owned, base_url=""))  # api.openai.com

    assert refused[0].context["adminform"].form.errors["base_url"] == [
        "attacker.test:80 is not a host backends may call; allowed: api.openai.com, "
        "llm.lab.example:8443 (the server's TOMLAB_BACKEND_HOSTS)."
    ]
    assert "base_url" in refused[1].context["adminform"].form.errors
    assert (allowed.status_code, default.status_code) == (302, 302)


def test_the_worker_checks_the_host_again_when_the_list_changed(owned, llm_server, settings):
    settings.TOMLAB_BACKEND_HOSTS = ["127.0.0.1"]
    llm_server.enqueue("ok")
    assert _call(owned) == "ok"
    run = _dyntom_run(owned)
    settings.TOMLAB_BACKEND_HOSTS = ["api.openai.com"]  # the operator narrowed it since

    assert run_execute(run_id=run.pk) == Run.Status.FAILED

    run.refresh_from_db()
    assert "base_url: 127.0.0.1:" in run.error and "is not a host backends may call" in run.error
    assert llm_server.request_count == 1  # only the call made while it was allowed
